//===- OnnxRunnerModule.cpp - MLBridgeRunnerOnnx.so's entry point ---------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The runner module of the ONNX Runtime runner (RunnerModule.h).
///
//===----------------------------------------------------------------------===//
#include "plugins/runners/RunnerModule.h"

#include "mlbridge/OnnxModelRunner.h"

#include "llvm/ADT/StringMap.h"

#include <mutex>

using namespace llvm;
using namespace mlbridge;
using namespace mlbridge::plugins;

/// One loaded ONNX model per file for the whole process: every pass instance
/// and thread that names the same model shares its session.
static Expected<std::shared_ptr<const OnnxModel>>
loadSharedOnnxModel(StringRef Path) {
  static std::mutex Mutex;
  static StringMap<std::weak_ptr<const OnnxModel>> Loaded;
  std::lock_guard<std::mutex> Lock(Mutex);
  std::weak_ptr<const OnnxModel> &Slot = Loaded[Path];
  if (std::shared_ptr<const OnnxModel> Model = Slot.lock())
    return Model;
  Expected<std::shared_ptr<const OnnxModel>> Model = OnnxModel::load(Path);
  if (!Model)
    return Model.takeError();
  Slot = *Model;
  return Model;
}

static Expected<std::unique_ptr<MLModelRunner>>
createOnnxRunner(StringRef ModelPath, std::chrono::milliseconds,
                 std::vector<TensorSpec> Features, TensorSpec Advice) {
  Expected<std::shared_ptr<const OnnxModel>> Loaded =
      loadSharedOnnxModel(ModelPath);
  if (!Loaded)
    return Loaded.takeError();
  auto R = OnnxModelRunner::create(std::move(*Loaded), std::move(Features),
                                   std::move(Advice));
  if (!R)
    return R.takeError();
  return std::unique_ptr<MLModelRunner>(std::move(*R));
}

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT const RunnerModuleInfo *
mlbridge_runner_module_v1() {
  static const RunnerModuleInfo Info = {
      RunnerModuleABIVersion, MLBRIDGE_VERSION, RunnerModuleKind::Onnx,
      createOnnxRunner, nullptr};
  return &Info;
}
