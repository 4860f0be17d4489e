//===- Register.cpp - Registers the gRPC runner ---------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Registers "grpc" (GrpcModelRunner, a ModelService client) and
/// "grpc-server" (GrpcCompilerServer, training) with the core's registry
/// (mlbridge/Registry.h) when MLBridge::Grpc is loaded. The static library's
/// link option `--undefined=` names the anchor below, so static links keep this
/// file (runtime/CMakeLists.txt).
///
//===----------------------------------------------------------------------===//
#include "mlbridge/GrpcModelRunner.h"
#include "mlbridge/Registry.h"

#include "llvm/Support/Compiler.h"

#include <algorithm>

using namespace llvm;
using namespace mlbridge;

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT void mlbridge_component_grpc() {}

namespace {

/// A runner on the server at \p Address; \p Timeout bounds every call and
/// the wait for the connection.
Expected<std::unique_ptr<MLModelRunner>>
createGrpcRunner(const RunnerConfig &Config, StringRef Address,
                 std::vector<TensorSpec> Features, TensorSpec Advice) {
  std::chrono::milliseconds Timeout = Config.Timeout;
  GrpcModelRunnerOptions O;
  O.Address = Address.str();
  O.Timeout = Timeout;
  O.ConnectTimeout = Timeout;
  // Reconnection back-off: never longer than the connection bound, at most
  // one second.
  O.InitialBackoff = std::min(O.InitialBackoff, Timeout);
  O.MaxBackoff =
      std::clamp(Timeout, O.InitialBackoff, std::chrono::milliseconds(1000));
  auto R = GrpcModelRunner::create(std::move(Features), std::move(Advice),
                                   std::move(O));
  if (!R)
    return R.takeError();
  return std::unique_ptr<MLModelRunner>(std::move(*R));
}

/// A CompilerService server listening on \p Address for a trainer;
/// \p Timeout bounds each wait for its action (the first: its connection).
Expected<std::unique_ptr<MLModelRunner>>
createGrpcServerRunner(const RunnerConfig &Config, StringRef Address,
                       std::vector<TensorSpec> Features, TensorSpec Advice) {
  GrpcCompilerServerOptions O;
  O.Address = Address.str();
  O.Timeout = Config.Timeout;
  O.ReadyFile = Config.ReadyFile;
  auto R = GrpcCompilerServer::create(std::move(Features), std::move(Advice),
                                      std::move(O));
  if (!R)
    return R.takeError();
  return std::unique_ptr<MLModelRunner>(std::move(*R));
}

struct Registrar {
  Registrar() {
    registerRunner("grpc", createGrpcRunner);
    registerRunner("grpc-server", createGrpcServerRunner);
  }
} TheRegistrar;

} // namespace
