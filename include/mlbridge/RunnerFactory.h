//===- RunnerFactory.h - One way to build a model runner --------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Every program that asks a model (the opt, llc and mlir-opt plugins, the C
/// API, a user's tool) says where decisions come from with one RunnerConfig
/// and gets an MLModelRunner from createModelRunner(). Passes get the runner
/// and never know which one it is.
///
/// The callback runner is built here; the others come from the component
/// that registered them by name (mlbridge/Registry.h): "pipe"
/// (MLBridge::Pipe), "grpc" (MLBridge::Grpc), "onnx" (MLBridge::Onnx),
/// "tfaot" (MLBridge::TFAOT, which also runs native models). A runner that is
/// not registered is asked of the component loader, if the program set one
/// (the plugins load their heavy runners on first use that way).
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_RUNNERFACTORY_H
#define MLBRIDGE_RUNNERFACTORY_H

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/SerDes/SerDes.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlbridge {

/// The model runners there are.
enum class RunnerKind {
  /// An in-process policy (a function), behind CallbackModelRunner.
  Callback,
  /// A model in another process over named pipes (PipeModelRunner).
  Pipe,
  /// A model server reached over gRPC (GrpcModelRunner, ModelService).
  Grpc,
  /// Training over gRPC: the compiler serves CompilerService and a trainer
  /// drives it (GrpcCompilerServer); one process is one episode.
  GrpcServer,
  /// An ONNX model in-process (OnnxModelRunner).
  Onnx,
  /// A TensorFlow AOT-compiled or native (mlbridge compile) model loaded
  /// from a shared object (TFAOTModelRunner::load).
  TFAOT,
};

/// The name of \p Kind, as options spell it: callback, pipe, grpc,
/// grpc-server, onnx, tfaot. It is also the name the runner is registered
/// under.
llvm::StringRef runnerKindName(RunnerKind Kind);
/// The inverse of runnerKindName().
std::optional<RunnerKind> parseRunnerKind(llvm::StringRef Name);

/// What a pass does when the model fails (gone, timed out, bad reply).
enum class ModelFailurePolicy {
  /// A compiler error naming the cause.
  Fail,
  /// One warning naming the cause, then the pass's own heuristic for the
  /// rest of the compilation.
  Fallback,
};

/// Everything needed to build a runner.
struct RunnerConfig {
  RunnerKind Kind = RunnerKind::Callback;
  /// Whether Kind was chosen explicitly; if not and Model is given, the
  /// model's kind (ONNX or TF AOT) picks the runner.
  bool KindGiven = false;
  /// Pipe: the channel base (`<base>.in`, `<base>.out`).
  std::string Channel;
  /// Pipe: whether the runner creates the FIFOs (in a private folder it
  /// checks) rather than wait for the model side to create them.
  bool CreateChannel = false;
  /// gRPC: the model server, `host:port`; grpc-server: where to listen
  /// (empty: 127.0.0.1 on a free port, which needs ReadyFile).
  std::string Address;
  /// grpc-server: the file the bound address is written to once the server
  /// listens (GrpcCompilerServerOptions::ReadyFile), for the trainer.
  std::string ReadyFile;
  /// ONNX, TF AOT: a registered model's name or a model file's path
  /// (mlbridge::findModel, docs/models.md).
  std::string Model;
  /// The model registry to look Model up in; empty: the default one.
  std::string RegistryDir;
  /// Model is a file's path, loaded by the runner Kind names as it is (the
  /// runner checks the file), never looked up in the registry.
  bool ModelIsFile = false;
  /// ONNX: threads ONNX Runtime may use inside one evaluation; 0: its
  /// default (OnnxRunnerOptions).
  int IntraOpThreads = 0;
  SerDesKind SerDes = SerDesKind::Bitstream;
  /// Whether SerDes was chosen explicitly (the gRPC runner accepts only an
  /// explicit Protobuf; it always speaks protobuf).
  bool SerDesGiven = false;
  /// Bound of every wait: connecting, each read, each write; for gRPC the
  /// deadline of each call and the bound of the connection wait.
  std::chrono::milliseconds Timeout{60000};
  /// What the caller does when the model fails; the factory only carries it.
  ModelFailurePolicy OnFailure = ModelFailurePolicy::Fail;
  /// The spec of the outcome a training model receives after each decision
  /// (MLModelRunner::sendOutcome). Runners that cannot carry outcomes (all
  /// but the pipe runner) ignore it: their scoreSpec() is empty.
  std::optional<TensorSpec> Score;
  /// How the options these settings came from are spelled, so that error
  /// messages name the option to fix: `-mlbridge-` gives `-mlbridge-channel`;
  /// MLIR pass options use an empty prefix and no dash (OptionDash false).
  std::string OptionPrefix = "mlbridge-";
  bool OptionDash = true;
  /// The task of the pass that asks (e.g. "inliner"; see taskModelOption()).
  /// A registered model of another task is refused before it is loaded, with
  /// a message naming its task and the option that takes it. Empty: any.
  std::string Task;

  /// The spelling of option \p Name (e.g. "channel") for messages.
  std::string optionName(llvm::StringRef Name) const;
};

/// What a pass is given to build its runner: its feature specs and advice
/// spec in, the runner (configured elsewhere) out.
using ModelRunnerMaker =
    std::function<llvm::Expected<std::unique_ptr<MLModelRunner>>(
        std::vector<TensorSpec> Features, TensorSpec Advice)>;

/// The runner kind \p Config resolves to: Config.Kind, or the kind of
/// Config.Model when no kind was given.
llvm::Expected<RunnerKind> resolveRunnerKind(const RunnerConfig &Config);

/// Builds the runner \p Config names for \p Features and \p Advice. \p Builtin
/// is the in-process policy of the callback runner (may be empty for other
/// kinds). The pipe runner connects on first use; the gRPC runner connects
/// here (bounded by Config.Timeout); the in-process runners load the model
/// here and refuse one whose inputs do not fit \p Features
/// (mlbridge::bindModelInputs).
llvm::Expected<std::unique_ptr<MLModelRunner>>
createModelRunner(const RunnerConfig &Config, std::vector<TensorSpec> Features,
                  TensorSpec Advice,
                  CallbackModelRunner::Callback Builtin = nullptr);

/// The option, and the tool that has it, that takes a model of \p Task (e.g.
/// "-mlbridge-inline-model (opt)"); empty for a task no plugin answers.
std::string taskModelOption(llvm::StringRef Task);

/// A short description of the runner \p Config names, for diagnostics
/// (e.g. "pipe runner on '/tmp/ch'", "onnx runner with model 'inliner-oz'").
std::string describeRunner(const RunnerConfig &Config);

} // namespace mlbridge

#endif // MLBRIDGE_RUNNERFACTORY_H
