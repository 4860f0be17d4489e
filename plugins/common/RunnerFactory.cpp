//===- RunnerFactory.cpp - The model runner a plugin's options name -------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "plugins/common/RunnerFactory.h"

#include "mlbridge/ModelRegistry.h"
#include "mlbridge/PipeModelRunner.h"
#include "mlbridge/Registry.h"
#include "plugins/runners/RunnerModule.h"
#ifdef MLBRIDGE_HAVE_TF_AOT
#include "mlbridge/TFAOTModelRunner.h"
#endif

#include "llvm/ADT/StringSwitch.h"

#include <string>

using namespace llvm;

namespace mlbridge::plugins {

StringRef runnerKindName(RunnerKind Kind) {
  switch (Kind) {
  case RunnerKind::Callback:
    return "callback";
  case RunnerKind::Pipe:
    return "pipe";
  case RunnerKind::Grpc:
    return "grpc";
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
      {"regalloc-priority", "-mlbridge-llc-priority-model", "llc"},
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
  if (Config.KindGiven || Config.Model.empty())
    return Config.Kind;
  Expected<RegisteredModel> Model = findModel(Config.Model);
  if (!Model)
    return Model.takeError();
  if (Error E = checkModelTask(Config, *Model))
    return std::move(E);
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
  Expected<RegisteredModel> Model = findModel(Config.Model);
  if (!Model)
    return Model.takeError();
  if (Error E = checkModelTask(Config, *Model))
    return std::move(E);
  if (runnerKindOf(Model->Kind) != Kind)
    return invalid("model '" + Config.Model + "' is a " +
                   modelKindName(Model->Kind) + " model, not one for the " +
                   runnerKindName(Kind) + " runner (use " +
                   Config.optionName("runner") + "=" +
                   runnerKindName(runnerKindOf(Model->Kind)) +
                   ", or leave the runner out)");
  return Model;
}

#if defined(MLBRIDGE_HAVE_GRPC) || defined(MLBRIDGE_HAVE_ONNX)
/// The runner registered as \p Kind's name by the components of the runner
/// module \p Module (RunnerModule.h): the module, and the heavy libraries it
/// links, are loaded on first use only.
Expected<std::unique_ptr<MLModelRunner>>
createModuleRunner(RunnerModuleKind Module, RunnerKind Kind, StringRef Target,
                   const RunnerConfig &Config, std::vector<TensorSpec> Features,
                   TensorSpec Advice) {
  if (Expected<const RunnerModuleInfo &> Loaded = loadRunnerModule(Module);
      !Loaded)
    return Loaded.takeError();
  RunnerFactoryFn Factory = lookupRunner(runnerKindName(Kind));
  if (!Factory)
    return createStringError(
        std::make_error_code(std::errc::not_supported),
        "the runner module " + runnerModuleFileName(Module) +
            " registered no " + runnerKindName(Kind) + " runner");
  return Factory(Target, Config.Timeout, std::move(Features),
                 std::move(Advice));
}
#endif

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
  switch (*Kind) {
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
          std::make_error_code(std::errc::invalid_argument),
          "the pipe runner needs a channel base (" +
              Config.optionName("channel") + "=<base>)");
    if (!Config.Address.empty())
      return createStringError(
          std::make_error_code(std::errc::invalid_argument),
          "the pipe runner takes a channel base, not an address (" +
              Config.optionName("address") + " is for " +
              Config.optionName("runner") + "=grpc)");
#ifdef MLBRIDGE_HAVE_PROTOBUF
    // The protobuf SerDes (libMLBridgeProtobuf.so) comes with the gRPC
    // runner module: a module that cannot be loaded is an error here rather
    // than at the first message.
    if (Config.SerDes == SerDesKind::Protobuf)
      if (Expected<const RunnerModuleInfo &> Module =
              loadRunnerModule(RunnerModuleKind::Grpc);
          !Module)
        return Module.takeError();
#endif
    PipeModelRunnerOptions O;
    O.ChannelBase = Config.Channel;
    O.Kind = Config.SerDes;
    O.ConnectTimeout = Config.Timeout;
    O.Timeout = Config.Timeout;
    O.Score = Config.Score;
    auto R = PipeModelRunner::create(std::move(Features), std::move(Advice),
                                     std::move(O));
    if (!R)
      return R.takeError();
    return std::unique_ptr<MLModelRunner>(std::move(*R));
  }
  case RunnerKind::Grpc: {
    if (Config.Address.empty())
      return createStringError(
          std::make_error_code(std::errc::invalid_argument),
          "the grpc runner needs the model server's address (" +
              Config.optionName("address") + "=<host:port>)");
    if (!Config.Channel.empty())
      return createStringError(
          std::make_error_code(std::errc::invalid_argument),
          "the grpc runner takes an address, not a channel base (" +
              Config.optionName("address") + "=<host:port>; " +
              Config.optionName("channel") + " is for the pipe runner)");
    if (Config.SerDesGiven && Config.SerDes != SerDesKind::Protobuf)
      return createStringError(
          std::make_error_code(std::errc::invalid_argument),
          "the grpc runner speaks protobuf only: serdes '" +
              serDesKindName(Config.SerDes).str() +
              "' is not supported (omit " + Config.optionName("serdes") +
              ", or use protobuf)");
#ifdef MLBRIDGE_HAVE_GRPC
    return createModuleRunner(RunnerModuleKind::Grpc, RunnerKind::Grpc,
                              Config.Address, Config, std::move(Features),
                              std::move(Advice));
#else
    return createStringError(std::errc::not_supported,
                             "mlbridge was built without gRPC (configure with "
                             "-DMLBRIDGE_ENABLE_GRPC=ON for the grpc runner)");
#endif
  }
  case RunnerKind::Onnx: {
    Expected<RegisteredModel> Model = modelFor(Config, RunnerKind::Onnx);
    if (!Model)
      return Model.takeError();
#ifdef MLBRIDGE_HAVE_ONNX
    return createModuleRunner(RunnerModuleKind::Onnx, RunnerKind::Onnx,
                              Model->Path, Config, std::move(Features),
                              std::move(Advice));
#else
    return createStringError(std::errc::not_supported,
                             "mlbridge was built without ONNX Runtime "
                             "(configure with -DMLBRIDGE_ENABLE_ONNX=ON for "
                             "the onnx runner)");
#endif
  }
  case RunnerKind::TFAOT: {
    Expected<RegisteredModel> Model = modelFor(Config, RunnerKind::TFAOT);
    if (!Model)
      return Model.takeError();
#ifdef MLBRIDGE_HAVE_TF_AOT
    return TFAOTModelRunner::load(Model->Path, std::move(Features),
                                  std::move(Advice));
#else
    return createStringError(std::errc::not_supported,
                             "mlbridge was built without TF AOT support "
                             "(configure with -DMLBRIDGE_ENABLE_TF_AOT=ON for "
                             "the tfaot runner)");
#endif
  }
  }
  return createStringError(inconvertibleErrorCode(), "unknown runner kind");
}

} // namespace mlbridge::plugins
