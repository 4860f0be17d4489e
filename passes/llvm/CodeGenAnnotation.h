//===- CodeGenAnnotation.h - Feature notes in llc's output ------*- C++ -*-===//
//
// Part of mlbridge. Helpers that run right before code generation:
// - `annotateModuleForCodeGen` computes per-function features and advice and
//   appends them as assembler comments to the module-level inline asm, so they
//   show up in `.s` output and leave the generated code unchanged;
// - `emitWithOwnCodeGenPipeline` builds and runs the legacy codegen pipeline
//   itself (what a driver such as llc would do), the hook later ML-guided
//   register allocation uses to install its advisors first.
//
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_LLVM_CODEGENANNOTATION_H
#define MLBRIDGE_PASSES_LLVM_CODEGENANNOTATION_H

#include "passes/llvm/FunctionFeatures.h"

#include "llvm/Support/CodeGen.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace llvm {
class Module;
class Pass;
class TargetMachine;
class raw_pwrite_stream;
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

/// Runs the target's legacy codegen pipeline on `M`, writing `FileType` output
/// to `OS`. \p FirstPasses are added to the PassManager (which owns them)
/// before the target's passes: an analysis among them with the pass ID of one
/// the codegen passes require (e.g. the register allocator's priority
/// advisor) is the one they get. Errors name what failed (e.g. a file type the
/// target cannot emit).
llvm::Error emitWithOwnCodeGenPipeline(
    llvm::Module &M, llvm::TargetMachine &TM, llvm::CodeGenFileType FileType,
    llvm::raw_pwrite_stream &OS,
    std::vector<std::unique_ptr<llvm::Pass>> FirstPasses = {});

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_LLVM_CODEGENANNOTATION_H
