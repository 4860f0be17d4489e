//===- RunnerFactory.h - The model runner a plugin's options name -*- C++
//-*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Every plugin (opt, llc, mlir-opt) lets the user pick where decisions come
/// from; this turns that choice (a RunnerConfig, filled from `cl::opt`s by
/// RunnerCommandLine or from MLIR pass options) into an MLModelRunner. Passes
/// get the runner and never know which one it is.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PLUGINS_COMMON_RUNNERFACTORY_H
#define MLBRIDGE_PLUGINS_COMMON_RUNNERFACTORY_H

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/SerDes/SerDes.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlbridge::plugins {

/// The model runners a plugin can build.
enum class RunnerKind {
  /// The pass's built-in policy in-process, behind CallbackModelRunner.
  Callback,
  /// A model in another process over named pipes (PipeModelRunner).
  Pipe,
  /// A model server reached over gRPC (GrpcModelRunner, ModelService). Only
  /// usable when mlbridge is built with MLBRIDGE_ENABLE_GRPC.
  Grpc,
  /// An ONNX model in-process (OnnxModelRunner). Needs MLBRIDGE_ENABLE_ONNX.
  Onnx,
  /// A TensorFlow AOT-compiled model loaded from a shared object
  /// (TFAOTModelRunner::load). Needs MLBRIDGE_ENABLE_TF_AOT.
  TFAOT,
};

/// The option value of \p Kind: callback, pipe, grpc, onnx, tfaot.
llvm::StringRef runnerKindName(RunnerKind Kind);
/// The inverse of runnerKindName().
std::optional<RunnerKind> parseRunnerKind(llvm::StringRef Name);

/// What the pass does when the model fails (gone, timed out, bad reply).
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
  /// gRPC: the model server, `host:port`.
  std::string Address;
  /// ONNX, TF AOT: a registered model's name or a model file's path
  /// (mlbridge::findModel, docs/models.md).
  std::string Model;
  SerDesKind SerDes = SerDesKind::Bitstream;
  /// Whether SerDes was chosen explicitly (the gRPC runner accepts only an
  /// explicit Protobuf; it always speaks protobuf).
  bool SerDesGiven = false;
  /// Bound of every wait: connecting, each read, each write; for gRPC the
  /// deadline of each call and the bound of the connection wait.
  std::chrono::milliseconds Timeout{60000};
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

/// The runner kind \p Config resolves to: Config.Kind, or the kind of
/// Config.Model when no kind was given.
llvm::Expected<RunnerKind> resolveRunnerKind(const RunnerConfig &Config);

/// Builds the runner \p Config names for \p Features and \p Advice. \p Builtin
/// is the in-process policy of the callback runner. The pipe runner connects
/// on first use; the gRPC runner connects here (bounded by Config.Timeout);
/// the in-process runners load the model here and refuse one whose inputs do
/// not fit \p Features (mlbridge::bindModelInputs).
llvm::Expected<std::unique_ptr<MLModelRunner>>
createModelRunner(const RunnerConfig &Config, std::vector<TensorSpec> Features,
                  TensorSpec Advice, CallbackModelRunner::Callback Builtin);

/// The option, and the tool that has it, that takes a model of \p Task (e.g.
/// "-mlbridge-inline-model (opt)"); empty for a task no plugin answers.
std::string taskModelOption(llvm::StringRef Task);

/// A short description of the runner \p Config names, for diagnostics
/// (e.g. "pipe runner on '/tmp/ch'", "onnx runner with model 'inliner-oz'").
std::string describeRunner(const RunnerConfig &Config);

} // namespace mlbridge::plugins

#endif // MLBRIDGE_PLUGINS_COMMON_RUNNERFACTORY_H
