//===- CodeGenAnnotation.cpp - Feature notes in llc's output --------------===//
//
// Part of mlbridge. See CodeGenAnnotation.h.
//
//===----------------------------------------------------------------------===//
#include "passes/function_features/CodeGenAnnotation.h"

#include "llvm/Analysis/LoopInfo.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace llvm;

namespace mlbridge::passes {

Error annotateModuleForCodeGen(Module &M, StringRef CommentString,
                               CodeGenAnnotationLevel Level,
                               FunctionAdvisor &Advisor) {
  if (Level == CodeGenAnnotationLevel::None)
    return Error::success();

  std::string FunctionLines;
  raw_string_ostream FOS(FunctionLines);
  int64_t NumFunctions = 0, NumInstructions = 0, NumLoops = 0;
  for (Function &F : M) {
    if (F.isDeclaration())
      continue;
    // llc has no analysis manager at this point: build what we need here.
    DominatorTree DT(F);
    LoopInfo LI(DT);
    FunctionFeatures Feats = computeFunctionFeatures(F, LI);
    Expected<FunctionAdvice> Advice = Advisor.advise(F.getName(), Feats);
    reportAdvisorWarning(Advisor, M.getContext());
    if (!Advice)
      return createStringError(
          inconvertibleErrorCode(), "no advice for function '%s': %s",
          F.getName().str().c_str(), toString(Advice.takeError()).c_str());
    ++NumFunctions;
    NumInstructions += Feats.InstructionCount;
    NumLoops += Feats.LoopCount;
    FOS << CommentString << " mlbridge: function " << F.getName()
        << ": instructions=" << Feats.InstructionCount
        << " blocks=" << Feats.BasicBlockCount << " calls=" << Feats.CallCount
        << " loops=" << Feats.LoopCount
        << " max_loop_depth=" << Feats.MaxLoopDepth
        << " advice=" << adviceName(*Advice) << '\n';
  }

  std::string Block;
  raw_string_ostream OS(Block);
  OS << CommentString << " mlbridge: module " << M.getModuleIdentifier()
     << ": functions=" << NumFunctions << " instructions=" << NumInstructions
     << " loops=" << NumLoops << '\n';
  if (Level == CodeGenAnnotationLevel::Functions)
    OS << FunctionLines;
  // appendModuleInlineAsm adds the missing trailing newline itself.
  M.appendModuleInlineAsm(StringRef(Block).rtrim('\n'));
  return Error::success();
}

} // namespace mlbridge::passes
