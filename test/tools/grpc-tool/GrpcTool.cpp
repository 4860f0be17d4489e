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
//   mlbridge-grpc-tool train-user --descriptor-set FILE --observation TYPE
//       --action TYPE [--observe M] [--act M] [--step M] [--done-field F]
//       [--context-field F] [--id-field F] --ready-file FILE [options]
//     training with the user's own service (GrpcUserTrainingService): the
//     message types come from a FileDescriptorSet (`protoc
//     --include_imports --descriptor_set_out=FILE`), the methods are
//     /package.Service/Method names.
//
// Options: --rounds N (default 10), --seed S (default 0), --timeout-ms T,
// --end-timeout-ms T (finish()'s wait for the trainer to see the end).
// Decision i sets context "fn<i>", feature x (int64_t [1]) = S * 1000 + i,
// v (float [-1]) = i % 3 + 1 elements, the k-th being i + k / 2, and
// name (string [1]) = "fn<i>"; the advice is y (int64_t [1]). Each decision
// is printed as {"round":i,"x":x,"n":len(v),"advice":y}. Errors go to
// stderr with exit code 1.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/GrpcModelRunner.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

using namespace llvm;
using namespace mlbridge;

static int usage() {
  errs() << "usage: mlbridge-grpc-tool evaluate|train|train-user [--address "
            "HOST:PORT] [--ready-file FILE] [--rounds N] [--seed S] "
            "[--timeout-ms T] [--end-timeout-ms T] [--descriptor-set FILE "
            "--observation TYPE --action TYPE --observe M --act M --step M "
            "--done-field F --context-field F --id-field F]\n";
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

/// Loads the user's message types from the FileDescriptorSet \p Path.
static Error loadTypes(StringRef Path, StringRef ObservationType,
                       StringRef ActionType,
                       google::protobuf::DescriptorPool &Pool,
                       GrpcUserTrainingService &User) {
  if (Path.empty() || ObservationType.empty() || ActionType.empty())
    return createStringError(inconvertibleErrorCode(),
                             "train-user needs --descriptor-set, "
                             "--observation and --action");
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buf = MemoryBuffer::getFile(Path);
  if (!Buf)
    return createStringError(Buf.getError(), "cannot read %s: %s",
                             Path.str().c_str(),
                             Buf.getError().message().c_str());
  google::protobuf::FileDescriptorSet Set;
  if (!Set.ParseFromArray((*Buf)->getBufferStart(),
                          static_cast<int>((*Buf)->getBufferSize())))
    return createStringError(inconvertibleErrorCode(),
                             "%s is not a FileDescriptorSet",
                             Path.str().c_str());
  // Dependencies first, as protoc --include_imports writes them.
  for (const google::protobuf::FileDescriptorProto &F : Set.file())
    if (!Pool.BuildFile(F))
      return createStringError(inconvertibleErrorCode(),
                               "%s: cannot build %s (missing imports? use "
                               "--include_imports)",
                               Path.str().c_str(), F.name().c_str());
  User.Observation = Pool.FindMessageTypeByName(ObservationType.str());
  User.Action = Pool.FindMessageTypeByName(ActionType.str());
  for (auto [Type, Name] : {std::pair(User.Observation, ObservationType),
                            std::pair(User.Action, ActionType)})
    if (!Type)
      return createStringError(inconvertibleErrorCode(),
                               "%s has no message type %s", Path.str().c_str(),
                               Name.str().c_str());
  return Error::success();
}

int main(int Argc, char **Argv) {
  if (Argc < 2)
    return usage();
  StringRef Mode = Argv[1];
  std::string Address, ReadyFile, DescriptorSet, ObservationType, ActionType;
  GrpcUserTrainingService User;
  int64_t Rounds = 10, Seed = 0, TimeoutMs = 30000, EndTimeoutMs = 5000;
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
    else if (Flag == "--end-timeout-ms")
      Ok = to_integer(Value, EndTimeoutMs) && EndTimeoutMs >= 0;
    else if (Flag == "--descriptor-set")
      DescriptorSet = Value.str();
    else if (Flag == "--observation")
      ObservationType = Value.str();
    else if (Flag == "--action")
      ActionType = Value.str();
    else if (Flag == "--observe")
      User.ObserveMethod = Value.str();
    else if (Flag == "--act")
      User.ActMethod = Value.str();
    else if (Flag == "--step")
      User.StepMethod = Value.str();
    else if (Flag == "--done-field")
      User.DoneField = Value.str();
    else if (Flag == "--context-field")
      User.ContextField = Value.str();
    else if (Flag == "--id-field")
      User.IdField = Value.str();
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
  // Outlives the server: it owns the user's message types.
  google::protobuf::DescriptorPool Pool;
  if (Mode == "train-user") {
    if (Error E =
            loadTypes(DescriptorSet, ObservationType, ActionType, Pool, User))
      return fail(std::move(E));
    Mode = "train";
  }
  if (Mode == "train") {
    GrpcCompilerServerOptions O;
    if (!Address.empty())
      O.Address = Address;
    O.ReadyFile = ReadyFile;
    O.Timeout = Timeout;
    O.EndTimeout = std::chrono::milliseconds(EndTimeoutMs);
    if (User.Observation)
      O.UserService = User;
    Expected<std::unique_ptr<GrpcCompilerServer>> R =
        GrpcCompilerServer::create(Features, Advice, O);
    if (!R)
      return fail(R.takeError());
    for (int64_t I = 0; I < Rounds; ++I)
      if (Error E = decide(**R, I, Seed))
        return fail(std::move(E));
    if (Error E = (*R)->finish())
      return fail(std::move(E));
    return 0;
  }
  return usage();
}
