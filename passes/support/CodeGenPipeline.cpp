//===- CodeGenPipeline.cpp - llc's codegen pipeline, run by a plugin ------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/support/CodeGenPipeline.h"

#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

using namespace llvm;

namespace mlbridge::passes {

Error emitWithOwnCodeGenPipeline(
    Module &M, TargetMachine &TM, CodeGenFileType FileType,
    raw_pwrite_stream &OS, std::vector<std::unique_ptr<Pass>> FirstPasses) {
  legacy::PassManager PM;
  TargetLibraryInfoImpl TLII(M.getTargetTriple());
  PM.add(new TargetLibraryInfoWrapperPass(TLII));
  // The PassManager takes ownership.
  for (std::unique_ptr<Pass> &P : FirstPasses)
    PM.add(P.release());
  // addPassesToEmitFile returns true when the target cannot emit this type.
  if (TM.addPassesToEmitFile(PM, OS, /*DwoOut=*/nullptr, FileType))
    return createStringError(inconvertibleErrorCode(),
                             "target '%s' cannot emit this file type",
                             M.getTargetTriple().str().c_str());
  PM.run(M);
  return Error::success();
}

} // namespace mlbridge::passes
