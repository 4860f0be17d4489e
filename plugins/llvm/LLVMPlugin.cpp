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
#include "passes/llvm/PhaseOrder.h"
#include "passes/llvm/RoundTrip.h"
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
     "the rest of the compilation"},
    "inliner");

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
  mlbridge::RunnerConfig Config = InlineRunnerOpts.config();
  mlbridge::passes::MLInlineAdvisorOptions Options;
  Options.IncludeDefault = InlineIncludeDefault;
  Options.FallBackOnFailure =
      Config.OnFailure == mlbridge::ModelFailurePolicy::Fallback;
  Options.RunnerDescription = mlbridge::describeRunner(Config);
  auto Factory = [&Config](std::vector<mlbridge::TensorSpec> Features,
                           mlbridge::TensorSpec Advice) {
    return mlbridge::createModelRunner(
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

// --- mlbridge-roundtrip (the round-trip benchmark's opt host; docs/bench.md).
// -mlbridge-roundtrip-runner, -channel, -address, -model, -serdes, -timeout-ms,
// -on-model-failure (accepted for symmetry: the experiment always fails).
mlbridge::plugins::RunnerCommandLine RoundTripRunnerOpts(
    "mlbridge-roundtrip-", MLBridgeCategory,
    {"The model runner mlbridge-roundtrip asks (float 'input' [L] -> float "
     "'output' [1]; docs/bench.md)",
     "the layer w . input + b computed in-process (default)",
     "not used: a failed query is always an error"});

cl::opt<unsigned>
    RoundTripLength("mlbridge-roundtrip-length",
                    cl::desc("mlbridge-roundtrip: floats per query (L)"),
                    cl::init(500), cl::value_desc("L"),
                    cl::cat(MLBridgeCategory));

cl::opt<unsigned>
    RoundTripQueries("mlbridge-roundtrip-queries",
                     cl::desc("mlbridge-roundtrip: number of queries"),
                     cl::init(1), cl::value_desc("N"),
                     cl::cat(MLBridgeCategory));

cl::opt<std::string> RoundTripReport(
    "mlbridge-roundtrip-report",
    cl::desc("mlbridge-roundtrip: write a JSON summary (answers, seconds per "
             "query, checks) to this file"),
    cl::value_desc("file"), cl::cat(MLBridgeCategory));

void registerRoundTripPass(PassBuilder &PB) {
  PB.registerPipelineParsingCallback(
      [](StringRef Name, ModulePassManager &MPM,
         ArrayRef<PassBuilder::PipelineElement>) {
        if (Name != "mlbridge-roundtrip")
          return false;
        mlbridge::RunnerConfig Config = RoundTripRunnerOpts.config();
        mlbridge::passes::RoundTripOptions Options;
        Options.Length = RoundTripLength;
        Options.Queries = RoundTripQueries;
        Options.ReportPath = RoundTripReport;
        Options.RunnerDescription = mlbridge::describeRunner(Config);
        MPM.addPass(mlbridge::passes::RoundTripPass(
            std::move(Options),
            [Config](std::vector<mlbridge::TensorSpec> Features,
                     mlbridge::TensorSpec Advice,
                     mlbridge::CallbackModelRunner::Callback Builtin) {
              return mlbridge::createModelRunner(Config, std::move(Features),
                                                 std::move(Advice),
                                                 std::move(Builtin));
            }));
        return true;
      });
}
// --- end mlbridge-roundtrip.

// --- mlbridge-phase-order (docs/phase-order.md): one episode per module.
// -mlbridge-phase-order-runner, -channel, -address, -model, -serdes,
// -timeout-ms, -on-model-failure.
mlbridge::plugins::RunnerCommandLine PhaseOrderRunnerOpts(
    "mlbridge-phase-order-", MLBridgeCategory,
    {"The model runner mlbridge-phase-order asks for each step (features "
     "observation, step, code_size, action_count, action_history; advice "
     "'action'; "
     "docs/phase-order.md)",
     "the built-in order: every sequence of the action set once, then stop "
     "(default)",
     "one warning naming the cause, the episode stops and the module stays "
     "as optimised so far"},
    "phase-order");

cl::opt<std::string> PhaseOrderActionsFile(
    "mlbridge-phase-order-actions",
    cl::desc("mlbridge-phase-order: the action set, one new-PM pipeline per "
             "line ('#' comments); default: the built-in set of 15 "
             "sub-sequences (docs/phase-order.md)"),
    cl::value_desc("file"), cl::cat(MLBridgeCategory));

cl::opt<unsigned> PhaseOrderMaxSteps(
    "mlbridge-phase-order-max-steps",
    cl::desc("mlbridge-phase-order: the most sequences applied per module "
             "(the episode ends there if the model has not said stop)"),
    cl::init(15), cl::value_desc("N"), cl::cat(MLBridgeCategory));

cl::opt<mlbridge::passes::PhaseOrderObservation> PhaseOrderObservationOpt(
    "mlbridge-phase-order-observation",
    cl::desc("mlbridge-phase-order: what the feature 'observation' holds"),
    cl::values(clEnumValN(mlbridge::passes::PhaseOrderObservation::Counts,
                          "counts", "22 instruction and CFG counts (default)"),
               clEnumValN(mlbridge::passes::PhaseOrderObservation::IR2Vec,
                          "ir2vec",
                          "the module's IR2Vec embedding (needs "
                          "-mlbridge-phase-order-ir2vec-vocab)")),
    cl::init(mlbridge::passes::PhaseOrderObservation::Counts),
    cl::cat(MLBridgeCategory));

cl::opt<std::string> PhaseOrderIR2VecVocab(
    "mlbridge-phase-order-ir2vec-vocab",
    cl::desc("mlbridge-phase-order: the IR2Vec vocabulary, a JSON file or a "
             "name registered by `mlbridge ir2vec vocab --register`"),
    cl::value_desc("file or name"), cl::cat(MLBridgeCategory));

cl::opt<bool> PhaseOrderTrace(
    "mlbridge-phase-order-trace",
    cl::desc("mlbridge-phase-order: one line per step on stderr (action, "
             "pipeline, code size before and after)"),
    cl::init(false), cl::cat(MLBridgeCategory));

// The runner of one episode. It gets the score spec, so that a runner that
// carries outcomes (a pipe runner to a training agent) reports the code size
// after each step; other runners have no reward channel (empty scoreSpec()).
Expected<mlbridge::passes::PhaseOrderAgent>
makePhaseOrderAgent(mlbridge::RunnerConfig Config, unsigned ActionCount,
                    std::vector<mlbridge::TensorSpec> Features,
                    mlbridge::TensorSpec Advice, mlbridge::TensorSpec Score) {
  Config.Score = std::move(Score);
  // The built-in order: action i at step i, then stop (action N).
  auto Builtin = [ActionCount](ArrayRef<mlbridge::TensorRef> Features)
      -> Expected<mlbridge::TensorValue> {
    int64_t Step = Features[1].data<int64_t>()[0];
    return mlbridge::TensorValue::scalar<int64_t>(
        "action", std::min<int64_t>(Step, ActionCount));
  };
  auto R = mlbridge::createModelRunner(Config, std::move(Features),
                                       std::move(Advice), Builtin);
  if (!R)
    return R.takeError();
  mlbridge::passes::PhaseOrderAgent Agent;
  if ((*R)->scoreSpec()) {
    mlbridge::MLModelRunner *Runner = R->get();
    Agent.ReportOutcome = [Runner](int64_t Step,
                                   const mlbridge::TensorValue &Size) {
      return Runner->sendOutcome(Step, Size);
    };
  }
  Agent.Runner = std::move(*R);
  return Agent;
}

void registerPhaseOrderPass(PassBuilder &PB) {
  // mlbridge-inline-oz, used by the built-in action set.
  mlbridge::passes::registerPhaseOrderActionPasses(PB);
  // The pass keeps &PB to parse its action pipelines: opt's PassBuilder
  // outlives every pipeline it builds.
  PB.registerPipelineParsingCallback(
      [&PB](StringRef Name, ModulePassManager &MPM,
            ArrayRef<PassBuilder::PipelineElement>) {
        if (Name != "mlbridge-phase-order")
          return false;
        mlbridge::RunnerConfig Config = PhaseOrderRunnerOpts.config();
        mlbridge::passes::PhaseOrderOptions Options;
        Options.ActionsFile = PhaseOrderActionsFile;
        Options.MaxSteps = PhaseOrderMaxSteps;
        Options.Observation = PhaseOrderObservationOpt;
        Options.IR2VecVocab = PhaseOrderIR2VecVocab;
        Options.Trace = PhaseOrderTrace ? &errs() : nullptr;
        Options.FallBackOnFailure =
            Config.OnFailure == mlbridge::ModelFailurePolicy::Fallback;
        Options.RunnerDescription = mlbridge::describeRunner(Config);
        MPM.addPass(mlbridge::passes::PhaseOrderPass(
            PB, std::move(Options),
            [Config](std::vector<mlbridge::TensorSpec> Features,
                     mlbridge::TensorSpec Advice, mlbridge::TensorSpec Score,
                     unsigned ActionCount) {
              return makePhaseOrderAgent(Config, ActionCount,
                                         std::move(Features), std::move(Advice),
                                         std::move(Score));
            }));
        return true;
      });
}
// --- end mlbridge-phase-order.

void registerCallbacks(PassBuilder &PB) {
  registerPhaseOrderPass(PB);
  registerRoundTripPass(PB);
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
