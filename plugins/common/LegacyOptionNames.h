//===- LegacyOptionNames.h - Old spellings of renamed options ---*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Options of the opt and llc plugins are named `-mlbridge-<family>-<setting>`
/// (docs/plugins.md, "Option names"). An option renamed to fit keeps its old
/// spelling as a hidden `cl::alias`, so existing command lines still work.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PLUGINS_COMMON_LEGACYOPTIONNAMES_H
#define MLBRIDGE_PLUGINS_COMMON_LEGACYOPTIONNAMES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mlbridge::plugins {

/// Hidden aliases from old option names to the registered options that
/// replace them. Keep one with static lifetime (cl::alias registration),
/// defined after the options it aliases in the same file: the options are
/// looked up by name when it is constructed.
class LegacyOptionNames {
public:
  /// One alias per (old name, new name) pair, both without the dash.
  explicit LegacyOptionNames(
      llvm::ArrayRef<std::pair<llvm::StringRef, llvm::StringRef>> OldToNew);
  /// The aliases `-<OldPrefix><setting>` of the options `-<NewPrefix><setting>`
  /// of a RunnerCommandLine: runner, channel, address, model, serdes,
  /// timeout-ms, on-model-failure.
  static LegacyOptionNames forRunnerOptions(llvm::StringRef OldPrefix,
                                            llvm::StringRef NewPrefix);

private:
  LegacyOptionNames() = default;
  void add(llvm::StringRef OldName, llvm::StringRef NewName);

  /// The old names, on the heap: cl::alias keeps a StringRef to them.
  std::vector<std::unique_ptr<std::string>> Names;
  std::vector<std::unique_ptr<llvm::cl::alias>> Aliases;
};

} // namespace mlbridge::plugins

#endif // MLBRIDGE_PLUGINS_COMMON_LEGACYOPTIONNAMES_H
