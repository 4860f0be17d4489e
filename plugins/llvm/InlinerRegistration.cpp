//===- InlinerRegistration.cpp - The ML inline advisor in opt -------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The opt plugin's ML inline advisor (docs/inliner.md): its options
/// (-mlbridge-inline-*) and, when they ask for it, the advisor installed
/// through PluginInlineAdvisorAnalysis. Without them opt inlines as it always
/// does.
///
//===----------------------------------------------------------------------===//
#include "passes/inliner/MLInlineAdvisor.h"
#include "plugins/common/RunnerCommandLine.h"
#include "plugins/llvm/Registration.h"

#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;

namespace {

cl::OptionCategory &Category = mlbridge::plugins::optPluginCategory();

enum class InlineAdvisorChoice { Default, ML };

cl::opt<InlineAdvisorChoice> InlineAdvisorOpt(
    "mlbridge-inline-advisor",
    cl::desc("The advisor of LLVM's inliner in default<O1..O3,Os,Oz>, "
             "inliner-wrapper and module-inline (not a bare cgscc(inline)); "
             "giving -mlbridge-inline-runner or -mlbridge-inline-model also "
             "selects 'ml'"),
    cl::values(clEnumValN(InlineAdvisorChoice::Default, "default",
                          "LLVM's own advisor, untouched (the default)"),
               clEnumValN(InlineAdvisorChoice::ML, "ml",
                          "mlbridge's ML inline advisor: LLVM's ML inliner "
                          "features, decisions from the model "
                          "-mlbridge-inline-runner names; legality stays "
                          "with LLVM")),
    cl::init(InlineAdvisorChoice::Default), cl::cat(Category));

// -mlbridge-inline-runner, -mlbridge-inline-channel, -mlbridge-inline-address,
// -mlbridge-inline-serdes, -mlbridge-inline-timeout-ms,
// -mlbridge-inline-on-model-failure.
mlbridge::plugins::RunnerCommandLine InlineRunnerOpts(
    "mlbridge-inline-", Category,
    {"The model runner the ML inline advisor asks for each inlining decision "
     "(features and advice of LLVM's ML inliner; docs/inliner.md)",
     "in-process policy answering LLVM's default heuristic's decision "
     "(inlining_default; default)",
     "one warning naming the cause, then LLVM's default inline advisor for "
     "the rest of the compilation"},
    "inliner");

cl::opt<bool> InlineIncludeDefault(
    "mlbridge-inline-include-default",
    cl::desc("ML inline advisor: also send the default heuristic's decision as "
             "the int64 [1] feature 'inlining_default', after LLVM's features "
             "(as stock -inliner-interactive-include-default; default on)"),
    cl::init(true), cl::cat(Category));

bool mlInlineAdvisorSelected() {
  if (InlineAdvisorOpt.getNumOccurrences() > 0)
    return InlineAdvisorOpt == InlineAdvisorChoice::ML;
  return InlineRunnerOpts.runnerGiven() || InlineRunnerOpts.modelGiven();
}

// PluginInlineAdvisorAnalysis's factory is a plain function of (Module, FAM,
// Params, Context), while llvm::MLInlineAdvisor needs the module analysis
// manager: the registration callback below remembers it. One per thread: a
// linker's ThinLTO backends (ld.lld --thinlto-jobs=N) each build their own
// PassBuilder and analysis managers and run their pipeline on the thread that
// registered them, at the same time; one shared pointer would hand a backend
// another thread's manager (docs/inliner.md, "In a ThinLTO link").
thread_local ModuleAnalysisManager *InlinerMAM = nullptr;

InlineAdvisor *createInlineAdvisor(Module &M, FunctionAnalysisManager &FAM,
                                   InlineParams Params, InlineContext IC) {
  auto *Proxy =
      InlinerMAM
          ? InlinerMAM->getCachedResult<FunctionAnalysisManagerModuleProxy>(M)
          : nullptr;
  if (!Proxy || &Proxy->getManager() != &FAM) {
    M.getContext().diagnose(DiagnosticInfoGeneric(
        "mlbridge-inline: the inliner's analysis managers are not those the "
        "plugin registered its advisor with; using LLVM's default inline "
        "advisor",
        DS_Warning));
    return std::make_unique<DefaultInlineAdvisor>(M, FAM, Params, IC).release();
  }
  mlbridge::RunnerConfig Config = InlineRunnerOpts.config();
  mlbridge::passes::MLInlineAdvisorOptions Options;
  Options.IncludeDefault = InlineIncludeDefault;
  Options.FallBackOnFailure =
      Config.OnFailure == mlbridge::ModelFailurePolicy::Fallback;
  Options.RunnerDescription = mlbridge::describeRunner(Config);
  auto Factory = [&Config](std::vector<mlbridge::TensorSpec> Features,
                           mlbridge::TensorSpec Advice) {
    return mlbridge::createModelRunner(
        Config, std::move(Features), std::move(Advice),
        mlbridge::passes::inliningDefaultPolicy());
  };
  // InlineAdvisorAnalysis takes ownership of the returned advisor.
  return mlbridge::passes::createMLInlineAdvisor(M, *InlinerMAM, Params, IC,
                                                 std::move(Options), Factory)
      .release();
}

} // namespace

void mlbridge::plugins::registerInliner(PassBuilder &PB) {
  PB.registerAnalysisRegistrationCallback([](ModuleAnalysisManager &MAM) {
    if (!mlInlineAdvisorSelected())
      return;
    InlinerMAM = &MAM;
    MAM.registerPass(
        [] { return PluginInlineAdvisorAnalysis(createInlineAdvisor); });
  });
}
