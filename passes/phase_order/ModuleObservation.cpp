//===- ModuleObservation.cpp - What a phase-ordering agent sees -----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/phase_order/ModuleObservation.h"

#include "mlbridge/ModelRegistry.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <array>
#include <optional>

using namespace llvm;

namespace mlbridge::passes {

namespace {

Error makeError(const Twine &Message) {
  return createStringError(std::make_error_code(std::errc::invalid_argument),
                           Message);
}

/// Indices into the counts vector; keep in sync with CountsNames.
enum CountIndex : unsigned {
  Functions,
  BasicBlocks,
  Instructions,
  CFGEdges,
  Loops,
  MaxLoopDepth,
  Loads,
  Stores,
  Calls,
  Branches,
  ConditionalBranches,
  Switches,
  Phis,
  Allocas,
  GEPs,
  IntegerArithmetic,
  FloatArithmetic,
  Compares,
  Casts,
  Selects,
  Returns,
  GlobalVariables,
  NumCounts
};

const std::array<StringRef, NumCounts> CountsNames = {"functions",
                                                      "basic_blocks",
                                                      "instructions",
                                                      "cfg_edges",
                                                      "loops",
                                                      "max_loop_depth",
                                                      "loads",
                                                      "stores",
                                                      "calls",
                                                      "branches",
                                                      "conditional_branches",
                                                      "switches",
                                                      "phis",
                                                      "allocas",
                                                      "getelementptrs",
                                                      "integer_arithmetic",
                                                      "float_arithmetic",
                                                      "compares",
                                                      "casts",
                                                      "selects",
                                                      "returns",
                                                      "global_variables"};

FunctionAnalysisManager &functionAnalyses(Module &M,
                                          ModuleAnalysisManager &MAM) {
  return MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
}

} // namespace

ArrayRef<StringRef> countsObservationNames() { return CountsNames; }

std::vector<float> countsObservation(Module &M, ModuleAnalysisManager &MAM) {
  std::array<uint64_t, NumCounts> C{};
  FunctionAnalysisManager &FAM = functionAnalyses(M, MAM);
  C[GlobalVariables] = M.global_size();
  for (Function &F : M) {
    if (F.isDeclaration())
      continue;
    ++C[Functions];
    // A LoopInfo of the observation's own unless one is cached: InstCombine
    // and GVN use a cached LoopInfo when there is one, so leaving one behind
    // would change what the next step does, and the episode would no longer
    // be its steps run as one pipeline (docs/phase-order.md).
    const LoopInfo *LI = FAM.getCachedResult<LoopAnalysis>(F);
    std::optional<DominatorTree> OwnDT;
    std::optional<LoopInfo> OwnLI;
    if (!LI) {
      OwnDT.emplace(F);
      LI = &OwnLI.emplace(*OwnDT);
    }
    for (const Loop *L : LI->getLoopsInPreorder()) {
      ++C[Loops];
      C[MaxLoopDepth] = std::max<uint64_t>(C[MaxLoopDepth], L->getLoopDepth());
    }
    for (BasicBlock &BB : F) {
      ++C[BasicBlocks];
      C[CFGEdges] += succ_size(&BB);
      for (Instruction &I : BB) {
        ++C[Instructions];
        if (isa<LoadInst>(I))
          ++C[Loads];
        else if (isa<StoreInst>(I))
          ++C[Stores];
        else if (isa<CallBase>(I))
          ++C[Calls];
        else if (auto *Br = dyn_cast<BranchInst>(&I)) {
          ++C[Branches];
          if (Br->isConditional())
            ++C[ConditionalBranches];
        } else if (isa<SwitchInst>(I))
          ++C[Switches];
        else if (isa<PHINode>(I))
          ++C[Phis];
        else if (isa<AllocaInst>(I))
          ++C[Allocas];
        else if (isa<GetElementPtrInst>(I))
          ++C[GEPs];
        else if (isa<CmpInst>(I))
          ++C[Compares];
        else if (isa<CastInst>(I))
          ++C[Casts];
        else if (isa<SelectInst>(I))
          ++C[Selects];
        else if (isa<ReturnInst>(I))
          ++C[Returns];
        else if (I.isBinaryOp() || isa<UnaryOperator>(I))
          ++C[I.getType()->isFPOrFPVectorTy() ? FloatArithmetic
                                              : IntegerArithmetic];
      }
    }
  }
  return std::vector<float>(C.begin(), C.end());
}

int64_t codeSizeEstimate(Module &M, ModuleAnalysisManager &MAM) {
  FunctionAnalysisManager &FAM = functionAnalyses(M, MAM);
  int64_t Size = 0;
  for (Function &F : M) {
    if (F.isDeclaration())
      continue;
    const TargetTransformInfo &TTI = FAM.getResult<TargetIRAnalysis>(F);
    for (Instruction &I : instructions(F)) {
      InstructionCost Cost =
          TTI.getInstructionCost(&I, TargetTransformInfo::TCK_CodeSize);
      // An invalid cost (an instruction the target cannot lower) counts as
      // one instruction rather than poisoning the sum.
      Size += Cost.isValid() ? Cost.getValue() : 1;
    }
  }
  return Size;
}

Expected<std::shared_ptr<const IR2VecVocabulary>>
IR2VecVocabulary::load(StringRef Path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
      MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!Buffer)
    return makeError("cannot read the IR2Vec vocabulary '" + Path +
                     "': " + Buffer.getError().message());
  Expected<json::Value> Root = json::parse((*Buffer)->getBuffer());
  if (!Root)
    return makeError("the IR2Vec vocabulary '" + Path +
                     "' is not valid JSON: " + toString(Root.takeError()));
  const json::Object *Obj = Root->getAsObject();
  if (!Obj)
    return makeError("the IR2Vec vocabulary '" + Path +
                     "' is not a JSON object with the sections 'Opcodes', "
                     "'Types' and 'Arguments' (make one with `mlbridge ir2vec "
                     "vocab`)");

  using ir2vec::Vocabulary;
  // LLVM 22's layout: opcodes, canonical types, operand kinds, predicates.
  // Predicates are operands in the file (section "Arguments").
  struct SectionInfo {
    StringRef Key;
    unsigned Size;
    float Weight;
  };
  const std::array<SectionInfo, 4> Sections = {{
      {"Opcodes", Vocabulary::MaxOpcodes, ir2vec::OpcWeight},
      {"Types", Vocabulary::MaxCanonicalTypeIDs, ir2vec::TypeWeight},
      {"Arguments", Vocabulary::MaxOperandKinds, ir2vec::ArgWeight},
      {"Arguments", Vocabulary::MaxPredicateKinds, ir2vec::ArgWeight},
  }};

  unsigned Dim = 0;
  for (StringRef Key : {"Opcodes", "Types", "Arguments"}) {
    const json::Object *Section = Obj->getObject(Key);
    if (!Section)
      return makeError("the IR2Vec vocabulary '" + Path + "' has no '" + Key +
                       "' section (an object of entity name to vector)");
    for (const auto &[Name, Value] : *Section) {
      const json::Array *Vec = Value.getAsArray();
      if (!Vec || Vec->empty())
        return makeError(formatv("the IR2Vec vocabulary '{0}': entry '{1}' "
                                 "of '{2}' is not a non-empty list of numbers",
                                 Path, StringRef(Name), Key));
      if (Dim == 0)
        Dim = Vec->size();
      if (Vec->size() != Dim)
        return makeError(formatv(
            "the IR2Vec vocabulary '{0}': entry '{1}' of '{2}' has {3} "
            "elements, others have {4} (all vectors need one dimension)",
            Path, StringRef(Name), Key, Vec->size(), Dim));
      for (const json::Value &X : *Vec)
        if (!X.getAsNumber())
          return makeError(formatv("the IR2Vec vocabulary '{0}': entry '{1}' "
                                   "of '{2}' holds a non-number",
                                   Path, StringRef(Name), Key));
    }
  }
  if (Dim == 0)
    return makeError("the IR2Vec vocabulary '" + Path + "' is empty");

  std::vector<std::vector<ir2vec::Embedding>> Data;
  unsigned Pos = 0, Found = 0;
  for (const SectionInfo &S : Sections) {
    const json::Object *Section = Obj->getObject(S.Key);
    std::vector<ir2vec::Embedding> Entries;
    Entries.reserve(S.Size);
    for (unsigned I = 0; I < S.Size; ++I, ++Pos) {
      ir2vec::Embedding E(Dim, 0.0);
      // A missing entity is a zero vector, as in IR2VecVocabAnalysis.
      if (const json::Array *Vec =
              Section->getArray(Vocabulary::getStringKey(Pos))) {
        ++Found;
        for (unsigned J = 0; J < Dim; ++J)
          E[J] = *(*Vec)[J].getAsNumber() * S.Weight;
      }
      Entries.push_back(std::move(E));
    }
    Data.push_back(std::move(Entries));
  }
  if (Found == 0)
    return makeError("the IR2Vec vocabulary '" + Path +
                     "' has none of LLVM 22's entity names (e.g. 'Add' in "
                     "'Opcodes'); make one with `mlbridge ir2vec vocab`");
  Vocabulary Vocab{ir2vec::VocabStorage(std::move(Data))};
  if (!Vocab.isValid())
    return makeError("the IR2Vec vocabulary '" + Path +
                     "' does not fill LLVM's vocabulary layout");
  return std::make_shared<const IR2VecVocabulary>(
      PrivateTag(), std::move(Vocab), Dim, Path.str(), Found);
}

std::vector<float> IR2VecVocabulary::embed(const Module &M) const {
  std::vector<double> Sum(Dimension, 0.0);
  for (const Function &F : M) {
    if (F.isDeclaration())
      continue;
    std::unique_ptr<ir2vec::Embedder> E =
        ir2vec::Embedder::create(IR2VecKind::Symbolic, F, Vocab);
    const ir2vec::Embedding FV = E->getFunctionVector();
    for (unsigned I = 0; I < Dimension; ++I)
      Sum[I] += FV[I];
  }
  return std::vector<float>(Sum.begin(), Sum.end());
}

Expected<std::string> findIR2VecVocabulary(StringRef NameOrPath,
                                           StringRef RegistryDir) {
  if (NameOrPath.empty())
    return makeError("no IR2Vec vocabulary given: name a file or a registered "
                     "vocabulary (`mlbridge ir2vec vocab --register NAME`)");
  // A file of any name is taken as it is; findModel() knows vocabularies by
  // their registered kind or a .json extension.
  if (sys::fs::is_regular_file(NameOrPath) && !NameOrPath.ends_with(".json")) {
    SmallString<256> Abs(NameOrPath);
    sys::fs::make_absolute(Abs);
    return std::string(Abs);
  }
  Expected<RegisteredModel> Found =
      findModel(NameOrPath, RegistryDir, {ModelKind::IR2VecVocab});
  if (!Found)
    return makeError("cannot find the IR2Vec vocabulary '" + NameOrPath +
                     "' (build one with `mlbridge ir2vec vocab --register "
                     "NAME`): " +
                     toString(Found.takeError()));
  return Found->Path;
}

} // namespace mlbridge::passes
