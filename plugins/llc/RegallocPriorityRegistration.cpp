//===- RegallocPriorityRegistration.cpp - The ML priority advisor in llc --===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The llc plugin's ML register-allocation priority advisor
/// (docs/regalloc.md) and its options (-mlbridge-regalloc-priority-*).
/// Installed only when asked for, so that without these options llc allocates
/// as it always does.
///
//===----------------------------------------------------------------------===//
#include "passes/regalloc_priority/MLPriorityAdvisor.h"
#include "plugins/common/LegacyOptionNames.h"
#include "plugins/common/RunnerCommandLine.h"
#include "plugins/llc/Registration.h"

#include "llvm/Pass.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;
using mlbridge::passes::PriorityAdviceType;

namespace {

cl::OptionCategory &Category = mlbridge::plugins::llcPluginCategory();

enum class PriorityAdvisorChoice { Default, ML };

cl::opt<PriorityAdvisorChoice> PriorityAdvisorOpt(
    "mlbridge-regalloc-priority-advisor",
    cl::desc("The live-range priority advisor of the greedy register "
             "allocator; giving -mlbridge-regalloc-priority-runner or "
             "-mlbridge-regalloc-priority-model also selects 'ml'"),
    cl::values(
        clEnumValN(PriorityAdvisorChoice::Default, "default",
                   "LLVM's (llc builds the pipeline; default)"),
        clEnumValN(PriorityAdvisorChoice::ML, "ml",
                   "mlbridge's: the plugin builds the codegen pipeline "
                   "with an advisor that asks the model runner "
                   "-mlbridge-regalloc-priority-runner names for each live "
                   "range's priority")),
    cl::init(PriorityAdvisorChoice::Default), cl::cat(Category));

// -mlbridge-regalloc-priority-runner, -mlbridge-regalloc-priority-channel,
// -mlbridge-regalloc-priority-address, -mlbridge-regalloc-priority-model,
// -mlbridge-regalloc-priority-serdes, -mlbridge-regalloc-priority-timeout-ms,
// -mlbridge-regalloc-priority-on-model-failure.
mlbridge::plugins::RunnerCommandLine PriorityRunnerOpts(
    "mlbridge-regalloc-priority-", Category,
    {"The model runner the ML priority advisor asks for each live range's "
     "priority (features and advice in docs/regalloc.md)",
     "in-process policy answering LLVM's default priority "
     "(default_priority; default)",
     "one warning naming the cause, then LLVM's default priority for the "
     "rest of the compilation"},
    "regalloc-priority");

cl::opt<PriorityAdviceType> PriorityAdviceTypeOpt(
    "mlbridge-regalloc-priority-advice-type",
    cl::desc("ML priority advisor: the element type of the model's advice "
             "'priority' (clamped to [0, 2^32-1], truncated toward zero)"),
    cl::values(clEnumValN(PriorityAdviceType::Double, "double",
                          "float64, exact for every priority (default)"),
               clEnumValN(PriorityAdviceType::Float, "float",
                          "float32, as LLVM's own ML priority advisor; "
                          "not exact above 2^24"),
               clEnumValN(PriorityAdviceType::Int64, "int64", "int64, exact")),
    cl::init(PriorityAdviceType::Double), cl::cat(Category));

bool mlPriorityAdvisorSelected() {
  if (PriorityAdvisorOpt.getNumOccurrences() > 0)
    return PriorityAdvisorOpt == PriorityAdvisorChoice::ML;
  return PriorityRunnerOpts.runnerGiven() || PriorityRunnerOpts.modelGiven();
}

// The names before the family was called after its task
// (-mlbridge-llc-priority-*).
mlbridge::plugins::LegacyOptionNames LegacyNames({
    {"mlbridge-llc-priority-advisor", "mlbridge-regalloc-priority-advisor"},
    {"mlbridge-llc-priority-advice-type",
     "mlbridge-regalloc-priority-advice-type"},
});
mlbridge::plugins::LegacyOptionNames LegacyRunnerNames =
    mlbridge::plugins::LegacyOptionNames::forRunnerOptions(
        "mlbridge-llc-priority-", "mlbridge-regalloc-priority-");

} // namespace

std::vector<std::unique_ptr<Pass>> mlbridge::plugins::regallocPriorityPasses() {
  std::vector<std::unique_ptr<Pass>> Passes;
  if (!mlPriorityAdvisorSelected())
    return Passes;
  RunnerConfig Config = PriorityRunnerOpts.config();
  passes::MLPriorityAdvisorOptions Options;
  Options.AdviceType = PriorityAdviceTypeOpt;
  Options.FallBackOnFailure = Config.OnFailure == ModelFailurePolicy::Fallback;
  Options.RunnerDescription = describeRunner(Config);
  auto Factory = [Config, Type = Options.AdviceType](
                     std::vector<TensorSpec> Features, TensorSpec Advice) {
    return createModelRunner(Config, std::move(Features), std::move(Advice),
                             passes::defaultPriorityPolicy(Type));
  };
  Passes.push_back(passes::createMLPriorityAdvisorAnalysis(std::move(Options),
                                                           std::move(Factory)));
  return Passes;
}
