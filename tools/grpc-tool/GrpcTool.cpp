//===- GrpcTool.cpp - A compiler stand-in for the gRPC runners ------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Asks a model for N decisions the way a pass does, through one of the gRPC
// runners, for the Python tests (test/python/test_grpc.py):
//
//   mlbridge-grpc-tool evaluate --address HOST:PORT [options]
//     inference: GrpcModelRunner, the model serves ModelService.
//   mlbridge-grpc-tool train [--address HOST:0] --ready-file FILE [options]
//     training: GrpcCompilerServer, the trainer drives CompilerService.
//
// Options: --rounds N (default 10), --seed S (default 0), --timeout-ms T.
// Decision i sets context "fn<i>", feature x (int64_t [1]) = S * 1000 + i,
// v (float [-1]) = i % 3 + 1 elements, the k-th being i + k / 2, and
// name (string [1]) = "fn<i>"; the advice is y (int64_t [1]). Each decision
// is printed as {"round":i,"x":x,"n":len(v),"advice":y}. Errors go to
// stderr with exit code 1.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/GrpcModelRunner.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace mlbridge;

static int usage() {
  errs() << "usage: mlbridge-grpc-tool evaluate|train [--address HOST:PORT] "
            "[--ready-file FILE] [--rounds N] [--seed S] [--timeout-ms T]\n";
  return 1;
}

static int fail(Error E) {
  errs() << "mlbridge-grpc-tool: " << toString(std::move(E)) << "\n";
  return 1;
}

template <typename RunnerT>
static Error decide(RunnerT &R, int64_t Round, int64_t Seed) {
  std::string Name = "fn" + std::to_string(Round);
  R.setContext(Name);
  int64_t X = Seed * 1000 + Round;
  std::vector<float> V;
  for (int64_t K = 0; K <= Round % 3; ++K)
    V.push_back(static_cast<float>(Round) + static_cast<float>(K) / 2);
  if (Error E =
          R.populateFeatures(std::make_pair("x", X), std::make_pair("v", V),
                             std::make_pair("name", Name)))
    return E;
  Expected<int64_t> Y = R.template evaluate<int64_t>();
  if (!Y)
    return Y.takeError();
  outs() << "{\"round\":" << Round << ",\"x\":" << X << ",\"n\":" << V.size()
         << ",\"advice\":" << *Y << "}\n";
  outs().flush();
  return Error::success();
}

int main(int Argc, char **Argv) {
  if (Argc < 2)
    return usage();
  StringRef Mode = Argv[1];
  std::string Address, ReadyFile;
  int64_t Rounds = 10, Seed = 0, TimeoutMs = 30000;
  for (int I = 2; I + 1 < Argc; I += 2) {
    StringRef Flag = Argv[I], Value = Argv[I + 1];
    bool Ok = true;
    if (Flag == "--address")
      Address = Value.str();
    else if (Flag == "--ready-file")
      ReadyFile = Value.str();
    else if (Flag == "--rounds")
      Ok = to_integer(Value, Rounds);
    else if (Flag == "--seed")
      Ok = to_integer(Value, Seed);
    else if (Flag == "--timeout-ms")
      Ok = to_integer(Value, TimeoutMs) && TimeoutMs > 0;
    else
      Ok = false;
    if (!Ok)
      return usage();
  }
  if (Argc % 2 != 0)
    return usage();

  std::vector<TensorSpec> Features = {createSpec<int64_t>("x", {1}),
                                      createSpec<float>("v", {-1}),
                                      createSpec<std::string>("name", {1})};
  TensorSpec Advice = createSpec<int64_t>("y", {1});
  std::chrono::milliseconds Timeout(TimeoutMs);

  if (Mode == "evaluate") {
    GrpcModelRunnerOptions O;
    O.Address = Address;
    O.Timeout = Timeout;
    Expected<std::unique_ptr<GrpcModelRunner>> R =
        GrpcModelRunner::create(Features, Advice, O);
    if (!R)
      return fail(R.takeError());
    for (int64_t I = 0; I < Rounds; ++I)
      if (Error E = decide(**R, I, Seed))
        return fail(std::move(E));
    return 0;
  }
  if (Mode == "train") {
    GrpcCompilerServerOptions O;
    if (!Address.empty())
      O.Address = Address;
    O.ReadyFile = ReadyFile;
    O.Timeout = Timeout;
    Expected<std::unique_ptr<GrpcCompilerServer>> R =
        GrpcCompilerServer::create(Features, Advice, O);
    if (!R)
      return fail(R.takeError());
    for (int64_t I = 0; I < Rounds; ++I)
      if (Error E = decide(**R, I, Seed))
        return fail(std::move(E));
    (*R)->finish();
    return 0;
  }
  return usage();
}
