//===- MLIRPlugin.cpp - mlbridge pass plugin for mlir-opt -----------------===//
//
// Part of mlbridge. Load with
//   mlir-opt --load-pass-plugin=<build>/lib/MLBridgeMLIRPlugin.so
//     --pass-pipeline='builtin.module(func.func(mlbridge-loop-unroll))'
//     in.mlir
// Registers mlbridge-annotate-loops, mlbridge-loop-unroll and
// mlbridge-roundtrip. The runner options of the ML-guided passes
// (runner=..., channel=..., ...) become a RunnerConfig here, and
// createModelRunner (mlbridge/RunnerFactory.h) builds the runner: the passes
// never know which one it is.
//
//===----------------------------------------------------------------------===//
#include "mlbridge/RunnerFactory.h"
#include "passes/loop_unroll/AnnotateLoops.h"
#include "passes/loop_unroll/LoopUnroll.h"
#include "passes/roundtrip/MLIRRoundTrip.h"

#include "mlir/Tools/Plugins/PassPlugin.h"

#include <memory>

#ifndef MLBRIDGE_VERSION
#define MLBRIDGE_VERSION "0.0.0"
#endif

using namespace mlbridge;

namespace {

/// The RunnerConfig of \p V; the error names the pass option at fault.
llvm::Expected<RunnerConfig> toConfig(const passes::RunnerOptionValues &V,
                                      llvm::StringRef Task) {
  RunnerConfig C;
  C.Task = Task.str();
  // Messages name MLIR pass options: `channel`, not `-mlbridge-channel`.
  C.OptionPrefix = "";
  C.OptionDash = false;
  if (!V.Runner.empty()) {
    std::optional<RunnerKind> K = parseRunnerKind(V.Runner);
    if (!K)
      return llvm::createStringError(
          std::make_error_code(std::errc::invalid_argument),
          "runner must be callback, pipe, grpc, onnx or tfaot, got '" +
              V.Runner + "'");
    C.Kind = *K;
    C.KindGiven = true;
  }
  if (!V.SerDes.empty()) {
    llvm::Expected<SerDesKind> S = parseSerDesKind(V.SerDes);
    if (!S)
      return llvm::createStringError(
          std::make_error_code(std::errc::invalid_argument),
          "serdes: " + llvm::toString(S.takeError()));
    C.SerDes = *S;
    C.SerDesGiven = true;
  }
  C.Channel = V.Channel;
  C.Address = V.Address;
  C.Model = V.Model;
  C.Timeout = std::chrono::milliseconds(V.TimeoutMs);
  return C;
}

/// The runners of the passes of one task (RunnerConfig::Task; empty: any).
std::shared_ptr<const passes::RunnerProvider>
makeRunnerProvider(std::string Task) {
  auto P = std::make_shared<passes::RunnerProvider>();
  P->Check = [Task](const passes::RunnerOptionValues &V) -> llvm::Error {
    llvm::Expected<RunnerConfig> C = toConfig(V, Task);
    if (!C)
      return C.takeError();
    // Also resolves a registered model name now, before any IR is seen.
    llvm::Expected<RunnerKind> K = resolveRunnerKind(*C);
    return K ? llvm::Error::success() : K.takeError();
  };
  P->IsSingleSession = [Task](const passes::RunnerOptionValues &V) {
    llvm::Expected<RunnerConfig> C = toConfig(V, Task);
    if (!C) {
      llvm::consumeError(C.takeError());
      return false;
    }
    llvm::Expected<RunnerKind> K = resolveRunnerKind(*C);
    if (!K) {
      llvm::consumeError(K.takeError());
      return false;
    }
    return *K == RunnerKind::Pipe;
  };
  P->Create = [Task](const passes::RunnerOptionValues &V,
                     std::vector<TensorSpec> Features, TensorSpec Advice,
                     CallbackModelRunner::Callback Builtin)
      -> llvm::Expected<std::unique_ptr<MLModelRunner>> {
    llvm::Expected<RunnerConfig> C = toConfig(V, Task);
    if (!C)
      return C.takeError();
    return createModelRunner(*C, std::move(Features), std::move(Advice),
                             std::move(Builtin));
  };
  P->Describe = [Task](const passes::RunnerOptionValues &V) -> std::string {
    llvm::Expected<RunnerConfig> C = toConfig(V, Task);
    if (!C) {
      llvm::consumeError(C.takeError());
      return "runner '" + V.Runner + "'";
    }
    return describeRunner(*C);
  };
  return P;
}

} // namespace

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT ::mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {
      MLIR_PLUGIN_API_VERSION, "MLBridgeMLIRPlugin", MLBRIDGE_VERSION, []() {
        passes::registerAnnotateLoopsPass();
        passes::registerLoopUnrollPass(makeRunnerProvider("mlir-loop-unroll"));
        // The round-trip benchmark's host takes any model.
        passes::registerRoundTripPass(makeRunnerProvider(""));
      }};
}
