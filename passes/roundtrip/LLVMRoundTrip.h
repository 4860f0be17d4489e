//===- LLVMRoundTrip.h - The round-trip experiment inside opt ---*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// `mlbridge-roundtrip` for opt (a module pass): the round-trip experiment of
/// passes/roundtrip/RoundTrip.h driven from inside opt-22, on whichever runner
/// the plugin's `-mlbridge-roundtrip-*` options name. Every answer is checked
/// against the fully-connected layer (the pass's own in-process model is the
/// same layer, so every runner must give the same answers); a wrong answer
/// or a failed query is a compiler error. The IR is left unchanged.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_ROUNDTRIP_LLVMROUNDTRIP_H
#define MLBRIDGE_PASSES_ROUNDTRIP_LLVMROUNDTRIP_H

#include "mlbridge/MLModelRunner.h"

#include "llvm/IR/PassManager.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mlbridge::passes {

/// Makes the runner the pass asks: features, advice, and the pass's own
/// in-process model (for a callback runner).
using RoundTripRunnerFactory =
    std::function<llvm::Expected<std::unique_ptr<MLModelRunner>>(
        std::vector<TensorSpec> Features, TensorSpec Advice,
        CallbackModelRunner::Callback Builtin)>;

struct RoundTripOptions {
  /// Floats per query (L), in [1, 16777216].
  unsigned Length = 500;
  /// Number of queries.
  unsigned Queries = 1;
  /// Where to write the JSON summary (answers, per-query seconds, checks);
  /// empty: nowhere.
  std::string ReportPath;
  /// The runner, for messages ("pipe runner on '/tmp/ch'").
  std::string RunnerDescription;
};

class RoundTripPass : public llvm::PassInfoMixin<RoundTripPass> {
public:
  RoundTripPass(RoundTripOptions Options, RoundTripRunnerFactory Factory)
      : Options(std::move(Options)), Factory(std::move(Factory)) {}

  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &);
  static bool isRequired() { return true; }

private:
  RoundTripOptions Options;
  RoundTripRunnerFactory Factory;
};

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_ROUNDTRIP_LLVMROUNDTRIP_H
