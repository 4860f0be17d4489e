//===- Registry.cpp - Optional SerDes and runners, found by name ----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/Registry.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <mutex>

using namespace llvm;

namespace mlbridge {

namespace {

/// The registered factories. Function-local, so that components may register
/// from their static initializers whatever the initialization order.
struct Registry {
  std::mutex Mutex;
  StringMap<SerDesFactoryFn> SerDes;
  StringMap<RunnerFactoryFn> Runners;
};

Registry &registry() {
  static Registry R;
  return R;
}

template <typename T>
std::vector<std::string> sortedNames(const StringMap<T> &Map) {
  std::vector<std::string> Names;
  for (const auto &E : Map)
    Names.push_back(E.getKey().str());
  std::sort(Names.begin(), Names.end());
  return Names;
}

} // namespace

void registerSerDes(StringRef Name, SerDesFactoryFn Factory) {
  Registry &R = registry();
  std::lock_guard<std::mutex> Lock(R.Mutex);
  R.SerDes[Name] = Factory;
}

SerDesFactoryFn lookupSerDes(StringRef Name) {
  Registry &R = registry();
  std::lock_guard<std::mutex> Lock(R.Mutex);
  auto It = R.SerDes.find(Name);
  return It == R.SerDes.end() ? nullptr : It->second;
}

void registerRunner(StringRef Name, RunnerFactoryFn Factory) {
  Registry &R = registry();
  std::lock_guard<std::mutex> Lock(R.Mutex);
  R.Runners[Name] = Factory;
}

RunnerFactoryFn lookupRunner(StringRef Name) {
  Registry &R = registry();
  std::lock_guard<std::mutex> Lock(R.Mutex);
  auto It = R.Runners.find(Name);
  return It == R.Runners.end() ? nullptr : It->second;
}

std::vector<std::string> registeredSerDes() {
  Registry &R = registry();
  std::lock_guard<std::mutex> Lock(R.Mutex);
  return sortedNames(R.SerDes);
}

std::vector<std::string> registeredRunners() {
  Registry &R = registry();
  std::lock_guard<std::mutex> Lock(R.Mutex);
  return sortedNames(R.Runners);
}

} // namespace mlbridge
