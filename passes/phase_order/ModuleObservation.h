//===- ModuleObservation.h - What a phase-ordering agent sees ---*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Observations of a whole module for the phase-ordering pass
/// (docs/phase-order.md): a fixed vector of instruction and CFG counts, the
/// module's IR2Vec embedding (LLVM 22's in-tree ir2vec::Embedder with a
/// vocabulary built by `mlbridge ir2vec vocab`), and a code-size estimate.
/// Nothing here knows about model runners.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_PHASE_ORDER_MODULEOBSERVATION_H
#define MLBRIDGE_PASSES_PHASE_ORDER_MODULEOBSERVATION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Analysis/IR2Vec.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Module;
} // namespace llvm

namespace mlbridge::passes {

/// The names of the elements of countsObservation(), in order (documented in
/// docs/phase-order.md; the order is part of the model interface).
llvm::ArrayRef<llvm::StringRef> countsObservationNames();

/// Instruction and CFG counts of \p M's defined functions, as floats, in the
/// order of countsObservationNames(). Loops come from LoopAnalysis via
/// \p MAM's function analysis manager.
std::vector<float> countsObservation(llvm::Module &M,
                                     llvm::ModuleAnalysisManager &MAM);

/// The code-size estimate of \p M: the sum of TargetTransformInfo's
/// TCK_CodeSize costs over the instructions of its defined functions.
int64_t codeSizeEstimate(llvm::Module &M, llvm::ModuleAnalysisManager &MAM);

/// An IR2Vec vocabulary read from a JSON file in the format of LLVM 22's
/// IR2VecVocabAnalysis (sections "Opcodes", "Types", "Arguments"; entries
/// missing from the file are zero vectors, as LLVM does), scaled by LLVM's
/// -ir2vec-opc-weight, -ir2vec-type-weight and -ir2vec-arg-weight.
class IR2VecVocabulary {
public:
  /// Reads the vocabulary at \p Path. Errors name the file and what is wrong.
  static llvm::Expected<std::shared_ptr<const IR2VecVocabulary>>
  load(llvm::StringRef Path);

  /// The embedding dimension.
  unsigned dimension() const { return Dimension; }
  /// The file it came from.
  llvm::StringRef path() const { return Path; }
  /// How many of LLVM's vocabulary entries the file has.
  unsigned entriesFound() const { return Found; }

  /// The IR2Vec embedding of \p M: the sum of the symbolic function
  /// embeddings of its defined functions (ir2vec::Embedder), as floats.
  std::vector<float> embed(const llvm::Module &M) const;

private:
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

public:
  /// Use load().
  IR2VecVocabulary(PrivateTag, llvm::ir2vec::Vocabulary Vocab,
                   unsigned Dimension, std::string Path, unsigned Found)
      : Vocab(std::move(Vocab)), Dimension(Dimension), Path(std::move(Path)),
        Found(Found) {}

private:
  llvm::ir2vec::Vocabulary Vocab;
  unsigned Dimension;
  std::string Path;
  unsigned Found;
};

/// The vocabulary file \p NameOrPath names: a path (with a '/', or an
/// existing file), or the name of a model of kind `ir2vec-vocab` in the model
/// registry (\p RegistryDir, default: mlbridge::defaultModelRegistryDir()).
llvm::Expected<std::string>
findIR2VecVocabulary(llvm::StringRef NameOrPath,
                     llvm::StringRef RegistryDir = "");

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_PHASE_ORDER_MODULEOBSERVATION_H
