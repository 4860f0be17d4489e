//===- CodeGenPipeline.h - llc's codegen pipeline, run by a plugin -*- C++
//-*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// `emitWithOwnCodeGenPipeline` builds and runs the legacy codegen pipeline
/// (what a driver such as llc would do) from inside the llc plugin, with
/// passes of the plugin's own added first: the hook ML-guided register
/// allocation uses to install its advisors (docs/regalloc.md).
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_SUPPORT_CODEGENPIPELINE_H
#define MLBRIDGE_PASSES_SUPPORT_CODEGENPIPELINE_H

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

#endif // MLBRIDGE_PASSES_SUPPORT_CODEGENPIPELINE_H
