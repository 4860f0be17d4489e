//===- RunnerCommandLine.h - Runner options of the LLVM plugins -*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The `cl::opt`s that fill a RunnerConfig in the opt and llc plugins (the
/// MLIR plugin uses pass options instead).
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PLUGINS_COMMON_RUNNERCOMMANDLINE_H
#define MLBRIDGE_PLUGINS_COMMON_RUNNERCOMMANDLINE_H

#include "mlbridge/RunnerFactory.h"

#include "llvm/Support/CommandLine.h"

#include <string>

namespace mlbridge::plugins {

/// What the `--help` texts of a RunnerCommandLine say about the pass that
/// uses it: which advisor asks the runner, what the callback runner answers,
/// and what `fallback` falls back to.
struct RunnerOptionHelp {
  llvm::StringRef Runner =
      "The model runner the advisor asks (with the 'runner' advisor)";
  llvm::StringRef Callback =
      "the built-in policy in-process (CallbackModelRunner, default)";
  llvm::StringRef Fallback = "one warning naming the cause, then the built-in "
                             "policy for the rest of the compilation";
};

/// The runner options of one plugin, all named `-<Prefix><name>`:
/// `runner`, `channel`, `address`, `ready-file`, `model`, `serdes`,
/// `timeout-ms`, `on-model-failure`. A plugin keeps one instance per pass
/// family with static lifetime (cl::opt registration); the opt plugin has
/// `-mlbridge-` (mlbridge-function-features) and `-mlbridge-inline-` (the
/// inline advisor).
class RunnerCommandLine {
public:
  /// \p Task is the task of the pass family these options configure
  /// (RunnerConfig::Task); empty for none.
  RunnerCommandLine(llvm::StringRef Prefix, llvm::cl::OptionCategory &Cat,
                    const RunnerOptionHelp &Help = RunnerOptionHelp(),
                    llvm::StringRef Task = "");
  RunnerCommandLine(const RunnerCommandLine &) = delete;
  RunnerCommandLine &operator=(const RunnerCommandLine &) = delete;

  RunnerConfig config() const;
  /// Whether `-<Prefix>runner` was given on the command line.
  bool runnerGiven() const { return Runner.getNumOccurrences() > 0; }
  /// Whether `-<Prefix>model` was given on the command line.
  bool modelGiven() const { return Model.getNumOccurrences() > 0; }
  /// The runner option's name (without the dash).
  llvm::StringRef runnerOptionName() const { return RunnerName; }

private:
  // The names first: cl::opt keeps a StringRef to them.
  std::string Task, Prefix, RunnerName, ChannelName, AddressName, ModelName,
      SerDesName, TimeoutName, FailureName, ReadyFileName;
  llvm::cl::opt<RunnerKind> Runner;
  llvm::cl::opt<std::string> Channel;
  llvm::cl::opt<std::string> Address;
  llvm::cl::opt<std::string> ReadyFile;
  llvm::cl::opt<std::string> Model;
  llvm::cl::opt<SerDesKind> SerDes;
  llvm::cl::opt<unsigned> TimeoutMs;
  llvm::cl::opt<ModelFailurePolicy> OnFailure;
};

} // namespace mlbridge::plugins

#endif // MLBRIDGE_PLUGINS_COMMON_RUNNERCOMMANDLINE_H
