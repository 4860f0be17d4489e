//===- Register.cpp - Registers the ONNX Runtime runner -------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Registers "onnx" (OnnxModelRunner on a model file) with the core's
/// registry (mlbridge/Registry.h) when MLBridge::Onnx is loaded. The static
/// library's link option `--undefined=` names the anchor below, so static
/// links keep this file (runtime/CMakeLists.txt).
///
//===----------------------------------------------------------------------===//
#include "mlbridge/OnnxModelRunner.h"
#include "mlbridge/Registry.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Compiler.h"

#include <mutex>

using namespace llvm;
using namespace mlbridge;

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT void mlbridge_component_onnx() {}

namespace {

/// One loaded ONNX model per file for the whole process: every runner built
/// through the registry (every pass instance and thread) that names the same
/// model shares its session.
/// The model at \p Path loaded with \p Options, shared by every runner that
/// uses it at the same time (a session per model, not per runner).
Expected<std::shared_ptr<const OnnxModel>>
loadSharedOnnxModel(StringRef Path, const OnnxRunnerOptions &Options) {
  static std::mutex Mutex;
  static StringMap<std::weak_ptr<const OnnxModel>> Loaded;
  std::lock_guard<std::mutex> Lock(Mutex);
  std::weak_ptr<const OnnxModel> &Slot =
      Loaded[(Twine(Options.IntraOpThreads) + ":" + Path).str()];
  if (std::shared_ptr<const OnnxModel> Model = Slot.lock())
    return Model;
  Expected<std::shared_ptr<const OnnxModel>> Model =
      OnnxModel::load(Path, Options);
  if (!Model)
    return Model.takeError();
  Slot = *Model;
  return Model;
}

Expected<std::unique_ptr<MLModelRunner>>
createOnnxRunner(const RunnerConfig &Config, StringRef ModelPath,
                 std::vector<TensorSpec> Features, TensorSpec Advice) {
  OnnxRunnerOptions Options;
  if (Config.IntraOpThreads > 0)
    Options.IntraOpThreads = Config.IntraOpThreads;
  Expected<std::shared_ptr<const OnnxModel>> Loaded =
      loadSharedOnnxModel(ModelPath, Options);
  if (!Loaded)
    return Loaded.takeError();
  auto R = OnnxModelRunner::create(std::move(*Loaded), std::move(Features),
                                   std::move(Advice));
  if (!R)
    return R.takeError();
  return std::unique_ptr<MLModelRunner>(std::move(*R));
}

struct Registrar {
  Registrar() { registerRunner("onnx", createOnnxRunner); }
} TheRegistrar;

} // namespace
