//===- LLCPlugin.cpp - mlbridge plugin for llc ----------------------------===//
//
// Part of mlbridge. Load with
//   llc -load-pass-plugin=<build>/lib/MLBridgeLLCPlugin.so [-mlbridge-...]
// llc 22 never calls a plugin's PassBuilder callbacks; it calls
// PreCodeGenCallback once per module, after verifying the module and setting
// function attributes, right before building the codegen pipeline. Returning
// true means "the plugin wrote the output itself": llc then skips its own
// pipeline and the callbacks of later plugins. That is how the ML register
// allocation priority advisor (-mlbridge-regalloc-priority-advisor=ml) gets in:
// the plugin builds the pipeline with the advisor's analysis added first
// (docs/regalloc.md). Each pass family defines its options in its own file
// (Registration.h).
//
//===----------------------------------------------------------------------===//
#include "passes/support/CodeGenPipeline.h"
#include "plugins/llc/Registration.h"

#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Pass.h"
#include "llvm/Plugins/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Target/TargetMachine.h"

using namespace llvm;

#ifndef MLBRIDGE_VERSION
#define MLBRIDGE_VERSION "0.0.0"
#endif

namespace mlbridge::plugins {

cl::OptionCategory &llcPluginCategory() {
  static cl::OptionCategory Category("mlbridge options (MLBridgeLLCPlugin)");
  return Category;
}

} // namespace mlbridge::plugins

namespace {

cl::opt<bool> OwnPipeline(
    "mlbridge-own-codegen-pipeline",
    cl::desc("Build and run the codegen pipeline inside the plugin instead of "
             "llc (the hook ML-guided register allocation uses)"),
    cl::init(false), cl::cat(mlbridge::plugins::llcPluginCategory()));

// Its name before options lost the tool's name.
cl::alias LegacyOwnPipeline("mlbridge-llc-own-pipeline",
                            cl::aliasopt(OwnPipeline), cl::Hidden);

bool preCodeGen(Module &M, TargetMachine &TM, CodeGenFileType FileType,
                raw_pwrite_stream &OS) {
  LLVMContext &Ctx = M.getContext();
  if (Error E = mlbridge::plugins::annotateFunctionFeatures(M, TM)) {
    // llc checks for reported errors only when a plugin returns true.
    Ctx.diagnose(
        DiagnosticInfoGeneric("MLBridgeLLCPlugin: " + toString(std::move(E))));
    return true;
  }
  std::vector<std::unique_ptr<Pass>> FirstPasses =
      mlbridge::plugins::regallocPriorityPasses();
  if (!OwnPipeline && FirstPasses.empty())
    return false; // llc builds and runs its usual pipeline
  if (Error E = mlbridge::passes::emitWithOwnCodeGenPipeline(
          M, TM, FileType, OS, std::move(FirstPasses)))
    Ctx.diagnose(
        DiagnosticInfoGeneric("MLBridgeLLCPlugin: " + toString(std::move(E))));
  return true;
}

} // namespace

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT ::llvm::PassPluginLibraryInfo
llvmGetPassPluginInfo() {
  PassPluginLibraryInfo Info{LLVM_PLUGIN_API_VERSION, "MLBridgeLLCPlugin",
                             MLBRIDGE_VERSION};
  Info.PreCodeGenCallback = preCodeGen;
  return Info;
}
