//===- MLPriorityAdvisor.cpp - Greedy RA's priority advisor over any runner ==//
//
// Part of mlbridge. See MLPriorityAdvisor.h.
//
//===----------------------------------------------------------------------===//
#include "passes/regalloc_priority/MLPriorityAdvisor.h"

#include "llvm/CodeGen/LiveInterval.h"
#include "llvm/CodeGen/LiveIntervals.h"
#include "llvm/CodeGen/MachineFunction.h"
#include "llvm/CodeGen/MachineRegisterInfo.h"
#include "llvm/CodeGen/RegAllocPriorityAdvisor.h"
#include "llvm/CodeGen/RegisterClassInfo.h"
#include "llvm/CodeGen/TargetRegisterInfo.h"
#include "llvm/CodeGen/VirtRegMap.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/LLVMContext.h"

#include <cmath>
#include <cstdint>
#include <optional>

using namespace llvm;

namespace mlbridge::passes {
namespace {

/// Positions of the features in priorityFeatureSpecs().
enum FeatureIndex : size_t {
  LiSize,
  Weight,
  DefaultPriority,
  InOneBlock,
  HasPreference,
  ClassPriority,
  AllocatableRegs,
};

/// One live range's features.
struct PriorityFeatures {
  int64_t LiSize = 0;
  float Weight = 0;
  int64_t DefaultPriority = 0;
  int64_t InOneBlock = 0;
  int64_t HasPreference = 0;
  int64_t ClassPriority = 0;
  int64_t AllocatableRegs = 0;
};

/// The model session of one compilation, shared by the advisors greedy asks
/// for, function after function: the runner (built on first use), and
/// whether the model failed (then it is not asked again).
class PrioritySession {
public:
  PrioritySession(MLPriorityAdvisorOptions Options,
                  PriorityRunnerFactory Factory)
      : Options(std::move(Options)), Factory(std::move(Factory)) {}

  bool stopped() const { return Stopped; }

  /// Greedy starts on \p MF: build the runner if this is the first function,
  /// and tell the model which function the next requests are about.
  void beginFunction(const MachineFunction &MF) {
    if (Stopped)
      return;
    LLVMContext &Ctx = MF.getFunction().getContext();
    if (!Runner) {
      Expected<std::unique_ptr<MLModelRunner>> R = Factory(
          priorityFeatureSpecs(), priorityAdviceSpec(Options.AdviceType));
      if (!R)
        return stop(R.takeError(), Ctx, "",
                    "cannot create the " + Options.RunnerDescription + ": ");
      Runner = std::move(*R);
    }
    if (Error E = Runner->switchContext(MF.getName()))
      stop(std::move(E), Ctx, (" in '" + MF.getName() + "'").str(), "");
  }

  /// The model's priority for the live range \p Reg of \p MF with features
  /// \p F, or nothing if the model failed (now or before).
  std::optional<unsigned> ask(const PriorityFeatures &F,
                              const MachineFunction &MF, Register Reg,
                              const TargetRegisterInfo *TRI) {
    if (Stopped)
      return std::nullopt;
    Expected<unsigned> P = evaluate(F);
    if (P)
      return *P;
    std::string Where;
    raw_string_ostream OS(Where);
    OS << " for live range " << printReg(Reg, TRI) << " in '" << MF.getName()
       << "'";
    stop(P.takeError(), MF.getFunction().getContext(), Where, "");
    return std::nullopt;
  }

private:
  Expected<unsigned> evaluate(const PriorityFeatures &F) {
    *Runner->getTensor<int64_t>(LiSize) = F.LiSize;
    *Runner->getTensor<float>(Weight) = F.Weight;
    *Runner->getTensor<int64_t>(DefaultPriority) = F.DefaultPriority;
    *Runner->getTensor<int64_t>(InOneBlock) = F.InOneBlock;
    *Runner->getTensor<int64_t>(HasPreference) = F.HasPreference;
    *Runner->getTensor<int64_t>(ClassPriority) = F.ClassPriority;
    *Runner->getTensor<int64_t>(AllocatableRegs) = F.AllocatableRegs;
    double Advice = 0;
    switch (Options.AdviceType) {
    case PriorityAdviceType::Double: {
      Expected<double> V = Runner->evaluate<double>();
      if (!V)
        return V.takeError();
      Advice = *V;
      break;
    }
    case PriorityAdviceType::Float: {
      Expected<float> V = Runner->evaluate<float>();
      if (!V)
        return V.takeError();
      Advice = *V;
      break;
    }
    case PriorityAdviceType::Int64: {
      // Exact for every value that is not clamped anyway.
      Expected<int64_t> V = Runner->evaluate<int64_t>();
      if (!V)
        return V.takeError();
      Advice = static_cast<double>(*V);
      break;
    }
    }
    return priorityFromAdvice(Advice);
  }

  /// Reports \p E once (error or warning, as the options say); the model is
  /// not asked again and greedy gets LLVM's default priority from then on.
  void stop(Error E, LLVMContext &Ctx, const std::string &Where,
            const std::string &CausePrefix) {
    Stopped = true;
    std::string Cause = CausePrefix + toString(std::move(E));
    // Ends the session (the model may be gone already) and its waits.
    Runner.reset();
    if (Options.FallBackOnFailure)
      Ctx.diagnose(DiagnosticInfoGeneric(
          "mlbridge-regalloc-priority: the model failed" + Where +
              ", using LLVM's default priority for the rest of the "
              "compilation: " +
              Cause,
          DS_Warning));
    else
      Ctx.diagnose(DiagnosticInfoGeneric(
          "mlbridge-regalloc-priority: no priority" + Where + ": " + Cause,
          DS_Error));
  }

  MLPriorityAdvisorOptions Options;
  PriorityRunnerFactory Factory;
  std::unique_ptr<MLModelRunner> Runner;
  bool Stopped = false;
};

/// The advisor of one machine function: computes the features (with LLVM's
/// default priority among them) and asks the session.
class BridgePriorityAdvisor final : public RegAllocPriorityAdvisor {
public:
  BridgePriorityAdvisor(const MachineFunction &MF, const RAGreedy &RA,
                        SlotIndexes &Indexes, PrioritySession &Session)
      : RegAllocPriorityAdvisor(MF, RA, &Indexes), Default(MF, RA, &Indexes),
        MF(MF), Session(Session) {}

  unsigned getPriority(const LiveInterval &LI) const override {
    // DefaultPriorityAdvisor::getPriority is private there, public in the
    // interface.
    const unsigned DefaultPrio =
        static_cast<const RegAllocPriorityAdvisor &>(Default).getPriority(LI);
    if (Session.stopped())
      return DefaultPrio;
    const Register Reg = LI.reg();
    const TargetRegisterClass *RC = MRI->getRegClass(Reg);
    PriorityFeatures F;
    F.LiSize = LI.getSize();
    F.Weight = LI.weight();
    F.DefaultPriority = DefaultPrio;
    F.InOneBlock = !LI.empty() && LIS->intervalIsInOneMBB(LI) != nullptr;
    F.HasPreference = VRM->hasKnownPreference(Reg);
    F.ClassPriority = RC->AllocationPriority;
    F.AllocatableRegs = RegClassInfo.getNumAllocatableRegs(RC);
    return Session.ask(F, MF, Reg, TRI).value_or(DefaultPrio);
  }

private:
  const DefaultPriorityAdvisor Default;
  const MachineFunction &MF;
  PrioritySession &Session;
};

class BridgePriorityProvider final : public RegAllocPriorityAdvisorProvider {
public:
  BridgePriorityProvider(MLPriorityAdvisorOptions Options,
                         PriorityRunnerFactory Factory)
      : RegAllocPriorityAdvisorProvider(AdvisorMode::Release),
        Session(std::move(Options), std::move(Factory)) {}

  std::unique_ptr<RegAllocPriorityAdvisor>
  getAdvisor(const MachineFunction &MF, const RAGreedy &RA,
             SlotIndexes &Indexes) override {
    Session.beginFunction(MF);
    return std::make_unique<BridgePriorityAdvisor>(MF, RA, Indexes, Session);
  }

private:
  PrioritySession Session;
};

/// The legacy analysis greedy asks for its provider. Same pass ID as LLVM's
/// (the base class's constructor passes it): when this pass is in the
/// PassManager first, the PassManager does not create LLVM's own.
class BridgePriorityAnalysis final
    : public RegAllocPriorityAdvisorAnalysisLegacy {
public:
  BridgePriorityAnalysis(MLPriorityAdvisorOptions Options,
                         PriorityRunnerFactory Factory)
      : RegAllocPriorityAdvisorAnalysisLegacy(AdvisorMode::Release) {
    Provider = std::make_unique<BridgePriorityProvider>(std::move(Options),
                                                        std::move(Factory));
  }

private:
  StringRef getPassName() const override {
    return "mlbridge ML Regalloc Priority Advisor";
  }
};

} // namespace

std::vector<TensorSpec> priorityFeatureSpecs() {
  // In FeatureIndex order.
  return {createSpec<int64_t>("li_size", {1}),
          createSpec<float>("weight", {1}),
          createSpec<int64_t>(DefaultPriorityName, {1}),
          createSpec<int64_t>("in_one_block", {1}),
          createSpec<int64_t>("has_preference", {1}),
          createSpec<int64_t>("class_priority", {1}),
          createSpec<int64_t>("allocatable_regs", {1})};
}

TensorSpec priorityAdviceSpec(PriorityAdviceType Type) {
  switch (Type) {
  case PriorityAdviceType::Double:
    return createSpec<double>(PriorityAdviceName, {1});
  case PriorityAdviceType::Float:
    return createSpec<float>(PriorityAdviceName, {1});
  case PriorityAdviceType::Int64:
    return createSpec<int64_t>(PriorityAdviceName, {1});
  }
  llvm_unreachable("unknown priority advice type");
}

Expected<unsigned> priorityFromAdvice(double Advice) {
  if (std::isnan(Advice))
    return createStringError(
        "the model's priority is NaN (a priority is a number that is clamped "
        "to [0, 4294967295] and truncated toward zero)");
  if (Advice <= 0)
    return 0u;
  if (Advice >= static_cast<double>(UINT32_MAX))
    return static_cast<unsigned>(UINT32_MAX);
  return static_cast<unsigned>(Advice);
}

CallbackModelRunner::Callback defaultPriorityPolicy(PriorityAdviceType Type) {
  return [Type](ArrayRef<TensorRef> Features) -> Expected<TensorValue> {
    for (const TensorRef &T : Features) {
      if (T.name() != DefaultPriorityName || T.type() != ElementType::Int64 ||
          T.getElementCount() != 1)
        continue;
      int64_t D = T.data<int64_t>()[0];
      switch (Type) {
      case PriorityAdviceType::Double:
        return TensorValue::scalar<double>(PriorityAdviceName,
                                           static_cast<double>(D));
      case PriorityAdviceType::Float:
        return TensorValue::scalar<float>(PriorityAdviceName,
                                          static_cast<float>(D));
      case PriorityAdviceType::Int64:
        return TensorValue::scalar<int64_t>(PriorityAdviceName, D);
      }
    }
    return createStringError("the in-process priority policy answers with "
                             "the feature 'default_priority', which is not "
                             "sent as int64 [1]");
  };
}

std::unique_ptr<Pass>
createMLPriorityAdvisorAnalysis(MLPriorityAdvisorOptions Options,
                                PriorityRunnerFactory Factory) {
  return std::make_unique<BridgePriorityAnalysis>(std::move(Options),
                                                  std::move(Factory));
}

} // namespace mlbridge::passes
