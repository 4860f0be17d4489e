//===- OnnxRunnerModule.cpp - MLBridgeRunnerOnnx.so's entry point ---------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The runner module that brings ONNX Runtime into the process: it links
/// libMLBridgeOnnx.so, which registers the "onnx" runner with the core when
/// the module is loaded (RunnerModule.h).
///
//===----------------------------------------------------------------------===//
#include "plugins/runners/RunnerModule.h"

#include "llvm/Support/Compiler.h"

using namespace mlbridge::plugins;

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT const RunnerModuleInfo *
mlbridge_runner_module_v2() {
  static const RunnerModuleInfo Info = {
      RunnerModuleABIVersion, MLBRIDGE_VERSION, RunnerModuleKind::Onnx};
  return &Info;
}
