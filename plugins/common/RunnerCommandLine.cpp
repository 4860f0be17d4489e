//===- RunnerCommandLine.cpp - Runner options of the LLVM plugins ---------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "plugins/common/RunnerCommandLine.h"

using namespace llvm;

namespace mlbridge::plugins {

RunnerCommandLine::RunnerCommandLine(StringRef Prefix, cl::OptionCategory &Cat,
                                     const RunnerOptionHelp &Help,
                                     StringRef Task)
    : Task(Task.str()), Prefix(Prefix.str()),
      RunnerName((Prefix + "runner").str()),
      ChannelName((Prefix + "channel").str()),
      AddressName((Prefix + "address").str()),
      ModelName((Prefix + "model").str()),
      SerDesName((Prefix + "serdes").str()),
      TimeoutName((Prefix + "timeout-ms").str()),
      FailureName((Prefix + "on-model-failure").str()),
      ReadyFileName((Prefix + "ready-file").str()),
      Runner(StringRef(RunnerName), cl::desc(Help.Runner),
             cl::values(
                 clEnumValN(RunnerKind::Callback, "callback", Help.Callback),
                 clEnumValN(RunnerKind::Pipe, "pipe",
                            "a model in another process over named "
                            "pipes (PipeModelRunner)"),
                 clEnumValN(RunnerKind::Grpc, "grpc",
                            "a model server over gRPC at the address "
                            "given (GrpcModelRunner)"),
                 clEnumValN(RunnerKind::GrpcServer, "grpc-server",
                            "training over gRPC: the compiler serves "
                            "CompilerService and a trainer drives it "
                            "(GrpcCompilerServer)"),
                 clEnumValN(RunnerKind::Onnx, "onnx",
                            "an ONNX model in-process (OnnxModelRunner)"),
                 clEnumValN(RunnerKind::TFAOT, "tfaot",
                            "a TensorFlow AOT-compiled model in-process, "
                            "loaded from its shared object "
                            "(TFAOTModelRunner)")),
             cl::init(RunnerKind::Callback), cl::cat(Cat)),
      Channel(StringRef(ChannelName),
              cl::desc("Pipe runner: the channel base; the model writes "
                       "<base>.in and reads <base>.out (FIFOs it creates)"),
              cl::value_desc("base"), cl::cat(Cat)),
      Address(StringRef(AddressName),
              cl::desc("gRPC runner: the model server's address (e.g. "
                       "'mlbridge serve POLICY --address 127.0.0.1:50051'); "
                       "grpc-server runner: where to listen (default "
                       "127.0.0.1 on a free port)"),
              cl::value_desc("host:port"), cl::cat(Cat)),
      ReadyFile(StringRef(ReadyFileName),
                cl::desc("grpc-server runner: write the address it listens "
                         "on to this file once listening (for the trainer; "
                         "needed with a free port, the default)"),
                cl::value_desc("path"), cl::cat(Cat)),
      Model(StringRef(ModelName),
            cl::desc("ONNX and TF AOT runners: a model registered with "
                     "'mlbridge models register', or a model file's path "
                     "(.onnx, or a .so from 'mlbridge aot'); without a "
                     "runner option, the model's kind picks the runner"),
            cl::value_desc("name|path"), cl::cat(Cat)),
      SerDes(StringRef(SerDesName),
             cl::desc("Pipe runner: the serialization format (the gRPC "
                      "runner speaks protobuf only)"),
             cl::values(clEnumValN(SerDesKind::Bitstream, "bitstream",
                                   "LLVM's protocol: raw replies (default)"),
                        clEnumValN(SerDesKind::JSON, "json",
                                   "JSON Lines records both ways"),
                        clEnumValN(SerDesKind::Protobuf, "protobuf",
                                   "protobuf records both ways")),
             cl::init(SerDesKind::Bitstream), cl::cat(Cat)),
      TimeoutMs(StringRef(TimeoutName),
                cl::desc("Bound in milliseconds of every wait for the model: "
                         "connecting, each reply, each write; for gRPC the "
                         "deadline of each call (default 60000)"),
                cl::value_desc("N"), cl::init(60000), cl::cat(Cat)),
      OnFailure(StringRef(FailureName),
                cl::desc("What to do when the model is gone or fails"),
                cl::values(clEnumValN(ModelFailurePolicy::Fail, "fail",
                                      "a compiler error naming the cause "
                                      "(default)"),
                           clEnumValN(ModelFailurePolicy::Fallback, "fallback",
                                      Help.Fallback)),
                cl::init(ModelFailurePolicy::Fail), cl::cat(Cat)) {}

RunnerConfig RunnerCommandLine::config() const {
  RunnerConfig C;
  C.Kind = Runner;
  C.KindGiven = Runner.getNumOccurrences() > 0;
  C.Model = Model;
  C.Channel = Channel;
  C.Address = Address;
  C.ReadyFile = ReadyFile;
  C.SerDes = SerDes;
  C.SerDesGiven = SerDes.getNumOccurrences() > 0;
  C.Timeout = std::chrono::milliseconds(TimeoutMs);
  C.OnFailure = OnFailure;
  C.OptionPrefix = Prefix;
  C.Task = Task;
  return C;
}

} // namespace mlbridge::plugins
