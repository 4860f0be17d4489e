//===- Advisors.h - Advisor and runner choice of the LLVM plugins -*- C++
//-*-===//
//
// Part of mlbridge. The opt and llc plugins let the user pick where decisions
// come from with command-line options; this builds the chosen model runner
// and the `FunctionAdvisor` the passes talk to. Passes never know which
// runner is behind them.
//
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PLUGINS_COMMON_ADVISORS_H
#define MLBRIDGE_PLUGINS_COMMON_ADVISORS_H

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/SerDes/SerDes.h"
#include "passes/llvm/FunctionFeatures.h"

#include "llvm/Support/CommandLine.h"

#include <chrono>
#include <memory>
#include <string>

namespace mlbridge::plugins {

enum class AdvisorKind {
  /// The built-in policy called directly (no runtime involved).
  Builtin,
  /// A model runner (the one `RunnerConfig::Kind` names): the pass fills
  /// feature tensors and calls evaluate<int64_t>().
  Runner,
};

/// The default advisor: a model runner (by default the callback runner).
AdvisorKind defaultAdvisorKind();

/// The model runners a plugin can build.
enum class RunnerKind {
  /// The built-in policy in-process, behind CallbackModelRunner.
  Callback,
  /// A model in another process over named pipes (PipeModelRunner).
  Pipe,
  /// A model server reached over gRPC (GrpcModelRunner, ModelService). Only
  /// usable when mlbridge is built with MLBRIDGE_ENABLE_GRPC; otherwise
  /// createModelRunner() fails with an error saying so.
  Grpc,
};

/// What the advisor does when the model fails (gone, timed out, bad reply).
enum class ModelFailurePolicy {
  /// A compiler error naming the cause.
  Fail,
  /// One warning naming the cause, then the built-in policy for the rest of
  /// the compilation.
  Fallback,
};

/// Everything needed to build a runner.
struct RunnerConfig {
  RunnerKind Kind = RunnerKind::Callback;
  /// Pipe: the channel base (`<base>.in`, `<base>.out`).
  std::string Channel;
  /// gRPC: the model server, `host:port`.
  std::string Address;
  SerDesKind SerDes = SerDesKind::Bitstream;
  /// Whether SerDes was chosen explicitly (the gRPC runner accepts only an
  /// explicit Protobuf; it always speaks protobuf).
  bool SerDesGiven = false;
  /// Bound of every wait: connecting, each read, each write; for gRPC the
  /// deadline of each call and the bound of the connection wait.
  std::chrono::milliseconds Timeout{60000};
  ModelFailurePolicy OnFailure = ModelFailurePolicy::Fail;
};

/// Builds the runner \p Config names for \p Features and \p Advice. \p Builtin
/// is the in-process policy of the callback runner. The pipe runner connects
/// on first use; the gRPC runner connects here (bounded by Config.Timeout).
/// The advisor of makeFunctionAdvisor() calls this on its first decision.
llvm::Expected<std::unique_ptr<MLModelRunner>>
createModelRunner(const RunnerConfig &Config, std::vector<TensorSpec> Features,
                  TensorSpec Advice, CallbackModelRunner::Callback Builtin);

/// A short description of the runner \p Config names, for diagnostics
/// (e.g. "pipe runner on '/tmp/ch'", "grpc runner to '127.0.0.1:50051'").
std::string describeRunner(const RunnerConfig &Config);

/// The runner options of one plugin, all named `-<Prefix><name>`:
/// `runner`, `channel`, `address`, `serdes`, `timeout-ms`,
/// `on-model-failure`. A plugin
/// keeps one instance with static lifetime (cl::opt registration).
class RunnerCommandLine {
public:
  RunnerCommandLine(llvm::StringRef Prefix, llvm::cl::OptionCategory &Cat);
  RunnerCommandLine(const RunnerCommandLine &) = delete;
  RunnerCommandLine &operator=(const RunnerCommandLine &) = delete;

  RunnerConfig config() const;
  /// Whether `-<Prefix>runner` was given on the command line.
  bool runnerGiven() const { return Runner.getNumOccurrences() > 0; }
  /// The runner option's name (without the dash).
  llvm::StringRef runnerOptionName() const { return RunnerName; }

private:
  // The names first: cl::opt keeps a StringRef to them.
  std::string RunnerName, ChannelName, AddressName, SerDesName, TimeoutName,
      FailureName;
  llvm::cl::opt<RunnerKind> Runner;
  llvm::cl::opt<std::string> Channel;
  llvm::cl::opt<std::string> Address;
  llvm::cl::opt<SerDesKind> SerDes;
  llvm::cl::opt<unsigned> TimeoutMs;
  llvm::cl::opt<ModelFailurePolicy> OnFailure;
};

/// Never null. \p Kind Builtin ignores \p Config. With a runner, the advisor
/// builds the runner on its first decision (so a pass that never runs never
/// connects), sends the function name as the context, then asks for the
/// advice; when
/// the runner cannot be built or the model fails, it either answers with an
/// error naming the cause (ModelFailurePolicy::Fail; the pass reports it as
/// a compiler diagnostic, plugins must not exit()) or, once, hands the pass
/// a warning naming the cause (FunctionAdvisor::takeWarning()) and answers
/// with the built-in policy from then on (ModelFailurePolicy::Fallback).
std::shared_ptr<passes::FunctionAdvisor>
makeFunctionAdvisor(AdvisorKind Kind, const RunnerConfig &Config,
                    passes::BuiltinPolicyParams Params);

} // namespace mlbridge::plugins

#endif // MLBRIDGE_PLUGINS_COMMON_ADVISORS_H
