//===- RegallocRegistration.cpp - The ML register allocator in llc --------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The llc plugin's ML register allocator (docs/ml-regalloc.md): registered
/// with LLVM's register allocator registry as `mlbridge`, so that `llc-22
/// -load-pass-plugin=... -regalloc=mlbridge` selects it, and its options
/// (-mlbridge-regalloc-*).
///
//===----------------------------------------------------------------------===//
#include "passes/regalloc/AllocationCost.h"
#include "passes/regalloc/MLRegAlloc.h"
#include "plugins/common/RunnerCommandLine.h"
#include "plugins/llc/Registration.h"

#include "llvm/CodeGen/MachineFunctionPass.h"
#include "llvm/CodeGen/RegAllocRegistry.h"
#include "llvm/Pass.h"
#include "llvm/PassInfo.h"
#include "llvm/PassRegistry.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;

// The registry is a static data member of a class template, defined in the
// header: left alone, the plugin would instantiate a copy of its own (local
// to the plugin, whose exports are its entry point only), which llc's
// `-regalloc` parser never sees. Declared here as instantiated elsewhere, it
// is libLLVM's, which llc's parser listens to.
extern template MachinePassRegistry<RegisterRegAlloc::FunctionPassCtor>
    RegisterRegAllocBase<RegisterRegAlloc>::Registry;

namespace {

cl::OptionCategory &Category = mlbridge::plugins::llcPluginCategory();

// -mlbridge-regalloc-runner, -mlbridge-regalloc-channel,
// -mlbridge-regalloc-address, -mlbridge-regalloc-model,
// -mlbridge-regalloc-serdes, -mlbridge-regalloc-timeout-ms,
// -mlbridge-regalloc-on-model-failure.
mlbridge::plugins::RunnerCommandLine RegAllocRunnerOpts(
    "mlbridge-regalloc-", Category,
    {"The model runner the ML register allocator (-regalloc=mlbridge) asks "
     "for every decision of its priority, coloring and split agents "
     "(features and advice in docs/ml-regalloc.md)",
     "the built-in policy in-process (-mlbridge-regalloc-policy; default)",
     "one warning naming the cause, then the built-in policy for the rest "
     "of the compilation"},
    "regalloc");

enum class BuiltinPolicy { Basic, Random, Split };

cl::opt<BuiltinPolicy> PolicyOpt(
    "mlbridge-regalloc-policy",
    cl::desc("The in-process policy of the ML register allocator's callback "
             "runner (the default runner)"),
    cl::values(clEnumValN(BuiltinPolicy::Basic, "basic",
                          "LLVM's basic allocator's choices: heaviest live "
                          "range first, first free register, else the "
                          "cheapest eviction, else spill (default)"),
               clEnumValN(BuiltinPolicy::Random, "random",
                          "a uniformly random legal action "
                          "(-mlbridge-regalloc-seed)"),
               clEnumValN(BuiltinPolicy::Split, "split",
                          "basic, with a split agent that splits around the "
                          "block of the largest (uses - live_in - live_out) "
                          "* frequency if positive, else spills (acts with "
                          "-mlbridge-regalloc-split)")),
    cl::init(BuiltinPolicy::Basic), cl::cat(Category));

cl::opt<bool> SplitOpt(
    "mlbridge-regalloc-split",
    cl::desc("Let the split agent act when the coloring agent chooses to "
             "spill a live range used in several blocks or living through a "
             "block with a call: it may split the live range around one of "
             "them instead (docs/ml-regalloc.md)"),
    cl::init(false), cl::cat(Category));

cl::opt<mlbridge::passes::MLRegAllocOptions::RegionBorders> RegionBordersOpt(
    "mlbridge-regalloc-region-borders",
    cl::desc("Where the split agent's region splits put their borders "
             "(with -mlbridge-regalloc-split; docs/ml-regalloc.md)"),
    cl::values(
        clEnumValN(mlbridge::passes::MLRegAllocOptions::RegionBorders::Free,
                   "free",
                   "around every block where the region's register is free"),
        clEnumValN(mlbridge::passes::MLRegAllocOptions::RegionBorders::Placed,
                   "placed",
                   "where LLVM's spill placement finds the copies cheapest, "
                   "as the greedy allocator's region splits"),
        clEnumValN(mlbridge::passes::MLRegAllocOptions::RegionBorders::Both,
                   "both", "offer both regions for each register (default)")),
    cl::init(mlbridge::passes::MLRegAllocOptions::RegionBorders::Both),
    cl::cat(Category));

cl::opt<bool> MovesOpt(
    "mlbridge-regalloc-moves",
    cl::desc("With -mlbridge-regalloc-split, offer the coloring agent a "
             "register held by live ranges (at most 4) that can each move to "
             "another register free for them: taking it moves them and "
             "spills nothing, as greedy's recoloring (default true; "
             "docs/ml-regalloc.md)"),
    cl::init(true), cl::cat(Category));

cl::list<std::string> ModelFunctionsOpt(
    "mlbridge-regalloc-model-functions",
    cl::desc("Allocate only these functions (comma-separated names) with the "
             "model runner; the built-in policy allocates the others "
             "in-process, without asking it (default: every function)"),
    cl::CommaSeparated, cl::cat(Category));

cl::opt<unsigned> MessageRoundsOpt(
    "mlbridge-regalloc-message-rounds",
    cl::desc("Send each query only the edges a graph model passing this many "
             "rounds of messages reads: those with an end fewer than this "
             "many edges away from the queued live ranges (priority agent) "
             "or from the one decided on (coloring, split agents). Such a "
             "model decides exactly as over the whole graph, in less time "
             "(docs/ml-regalloc.md). Default: the rounds the model "
             "declares (an ONNX model's metadata), else every edge"),
    cl::value_desc("rounds"), cl::cat(Category));

cl::opt<uint64_t>
    SeedOpt("mlbridge-regalloc-seed",
            cl::desc("The seed of -mlbridge-regalloc-policy=random"),
            cl::init(0), cl::cat(Category));

FunctionPass *createFromOptions() {
  using namespace mlbridge;
  RunnerConfig Config = RegAllocRunnerOpts.config();
  passes::MLRegAllocOptions Options;
  Options.FallBackOnFailure = Config.OnFailure == ModelFailurePolicy::Fallback;
  Options.RunnerDescription = describeRunner(Config);
  Options.Split = SplitOpt;
  Options.Borders = RegionBordersOpt;
  Options.Moves = MovesOpt;
  for (const std::string &Name : ModelFunctionsOpt)
    Options.ModelFunctions.insert(Name);
  if (MessageRoundsOpt.getNumOccurrences())
    Options.MessageRounds = MessageRoundsOpt;
  CallbackModelRunner::Callback Policy;
  switch (PolicyOpt) {
  case BuiltinPolicy::Basic:
    Policy = passes::builtinRegAllocPolicy();
    break;
  case BuiltinPolicy::Random:
    Policy = passes::randomRegAllocPolicy(SeedOpt);
    break;
  case BuiltinPolicy::Split:
    Policy = passes::splitRegAllocPolicy();
    break;
  }
  auto Factory = [Config, Policy](std::vector<TensorSpec> Features,
                                  TensorSpec Advice) {
    return createModelRunner(Config, std::move(Features), std::move(Advice),
                             Policy);
  };
  return passes::createMLRegAlloc(std::move(Options), std::move(Factory));
}

RegisterRegAlloc
    MLBridgeRegAlloc("mlbridge",
                     "mlbridge's ML register allocator: "
                     "priority, coloring and split agents behind a "
                     "model runner (docs/ml-regalloc.md)",
                     createFromOptions);

// The cost measure (docs/ml-regalloc.md), for any allocator's result:
// `llc -run-pass=mlbridge-regalloc-cost` on MIR stopped after the rewriter.
Pass *createCostPass() { return mlbridge::passes::createAllocationCostPass(); }
struct CostPassRegistration {
  PassInfo Info{"mlbridge register allocation cost",
                "mlbridge-regalloc-cost",
                mlbridge::passes::allocationCostPassID(),
                createCostPass,
                /*isCFGOnly=*/false,
                /*is_analysis=*/false};
  CostPassRegistration() {
    PassRegistry::getPassRegistry()->registerPass(Info);
  }
} CostPass;

} // namespace
