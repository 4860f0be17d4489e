//===- RunnerFactory.cpp - One way to build a model runner ----------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "mlbridge/RunnerFactory.h"

#include "mlbridge/ModelRegistry.h"
#include "mlbridge/Registry.h"

#include "llvm/ADT/StringSwitch.h"

#include <string>

using namespace llvm;

namespace mlbridge {

/// Where a grpc-server runner listens when no address is given.
static constexpr const char *DefaultListenAddress = "127.0.0.1:0";

StringRef runnerKindName(RunnerKind Kind) {
  switch (Kind) {
  case RunnerKind::Callback:
    return "callback";
  case RunnerKind::Pipe:
    return "pipe";
  case RunnerKind::Grpc:
    return "grpc";
  case RunnerKind::GrpcServer:
    return "grpc-server";
  case RunnerKind::Onnx:
    return "onnx";
  case RunnerKind::TFAOT:
    return "tfaot";
  }
  return "unknown";
}

std::optional<RunnerKind> parseRunnerKind(StringRef Name) {
  return StringSwitch<std::optional<RunnerKind>>(Name)
      .Case("callback", RunnerKind::Callback)
      .Case("pipe", RunnerKind::Pipe)
      .Case("grpc", RunnerKind::Grpc)
      .Case("grpc-server", RunnerKind::GrpcServer)
      .Case("onnx", RunnerKind::Onnx)
      .Case("tfaot", RunnerKind::TFAOT)
      .Default(std::nullopt);
}

std::string RunnerConfig::optionName(StringRef Name) const {
  return (OptionDash ? "-" : "") + OptionPrefix + Name.str();
}

std::string taskModelOption(StringRef Task) {
  // The pass families of the plugins and their model options (docs/models.md).
  static constexpr struct {
    const char *Task, *Option, *Tool;
  } TaskOptions[] = {
      {"inliner", "-mlbridge-inline-model", "opt"},
      {"phase-order", "-mlbridge-phase-order-model", "opt"},
      {"regalloc-priority", "-mlbridge-regalloc-priority-model", "llc"},
      {"regalloc", "-mlbridge-regalloc-model", "llc"},
      {"mlir-loop-unroll", "mlbridge-loop-unroll{model=...}", "mlir-opt"},
  };
  for (const auto &T : TaskOptions)
    if (Task == T.Task)
      return std::string(T.Option) + " (" + T.Tool + ")";
  return "";
}

/// Refuses a registered model made for another pass family than the one that
/// asks, in one line, before anything heavy is loaded.
static Error checkModelTask(const RunnerConfig &Config,
                            const RegisteredModel &Model) {
  if (Config.Task.empty() || Model.Task.empty() || Model.Task == Config.Task)
    return Error::success();
  std::string Option = taskModelOption(Model.Task);
  return createStringError(
      std::make_error_code(std::errc::invalid_argument),
      "model '" + Config.Model + "' answers task '" + Model.Task + "', not '" +
          Config.Task + "': " +
          (Option.empty() ? std::string("no mlbridge pass takes it")
                          : "give it to " + Option) +
          "; the models of this pass: mlbridge models list --task " +
          Config.Task);
}

static RunnerKind runnerKindOf(ModelKind Kind) {
  return Kind == ModelKind::Onnx ? RunnerKind::Onnx : RunnerKind::TFAOT;
}

Expected<RunnerKind> resolveRunnerKind(const RunnerConfig &Config) {
  if (Config.KindGiven || Config.Model.empty() || Config.ModelIsFile)
    return Config.Kind;
  Expected<RegisteredModel> Model = findModel(Config.Model, Config.RegistryDir);
  if (!Model)
    return Model.takeError();
  if (Error E = checkModelTask(Config, *Model))
    return E;
  return runnerKindOf(Model->Kind);
}

std::string describeRunner(const RunnerConfig &Config) {
  RunnerKind Kind = Config.Kind;
  if (!Config.KindGiven && !Config.Model.empty())
    return "model '" + Config.Model + "' in-process";
  switch (Kind) {
  case RunnerKind::Callback:
    return "callback runner";
  case RunnerKind::Pipe:
    return "pipe runner on '" + Config.Channel + "'";
  case RunnerKind::Grpc:
    return "grpc runner to '" + Config.Address + "'";
  case RunnerKind::GrpcServer:
    return "grpc-server runner listening on '" +
           (Config.Address.empty() ? std::string(DefaultListenAddress)
                                   : Config.Address) +
           "'";
  case RunnerKind::Onnx:
  case RunnerKind::TFAOT:
    return runnerKindName(Kind).str() + " runner with model '" + Config.Model +
           "'";
  }
  return "unknown runner";
}

namespace {

Error invalid(const Twine &Message) {
  return createStringError(std::make_error_code(std::errc::invalid_argument),
                           Message);
}

/// The model file \p Config names, checked to be of the kind \p Kind needs.
Expected<RegisteredModel> modelFor(const RunnerConfig &Config,
                                   RunnerKind Kind) {
  if (Config.Model.empty())
    return invalid("the " + runnerKindName(Kind) +
                   " runner needs a model: " + Config.optionName("model") +
                   "=<registered name or path> (see 'mlbridge models list')");
  if (!Config.Channel.empty() || !Config.Address.empty())
    return invalid(
        "the " + runnerKindName(Kind) +
        " runner runs the model in-process: it takes no " +
        Config.optionName(Config.Channel.empty() ? "address" : "channel"));
  Expected<RegisteredModel> Model = findModel(Config.Model, Config.RegistryDir);
  if (!Model)
    return Model.takeError();
  if (Error E = checkModelTask(Config, *Model))
    return E;
  if (runnerKindOf(Model->Kind) != Kind)
    return invalid("model '" + Config.Model + "' is a " +
                   modelKindName(Model->Kind) + " model, not one for the " +
                   runnerKindName(Kind) + " runner (use " +
                   Config.optionName("runner") + "=" +
                   runnerKindName(runnerKindOf(Model->Kind)) +
                   ", or leave the runner out)");
  return Model;
}

/// What the runner \p Kind needs to find its model (RunnerFactoryFn's
/// Target), after the checks of the settings that kind takes.
Expected<std::string> targetOf(const RunnerConfig &Config, RunnerKind Kind) {
  switch (Kind) {
  case RunnerKind::Callback:
    return std::string();
  case RunnerKind::Pipe:
    if (Config.Channel.empty())
      return invalid("the pipe runner needs a channel base (" +
                     Config.optionName("channel") + "=<base>)");
    if (!Config.Address.empty())
      return invalid("the pipe runner takes a channel base, not an address (" +
                     Config.optionName("address") + " is for " +
                     Config.optionName("runner") + "=grpc)");
    return Config.Channel;
  case RunnerKind::Grpc:
    if (Config.Address.empty())
      return invalid("the grpc runner needs the model server's address (" +
                     Config.optionName("address") + "=<host:port>)");
    if (!Config.Channel.empty())
      return invalid("the grpc runner takes an address, not a channel base (" +
                     Config.optionName("address") + "=<host:port>; " +
                     Config.optionName("channel") + " is for the pipe runner)");
    if (Config.SerDesGiven && Config.SerDes != SerDesKind::Protobuf)
      return invalid("the grpc runner speaks protobuf only: serdes '" +
                     serDesKindName(Config.SerDes) +
                     "' is not supported (omit " + Config.optionName("serdes") +
                     ", or use protobuf)");
    return Config.Address;
  case RunnerKind::GrpcServer: {
    if (!Config.Channel.empty())
      return invalid("the grpc-server runner listens on an address, not a "
                     "channel base (" +
                     Config.optionName("channel") + " is for the pipe runner)");
    if (Config.SerDesGiven && Config.SerDes != SerDesKind::Protobuf)
      return invalid("the grpc-server runner speaks protobuf only: serdes '" +
                     serDesKindName(Config.SerDes) +
                     "' is not supported (omit " + Config.optionName("serdes") +
                     ", or use protobuf)");
    std::string Listen =
        Config.Address.empty() ? DefaultListenAddress : Config.Address;
    // With a free port, the trainer learns the address from the ready file
    // only.
    if (StringRef(Listen).ends_with(":0") && Config.ReadyFile.empty())
      return invalid("on a free port ('" + Listen +
                     "') the trainer can learn the address only from a "
                     "file: give " +
                     Config.optionName("ready-file") + "=<path>, or " +
                     Config.optionName("address") + "=<host:port>");
    return Listen;
  }
  case RunnerKind::Onnx:
  case RunnerKind::TFAOT: {
    if (Config.ModelIsFile && !Config.Model.empty())
      return Config.Model;
    Expected<RegisteredModel> Model = modelFor(Config, Kind);
    if (!Model)
      return Model.takeError();
    return Model->Path;
  }
  }
  return invalid("unknown runner kind");
}

} // namespace

Expected<std::unique_ptr<MLModelRunner>>
createModelRunner(const RunnerConfig &Config, std::vector<TensorSpec> Features,
                  TensorSpec Advice, CallbackModelRunner::Callback Builtin) {
  Expected<RunnerKind> Kind = resolveRunnerKind(Config);
  if (!Kind)
    return Kind.takeError();
  if (!Config.Model.empty() &&
      (*Kind != RunnerKind::Onnx && *Kind != RunnerKind::TFAOT))
    return invalid(Config.optionName("model") +
                   " is for the onnx and tfaot "
                   "runners, not the " +
                   runnerKindName(*Kind) + " runner");
  Expected<std::string> Target = targetOf(Config, *Kind);
  if (!Target)
    return Target.takeError();
  if (*Kind == RunnerKind::Callback) {
    if (!Builtin)
      return invalid("the callback runner needs an in-process policy; this "
                     "caller has none (choose another " +
                     Config.optionName("runner") + ")");
    auto R = CallbackModelRunner::create(std::move(Features), std::move(Advice),
                                         std::move(Builtin));
    if (!R)
      return R.takeError();
    return std::unique_ptr<MLModelRunner>(std::move(*R));
  }
  // A SerDes from an optional component (protobuf over the pipe) is an error
  // here rather than at the first message.
  if (*Kind == RunnerKind::Pipe && Config.SerDes == SerDesKind::Protobuf)
    if (Expected<SerDesFactoryFn> S = findSerDes(serDesKindName(Config.SerDes));
        !S)
      return S.takeError();
  Expected<RunnerFactoryFn> Factory = findRunner(runnerKindName(*Kind));
  if (!Factory)
    return Factory.takeError();
  return (*Factory)(Config, *Target, std::move(Features), std::move(Advice));
}

} // namespace mlbridge
