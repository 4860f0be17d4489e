//===- Advisors.h - Advisor choice shared by the LLVM plugins ---*- C++ -*-===//
//
// Part of mlbridge. The opt and llc plugins let the user pick where decisions
// come from; this builds the chosen `FunctionAdvisor` for the passes.
//
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PLUGINS_COMMON_ADVISORS_H
#define MLBRIDGE_PLUGINS_COMMON_ADVISORS_H

#include "passes/llvm/FunctionFeatures.h"

#include <memory>

namespace mlbridge::plugins {

enum class AdvisorKind {
  /// The built-in policy called directly (no runtime involved).
  Builtin,
  /// The built-in policy behind the runtime's in-process CallbackModelRunner:
  /// the pass fills feature tensors and calls evaluate<int64_t>(), exactly as
  /// it would with a pipe, gRPC, ONNX or TF AOT runner.
  CallbackRunner,
};

/// The default advisor: the built-in policy behind the CallbackModelRunner.
AdvisorKind defaultAdvisorKind();

/// Never null. When the chosen advisor cannot be built, the returned advisor
/// answers every request with an error that says why, so the pass reports it
/// as a compiler diagnostic (plugins must not exit()).
std::shared_ptr<passes::FunctionAdvisor>
makeFunctionAdvisor(AdvisorKind Kind, passes::BuiltinPolicyParams Params);

} // namespace mlbridge::plugins

#endif // MLBRIDGE_PLUGINS_COMMON_ADVISORS_H
