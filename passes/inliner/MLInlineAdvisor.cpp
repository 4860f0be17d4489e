//===- MLInlineAdvisor.cpp - LLVM's ML inliner over any model runner ------===//
//
// Part of mlbridge. See MLInlineAdvisor.h.
//
//===----------------------------------------------------------------------===//
#include "passes/inliner/MLInlineAdvisor.h"

#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/BlockFrequencyInfo.h"
#include "llvm/Analysis/InlineModelFeatureMaps.h"
#include "llvm/Analysis/MLInlineAdvisor.h"
#include "llvm/Analysis/NoInferenceModelRunner.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Analysis/ProfileSummaryInfo.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"

#include <cstring>
#include <optional>

using namespace llvm;

namespace mlbridge::passes {
namespace {

/// LLVM's `-inline-deferral` (InlineAdvisor.cpp), which the default advice
/// uses when the pipeline's InlineParams leave deferral unset.
bool inlineDeferralOption() {
  auto &Opts = cl::getRegisteredOptions();
  auto It = Opts.find("inline-deferral");
  if (It == Opts.end())
    return false;
  // Declared there as cl::opt<bool>.
  return static_cast<cl::opt<bool> *>(It->second)->getValue();
}

Expected<mlbridge::TensorSpec> toBridgeSpec(const llvm::TensorSpec &S) {
  ElementType Type;
  if (S.isElementType<int64_t>())
    Type = ElementType::Int64;
  else if (S.isElementType<float>())
    Type = ElementType::Float;
  else
    return createStringError("feature '" + S.name() +
                             "' has an element type mlbridge's inliner does "
                             "not send (int64 and float only)");
  return mlbridge::TensorSpec::create(S.name(), Type, S.shape());
}

/// llvm::MLInlineAdvisor with the model evaluation replaced: the base class
/// computes the features into a buffer-only llvm::NoInferenceModelRunner and
/// applies LLVM's legality rules; getAdviceFromModel() copies the features to
/// the mlbridge runner, adds `inlining_default`, and asks it.
class BridgeInlineAdvisor final : public MLInlineAdvisor {
public:
  BridgeInlineAdvisor(Module &M, ModuleAnalysisManager &MAM,
                      InlineParams Params, InlineContext IC,
                      MLInlineAdvisorOptions Options,
                      const InlineRunnerFactory &Factory)
      : MLInlineAdvisor(
            M, MAM,
            [&M](const std::vector<llvm::TensorSpec> &Specs) {
              return std::make_unique<NoInferenceModelRunner>(M.getContext(),
                                                              Specs);
            },
            // Only called once the object is complete.
            [this](CallBase &CB) {
              return defaultInliningDecision(CB, FAM, this->Params);
            }),
        Params(Params), Options(std::move(Options)),
        Default(M, FAM, Params, IC) {
    connect(Factory);
  }

  // The end of the session is checked too: a model that sent more than its
  // last reply (bytes the runner looks for in finish()) gave wrong advice.
  ~BridgeInlineAdvisor() override {
    if (Runner && !Stopped)
      if (Error E = Runner->finish())
        stop(std::move(E), nullptr, /*AtEnd=*/true);
  }

  // After the model failed, LLVM's default advisor decides everything and the
  // ML bookkeeping stops (it would otherwise miss the default advisor's
  // inlinings).
  void onPassEntry(LazyCallGraph::SCC *SCC) override {
    if (!Stopped)
      MLInlineAdvisor::onPassEntry(SCC);
  }
  void onPassExit(LazyCallGraph::SCC *SCC) override {
    if (!Stopped)
      MLInlineAdvisor::onPassExit(SCC);
  }

protected:
  std::unique_ptr<InlineAdvice> getAdviceImpl(CallBase &CB) override {
    if (Stopped)
      return Default.getAdvice(CB);
    return MLInlineAdvisor::getAdviceImpl(CB);
  }

  std::unique_ptr<InlineAdvice> getMandatoryAdvice(CallBase &CB,
                                                   bool Advice) override {
    if (Stopped)
      return Default.getAdvice(CB, /*MandatoryOnly=*/true);
    return MLInlineAdvisor::getMandatoryAdvice(CB, Advice);
  }

  std::unique_ptr<MLInlineAdvice>
  getAdviceFromModel(CallBase &CB, OptimizationRemarkEmitter &ORE) override {
    std::optional<bool> Decision;
    int64_t DefaultDecision = -1;
    if (!Stopped) {
      Expected<bool> D = evaluate(CB, DefaultDecision);
      if (D)
        Decision = *D;
      else
        stop(D.takeError(), &CB);
    }
    if (!Decision)
      return std::make_unique<MLInlineAdvice>(this, CB, ORE,
                                              GetDefaultAdvice(CB));
    ORE.emit([&] { return remark(CB, *Decision, DefaultDecision); });
    return std::make_unique<MLInlineAdvice>(this, CB, ORE, *Decision);
  }

private:
  /// Where a feature the base class fills goes in the mlbridge runner.
  struct FeatureCopy {
    size_t From; ///< index in the base class's feature map
    size_t To;   ///< index in the mlbridge runner's specs
    ElementType Type;
    size_t Count;
  };

  void connect(const InlineRunnerFactory &Factory) {
    const std::vector<llvm::TensorSpec> &Map = getFeatureMap();
    std::vector<mlbridge::TensorSpec> Specs;
    for (size_t I = 0; I < Map.size(); ++I) {
      // Ours to compute (LLVM adds it under -inliner-interactive-include-
      // default but fills it only with its own channel).
      if (Map[I].name() == InliningDefaultName)
        continue;
      Expected<mlbridge::TensorSpec> S = toBridgeSpec(Map[I]);
      if (!S)
        return stop(S.takeError(), nullptr);
      Copies.push_back({I, Specs.size(), S->type(),
                        static_cast<size_t>(Map[I].getElementCount())});
      Specs.push_back(std::move(*S));
    }
    if (Options.IncludeDefault) {
      DefaultIndex = Specs.size();
      Specs.push_back(createSpec<int64_t>(InliningDefaultName, {1}));
    }
    Expected<std::unique_ptr<MLModelRunner>> R =
        Factory(std::move(Specs), inlineAdviceSpec());
    if (!R)
      return stop(R.takeError(), nullptr);
    Runner = std::move(*R);
    // Start the session now, as LLVM's interactive runner does (header, empty
    // context): a model side then sees a session even when no call site
    // reaches it.
    if (Error E = Runner->switchContext(""))
      return stop(std::move(E), nullptr);
  }

  Expected<bool> evaluate(CallBase &CB, int64_t &DefaultDecision) {
    for (const FeatureCopy &C : Copies) {
      const void *From = ModelRunner->getTensorUntyped(C.From);
      if (C.Type == ElementType::Int64)
        std::memcpy(Runner->getTensor<int64_t>(C.To), From,
                    C.Count * sizeof(int64_t));
      else
        std::memcpy(Runner->getTensor<float>(C.To), From,
                    C.Count * sizeof(float));
    }
    if (DefaultIndex) {
      DefaultDecision = GetDefaultAdvice(CB);
      *Runner->getTensor<int64_t>(*DefaultIndex) = DefaultDecision;
    }
    Expected<int64_t> Advice = Runner->evaluate<int64_t>();
    if (!Advice)
      return Advice.takeError();
    // As LLVM's MLInlineAdvisor: any nonzero advice means inline.
    return *Advice != 0;
  }

  OptimizationRemark remark(CallBase &CB, bool Decision,
                            int64_t DefaultDecision) {
    OptimizationRemark R(InlineRemarkName.data(), "InliningAdvice", &CB);
    R << "model advice for " << ore::NV("Callee", CB.getCalledFunction())
      << " in " << ore::NV("Caller", CB.getCaller()) << ": "
      << ore::NV("Advice", Decision ? "inline" : "no-inline");
    if (DefaultIndex)
      R << " (default: "
        << ore::NV("Default", DefaultDecision ? "inline" : "no-inline") << ")";
    R << "; features:";
    const std::vector<llvm::TensorSpec> &Map = getFeatureMap();
    for (const FeatureCopy &C : Copies) {
      if (C.Type != ElementType::Int64 || C.Count != 1)
        continue; // embeddings: too long for a remark
      StringRef Name = Map[C.From].name();
      R << (" " + Name + "=").str()
        << ore::NV(Name, *Runner->getTensor<int64_t>(C.To));
    }
    return R;
  }

  /// Reports \p E (once: the model is not asked again) and hands every later
  /// decision to LLVM's default advisor.
  void stop(Error E, CallBase *CB, bool AtEnd = false) {
    Stopped = true;
    std::string Where;
    if (CB)
      Where = (" for the call to '" + CB->getCalledFunction()->getName() +
               "' in '" + CB->getCaller()->getName() + "'")
                  .str();
    std::string Cause = toString(std::move(E));
    if (!CB && !AtEnd)
      Cause = "cannot create the " + Options.RunnerDescription + ": " + Cause;
    // Ends the session (the model may be gone already) and its waits.
    Runner.reset();
    LLVMContext &Ctx = M.getContext();
    if (AtEnd) {
      // Every decision was made; the advice the model sent was still wrong.
      Ctx.diagnose(DiagnosticInfoGeneric(
          "mlbridge-inline: the model's session failed at its end: " + Cause,
          Options.FallBackOnFailure ? DS_Warning : DS_Error));
      return;
    }
    if (Options.FallBackOnFailure)
      Ctx.diagnose(DiagnosticInfoGeneric(
          "mlbridge-inline: the model failed" + Where +
              ", using LLVM's default inline advisor for the rest of the "
              "compilation: " +
              Cause,
          DS_Warning));
    else
      Ctx.diagnose(DiagnosticInfoGeneric(
          "mlbridge-inline: no advice" + Where + ": " + Cause, DS_Error));
  }

  InlineParams Params;
  MLInlineAdvisorOptions Options;
  DefaultInlineAdvisor Default;
  std::unique_ptr<MLModelRunner> Runner;
  std::vector<FeatureCopy> Copies;
  std::optional<size_t> DefaultIndex;
  bool Stopped = false;
};

} // namespace

mlbridge::TensorSpec inlineAdviceSpec() {
  return createSpec<int64_t>(InliningDecisionName, {1});
}

std::vector<mlbridge::TensorSpec> inlineFeatureSpecs(bool IncludeDefault) {
  std::vector<mlbridge::TensorSpec> Specs;
  for (const llvm::TensorSpec &S : MLInlineAdvisor::getInitialFeatureMap())
    if (S.name() != InliningDefaultName)
      Specs.push_back(cantFail(toBridgeSpec(S)));
  if (IncludeDefault)
    Specs.push_back(createSpec<int64_t>(InliningDefaultName, {1}));
  return Specs;
}

CallbackModelRunner::Callback inliningDefaultPolicy() {
  return [](ArrayRef<TensorRef> Features) -> Expected<TensorValue> {
    for (const TensorRef &T : Features)
      if (T.name() == InliningDefaultName && T.type() == ElementType::Int64 &&
          T.getElementCount() == 1)
        return TensorValue::scalar<int64_t>(InliningDecisionName,
                                            T.data<int64_t>()[0]);
    return createStringError(
        "the in-process inlining policy answers with the default heuristic's "
        "decision, but the feature 'inlining_default' is not sent (do not turn "
        "off -mlbridge-inline-include-default)");
  };
}

bool defaultInliningDecision(CallBase &CB, FunctionAnalysisManager &FAM,
                             const InlineParams &Params) {
  // The same steps as getDefaultInlineAdvice() in LLVM's InlineAdvisor.cpp,
  // which stock interactive mode uses for inlining_default.
  Function &Caller = *CB.getCaller();
  ProfileSummaryInfo *PSI =
      FAM.getResult<ModuleAnalysisManagerFunctionProxy>(Caller)
          .getCachedResult<ProfileSummaryAnalysis>(*Caller.getParent());
  auto &ORE = FAM.getResult<OptimizationRemarkEmitterAnalysis>(Caller);
  auto GetAssumptionCache = [&](Function &F) -> AssumptionCache & {
    return FAM.getResult<AssumptionAnalysis>(F);
  };
  auto GetBFI = [&](Function &F) -> BlockFrequencyInfo & {
    return FAM.getResult<BlockFrequencyAnalysis>(F);
  };
  auto GetTLI = [&](Function &F) -> const TargetLibraryInfo & {
    return FAM.getResult<TargetLibraryAnalysis>(F);
  };
  Function &Callee = *CB.getCalledFunction();
  auto &CalleeTTI = FAM.getResult<TargetIRAnalysis>(Callee);
  auto GetInlineCost = [&](CallBase &CB) {
    bool RemarksEnabled =
        Callee.getContext().getDiagHandlerPtr()->isMissedOptRemarkEnabled(
            "inline");
    return getInlineCost(CB, Params, CalleeTTI, GetAssumptionCache, GetTLI,
                         GetBFI, PSI, RemarksEnabled ? &ORE : nullptr);
  };
  return shouldInline(CB, CalleeTTI, GetInlineCost, ORE,
                      Params.EnableDeferral.value_or(inlineDeferralOption()))
      .has_value();
}

std::unique_ptr<InlineAdvisor>
createMLInlineAdvisor(Module &M, ModuleAnalysisManager &MAM,
                      InlineParams Params, InlineContext IC,
                      MLInlineAdvisorOptions Options,
                      const InlineRunnerFactory &Factory) {
  return std::make_unique<BridgeInlineAdvisor>(M, MAM, Params, IC,
                                               std::move(Options), Factory);
}

} // namespace mlbridge::passes
