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
/// the protobuf SerDes. Linking a component's CMake target is enough: the
/// shared library carries the link option `--no-as-needed` and the static
/// one `--undefined=mlbridge_component_<name>`, so the component is loaded
/// (and registers itself) even when the program never names its symbols.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_REGISTRY_H
#define MLBRIDGE_REGISTRY_H

#include "mlbridge/MLModelRunner.h"
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

/// Builds a runner for \p Features and \p Advice. \p Target is what the
/// runner needs to find its model: a gRPC server's `host:port`, an ONNX model
/// file, a TF AOT shared object. \p Timeout bounds every wait.
using RunnerFactoryFn = llvm::Expected<std::unique_ptr<MLModelRunner>> (*)(
    llvm::StringRef Target, std::chrono::milliseconds Timeout,
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

/// The names registered so far (SerDes, then runners), sorted; for messages.
std::vector<std::string> registeredSerDes();
std::vector<std::string> registeredRunners();

} // namespace mlbridge

#endif // MLBRIDGE_REGISTRY_H
