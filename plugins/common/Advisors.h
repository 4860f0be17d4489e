//===- Advisors.h - The FunctionAdvisor of the function-features pass -*- C++
//-*-===//
//
// Part of mlbridge. The `FunctionAdvisor` that mlbridge-function-features (opt)
// and the llc annotations talk to: the built-in policy, or any model runner
// the plugin's options name (RunnerFactory.h), with the failure policy.
//
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PLUGINS_COMMON_ADVISORS_H
#define MLBRIDGE_PLUGINS_COMMON_ADVISORS_H

#include "mlbridge/RunnerFactory.h"
#include "passes/function_features/FunctionFeatures.h"

#include <memory>

namespace mlbridge::plugins {

enum class AdvisorKind {
  /// The built-in policy called directly (no runtime involved).
  Builtin,
  /// A model runner (the one `RunnerConfig::Kind` names): the pass fills
  /// feature tensors and calls evaluate<int64_t>().
  Runner,
};

/// The default advisor: a model runner (by default the callback runner).
AdvisorKind defaultAdvisorKind();

/// Never null. \p Kind Builtin ignores \p Config. With a runner, the advisor
/// builds the runner on its first decision (so a pass that never runs never
/// connects), sends the function name as the context, then asks for the
/// advice; when
/// the runner cannot be built or the model fails, it either answers with an
/// error naming the cause (ModelFailurePolicy::Fail; the pass reports it as
/// a compiler diagnostic, plugins must not exit()) or, once, hands the pass
/// a warning naming the cause (FunctionAdvisor::takeWarning()) and answers
/// with the built-in policy from then on (ModelFailurePolicy::Fallback).
std::shared_ptr<passes::FunctionAdvisor>
makeFunctionAdvisor(AdvisorKind Kind, const RunnerConfig &Config,
                    passes::BuiltinPolicyParams Params);

} // namespace mlbridge::plugins

#endif // MLBRIDGE_PLUGINS_COMMON_ADVISORS_H
