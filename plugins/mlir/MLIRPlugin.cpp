//===- MLIRPlugin.cpp - mlbridge pass plugin for mlir-opt -----------------===//
//
// Part of mlbridge. Load with
//   mlir-opt --load-pass-plugin=<build>/lib/MLBridgeMLIRPlugin.so
//     --pass-pipeline='builtin.module(func.func(mlbridge-annotate-loops))'
//     in.mlir
// or --mlbridge-annotate-loops='max-depth=1' (options in MLIR syntax).
//
//===----------------------------------------------------------------------===//
#include "passes/mlir/AnnotateLoops.h"

#include "mlir/Tools/Plugins/PassPlugin.h"

#ifndef MLBRIDGE_VERSION
#define MLBRIDGE_VERSION "0.0.0"
#endif

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT ::mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "MLBridgeMLIRPlugin", MLBRIDGE_VERSION,
          []() { mlbridge::passes::registerAnnotateLoopsPass(); }};
}
