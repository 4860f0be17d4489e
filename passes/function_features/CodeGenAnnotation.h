//===- CodeGenAnnotation.h - Feature notes in llc's output ------*- C++ -*-===//
//
// Part of mlbridge. Runs right before code generation (the llc plugin):
// `annotateModuleForCodeGen` computes per-function features and advice and
// appends them as assembler comments to the module-level inline asm, so they
// show up in `.s` output and leave the generated code unchanged.
//
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_FUNCTION_FEATURES_CODEGENANNOTATION_H
#define MLBRIDGE_PASSES_FUNCTION_FEATURES_CODEGENANNOTATION_H

#include "passes/function_features/FunctionFeatures.h"

#include "llvm/Support/Error.h"

namespace llvm {
class Module;
} // namespace llvm

namespace mlbridge::passes {

enum class CodeGenAnnotationLevel {
  None,      ///< add nothing
  Module,    ///< one summary line for the module
  Functions, ///< the summary line plus one line per defined function
};

/// Appends `<CommentString> mlbridge: ...` lines to the module inline asm.
/// Returns the advisor's error, if any (nothing is added then).
llvm::Error annotateModuleForCodeGen(llvm::Module &M,
                                     llvm::StringRef CommentString,
                                     CodeGenAnnotationLevel Level,
                                     FunctionAdvisor &Advisor);

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_FUNCTION_FEATURES_CODEGENANNOTATION_H
