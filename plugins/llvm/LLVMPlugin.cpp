//===- LLVMPlugin.cpp - mlbridge pass plugin for opt ----------------------===//
//
// Part of mlbridge. Load with
//   opt -load-pass-plugin=<build>/lib/MLBridgeLLVMPlugin.so
//       -passes=mlbridge-function-features [-mlbridge-...] in.ll
// or, for the ML inline advisor (docs/inliner.md),
//   opt -load-pass-plugin=<build>/lib/MLBridgeLLVMPlugin.so
//       -passes='default<Oz>' -mlbridge-inline-runner=pipe
//       -mlbridge-inline-channel=<base> in.ll
// The -mlbridge-* options must come after -load-pass-plugin: opt registers
// them when it loads the plugin, while it parses its command line. Each pass
// family registers itself and defines its options in its own file
// (Registration.h).
//
//===----------------------------------------------------------------------===//
#include "plugins/llvm/Registration.h"

#include "llvm/Passes/PassBuilder.h"
#include "llvm/Plugins/PassPlugin.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;

#ifndef MLBRIDGE_VERSION
#define MLBRIDGE_VERSION "0.0.0"
#endif

namespace mlbridge::plugins {

cl::OptionCategory &optPluginCategory() {
  static cl::OptionCategory Category("mlbridge options (MLBridgeLLVMPlugin)");
  return Category;
}

} // namespace mlbridge::plugins

namespace {

void registerCallbacks(PassBuilder &PB) {
  mlbridge::plugins::registerPhaseOrder(PB);
  mlbridge::plugins::registerRoundTrip(PB);
  mlbridge::plugins::registerInliner(PB);
  mlbridge::plugins::registerFunctionFeatures(PB);
}

} // namespace

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT ::llvm::PassPluginLibraryInfo
llvmGetPassPluginInfo() {
  PassPluginLibraryInfo Info{LLVM_PLUGIN_API_VERSION, "MLBridgeLLVMPlugin",
                             MLBRIDGE_VERSION, registerCallbacks};
  return Info;
}
