//===- Advisors.cpp - Advisor choice shared by the LLVM plugins -----------===//
//
// Part of mlbridge. See Advisors.h.
//
//===----------------------------------------------------------------------===//
#include "plugins/common/Advisors.h"

#include "mlbridge/MLModelRunner.h"
#include "passes/llvm/ModelRunnerAdvisor.h"

#include <string>

using namespace llvm;

namespace mlbridge::plugins {
namespace {

class FailingAdvisor final : public passes::FunctionAdvisor {
public:
  explicit FailingAdvisor(std::string Why) : Why(std::move(Why)) {}
  Expected<passes::FunctionAdvice>
  advise(StringRef, const passes::FunctionFeatures &) override {
    return createStringError(inconvertibleErrorCode(), Why);
  }

private:
  std::string Why;
};

/// The built-in policy behind the runtime's CallbackModelRunner: the pass
/// talks to it exactly as to any other runner.
std::shared_ptr<passes::FunctionAdvisor>
makeCallbackRunnerAdvisor(passes::BuiltinPolicyParams Params) {
  auto Policy =
      [Params](ArrayRef<TensorRef> Features) -> Expected<TensorValue> {
    Expected<passes::FunctionFeatures> F =
        passes::functionFeaturesFromTensors(Features);
    if (!F)
      return F.takeError();
    passes::FunctionAdvice A = passes::builtinFunctionPolicy(*F, Params);
    return TensorValue::scalar<int64_t>("advice", static_cast<int64_t>(A));
  };
  auto Runner = CallbackModelRunner::create(passes::functionFeatureSpecs(),
                                            passes::functionAdviceSpec(),
                                            std::move(Policy));
  if (!Runner)
    return std::make_shared<FailingAdvisor>(
        "cannot create the callback runner: " + toString(Runner.takeError()));
  return std::make_shared<passes::ModelRunnerAdvisor>(std::move(*Runner));
}

} // namespace

AdvisorKind defaultAdvisorKind() { return AdvisorKind::CallbackRunner; }

std::shared_ptr<passes::FunctionAdvisor>
makeFunctionAdvisor(AdvisorKind Kind, passes::BuiltinPolicyParams Params) {
  switch (Kind) {
  case AdvisorKind::Builtin:
    return std::make_shared<passes::BuiltinFunctionAdvisor>(Params);
  case AdvisorKind::CallbackRunner:
    return makeCallbackRunnerAdvisor(Params);
  }
  return std::make_shared<FailingAdvisor>("unknown advisor kind");
}

} // namespace mlbridge::plugins
