//===- LLVMPlugin.cpp - mlbridge pass plugin for opt ----------------------===//
//
// Part of mlbridge. Load with
//   opt -load-pass-plugin=<build>/lib/MLBridgeLLVMPlugin.so
//       -passes=mlbridge-function-features [-mlbridge-...] in.ll
// The -mlbridge-* options must come after -load-pass-plugin: opt registers
// them when it loads the plugin, while it parses its command line.
//
//===----------------------------------------------------------------------===//
#include "passes/llvm/FunctionFeatures.h"
#include "plugins/common/Advisors.h"

#include "llvm/Passes/OptimizationLevel.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Plugins/PassPlugin.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;
using mlbridge::plugins::AdvisorKind;

#ifndef MLBRIDGE_VERSION
#define MLBRIDGE_VERSION "0.0.0"
#endif

namespace {

cl::OptionCategory MLBridgeCategory("mlbridge options (MLBridgeLLVMPlugin)");

cl::opt<AdvisorKind> AdvisorOpt(
    "mlbridge-advisor",
    cl::desc("Where mlbridge-function-features gets its per-function "
             "decisions from"),
    cl::values(clEnumValN(AdvisorKind::Builtin, "builtin",
                          "the built-in policy, called directly"),
               clEnumValN(AdvisorKind::Runner, "runner",
                          "the model runner -mlbridge-runner names "
                          "(default)"),
               clEnumValN(AdvisorKind::Runner, "callback-runner",
                          "the same as 'runner' (with the default "
                          "-mlbridge-runner=callback)")),
    cl::init(mlbridge::plugins::defaultAdvisorKind()),
    cl::cat(MLBridgeCategory));

// -mlbridge-runner, -mlbridge-channel, -mlbridge-serdes, -mlbridge-timeout-ms,
// -mlbridge-on-model-failure.
mlbridge::plugins::RunnerCommandLine RunnerOpts("mlbridge-", MLBridgeCategory);

cl::opt<unsigned> SmallFunctionThreshold(
    "mlbridge-small-function-threshold",
    cl::desc("Built-in policy: loop-free functions with at most this many "
             "instructions are advised 'inline', larger ones 'size'"),
    cl::init(20), cl::value_desc("N"), cl::cat(MLBridgeCategory));

cl::opt<bool> PrintFeatures(
    "mlbridge-print-features",
    cl::desc("Print each function's features and advice as one JSON object "
             "per line to stderr"),
    cl::init(false), cl::cat(MLBridgeCategory));

cl::opt<bool> ApplyAdvice(
    "mlbridge-apply-advice",
    cl::desc("Also turn the advice into standard attributes: 'inline' adds "
             "inlinehint, 'size' adds optsize"),
    cl::init(false), cl::cat(MLBridgeCategory));

cl::opt<bool> AddToDefaultPipelines(
    "mlbridge-in-default-pipelines",
    cl::desc("Run mlbridge-function-features at the start of the default "
             "pipelines (default<O1..O3>, default<Os>...)"),
    cl::init(false), cl::cat(MLBridgeCategory));

mlbridge::passes::FunctionFeaturesPass makePass() {
  mlbridge::passes::BuiltinPolicyParams Params;
  Params.SmallFunctionThreshold = SmallFunctionThreshold;
  mlbridge::passes::FunctionFeaturesOptions Options;
  Options.PrintJSON = PrintFeatures;
  Options.ApplyAdvice = ApplyAdvice;
  return mlbridge::passes::FunctionFeaturesPass(
      mlbridge::plugins::makeFunctionAdvisor(AdvisorOpt, RunnerOpts.config(),
                                             Params),
      Options);
}

void registerCallbacks(PassBuilder &PB) {
  PB.registerPipelineParsingCallback(
      [](StringRef Name, FunctionPassManager &FPM,
         ArrayRef<PassBuilder::PipelineElement>) {
        if (Name != "mlbridge-function-features")
          return false;
        FPM.addPass(makePass());
        return true;
      });
  PB.registerPipelineStartEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel) {
        if (AddToDefaultPipelines)
          MPM.addPass(createModuleToFunctionPassAdaptor(makePass()));
      });
}

} // namespace

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT ::llvm::PassPluginLibraryInfo
llvmGetPassPluginInfo() {
  PassPluginLibraryInfo Info{LLVM_PLUGIN_API_VERSION, "MLBridgeLLVMPlugin",
                             MLBRIDGE_VERSION, registerCallbacks};
  return Info;
}
