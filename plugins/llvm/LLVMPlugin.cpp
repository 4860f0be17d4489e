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
// them when it loads the plugin, while it parses its command line.
//
//===----------------------------------------------------------------------===//
#include "passes/llvm/FunctionFeatures.h"
#include "passes/llvm/MLInlineAdvisor.h"
#include "plugins/common/Advisors.h"
#include "plugins/common/RunnerCommandLine.h"

#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Module.h"

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

// The ML inline advisor. Installed (PluginInlineAdvisorAnalysis) only when
// asked for, so that without these options opt inlines as it always does.
enum class InlineAdvisorChoice { Default, ML };

cl::opt<InlineAdvisorChoice> InlineAdvisorOpt(
    "mlbridge-inline-advisor",
    cl::desc("The advisor of LLVM's inliner in default<O1..O3,Os,Oz>, "
             "inliner-wrapper and module-inline (not a bare cgscc(inline)); "
             "giving -mlbridge-inline-runner or -mlbridge-inline-model also "
             "selects 'ml'"),
    cl::values(clEnumValN(InlineAdvisorChoice::Default, "default",
                          "LLVM's own advisor, untouched (the default)"),
               clEnumValN(InlineAdvisorChoice::ML, "ml",
                          "mlbridge's ML inline advisor: LLVM's ML inliner "
                          "features, decisions from the model "
                          "-mlbridge-inline-runner names; legality stays "
                          "with LLVM")),
    cl::init(InlineAdvisorChoice::Default), cl::cat(MLBridgeCategory));

// -mlbridge-inline-runner, -mlbridge-inline-channel, -mlbridge-inline-address,
// -mlbridge-inline-serdes, -mlbridge-inline-timeout-ms,
// -mlbridge-inline-on-model-failure.
mlbridge::plugins::RunnerCommandLine InlineRunnerOpts(
    "mlbridge-inline-", MLBridgeCategory,
    {"The model runner the ML inline advisor asks for each inlining decision "
     "(features and advice of LLVM's ML inliner; docs/inliner.md)",
     "in-process policy answering LLVM's default heuristic's decision "
     "(inlining_default; default)",
     "one warning naming the cause, then LLVM's default inline advisor for "
     "the rest of the compilation"});

cl::opt<bool> InlineIncludeDefault(
    "mlbridge-inline-include-default",
    cl::desc("ML inline advisor: also send the default heuristic's decision as "
             "the int64 [1] feature 'inlining_default', after LLVM's features "
             "(as stock -inliner-interactive-include-default; default on)"),
    cl::init(true), cl::cat(MLBridgeCategory));

bool mlInlineAdvisorSelected() {
  if (InlineAdvisorOpt.getNumOccurrences() > 0)
    return InlineAdvisorOpt == InlineAdvisorChoice::ML;
  return InlineRunnerOpts.runnerGiven() || InlineRunnerOpts.modelGiven();
}

// PluginInlineAdvisorAnalysis's factory is a plain function of (Module, FAM,
// Params, Context), while llvm::MLInlineAdvisor needs the module analysis
// manager: the registration callback below remembers it.
ModuleAnalysisManager *InlinerMAM = nullptr;

InlineAdvisor *createInlineAdvisor(Module &M, FunctionAnalysisManager &FAM,
                                   InlineParams Params, InlineContext IC) {
  auto *Proxy =
      InlinerMAM
          ? InlinerMAM->getCachedResult<FunctionAnalysisManagerModuleProxy>(M)
          : nullptr;
  if (!Proxy || &Proxy->getManager() != &FAM) {
    M.getContext().diagnose(DiagnosticInfoGeneric(
        "mlbridge-inline: the inliner's analysis managers are not those the "
        "plugin registered its advisor with; using LLVM's default inline "
        "advisor",
        DS_Warning));
    return std::make_unique<DefaultInlineAdvisor>(M, FAM, Params, IC).release();
  }
  mlbridge::plugins::RunnerConfig Config = InlineRunnerOpts.config();
  mlbridge::passes::MLInlineAdvisorOptions Options;
  Options.IncludeDefault = InlineIncludeDefault;
  Options.FallBackOnFailure =
      Config.OnFailure == mlbridge::plugins::ModelFailurePolicy::Fallback;
  Options.RunnerDescription = mlbridge::plugins::describeRunner(Config);
  auto Factory = [&Config](std::vector<mlbridge::TensorSpec> Features,
                           mlbridge::TensorSpec Advice) {
    return mlbridge::plugins::createModelRunner(
        Config, std::move(Features), std::move(Advice),
        mlbridge::passes::inliningDefaultPolicy());
  };
  // InlineAdvisorAnalysis takes ownership of the returned advisor.
  return mlbridge::passes::createMLInlineAdvisor(M, *InlinerMAM, Params, IC,
                                                 std::move(Options), Factory)
      .release();
}

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
  PB.registerAnalysisRegistrationCallback([](ModuleAnalysisManager &MAM) {
    if (!mlInlineAdvisorSelected())
      return;
    InlinerMAM = &MAM;
    MAM.registerPass(
        [] { return PluginInlineAdvisorAnalysis(createInlineAdvisor); });
  });
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
