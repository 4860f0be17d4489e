//===- LLVMRoundTrip.cpp - The round-trip experiment inside opt -----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/roundtrip/LLVMRoundTrip.h"
#include "passes/roundtrip/RoundTrip.h"

#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace mlbridge::passes {

namespace {

void error(Module &M, const Twine &Message) {
  M.getContext().diagnose(
      DiagnosticInfoGeneric("mlbridge-roundtrip: " + Message, DS_Error));
}

/// The summary a driver reads (bench/, lit): one JSON object.
Error writeReport(StringRef Path, const RoundTripOptions &O,
                  const roundtrip::Result &R) {
  json::Array Answers, Seconds;
  for (float A : R.Answers)
    Answers.push_back(static_cast<double>(A));
  for (double S : R.Seconds)
    Seconds.push_back(S);
  json::Object Report{{"length", O.Length},
                      {"queries", O.Queries},
                      {"runner", O.RunnerDescription},
                      {"checked", R.Checked},
                      {"mismatches", R.Mismatches},
                      {"first_mismatch", R.FirstMismatch},
                      {"answers", std::move(Answers)},
                      {"seconds", std::move(Seconds)}};
  std::error_code EC;
  raw_fd_ostream OS(Path, EC, sys::fs::OF_Text);
  if (EC)
    return createStringError(EC, "cannot write the report '%s': %s",
                             Path.str().c_str(), EC.message().c_str());
  OS << json::Value(std::move(Report)) << "\n";
  OS.close();
  if (OS.has_error())
    return createStringError(OS.error(), "cannot write the report '%s'",
                             Path.str().c_str());
  return Error::success();
}

} // namespace

PreservedAnalyses RoundTripPass::run(Module &M, ModuleAnalysisManager &) {
  if (Options.Length < 1 || Options.Length > (1u << 24)) {
    error(M, "-mlbridge-roundtrip-length must be in [1, 16777216], got " +
                 Twine(Options.Length));
    return PreservedAnalyses::all();
  }
  Expected<std::unique_ptr<MLModelRunner>> Runner =
      Factory({createSpec<float>(roundtrip::InputName.str(),
                                 {static_cast<int64_t>(Options.Length)})},
              createSpec<float>(roundtrip::OutputName.str(), {1}),
              roundtrip::callbackModel(roundtrip::Expect::Dense));
  if (!Runner) {
    error(M, "cannot create the " + Options.RunnerDescription + ": " +
                 toString(Runner.takeError()));
    return PreservedAnalyses::all();
  }
  Expected<roundtrip::Result> R = roundtrip::run(
      **Runner, Options.Length, Options.Queries, roundtrip::Expect::Dense);
  if (!R) {
    error(M, Options.RunnerDescription + ": " + toString(R.takeError()));
    return PreservedAnalyses::all();
  }
  if (!Options.ReportPath.empty())
    if (Error E = writeReport(Options.ReportPath, Options, *R))
      error(M, toString(std::move(E)));
  if (R->Mismatches)
    error(M, Twine(R->Mismatches) + " of " + Twine(R->Checked) +
                 " answers from the " + Options.RunnerDescription +
                 " are wrong; the first: " + R->FirstMismatch);
  return PreservedAnalyses::all();
}

} // namespace mlbridge::passes
