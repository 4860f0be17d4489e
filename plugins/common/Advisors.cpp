//===- Advisors.cpp - Advisor choice shared by the LLVM plugins -----------===//
//
// Part of mlbridge. See Advisors.h.
//
//===----------------------------------------------------------------------===//
#include "plugins/common/Advisors.h"

#ifdef MLBRIDGE_HAVE_RUNTIME
#include "passes/llvm/ModelRunnerAdvisor.h"
#include "mlbridge/MLModelRunner.h"
#endif

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

#ifdef MLBRIDGE_HAVE_RUNTIME
/// The built-in policy behind the runtime's CallbackModelRunner: the pass
/// talks to it exactly as to any other runner.
std::shared_ptr<passes::FunctionAdvisor>
makeCallbackRunnerAdvisor(passes::BuiltinPolicyParams Params) {
  auto Policy = [Params](ArrayRef<TensorRef> Features) -> Expected<TensorValue> {
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
#endif

} // namespace

bool haveRuntime() {
#ifdef MLBRIDGE_HAVE_RUNTIME
  return true;
#else
  return false;
#endif
}

AdvisorKind defaultAdvisorKind() {
  return haveRuntime() ? AdvisorKind::CallbackRunner : AdvisorKind::Builtin;
}

std::shared_ptr<passes::FunctionAdvisor>
makeFunctionAdvisor(AdvisorKind Kind, passes::BuiltinPolicyParams Params) {
  switch (Kind) {
  case AdvisorKind::Builtin:
    return std::make_shared<passes::BuiltinFunctionAdvisor>(Params);
  case AdvisorKind::CallbackRunner:
    if (!haveRuntime())
      return std::make_shared<FailingAdvisor>(
          "advisor 'callback-runner' needs the mlbridge runtime, which this "
          "plugin was built without; use the 'builtin' advisor");
#ifdef MLBRIDGE_HAVE_RUNTIME
    return makeCallbackRunnerAdvisor(Params);
#else
    break;
#endif
  }
  return std::make_shared<FailingAdvisor>("unknown advisor kind");
}

} // namespace mlbridge::plugins
