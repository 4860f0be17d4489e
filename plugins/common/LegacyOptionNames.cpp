//===- LegacyOptionNames.cpp - Old spellings of renamed options -----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "plugins/common/LegacyOptionNames.h"

#include "llvm/Support/ErrorHandling.h"

using namespace llvm;

namespace mlbridge::plugins {

LegacyOptionNames::LegacyOptionNames(
    ArrayRef<std::pair<StringRef, StringRef>> OldToNew) {
  for (const auto &[Old, New] : OldToNew)
    add(Old, New);
}

LegacyOptionNames LegacyOptionNames::forRunnerOptions(StringRef OldPrefix,
                                                      StringRef NewPrefix) {
  // The settings of RunnerCommandLine (RunnerCommandLine.h).
  static constexpr StringLiteral Settings[] = {
      "runner", "channel",    "address",         "model",
      "serdes", "timeout-ms", "on-model-failure"};
  LegacyOptionNames Names;
  for (StringRef Setting : Settings)
    Names.add((OldPrefix + Setting).str(), (NewPrefix + Setting).str());
  return Names;
}

void LegacyOptionNames::add(StringRef OldName, StringRef NewName) {
  auto &Registered = cl::getRegisteredOptions();
  auto It = Registered.find(NewName);
  if (It == Registered.end())
    llvm_unreachable("a legacy option name must follow the option it aliases");
  Names.push_back(std::make_unique<std::string>(OldName.str()));
  Aliases.push_back(std::make_unique<cl::alias>(
      StringRef(*Names.back()), cl::aliasopt(*It->second), cl::Hidden));
}

} // namespace mlbridge::plugins
