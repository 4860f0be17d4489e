//===- PhaseOrderRegistration.cpp - mlbridge-phase-order in opt -----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// `mlbridge-phase-order` (docs/phase-order.md), one episode per module, and
/// its options (-mlbridge-phase-order-*). Without a model the callback runner
/// answers with the built-in order (passes::builtinPhaseOrderPolicy).
///
//===----------------------------------------------------------------------===//
#include "passes/phase_order/PhaseOrder.h"
#include "plugins/common/RunnerCommandLine.h"
#include "plugins/llvm/Registration.h"

#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using mlbridge::passes::PhaseOrderObservation;

namespace {

cl::OptionCategory &Category = mlbridge::plugins::optPluginCategory();

// -mlbridge-phase-order-runner, -channel, -address, -model, -serdes,
// -timeout-ms, -on-model-failure.
mlbridge::plugins::RunnerCommandLine PhaseOrderRunnerOpts(
    "mlbridge-phase-order-", Category,
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
    cl::value_desc("file"), cl::cat(Category));

cl::opt<unsigned> PhaseOrderMaxSteps(
    "mlbridge-phase-order-max-steps",
    cl::desc("mlbridge-phase-order: the most sequences applied per module "
             "(the episode ends there if the model has not said stop)"),
    cl::init(15), cl::value_desc("N"), cl::cat(Category));

cl::opt<PhaseOrderObservation> PhaseOrderObservationOpt(
    "mlbridge-phase-order-observation",
    cl::desc("mlbridge-phase-order: what the feature 'observation' holds"),
    cl::values(clEnumValN(PhaseOrderObservation::Counts, "counts",
                          "22 instruction and CFG counts (default)"),
               clEnumValN(PhaseOrderObservation::IR2Vec, "ir2vec",
                          "the module's IR2Vec embedding (needs "
                          "-mlbridge-phase-order-ir2vec-vocab)")),
    cl::init(PhaseOrderObservation::Counts), cl::cat(Category));

cl::opt<std::string> PhaseOrderIR2VecVocab(
    "mlbridge-phase-order-ir2vec-vocab",
    cl::desc("mlbridge-phase-order: the IR2Vec vocabulary, a JSON file or a "
             "name registered by `mlbridge ir2vec vocab --register`"),
    cl::value_desc("file or name"), cl::cat(Category));

cl::opt<bool> PhaseOrderTrace(
    "mlbridge-phase-order-trace",
    cl::desc("mlbridge-phase-order: one line per step on stderr (action, "
             "pipeline, code size before and after)"),
    cl::init(false), cl::cat(Category));

// The runner of one episode. It gets the score spec, so that a runner that
// carries outcomes (a pipe runner to a training agent) reports the code size
// after each step; other runners have no reward channel (empty scoreSpec()).
Expected<mlbridge::passes::PhaseOrderAgent>
makePhaseOrderAgent(mlbridge::RunnerConfig Config, unsigned ActionCount,
                    std::vector<mlbridge::TensorSpec> Features,
                    mlbridge::TensorSpec Advice, mlbridge::TensorSpec Score) {
  Config.Score = std::move(Score);
  auto R = mlbridge::createModelRunner(
      Config, std::move(Features), std::move(Advice),
      mlbridge::passes::builtinPhaseOrderPolicy(ActionCount));
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

} // namespace

void mlbridge::plugins::registerPhaseOrder(PassBuilder &PB) {
  // mlbridge-inline-oz, used by the built-in action set.
  passes::registerPhaseOrderActionPasses(PB);
  // The pass keeps &PB to parse its action pipelines: opt's PassBuilder
  // outlives every pipeline it builds.
  PB.registerPipelineParsingCallback(
      [&PB](StringRef Name, ModulePassManager &MPM,
            ArrayRef<PassBuilder::PipelineElement>) {
        if (Name != "mlbridge-phase-order")
          return false;
        RunnerConfig Config = PhaseOrderRunnerOpts.config();
        passes::PhaseOrderOptions Options;
        Options.ActionsFile = PhaseOrderActionsFile;
        Options.MaxSteps = PhaseOrderMaxSteps;
        Options.Observation = PhaseOrderObservationOpt;
        Options.IR2VecVocab = PhaseOrderIR2VecVocab;
        Options.Trace = PhaseOrderTrace ? &errs() : nullptr;
        Options.FallBackOnFailure =
            Config.OnFailure == ModelFailurePolicy::Fallback;
        Options.RunnerDescription = describeRunner(Config);
        MPM.addPass(passes::PhaseOrderPass(
            PB, std::move(Options),
            [Config](std::vector<TensorSpec> Features, TensorSpec Advice,
                     TensorSpec Score, unsigned ActionCount) {
              return makePhaseOrderAgent(Config, ActionCount,
                                         std::move(Features), std::move(Advice),
                                         std::move(Score));
            }));
        return true;
      });
}
