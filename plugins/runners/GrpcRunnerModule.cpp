//===- GrpcRunnerModule.cpp - MLBridgeRunnerGrpc.so's entry point ---------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The runner module that brings libprotobuf into the process: it links
/// libMLBridgeProtobuf.so (the protobuf SerDes) and, when built with gRPC,
/// libMLBridgeGrpc.so (the gRPC runner), which register themselves with the
/// core when the module is loaded (RunnerModule.h).
///
//===----------------------------------------------------------------------===//
#include "plugins/runners/RunnerModule.h"

#include "llvm/Support/Compiler.h"

using namespace mlbridge::plugins;

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT const RunnerModuleInfo *
mlbridge_runner_module_v2() {
  static const RunnerModuleInfo Info = {
      RunnerModuleABIVersion, MLBRIDGE_VERSION, RunnerModuleKind::Grpc};
  return &Info;
}
