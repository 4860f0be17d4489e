//===- LLCPlugin.cpp - mlbridge plugin for llc ----------------------------===//
//
// Part of mlbridge. Load with
//   llc -load-pass-plugin=<build>/lib/MLBridgeLLCPlugin.so [-mlbridge-llc-...]
// llc 22 never calls a plugin's PassBuilder callbacks; it calls
// PreCodeGenCallback once per module, after verifying the module and setting
// function attributes, right before building the codegen pipeline. Returning
// true means "the plugin wrote the output itself": llc then skips its own
// pipeline and the callbacks of later plugins. That is how the ML register
// allocation priority advisor (-mlbridge-llc-priority-advisor=ml) gets in:
// the plugin builds the pipeline with the advisor's analysis added first
// (docs/regalloc.md).
//
//===----------------------------------------------------------------------===//
#include "passes/llvm/CodeGenAnnotation.h"
#include "passes/llvm/FunctionFeatures.h"
#include "passes/llvm/MLPriorityAdvisor.h"
#include "plugins/common/Advisors.h"
#include "plugins/common/RunnerCommandLine.h"

#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/Pass.h"
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

// The ML register-allocation priority advisor (docs/regalloc.md). Installed
// only when asked for, so that without these options llc allocates as it
// always does.
enum class PriorityAdvisorChoice { Default, ML };

cl::opt<PriorityAdvisorChoice> PriorityAdvisorOpt(
    "mlbridge-llc-priority-advisor",
    cl::desc("The live-range priority advisor of the greedy register "
             "allocator; giving -mlbridge-llc-priority-runner or "
             "-mlbridge-llc-priority-model also selects 'ml'"),
    cl::values(clEnumValN(PriorityAdvisorChoice::Default, "default",
                          "LLVM's (llc builds the pipeline; default)"),
               clEnumValN(PriorityAdvisorChoice::ML, "ml",
                          "mlbridge's: the plugin builds the codegen pipeline "
                          "with an advisor that asks the model runner "
                          "-mlbridge-llc-priority-runner names for each live "
                          "range's priority")),
    cl::init(PriorityAdvisorChoice::Default), cl::cat(MLBridgeCategory));

// -mlbridge-llc-priority-runner, -mlbridge-llc-priority-channel,
// -mlbridge-llc-priority-address, -mlbridge-llc-priority-model,
// -mlbridge-llc-priority-serdes, -mlbridge-llc-priority-timeout-ms,
// -mlbridge-llc-priority-on-model-failure.
mlbridge::plugins::RunnerCommandLine PriorityRunnerOpts(
    "mlbridge-llc-priority-", MLBridgeCategory,
    {"The model runner the ML priority advisor asks for each live range's "
     "priority (features and advice in docs/regalloc.md)",
     "in-process policy answering LLVM's default priority "
     "(default_priority; default)",
     "one warning naming the cause, then LLVM's default priority for the "
     "rest of the compilation"},
    "regalloc-priority");

cl::opt<mlbridge::passes::PriorityAdviceType> PriorityAdviceTypeOpt(
    "mlbridge-llc-priority-advice-type",
    cl::desc("ML priority advisor: the element type of the model's advice "
             "'priority' (clamped to [0, 2^32-1], truncated toward zero)"),
    cl::values(clEnumValN(mlbridge::passes::PriorityAdviceType::Double,
                          "double",
                          "float64, exact for every priority (default)"),
               clEnumValN(mlbridge::passes::PriorityAdviceType::Float, "float",
                          "float32, as LLVM's own ML priority advisor; "
                          "not exact above 2^24"),
               clEnumValN(mlbridge::passes::PriorityAdviceType::Int64, "int64",
                          "int64, exact")),
    cl::init(mlbridge::passes::PriorityAdviceType::Double),
    cl::cat(MLBridgeCategory));

bool mlPriorityAdvisorSelected() {
  if (PriorityAdvisorOpt.getNumOccurrences() > 0)
    return PriorityAdvisorOpt == PriorityAdvisorChoice::ML;
  return PriorityRunnerOpts.runnerGiven() || PriorityRunnerOpts.modelGiven();
}

std::vector<std::unique_ptr<Pass>> priorityAdvisorPasses() {
  std::vector<std::unique_ptr<Pass>> Passes;
  if (!mlPriorityAdvisorSelected())
    return Passes;
  mlbridge::RunnerConfig Config = PriorityRunnerOpts.config();
  mlbridge::passes::MLPriorityAdvisorOptions Options;
  Options.AdviceType = PriorityAdviceTypeOpt;
  Options.FallBackOnFailure =
      Config.OnFailure == mlbridge::ModelFailurePolicy::Fallback;
  Options.RunnerDescription = mlbridge::describeRunner(Config);
  auto Factory = [Config, Type = Options.AdviceType](
                     std::vector<mlbridge::TensorSpec> Features,
                     mlbridge::TensorSpec Advice) {
    return mlbridge::createModelRunner(
        Config, std::move(Features), std::move(Advice),
        mlbridge::passes::defaultPriorityPolicy(Type));
  };
  Passes.push_back(mlbridge::passes::createMLPriorityAdvisorAnalysis(
      std::move(Options), std::move(Factory)));
  return Passes;
}

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
  std::vector<std::unique_ptr<Pass>> FirstPasses = priorityAdvisorPasses();
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
