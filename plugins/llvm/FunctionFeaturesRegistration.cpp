//===- FunctionFeaturesRegistration.cpp - mlbridge-function-features ------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The opt plugin's `mlbridge-function-features` pass (docs/plugins.md): its
/// options (-mlbridge-advisor, -mlbridge-runner, ...), the pass in a
/// pipeline, and optionally at the start of the default pipelines.
///
//===----------------------------------------------------------------------===//
#include "passes/function_features/FunctionFeatures.h"
#include "plugins/common/Advisors.h"
#include "plugins/common/RunnerCommandLine.h"
#include "plugins/llvm/Registration.h"

#include "llvm/Passes/OptimizationLevel.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;
using mlbridge::plugins::AdvisorKind;

namespace {

cl::OptionCategory &Category = mlbridge::plugins::optPluginCategory();

cl::opt<AdvisorKind> AdvisorOpt(
    "mlbridge-advisor",
    cl::desc("Where mlbridge-function-features gets its per-function "
             "decisions from"),
    cl::values(clEnumValN(AdvisorKind::Builtin, "builtin",
                          "the built-in policy, called directly"),
               clEnumValN(AdvisorKind::Runner, "runner",
                          "the model runner -mlbridge-runner names "
                          "(default)"),
               clEnumValN(AdvisorKind::Runner, "callback-runner",
                          "the same as 'runner' (with the default "
                          "-mlbridge-runner=callback)")),
    cl::init(mlbridge::plugins::defaultAdvisorKind()), cl::cat(Category));

// -mlbridge-runner, -mlbridge-channel, -mlbridge-serdes, -mlbridge-timeout-ms,
// -mlbridge-on-model-failure.
mlbridge::plugins::RunnerCommandLine RunnerOpts("mlbridge-", Category);

cl::opt<unsigned> SmallFunctionThreshold(
    "mlbridge-small-function-threshold",
    cl::desc("Built-in policy: loop-free functions with at most this many "
             "instructions are advised 'inline', larger ones 'size'"),
    cl::init(20), cl::value_desc("N"), cl::cat(Category));

cl::opt<bool> PrintFeatures(
    "mlbridge-print-features",
    cl::desc("Print each function's features and advice as one JSON object "
             "per line to stderr"),
    cl::init(false), cl::cat(Category));

cl::opt<bool> ApplyAdvice(
    "mlbridge-apply-advice",
    cl::desc("Also turn the advice into standard attributes: 'inline' adds "
             "inlinehint, 'size' adds optsize"),
    cl::init(false), cl::cat(Category));

cl::opt<bool> AddToDefaultPipelines(
    "mlbridge-in-default-pipelines",
    cl::desc("Run mlbridge-function-features at the start of the default "
             "pipelines (default<O1..O3>, default<Os>...)"),
    cl::init(false), cl::cat(Category));

mlbridge::passes::FunctionFeaturesPass makePass() {
  mlbridge::passes::BuiltinPolicyParams Params;
  Params.SmallFunctionThreshold = SmallFunctionThreshold;
  mlbridge::passes::FunctionFeaturesOptions Options;
  Options.PrintJSON = PrintFeatures;
  Options.ApplyAdvice = ApplyAdvice;
  return mlbridge::passes::FunctionFeaturesPass(
      mlbridge::plugins::makeFunctionAdvisor(AdvisorOpt, RunnerOpts.config(),
                                             Params),
      Options);
}

} // namespace

void mlbridge::plugins::registerFunctionFeatures(PassBuilder &PB) {
  PB.registerPipelineParsingCallback(
      [](StringRef Name, FunctionPassManager &FPM,
         ArrayRef<PassBuilder::PipelineElement>) {
        if (Name != "mlbridge-function-features")
          return false;
        FPM.addPass(makePass());
        return true;
      });
  PB.registerPipelineStartEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel) {
        if (AddToDefaultPipelines)
          MPM.addPass(createModuleToFunctionPassAdaptor(makePass()));
      });
}
