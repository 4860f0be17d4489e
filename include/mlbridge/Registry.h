//===- Registry.h - Optional SerDes and runners, found by name --*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The core library (MLBridge::Core) knows the bitstream and JSON SerDes and
/// the runner interface only. The optional components (MLBridge::Protobuf,
/// MLBridge::Grpc, MLBridge::Onnx, MLBridge::TFAOT) register their SerDes and
/// runners here, by name, when they are loaded: a program that links one, or
/// a plugin that loads its runner module on first use, finds it through
/// lookupSerDes() / lookupRunner(); createSerDes() uses lookupSerDes() for
/// the protobuf SerDes, createModelRunner() (mlbridge/RunnerFactory.h) uses
/// lookupRunner(). Linking a component's CMake target is enough: the
/// shared library carries the link option `--no-as-needed` and the static
/// one `--undefined=mlbridge_component_<name>`, so the component is loaded
/// (and registers itself) even when the program never names its symbols.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_REGISTRY_H
#define MLBRIDGE_REGISTRY_H

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/RunnerFactory.h"
#include "mlbridge/SerDes/SerDes.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace mlbridge {

/// Builds a SerDes with the given decoder limits.
using SerDesFactoryFn =
    std::unique_ptr<SerDes> (*)(const DecoderLimits &Limits);

/// Builds a runner for \p Features and \p Advice as \p Config says (its
/// timeout, SerDes, score spec, ...). \p Target is what createModelRunner()
/// resolved for the runner to find its model: the pipe's channel base, a
/// gRPC server's `host:port`, an ONNX model file, a shared object.
using RunnerFactoryFn = llvm::Expected<std::unique_ptr<MLModelRunner>> (*)(
    const RunnerConfig &Config, llvm::StringRef Target,
    std::vector<TensorSpec> Features, TensorSpec Advice);

/// Registers the SerDes \p Name (e.g. "protobuf"). A second registration of
/// the same name replaces the first.
void registerSerDes(llvm::StringRef Name, SerDesFactoryFn Factory);
/// The SerDes registered as \p Name, or null.
SerDesFactoryFn lookupSerDes(llvm::StringRef Name);

/// Registers the runner \p Name (e.g. "grpc", "onnx", "tfaot"). A second
/// registration of the same name replaces the first.
void registerRunner(llvm::StringRef Name, RunnerFactoryFn Factory);
/// The runner registered as \p Name, or null.
RunnerFactoryFn lookupRunner(llvm::StringRef Name);

/// Loads the component that registers the runner (\p What "runner") or
/// SerDes (\p What "serdes") \p Name, or fails saying why it cannot.
using ComponentLoaderFn = llvm::Error (*)(llvm::StringRef What,
                                          llvm::StringRef Name);
/// Sets the loader asked for a runner or SerDes that is not registered (the
/// plugins load their runner modules on first use this way); null: none.
void setComponentLoader(ComponentLoaderFn Loader);

/// The runner registered as \p Name, after asking the component loader if it
/// is not registered yet; an error naming what is missing and the fix.
llvm::Expected<RunnerFactoryFn> findRunner(llvm::StringRef Name);
/// The same for the SerDes \p Name.
llvm::Expected<SerDesFactoryFn> findSerDes(llvm::StringRef Name);

/// The names registered so far (SerDes, then runners), sorted; for messages.
std::vector<std::string> registeredSerDes();
std::vector<std::string> registeredRunners();

} // namespace mlbridge

#endif // MLBRIDGE_REGISTRY_H
