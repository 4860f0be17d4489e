//===- LLCPlugin.cpp - mlbridge plugin for llc ----------------------------===//
//
// Part of mlbridge. Load with
//   llc -load-pass-plugin=<build>/lib/MLBridgeLLCPlugin.so [-mlbridge-llc-...]
// llc 22 never calls a plugin's PassBuilder callbacks; it calls
// PreCodeGenCallback once per module, after verifying the module and setting
// function attributes, right before building the codegen pipeline. Returning
// true means "the plugin wrote the output itself": llc then skips its own
// pipeline and the callbacks of later plugins.
//
//===----------------------------------------------------------------------===//
#include "passes/llvm/CodeGenAnnotation.h"
#include "passes/llvm/FunctionFeatures.h"
#include "plugins/common/Advisors.h"
#include "plugins/common/RunnerCommandLine.h"

#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/Plugins/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Target/TargetMachine.h"

using namespace llvm;
using mlbridge::passes::CodeGenAnnotationLevel;
using mlbridge::plugins::AdvisorKind;

#ifndef MLBRIDGE_VERSION
#define MLBRIDGE_VERSION "0.0.0"
#endif

namespace {

cl::OptionCategory MLBridgeCategory("mlbridge options (MLBridgeLLCPlugin)");

cl::opt<CodeGenAnnotationLevel> Annotate(
    "mlbridge-llc-annotate",
    cl::desc("Feature notes added to the output as assembler comments "
             "(module inline asm; the generated code is unchanged)"),
    cl::values(clEnumValN(CodeGenAnnotationLevel::None, "none", "no notes"),
               clEnumValN(CodeGenAnnotationLevel::Module, "module",
                          "one summary line for the module"),
               clEnumValN(CodeGenAnnotationLevel::Functions, "functions",
                          "the summary plus one line per function")),
    cl::init(CodeGenAnnotationLevel::Functions), cl::cat(MLBridgeCategory));

cl::opt<AdvisorKind> AdvisorOpt(
    "mlbridge-llc-advisor",
    cl::desc("Where the per-function advice in the notes comes from"),
    cl::values(clEnumValN(AdvisorKind::Builtin, "builtin",
                          "the built-in policy, called directly"),
               clEnumValN(AdvisorKind::Runner, "runner",
                          "the model runner -mlbridge-llc-runner names "
                          "(default)"),
               clEnumValN(AdvisorKind::Runner, "callback-runner",
                          "the same as 'runner' (with the default "
                          "-mlbridge-llc-runner=callback)")),
    cl::init(mlbridge::plugins::defaultAdvisorKind()),
    cl::cat(MLBridgeCategory));

// -mlbridge-llc-runner, -mlbridge-llc-channel, -mlbridge-llc-serdes,
// -mlbridge-llc-timeout-ms, -mlbridge-llc-on-model-failure.
mlbridge::plugins::RunnerCommandLine RunnerOpts("mlbridge-llc-",
                                                MLBridgeCategory);

cl::opt<unsigned> SmallFunctionThreshold(
    "mlbridge-llc-small-function-threshold",
    cl::desc("Built-in policy: loop-free functions with at most this many "
             "instructions are advised 'inline', larger ones 'size'"),
    cl::init(20), cl::value_desc("N"), cl::cat(MLBridgeCategory));

cl::opt<bool> OwnPipeline(
    "mlbridge-llc-own-pipeline",
    cl::desc("Build and run the codegen pipeline inside the plugin instead of "
             "llc (the hook ML-guided register allocation uses)"),
    cl::init(false), cl::cat(MLBridgeCategory));

bool preCodeGen(Module &M, TargetMachine &TM, CodeGenFileType FileType,
                raw_pwrite_stream &OS) {
  LLVMContext &Ctx = M.getContext();
  if (Annotate != CodeGenAnnotationLevel::None) {
    mlbridge::passes::BuiltinPolicyParams Params;
    Params.SmallFunctionThreshold = SmallFunctionThreshold;
    auto Advisor = mlbridge::plugins::makeFunctionAdvisor(
        AdvisorOpt, RunnerOpts.config(), Params);
    StringRef Comment = "#";
    if (const MCAsmInfo *MAI = TM.getMCAsmInfo())
      Comment = MAI->getCommentString();
    if (Error E = mlbridge::passes::annotateModuleForCodeGen(
            M, Comment, Annotate, *Advisor)) {
      // llc checks for reported errors only when a plugin returns true.
      Ctx.diagnose(DiagnosticInfoGeneric("MLBridgeLLCPlugin: " +
                                         toString(std::move(E))));
      return true;
    }
  }
  if (!OwnPipeline)
    return false; // llc builds and runs its usual pipeline
  if (Error E =
          mlbridge::passes::emitWithOwnCodeGenPipeline(M, TM, FileType, OS))
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
