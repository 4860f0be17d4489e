//===- Register.cpp - Registers the pipe runner with the core -------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "mlbridge/PipeModelRunner.h"
#include "mlbridge/Registry.h"

#include "llvm/Support/Compiler.h"

using namespace llvm;
using namespace mlbridge;

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT void mlbridge_component_pipe() {}

namespace {

Expected<std::unique_ptr<MLModelRunner>>
createPipeRunner(const RunnerConfig &Config, StringRef ChannelBase,
                 std::vector<TensorSpec> Features, TensorSpec Advice) {
  PipeModelRunnerOptions O;
  O.ChannelBase = ChannelBase.str();
  O.Kind = Config.SerDes;
  O.ConnectTimeout = Config.Timeout;
  O.Timeout = Config.Timeout;
  O.CreateFifos = Config.CreateChannel;
  O.Score = Config.Score;
  auto R = PipeModelRunner::create(std::move(Features), std::move(Advice),
                                   std::move(O));
  if (!R)
    return R.takeError();
  return std::unique_ptr<MLModelRunner>(std::move(*R));
}

struct Registrar {
  Registrar() { registerRunner("pipe", createPipeRunner); }
} TheRegistrar;

} // namespace
