//===- Advisors.cpp - Advisor and runner choice of the LLVM plugins -------===//
//
// Part of mlbridge. See Advisors.h.
//
//===----------------------------------------------------------------------===//
#include "plugins/common/Advisors.h"

#include "mlbridge/PipeModelRunner.h"
#ifdef MLBRIDGE_HAVE_GRPC
#include "mlbridge/GrpcModelRunner.h"
#endif
#include "passes/llvm/ModelRunnerAdvisor.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>

using namespace llvm;

namespace mlbridge::plugins {
namespace {

/// The built-in policy as a CallbackModelRunner policy.
CallbackModelRunner::Callback builtinCallback(passes::BuiltinPolicyParams P) {
  return [P](ArrayRef<TensorRef> Features) -> Expected<TensorValue> {
    Expected<passes::FunctionFeatures> F =
        passes::functionFeaturesFromTensors(Features);
    if (!F)
      return F.takeError();
    passes::FunctionAdvice A = passes::builtinFunctionPolicy(*F, P);
    return TensorValue::scalar<int64_t>("advice", static_cast<int64_t>(A));
  };
}

/// Builds a model runner (on the advisor's first decision).
using RunnerFactory = std::function<Expected<std::unique_ptr<MLModelRunner>>()>;

/// Asks a model runner, built on the first decision; on failure either fails
/// (with the cause) or warns once and uses the built-in policy for the rest
/// of the compilation.
class RunnerFunctionAdvisor final : public passes::FunctionAdvisor {
public:
  RunnerFunctionAdvisor(RunnerFactory Factory, std::string Description,
                        ModelFailurePolicy OnFailure,
                        passes::BuiltinPolicyParams Params)
      : Factory(std::move(Factory)), Description(std::move(Description)),
        OnFailure(OnFailure), Builtin(Params) {}

  Expected<passes::FunctionAdvice>
  advise(StringRef FunctionName,
         const passes::FunctionFeatures &Features) override {
    if (FellBack)
      return Builtin.advise(FunctionName, Features);
    if (Factory) {
      Expected<std::unique_ptr<MLModelRunner>> Runner = Factory();
      Factory = nullptr;
      if (Runner)
        Model.emplace(std::move(*Runner));
      else
        CreateError = "cannot create the " + Description + ": " +
                      toString(Runner.takeError());
    }
    std::string Cause;
    if (Model) {
      Expected<passes::FunctionAdvice> A =
          Model->advise(FunctionName, Features);
      if (A)
        return A;
      Cause = toString(A.takeError());
    } else {
      Cause = CreateError;
    }
    if (OnFailure == ModelFailurePolicy::Fail)
      return createStringError(inconvertibleErrorCode(), Cause);
    // Ends the session (the model may be gone already) and the waits.
    Model.reset();
    FellBack = true;
    Warning = formatv("mlbridge: the model failed for '{0}', using the "
                      "built-in policy for the rest of the compilation: {1}",
                      FunctionName, Cause)
                  .str();
    return Builtin.advise(FunctionName, Features);
  }

  std::optional<std::string> takeWarning() override {
    std::optional<std::string> W = std::move(Warning);
    Warning.reset();
    return W;
  }

private:
  RunnerFactory Factory;
  std::string Description;
  ModelFailurePolicy OnFailure;
  passes::BuiltinFunctionAdvisor Builtin;
  std::optional<passes::ModelRunnerAdvisor> Model;
  std::string CreateError;
  bool FellBack = false;
  std::optional<std::string> Warning;
};

} // namespace

AdvisorKind defaultAdvisorKind() { return AdvisorKind::Runner; }

std::string describeRunner(const RunnerConfig &Config) {
  switch (Config.Kind) {
  case RunnerKind::Callback:
    return "callback runner";
  case RunnerKind::Pipe:
    return "pipe runner on '" + Config.Channel + "'";
  case RunnerKind::Grpc:
    return "grpc runner to '" + Config.Address + "'";
  }
  return "unknown runner";
}

Expected<std::unique_ptr<MLModelRunner>>
createModelRunner(const RunnerConfig &Config, std::vector<TensorSpec> Features,
                  TensorSpec Advice, CallbackModelRunner::Callback Builtin) {
  switch (Config.Kind) {
  case RunnerKind::Callback: {
    auto R = CallbackModelRunner::create(std::move(Features), std::move(Advice),
                                         std::move(Builtin));
    if (!R)
      return R.takeError();
    return std::unique_ptr<MLModelRunner>(std::move(*R));
  }
  case RunnerKind::Pipe: {
    if (Config.Channel.empty())
      return createStringError(
          std::errc::invalid_argument,
          "the pipe runner needs a channel base (-mlbridge-channel=<base>, "
          "-mlbridge-llc-channel=<base> in llc)");
    if (!Config.Address.empty())
      return createStringError(
          std::errc::invalid_argument,
          "the pipe runner takes a channel base, not an address "
          "(-mlbridge-address is for -mlbridge-runner=grpc)");
    PipeModelRunnerOptions O;
    O.ChannelBase = Config.Channel;
    O.Kind = Config.SerDes;
    O.ConnectTimeout = Config.Timeout;
    O.Timeout = Config.Timeout;
    auto R = PipeModelRunner::create(std::move(Features), std::move(Advice),
                                     std::move(O));
    if (!R)
      return R.takeError();
    return std::unique_ptr<MLModelRunner>(std::move(*R));
  }
  case RunnerKind::Grpc: {
    if (Config.Address.empty())
      return createStringError(
          std::errc::invalid_argument,
          "the grpc runner needs the model server's address "
          "(-mlbridge-address=<host:port>, -mlbridge-llc-address=<host:port> "
          "in llc)");
    if (!Config.Channel.empty())
      return createStringError(
          std::errc::invalid_argument,
          "the grpc runner takes an address, not a channel base "
          "(-mlbridge-address=<host:port>; -mlbridge-channel is for the pipe "
          "runner)");
    if (Config.SerDesGiven && Config.SerDes != SerDesKind::Protobuf)
      return createStringError(
          std::errc::invalid_argument,
          "the grpc runner speaks protobuf only: serdes '%s' is not "
          "supported (omit -mlbridge-serdes, -mlbridge-llc-serdes in llc, or "
          "use protobuf)",
          serDesKindName(Config.SerDes).str().c_str());
#ifdef MLBRIDGE_HAVE_GRPC
    GrpcModelRunnerOptions O;
    O.Address = Config.Address;
    O.Timeout = Config.Timeout;
    O.ConnectTimeout = Config.Timeout;
    // Reconnection back-off: never longer than the connection bound, at most
    // one second.
    O.InitialBackoff = std::min(O.InitialBackoff, Config.Timeout);
    O.MaxBackoff = std::clamp(Config.Timeout, O.InitialBackoff,
                              std::chrono::milliseconds(1000));
    auto R = GrpcModelRunner::create(std::move(Features), std::move(Advice),
                                     std::move(O));
    if (!R)
      return R.takeError();
    return std::unique_ptr<MLModelRunner>(std::move(*R));
#else
    return createStringError(
        std::errc::not_supported,
        "mlbridge was built without gRPC (configure with "
        "-DMLBRIDGE_ENABLE_GRPC=ON for -mlbridge-runner=grpc)");
#endif
  }
  }
  return createStringError(inconvertibleErrorCode(), "unknown runner kind");
}

RunnerCommandLine::RunnerCommandLine(StringRef Prefix, cl::OptionCategory &Cat)
    : RunnerName((Prefix + "runner").str()),
      ChannelName((Prefix + "channel").str()),
      AddressName((Prefix + "address").str()),
      SerDesName((Prefix + "serdes").str()),
      TimeoutName((Prefix + "timeout-ms").str()),
      FailureName((Prefix + "on-model-failure").str()),
      Runner(StringRef(RunnerName),
             cl::desc("The model runner the advisor asks (with the "
                      "'runner' advisor)"),
             cl::values(clEnumValN(RunnerKind::Callback, "callback",
                                   "the built-in policy in-process "
                                   "(CallbackModelRunner, default)"),
                        clEnumValN(RunnerKind::Pipe, "pipe",
                                   "a model in another process over named "
                                   "pipes (PipeModelRunner)"),
                        clEnumValN(RunnerKind::Grpc, "grpc",
                                   "a model server over gRPC at the address "
                                   "given (GrpcModelRunner)")),
             cl::init(RunnerKind::Callback), cl::cat(Cat)),
      Channel(StringRef(ChannelName),
              cl::desc("Pipe runner: the channel base; the model writes "
                       "<base>.in and reads <base>.out (FIFOs it creates)"),
              cl::value_desc("base"), cl::cat(Cat)),
      Address(StringRef(AddressName),
              cl::desc("gRPC runner: the model server's address (e.g. "
                       "'mlbridge serve POLICY --address 127.0.0.1:50051')"),
              cl::value_desc("host:port"), cl::cat(Cat)),
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
                                      "one warning naming the cause, then "
                                      "the built-in policy for the rest of "
                                      "the compilation")),
                cl::init(ModelFailurePolicy::Fail), cl::cat(Cat)) {}

RunnerConfig RunnerCommandLine::config() const {
  RunnerConfig C;
  C.Kind = Runner;
  C.Channel = Channel;
  C.Address = Address;
  C.SerDes = SerDes;
  C.SerDesGiven = SerDes.getNumOccurrences() > 0;
  C.Timeout = std::chrono::milliseconds(TimeoutMs);
  C.OnFailure = OnFailure;
  return C;
}

std::shared_ptr<passes::FunctionAdvisor>
makeFunctionAdvisor(AdvisorKind Kind, const RunnerConfig &Config,
                    passes::BuiltinPolicyParams Params) {
  if (Kind == AdvisorKind::Builtin)
    return std::make_shared<passes::BuiltinFunctionAdvisor>(Params);
  RunnerFactory Factory = [Config, Params] {
    return createModelRunner(Config, passes::functionFeatureSpecs(),
                             passes::functionAdviceSpec(),
                             builtinCallback(Params));
  };
  return std::make_shared<RunnerFunctionAdvisor>(
      std::move(Factory), describeRunner(Config), Config.OnFailure, Params);
}

} // namespace mlbridge::plugins
