//===- RunnerModuleLoader.cpp - Loads runner modules on first use ---------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Part of each plugin: finds a runner module beside the plugin and loads it
/// with dlopen; the runtime components the module links register their
/// runners and SerDes with the core as they are loaded. Loading the plugin
/// makes this the core's component loader (mlbridge/Registry.h), so that
/// createModelRunner() loads a module the first time its runner is asked.
///
//===----------------------------------------------------------------------===//
#include "plugins/runners/RunnerModule.h"

#include "mlbridge/Registry.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <optional>
#include <string>

using namespace llvm;

namespace mlbridge::plugins {

StringRef runnerModuleFileName(RunnerModuleKind Kind) {
  switch (Kind) {
  case RunnerModuleKind::Grpc:
    return "MLBridgeRunnerGrpc.so";
  case RunnerModuleKind::Onnx:
    return "MLBridgeRunnerOnnx.so";
  }
  return "unknown";
}

static StringRef runnerModuleWhat(RunnerModuleKind Kind) {
  return Kind == RunnerModuleKind::Grpc
             ? "gRPC runner module (also the protobuf SerDes)"
             : "ONNX Runtime runner module";
}

/// An address inside this plugin, for dladdr.
static const char ThisLibraryAnchor = 0;

std::string runnerModuleDirectory() {
  Dl_info Info;
  if (dladdr(&ThisLibraryAnchor, &Info) == 0 || !Info.dli_fname)
    return ".";
  return sys::path::parent_path(Info.dli_fname).str();
}

namespace {

struct LoadedModule {
  std::once_flag Once;
  const RunnerModuleInfo *Info = nullptr;
  std::string Error;
};

std::string loadModule(RunnerModuleKind Kind, const RunnerModuleInfo *&Out) {
  SmallString<256> Path(runnerModuleDirectory());
  sys::path::append(Path, runnerModuleFileName(Kind));
  std::string Fix =
      "the plugins and their runner modules are built together (target "
      "mlbridge-plugins) and installed together into one folder (cmake "
      "--install <build> --component mlbridge_plugins)";
  if (!sys::fs::exists(Path))
    return ("the " + runnerModuleWhat(Kind) + " '" + Path +
            "' does not exist: " + Fix)
        .str();
  // RTLD_LOCAL: the module's own dependencies (gRPC, ONNX Runtime) stay out
  // of the global scope; NODELETE: runners outlive any handle.
  void *Handle = dlopen(Path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!Handle) {
    const char *Why = dlerror();
    return ("cannot load the " + runnerModuleWhat(Kind) + " '" + Path +
            "': " + (Why ? Why : "unknown dlopen error") +
            " (the file is damaged, or a library it needs is missing: 'ldd " +
            Path + "' lists them; " + Fix + ")")
        .str();
  }
  auto *Entry = reinterpret_cast<RunnerModuleEntry *>(
      dlsym(Handle, MLBRIDGE_RUNNER_MODULE_ENTRY));
  if (!Entry)
    return ("'" + Path + "' is not an mlbridge runner module of ABI version " +
            Twine(RunnerModuleABIVersion) + " (no symbol " +
            MLBRIDGE_RUNNER_MODULE_ENTRY + "): " + Fix)
        .str();
  const RunnerModuleInfo *Info = Entry();
  if (!Info || Info->ABIVersion != RunnerModuleABIVersion ||
      std::strcmp(Info->MLBridgeVersion, MLBRIDGE_VERSION) != 0 ||
      Info->Kind != Kind)
    return ("the runner module '" + Path +
            "' is from another build (mlbridge " +
            (Info ? Info->MLBridgeVersion : "?") + ", module ABI " +
            Twine(Info ? Info->ABIVersion : 0) +
            ") than the plugin (mlbridge " + MLBRIDGE_VERSION +
            ", module ABI " + Twine(RunnerModuleABIVersion) + "): " + Fix)
        .str();
  Out = Info;
  return "";
}

} // namespace

Expected<const RunnerModuleInfo &> loadRunnerModule(RunnerModuleKind Kind) {
  static LoadedModule Modules[2];
  LoadedModule &M = Modules[Kind == RunnerModuleKind::Grpc ? 0 : 1];
  std::call_once(M.Once, [&] { M.Error = loadModule(Kind, M.Info); });
  if (!M.Info)
    return createStringError(
        std::make_error_code(std::errc::no_such_file_or_directory), M.Error);
  return *M.Info;
}

/// The core's component loader: the runner module that holds runner or SerDes
/// \p Name. Names no module holds are left to the core's message.
static Error loadComponentModule(StringRef What, StringRef Name) {
  std::optional<RunnerModuleKind> Module;
#if defined(MLBRIDGE_HAVE_GRPC) || defined(MLBRIDGE_HAVE_PROTOBUF)
  if ((What == "runner" && (Name == "grpc" || Name == "grpc-server")) ||
      (What == "serdes" && Name == "protobuf"))
    Module = RunnerModuleKind::Grpc;
#endif
#ifdef MLBRIDGE_HAVE_ONNX
  if (What == "runner" && Name == "onnx")
    Module = RunnerModuleKind::Onnx;
#endif
  if (!Module)
    return Error::success();
  Expected<const RunnerModuleInfo &> Loaded = loadRunnerModule(*Module);
  return Loaded ? Error::success() : Loaded.takeError();
}

namespace {
/// Installs the loader when the plugin is loaded.
struct InstallComponentLoader {
  InstallComponentLoader() { setComponentLoader(loadComponentModule); }
} TheComponentLoader;
} // namespace

} // namespace mlbridge::plugins
