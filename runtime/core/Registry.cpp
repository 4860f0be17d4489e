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
  ComponentLoaderFn Loader = nullptr;
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

void setComponentLoader(ComponentLoaderFn Loader) {
  Registry &R = registry();
  std::lock_guard<std::mutex> Lock(R.Mutex);
  R.Loader = Loader;
}

namespace {

/// The component that registers \p Name, and the build option without which
/// mlbridge has none.
struct ComponentInfo {
  const char *What, *Name, *Target, *BuildOption;
  bool Built;
};

constexpr ComponentInfo Components[] = {
    {"runner", "pipe", "MLBridge::Pipe", "", true},
#ifdef MLBRIDGE_HAVE_GRPC
    {"runner", "grpc", "MLBridge::Grpc", "MLBRIDGE_ENABLE_GRPC", true},
    {"runner", "grpc-server", "MLBridge::Grpc", "MLBRIDGE_ENABLE_GRPC", true},
#else
    {"runner", "grpc", "MLBridge::Grpc", "MLBRIDGE_ENABLE_GRPC", false},
    {"runner", "grpc-server", "MLBridge::Grpc", "MLBRIDGE_ENABLE_GRPC", false},
#endif
#ifdef MLBRIDGE_HAVE_ONNX
    {"runner", "onnx", "MLBridge::Onnx", "MLBRIDGE_ENABLE_ONNX", true},
#else
    {"runner", "onnx", "MLBridge::Onnx", "MLBRIDGE_ENABLE_ONNX", false},
#endif
#ifdef MLBRIDGE_HAVE_TF_AOT
    {"runner", "tfaot", "MLBridge::TFAOT", "MLBRIDGE_ENABLE_TF_AOT", true},
#else
    {"runner", "tfaot", "MLBridge::TFAOT", "MLBRIDGE_ENABLE_TF_AOT", false},
#endif
#ifdef MLBRIDGE_HAVE_PROTOBUF
    {"serdes", "protobuf", "MLBridge::Protobuf", "MLBRIDGE_ENABLE_PROTOBUF",
     true},
#else
    {"serdes", "protobuf", "MLBridge::Protobuf", "MLBRIDGE_ENABLE_PROTOBUF",
     false},
#endif
};

/// Why \p What \p Name is not registered, and the fix.
Error missingComponent(StringRef What, StringRef Name) {
  std::string Label =
      What == "runner" ? (Name + " runner").str() : (Name + " SerDes").str();
  for (const ComponentInfo &C : Components) {
    if (What != C.What || Name != C.Name)
      continue;
    if (!C.Built)
      return createStringError(std::make_error_code(std::errc::not_supported),
                               "mlbridge was built without the " + Label +
                                   " (configure with -D" + C.BuildOption +
                                   "=ON)");
    return createStringError(std::make_error_code(std::errc::not_supported),
                             "the " + Label + " is not part of this program (" +
                                 "link " + C.Target + ")");
  }
  return createStringError(std::make_error_code(std::errc::invalid_argument),
                           "there is no " + Label);
}

/// The factory registered in \p Map as \p Name, after asking the loader once.
template <typename Fn>
Expected<Fn> find(StringMap<Fn> Registry::*Map, StringRef What,
                  StringRef Name) {
  Registry &R = registry();
  ComponentLoaderFn Loader;
  {
    std::lock_guard<std::mutex> Lock(R.Mutex);
    auto It = (R.*Map).find(Name);
    if (It != (R.*Map).end())
      return It->second;
    Loader = R.Loader;
  }
  // Unlocked: loading a component registers it, which takes the lock.
  if (Loader)
    if (Error E = Loader(What, Name))
      return E;
  std::lock_guard<std::mutex> Lock(R.Mutex);
  auto It = (R.*Map).find(Name);
  if (It != (R.*Map).end())
    return It->second;
  return missingComponent(What, Name);
}

} // namespace

Expected<RunnerFactoryFn> findRunner(StringRef Name) {
  return find(&Registry::Runners, "runner", Name);
}

Expected<SerDesFactoryFn> findSerDes(StringRef Name) {
  return find(&Registry::SerDes, "serdes", Name);
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
