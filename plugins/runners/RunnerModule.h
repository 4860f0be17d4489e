//===- RunnerModule.h - Runner modules loaded on first use -----*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The model runners with heavy dependencies live in runner modules that the
/// plugins load only when a run uses them, so that a compilation with the
/// callback, pipe or TF AOT runner never maps gRPC, Abseil, OpenSSL,
/// protobuf or ONNX Runtime (docs/plugins.md, "Runner modules"):
///
///   MLBridgeRunnerGrpc.so  the gRPC runner and the protobuf SerDes (both
///                          need libprotobuf; the generated tensor.pb code
///                          must exist once per process)
///   MLBridgeRunnerOnnx.so  the ONNX Runtime runner
///
/// Both link libMLBridgePluginRuntime.so, the one copy of the rest of the
/// runtime in the process (which the plugins link too), so the C++ objects
/// that cross the boundary (TensorSpec, MLModelRunner, SerDes, llvm::Error
/// and its class IDs) have one definition. The interface is C++: the modules
/// must come from the same build as the plugins, which the loader checks
/// (ABI version and mlbridge version).
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PLUGINS_RUNNERS_RUNNERMODULE_H
#define MLBRIDGE_PLUGINS_RUNNERS_RUNNERMODULE_H

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/SerDes/SerDes.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <memory>
#include <vector>

namespace mlbridge::plugins {

/// Bumped whenever RunnerModuleInfo or the meaning of its members changes.
inline constexpr unsigned RunnerModuleABIVersion = 1;

/// The entry point every module exports (extern "C", default visibility).
#define MLBRIDGE_RUNNER_MODULE_ENTRY "mlbridge_runner_module_v1"

/// The runner modules.
enum class RunnerModuleKind { Grpc, Onnx };

/// What a runner module offers; a module returns a pointer to a static one.
struct RunnerModuleInfo {
  /// RunnerModuleABIVersion of the module's build.
  unsigned ABIVersion;
  /// MLBRIDGE_VERSION of the module's build.
  const char *MLBridgeVersion;
  /// Which module this is.
  RunnerModuleKind Kind;
  /// Builds the module's runner for \p Features and \p Advice. \p Target is
  /// the gRPC server's `host:port` or the ONNX model file; \p Timeout bounds
  /// every wait. Null if the module was built without its runner (the gRPC
  /// module with protobuf but without gRPC).
  llvm::Expected<std::unique_ptr<MLModelRunner>> (*CreateRunner)(
      llvm::StringRef Target, std::chrono::milliseconds Timeout,
      std::vector<TensorSpec> Features, TensorSpec Advice);
  /// The protobuf SerDes (gRPC module only; null in the others).
  std::unique_ptr<SerDes> (*CreateProtobufSerDes)(const DecoderLimits &Limits);
};

/// The signature of MLBRIDGE_RUNNER_MODULE_ENTRY.
using RunnerModuleEntry = const RunnerModuleInfo *();

/// The file name of \p Kind's module ("MLBridgeRunnerOnnx.so").
llvm::StringRef runnerModuleFileName(RunnerModuleKind Kind);

/// The folder the modules are looked up in: the one that holds
/// libMLBridgePluginRuntime.so, i.e. the plugins' own folder.
std::string runnerModuleDirectory();

/// Loads \p Kind's module once per process (later calls return the same
/// module, or the same error) and checks that it comes from this build. The
/// error names the file and how to get it.
llvm::Expected<const RunnerModuleInfo &>
loadRunnerModule(RunnerModuleKind Kind);

} // namespace mlbridge::plugins

#endif // MLBRIDGE_PLUGINS_RUNNERS_RUNNERMODULE_H
