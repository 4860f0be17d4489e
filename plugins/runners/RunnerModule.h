//===- RunnerModule.h - Runner modules loaded on first use -----*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The model runners with heavy dependencies are loaded only when a run uses
/// them, so that a compilation with the callback, pipe or TF AOT runner never
/// maps gRPC, Abseil, OpenSSL, protobuf or ONNX Runtime (docs/plugins.md,
/// "Runner modules"). A runner module is a small shared object beside the
/// plugins over the runtime components it brings into the process:
///
///   MLBridgeRunnerGrpc.so  libMLBridgeGrpc.so and libMLBridgeProtobuf.so:
///                          the gRPC runner and the protobuf SerDes
///   MLBridgeRunnerOnnx.so  libMLBridgeOnnx.so: the ONNX Runtime runner
///
/// Those components register their runners and SerDes with the core's
/// registry (mlbridge/Registry.h) when they are loaded; the plugins then find
/// them by name. The module itself only tells which build it comes from, so
/// that a module of another build is refused with a message rather than used.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PLUGINS_RUNNERS_RUNNERMODULE_H
#define MLBRIDGE_PLUGINS_RUNNERS_RUNNERMODULE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlbridge::plugins {

/// Bumped whenever RunnerModuleInfo or the meaning of its members changes.
inline constexpr unsigned RunnerModuleABIVersion = 2;

/// The entry point every module exports (extern "C", default visibility).
#define MLBRIDGE_RUNNER_MODULE_ENTRY "mlbridge_runner_module_v2"

/// The runner modules.
enum class RunnerModuleKind { Grpc, Onnx };

/// What a runner module tells about itself; a module returns a pointer to a
/// static one.
struct RunnerModuleInfo {
  /// RunnerModuleABIVersion of the module's build.
  unsigned ABIVersion;
  /// MLBRIDGE_VERSION of the module's build.
  const char *MLBridgeVersion;
  /// Which module this is.
  RunnerModuleKind Kind;
};

/// The signature of MLBRIDGE_RUNNER_MODULE_ENTRY.
using RunnerModuleEntry = const RunnerModuleInfo *();

/// The file name of \p Kind's module ("MLBridgeRunnerOnnx.so").
llvm::StringRef runnerModuleFileName(RunnerModuleKind Kind);

/// The folder the modules are looked up in: the plugin's own folder.
std::string runnerModuleDirectory();

/// Loads \p Kind's module once per process (later calls return the same
/// module, or the same error) and checks that it comes from this build; its
/// components have then registered their runners and SerDes. The error names
/// the file and how to get it.
llvm::Expected<const RunnerModuleInfo &>
loadRunnerModule(RunnerModuleKind Kind);

} // namespace mlbridge::plugins

#endif // MLBRIDGE_PLUGINS_RUNNERS_RUNNERMODULE_H
