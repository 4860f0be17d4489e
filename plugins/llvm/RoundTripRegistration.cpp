//===- RoundTripRegistration.cpp - mlbridge-roundtrip in opt --------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// `mlbridge-roundtrip`, the round-trip benchmark's opt host (docs/bench.md),
/// and its options (-mlbridge-roundtrip-*).
///
//===----------------------------------------------------------------------===//
#include "passes/roundtrip/LLVMRoundTrip.h"
#include "plugins/common/RunnerCommandLine.h"
#include "plugins/llvm/Registration.h"

#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;

namespace {

cl::OptionCategory &Category = mlbridge::plugins::optPluginCategory();

// -mlbridge-roundtrip-runner, -channel, -address, -model, -serdes, -timeout-ms,
// -on-model-failure (accepted for symmetry: the experiment always fails).
mlbridge::plugins::RunnerCommandLine RoundTripRunnerOpts(
    "mlbridge-roundtrip-", Category,
    {"The model runner mlbridge-roundtrip asks (float 'input' [L] -> float "
     "'output' [1]; docs/bench.md)",
     "the layer w . input + b computed in-process (default)",
     "not used: a failed query is always an error"});

cl::opt<unsigned>
    RoundTripLength("mlbridge-roundtrip-length",
                    cl::desc("mlbridge-roundtrip: floats per query (L)"),
                    cl::init(500), cl::value_desc("L"), cl::cat(Category));

cl::opt<unsigned>
    RoundTripQueries("mlbridge-roundtrip-queries",
                     cl::desc("mlbridge-roundtrip: number of queries"),
                     cl::init(1), cl::value_desc("N"), cl::cat(Category));

cl::opt<std::string> RoundTripReport(
    "mlbridge-roundtrip-report",
    cl::desc("mlbridge-roundtrip: write a JSON summary (answers, seconds per "
             "query, checks) to this file"),
    cl::value_desc("file"), cl::cat(Category));

} // namespace

void mlbridge::plugins::registerRoundTrip(PassBuilder &PB) {
  PB.registerPipelineParsingCallback(
      [](StringRef Name, ModulePassManager &MPM,
         ArrayRef<PassBuilder::PipelineElement>) {
        if (Name != "mlbridge-roundtrip")
          return false;
        RunnerConfig Config = RoundTripRunnerOpts.config();
        passes::RoundTripOptions Options;
        Options.Length = RoundTripLength;
        Options.Queries = RoundTripQueries;
        Options.ReportPath = RoundTripReport;
        Options.RunnerDescription = describeRunner(Config);
        MPM.addPass(passes::RoundTripPass(
            std::move(Options),
            [Config](std::vector<TensorSpec> Features, TensorSpec Advice,
                     CallbackModelRunner::Callback Builtin) {
              return createModelRunner(Config, std::move(Features),
                                       std::move(Advice), std::move(Builtin));
            }));
        return true;
      });
}
