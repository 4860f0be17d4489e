//===- Register.cpp - Registers the TF AOT runner -------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Registers "tfaot" (a model compiled by `mlbridge aot`, loaded from its
/// shared object) with the core's registry (mlbridge/Registry.h) when
/// MLBridge::TFAOT is loaded. The static library's link option `--undefined=`
/// names the anchor below, so static links keep this file
/// (runtime/CMakeLists.txt).
///
//===----------------------------------------------------------------------===//
#include "mlbridge/Registry.h"
#include "mlbridge/TFAOTModelRunner.h"

#include "llvm/Support/Compiler.h"

using namespace llvm;
using namespace mlbridge;

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT void mlbridge_component_tfaot() {}

namespace {

Expected<std::unique_ptr<MLModelRunner>>
createTFAOTRunner(const RunnerConfig &, StringRef SharedObject,
                  std::vector<TensorSpec> Features, TensorSpec Advice) {
  return TFAOTModelRunner::load(SharedObject, std::move(Features),
                                std::move(Advice));
}

struct Registrar {
  Registrar() { registerRunner("tfaot", createTFAOTRunner); }
} TheRegistrar;

} // namespace
