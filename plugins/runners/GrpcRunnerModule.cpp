//===- GrpcRunnerModule.cpp - MLBridgeRunnerGrpc.so's entry point ---------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The runner module with everything that needs libprotobuf: the gRPC runner
/// (when built with gRPC) and the protobuf SerDes (RunnerModule.h).
///
//===----------------------------------------------------------------------===//
#include "plugins/runners/RunnerModule.h"

#ifdef MLBRIDGE_HAVE_GRPC
#include "mlbridge/GrpcModelRunner.h"
#endif

#include <algorithm>

using namespace llvm;
using namespace mlbridge;
using namespace mlbridge::plugins;

#ifdef MLBRIDGE_HAVE_GRPC
static Expected<std::unique_ptr<MLModelRunner>>
createGrpcRunner(StringRef Address, std::chrono::milliseconds Timeout,
                 std::vector<TensorSpec> Features, TensorSpec Advice) {
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
#endif

// The module's own createProtobufSerDes (Protobuf.cpp), linked in here; the
// one in libMLBridgePluginRuntime.so forwards to this one.
static std::unique_ptr<SerDes>
createModuleProtobufSerDes(const DecoderLimits &Limits) {
  return createProtobufSerDes(Limits);
}

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT const RunnerModuleInfo *
mlbridge_runner_module_v1() {
  static const RunnerModuleInfo Info = {
      RunnerModuleABIVersion, MLBRIDGE_VERSION, RunnerModuleKind::Grpc,
#ifdef MLBRIDGE_HAVE_GRPC
      createGrpcRunner,
#else
      nullptr,
#endif
      createModuleProtobufSerDes};
  return &Info;
}
