//===- PhaseOrder.cpp - Model-guided phase ordering in one opt run --------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/phase_order/PhaseOrder.h"

#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace llvm;

namespace mlbridge::passes {

namespace {

/// The names the built-in policy reads and answers (phaseOrderFeatureSpecs(),
/// phaseOrderAdviceSpec()).
constexpr llvm::StringLiteral StepFeatureName = "step";
constexpr llvm::StringLiteral ActionAdviceName = "action";

Error makeError(const Twine &Message) {
  return createStringError(std::make_error_code(std::errc::invalid_argument),
                           Message);
}

} // namespace

std::vector<TensorSpec> phaseOrderFeatureSpecs(unsigned ObservationDim,
                                               unsigned ActionCount) {
  return {createSpec<float>("observation", {int64_t(ObservationDim)}),
          createSpec<int64_t>(StepFeatureName, {1}),
          createSpec<int64_t>("code_size", {1}),
          createSpec<int64_t>("action_count", {1}),
          createSpec<float>("action_history", {int64_t(ActionCount)})};
}

TensorSpec phaseOrderAdviceSpec() {
  return createSpec<int64_t>(ActionAdviceName, {1});
}

TensorSpec phaseOrderScoreSpec() {
  return createSpec<int64_t>("code_size", {1});
}

CallbackModelRunner::Callback builtinPhaseOrderPolicy(unsigned ActionCount) {
  return [ActionCount](ArrayRef<TensorRef> Features) -> Expected<TensorValue> {
    for (const TensorRef &T : Features)
      if (T.name() == StepFeatureName && T.type() == ElementType::Int64 &&
          T.getElementCount() == 1)
        return TensorValue::scalar<int64_t>(
            ActionAdviceName,
            std::min<int64_t>(T.data<int64_t>()[0], ActionCount));
    return makeError("the built-in phase order answers by the feature '" +
                     Twine(StepFeatureName) +
                     "' (int64 [1]), which is not sent");
  };
}

PhaseOrderEnvironment::PhaseOrderEnvironment(
    Module &M, ModuleAnalysisManager &MAM,
    const std::vector<PhaseOrderAction> &Actions,
    std::vector<ModulePassManager> &Pipelines, const IR2VecVocabulary *Vocab,
    unsigned MaxSteps, raw_ostream *Trace,
    std::function<Error(int64_t, const TensorValue &)> ReportOutcome)
    : M(M), MAM(MAM), Actions(Actions), Pipelines(Pipelines), Vocab(Vocab),
      MaxSteps(MaxSteps), Trace(Trace),
      ReportOutcome(std::move(ReportOutcome)) {}

Error PhaseOrderEnvironment::reset() {
  Step = 0;
  Applied = 0;
  History.assign(Pipelines.size(), 0.0f);
  AppliedActions.clear();
  CodeSize = codeSizeEstimate(M, MAM);
  Done = MaxSteps == 0;
  return Error::success();
}

Error PhaseOrderEnvironment::observe(MLModelRunner &Agent) {
  std::vector<float> Observation =
      Vocab ? Vocab->embed(M) : countsObservation(M, MAM);
  return Agent.populateFeatures(
      std::make_pair("observation", Observation),
      std::make_pair("step", int64_t(Step)),
      std::make_pair("code_size", CodeSize),
      std::make_pair("action_count", int64_t(Pipelines.size())),
      std::make_pair("action_history", History));
}

std::string PhaseOrderEnvironment::appliedPipeline() const {
  std::string Joined;
  for (size_t Choice : AppliedActions) {
    if (!Joined.empty())
      Joined += ',';
    Joined += Actions[Choice].Pipeline;
  }
  return Joined;
}

Error PhaseOrderEnvironment::step(const Action &A) {
  // evaluateChecked() has checked the advice against `action` int64 [1].
  int64_t Choice = A.Advice.data<int64_t>()[0];
  int64_t N = static_cast<int64_t>(Pipelines.size());
  if (Choice < 0 || Choice > N)
    return makeError(formatv("the model's action {0} is out of range: 0..{1} "
                             "applies that sequence, {2} stops",
                             Choice, N - 1, N));
  if (Choice == N) {
    if (Trace)
      *Trace << "mlbridge-phase-order: " << M.getModuleIdentifier() << " step "
             << Step << ": stop\n";
    Done = true;
    return Error::success();
  }
  int64_t Before = CodeSize;
  Pipelines[Choice].run(M, MAM);
  CodeSize = codeSizeEstimate(M, MAM);
  if (Trace)
    *Trace << "mlbridge-phase-order: " << M.getModuleIdentifier() << " step "
           << Step << ": action " << Choice << " '" << Actions[Choice].Pipeline
           << "' size " << Before << " -> " << CodeSize << "\n";
  ++Applied;
  History[Choice] += 1.0f;
  AppliedActions.push_back(static_cast<size_t>(Choice));
  if (ReportOutcome)
    if (Error E = ReportOutcome(
            Step, TensorValue::scalar<int64_t>("code_size", CodeSize)))
      return E;
  ++Step;
  Done = Step >= MaxSteps;
  return Error::success();
}

PhaseOrderPass::PhaseOrderPass(PassBuilder &PB, PhaseOrderOptions Options,
                               PhaseOrderAgentFactory MakeAgent)
    : PB(&PB), Options(std::move(Options)), MakeAgent(std::move(MakeAgent)) {}

PreservedAnalyses PhaseOrderPass::run(Module &M, ModuleAnalysisManager &MAM) {
  LLVMContext &Ctx = M.getContext();
  StringRef ModuleName = M.getModuleIdentifier();
  auto ConfigError = [&](Error E) {
    Ctx.emitError("mlbridge-phase-order: " + toString(std::move(E)));
    return PreservedAnalyses::all();
  };

  // The action set and its pipelines; a bad one is a usage error whatever
  // -on-model-failure says.
  std::vector<PhaseOrderAction> Actions;
  std::string Source = "the built-in action set";
  if (Options.ActionsFile.empty()) {
    Actions = defaultPhaseOrderActions();
  } else {
    Expected<std::vector<PhaseOrderAction>> Read =
        readPhaseOrderActions(Options.ActionsFile);
    if (!Read)
      return ConfigError(Read.takeError());
    Actions = std::move(*Read);
    Source = Options.ActionsFile;
  }
  if (Error E = checkPhaseOrderActions(*PB, Actions, Source))
    return ConfigError(std::move(E));
  std::vector<ModulePassManager> Pipelines(Actions.size());
  for (size_t I = 0; I < Actions.size(); ++I)
    cantFail(PB->parsePassPipeline(Pipelines[I], Actions[I].Pipeline));

  std::shared_ptr<const IR2VecVocabulary> Vocab;
  unsigned Dim = countsObservationNames().size();
  if (Options.Observation == PhaseOrderObservation::IR2Vec) {
    if (Options.IR2VecVocab.empty())
      return ConfigError(makeError(
          "the ir2vec observation needs a vocabulary: " + Options.OptionPrefix +
          "ir2vec-vocab=<file or registered name> (build one with `mlbridge "
          "ir2vec vocab`)"));
    Expected<std::string> Path = findIR2VecVocabulary(Options.IR2VecVocab);
    if (!Path)
      return ConfigError(Path.takeError());
    Expected<std::shared_ptr<const IR2VecVocabulary>> Loaded =
        IR2VecVocabulary::load(*Path);
    if (!Loaded)
      return ConfigError(Loaded.takeError());
    Vocab = std::move(*Loaded);
    Dim = Vocab->dimension();
  }

  // Everything the model does wrong (no runner, a dead or slow peer, a bad
  // action) ends the episode the same way: an error, or with fallback one
  // warning and the module as optimised so far.
  unsigned Applied = 0;
  auto ModelFailure = [&](Error E) {
    std::string Message = toString(std::move(E));
    if (Options.FallBackOnFailure)
      Ctx.diagnose(DiagnosticInfoGeneric(
          formatv("mlbridge-phase-order: the model failed for '{0}' after {1} "
                  "applied step(s), keeping the module as optimised so far: "
                  "{2}: {3}",
                  ModuleName, Applied, Options.RunnerDescription, Message)
              .str(),
          DS_Warning));
    else
      Ctx.emitError(formatv("mlbridge-phase-order: the model failed for "
                            "'{0}': {1}: {2}",
                            ModuleName, Options.RunnerDescription, Message)
                        .str());
    return Applied ? PreservedAnalyses::none() : PreservedAnalyses::all();
  };

  Expected<PhaseOrderAgent> Agent =
      MakeAgent(phaseOrderFeatureSpecs(Dim, Actions.size()),
                phaseOrderAdviceSpec(), phaseOrderScoreSpec(), Actions.size());
  if (!Agent)
    return ModelFailure(Agent.takeError());
  if (Error E = Agent->Runner->switchContext(ModuleName))
    return ModelFailure(std::move(E));

  PhaseOrderEnvironment Env(M, MAM, Actions, Pipelines, Vocab.get(),
                            Options.MaxSteps, Options.Trace,
                            std::move(Agent->ReportOutcome));
  EpisodeOptions Bounds;
  Bounds.MaxSteps = size_t(Options.MaxSteps) + 1;
  Bounds.RecordActions = false;
  Expected<EpisodeResult> Result = runEpisode(Env, *Agent->Runner, Bounds);
  Applied = Env.applied();
  PreservedAnalyses PA = !Result   ? ModelFailure(Result.takeError())
                         : Applied ? PreservedAnalyses::none()
                                   : PreservedAnalyses::all();
  // The module now is what this pipeline makes in one opt run
  // (docs/phase-order.md): the order to hand to opt.
  if (Options.Trace)
    *Options.Trace << "mlbridge-phase-order: " << ModuleName << " pipeline '"
                   << Env.appliedPipeline() << "'\n";
  // The runner goes out of scope here: a pipe runner sends its end record.
  return PA;
}

} // namespace mlbridge::passes
