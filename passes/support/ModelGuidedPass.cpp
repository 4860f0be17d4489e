//===- ModelGuidedPass.cpp - Runners of ML-guided MLIR passes -------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/support/ModelGuidedPass.h"

namespace mlbridge::passes {

RunnerPool::Lease::~Lease() {
  if (!Pool || !Runner)
    return;
  std::lock_guard<std::mutex> Lock(Pool->Mutex);
  Pool->Free.push_back(std::move(Runner));
}

llvm::Expected<std::optional<RunnerPool::Lease>>
RunnerPool::acquire(const RunnerOptionValues &Options,
                    std::vector<TensorSpec> Features, TensorSpec Advice,
                    CallbackModelRunner::Callback Builtin) {
  std::unique_lock<std::mutex> Session;
  if (Provider->IsSingleSession(Options))
    Session = std::unique_lock<std::mutex>(SessionMutex);
  {
    std::lock_guard<std::mutex> Lock(Mutex);
    // Checked after the session wait: the holder may have failed meanwhile.
    if (Failed)
      return std::nullopt;
    if (!Free.empty()) {
      std::unique_ptr<MLModelRunner> R = std::move(Free.back());
      Free.pop_back();
      return Lease(*this, std::move(R), std::move(Session));
    }
  }
  // Made outside the pool's lock: connecting may take up to the timeout.
  llvm::Expected<std::unique_ptr<MLModelRunner>> R = Provider->Create(
      Options, std::move(Features), std::move(Advice), std::move(Builtin));
  if (!R)
    return R.takeError();
  return Lease(*this, std::move(*R), std::move(Session));
}

bool RunnerPool::markFailed() {
  std::lock_guard<std::mutex> Lock(Mutex);
  bool First = !Failed;
  Failed = true;
  // Ends idle sessions now rather than at exit.
  Free.clear();
  return First;
}

bool RunnerPool::failed() {
  std::lock_guard<std::mutex> Lock(Mutex);
  return Failed;
}

} // namespace mlbridge::passes
