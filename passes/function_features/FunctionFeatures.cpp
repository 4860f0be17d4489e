//===- FunctionFeatures.cpp - Per-function features and advice ------------===//
//
// Part of mlbridge. See FunctionFeatures.h.
//
//===----------------------------------------------------------------------===//
#include "passes/function_features/FunctionFeatures.h"

#include "llvm/Analysis/LoopInfo.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace mlbridge::passes {

ArrayRef<StringRef> FunctionFeatures::featureNames() {
  static const StringRef Names[NumFeatures] = {
      "instruction_count", "basic_block_count", "call_count",
      "loop_count",        "max_loop_depth",    "argument_count",
      "load_count",        "store_count",       "conditional_branch_count"};
  return Names;
}

std::array<int64_t, FunctionFeatures::NumFeatures>
FunctionFeatures::asArray() const {
  return {InstructionCount, BasicBlockCount, CallCount,
          LoopCount,        MaxLoopDepth,    ArgumentCount,
          LoadCount,        StoreCount,      ConditionalBranchCount};
}

FunctionFeatures computeFunctionFeatures(const Function &F,
                                         const LoopInfo &LI) {
  FunctionFeatures R;
  R.ArgumentCount = static_cast<int64_t>(F.arg_size());
  for (const BasicBlock &BB : F) {
    ++R.BasicBlockCount;
    for (const Instruction &I : BB) {
      if (I.isDebugOrPseudoInst())
        continue;
      ++R.InstructionCount;
      if (const auto *CB = dyn_cast<CallBase>(&I)) {
        if (!isa<IntrinsicInst>(CB))
          ++R.CallCount;
      } else if (isa<LoadInst>(I)) {
        ++R.LoadCount;
      } else if (isa<StoreInst>(I)) {
        ++R.StoreCount;
      } else if (const auto *Br = dyn_cast<BranchInst>(&I)) {
        if (Br->isConditional())
          ++R.ConditionalBranchCount;
      }
    }
  }
  // getLoopsInPreorder() lists every loop, nested ones included.
  for (const Loop *L : LI.getLoopsInPreorder()) {
    ++R.LoopCount;
    R.MaxLoopDepth = std::max<int64_t>(R.MaxLoopDepth,
                                       static_cast<int64_t>(L->getLoopDepth()));
  }
  return R;
}

StringRef adviceName(FunctionAdvice A) {
  switch (A) {
  case FunctionAdvice::None:
    return "none";
  case FunctionAdvice::Inline:
    return "inline";
  case FunctionAdvice::Size:
    return "size";
  case FunctionAdvice::Speed:
    return "speed";
  }
  return "unknown";
}

FunctionAdvice builtinFunctionPolicy(const FunctionFeatures &Features,
                                     const BuiltinPolicyParams &Params) {
  if (Features.LoopCount > 0)
    return FunctionAdvice::Speed;
  if (Features.InstructionCount <= Params.SmallFunctionThreshold)
    return FunctionAdvice::Inline;
  return FunctionAdvice::Size;
}

FunctionAdvisor::~FunctionAdvisor() = default;

void reportAdvisorWarning(FunctionAdvisor &Advisor, LLVMContext &Ctx) {
  if (std::optional<std::string> W = Advisor.takeWarning())
    Ctx.diagnose(DiagnosticInfoGeneric(*W, DS_Warning));
}

Expected<FunctionAdvice>
BuiltinFunctionAdvisor::advise(StringRef, const FunctionFeatures &Features) {
  return builtinFunctionPolicy(Features, Params);
}

void printFeaturesJSON(raw_ostream &OS, StringRef FunctionName,
                       const FunctionFeatures &Features,
                       FunctionAdvice Advice) {
  json::Object Feats;
  auto Values = Features.asArray();
  auto Names = FunctionFeatures::featureNames();
  for (size_t I = 0; I < FunctionFeatures::NumFeatures; ++I)
    Feats[Names[I]] = Values[I];
  json::Object Root{{"function", FunctionName},
                    {"features", std::move(Feats)},
                    {"advice", adviceName(Advice)}};
  OS << json::Value(std::move(Root));
}

PreservedAnalyses FunctionFeaturesPass::run(Function &F,
                                            FunctionAnalysisManager &FAM) {
  if (F.isDeclaration())
    return PreservedAnalyses::all();

  const LoopInfo &LI = FAM.getResult<LoopAnalysis>(F);
  FunctionFeatures Features = computeFunctionFeatures(F, LI);

  Expected<FunctionAdvice> Advice = Advisor->advise(F.getName(), Features);
  reportAdvisorWarning(*Advisor, F.getContext());
  if (!Advice) {
    F.getContext().emitError("mlbridge-function-features: no advice for '" +
                             F.getName() +
                             "': " + toString(Advice.takeError()));
    return PreservedAnalyses::all();
  }

  if (Options.PrintJSON) {
    printFeaturesJSON(errs(), F.getName(), Features, *Advice);
    errs() << '\n';
  }

  F.addFnAttr(AdviceAttributeName, adviceName(*Advice));
  if (Options.ApplyAdvice) {
    if (*Advice == FunctionAdvice::Inline &&
        !F.hasFnAttribute(Attribute::NoInline))
      F.addFnAttr(Attribute::InlineHint);
    else if (*Advice == FunctionAdvice::Size &&
             !F.hasFnAttribute(Attribute::OptimizeNone))
      F.addFnAttr(Attribute::OptimizeForSize);
  }
  // Only attributes changed: the CFG stays valid, attribute-dependent
  // analyses (e.g. TTI costs under optsize) may not.
  PreservedAnalyses PA;
  PA.preserveSet<CFGAnalyses>();
  return PA;
}

} // namespace mlbridge::passes
