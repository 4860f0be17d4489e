//===- Advisors.cpp - The FunctionAdvisor of the function-features pass ---===//
//
// Part of mlbridge. See Advisors.h.
//
//===----------------------------------------------------------------------===//
#include "plugins/common/Advisors.h"

#include "passes/function_features/ModelRunnerAdvisor.h"

#include "llvm/Support/FormatVariadic.h"

#include <functional>
#include <optional>
#include <string>

using namespace llvm;

namespace mlbridge::plugins {
namespace {

/// The built-in policy as a CallbackModelRunner policy.
CallbackModelRunner::Callback builtinCallback(passes::BuiltinPolicyParams P) {
  return [P](ArrayRef<TensorRef> Features) -> Expected<TensorValue> {
    Expected<passes::FunctionFeatures> F =
        passes::functionFeaturesFromTensors(Features);
    if (!F)
      return F.takeError();
    passes::FunctionAdvice A = passes::builtinFunctionPolicy(*F, P);
    return TensorValue::scalar<int64_t>("advice", static_cast<int64_t>(A));
  };
}

/// Builds a model runner (on the advisor's first decision).
using RunnerFactory = std::function<Expected<std::unique_ptr<MLModelRunner>>()>;

/// Asks a model runner, built on the first decision; on failure either fails
/// (with the cause) or warns once and uses the built-in policy for the rest
/// of the compilation.
class RunnerFunctionAdvisor final : public passes::FunctionAdvisor {
public:
  RunnerFunctionAdvisor(RunnerFactory Factory, std::string Description,
                        ModelFailurePolicy OnFailure,
                        passes::BuiltinPolicyParams Params)
      : Factory(std::move(Factory)), Description(std::move(Description)),
        OnFailure(OnFailure), Builtin(Params) {}

  Expected<passes::FunctionAdvice>
  advise(StringRef FunctionName,
         const passes::FunctionFeatures &Features) override {
    if (FellBack)
      return Builtin.advise(FunctionName, Features);
    if (Factory) {
      Expected<std::unique_ptr<MLModelRunner>> Runner = Factory();
      Factory = nullptr;
      if (Runner)
        Model.emplace(std::move(*Runner));
      else
        CreateError = "cannot create the " + Description + ": " +
                      toString(Runner.takeError());
    }
    std::string Cause;
    if (Model) {
      Expected<passes::FunctionAdvice> A =
          Model->advise(FunctionName, Features);
      if (A)
        return A;
      Cause = toString(A.takeError());
    } else {
      Cause = CreateError;
    }
    if (OnFailure == ModelFailurePolicy::Fail)
      return createStringError(inconvertibleErrorCode(), Cause);
    // Ends the session (the model may be gone already) and the waits.
    Model.reset();
    FellBack = true;
    Warning = formatv("mlbridge: the model failed for '{0}', using the "
                      "built-in policy for the rest of the compilation: {1}",
                      FunctionName, Cause)
                  .str();
    return Builtin.advise(FunctionName, Features);
  }

  std::optional<std::string> takeWarning() override {
    std::optional<std::string> W = std::move(Warning);
    Warning.reset();
    return W;
  }

private:
  RunnerFactory Factory;
  std::string Description;
  ModelFailurePolicy OnFailure;
  passes::BuiltinFunctionAdvisor Builtin;
  std::optional<passes::ModelRunnerAdvisor> Model;
  std::string CreateError;
  bool FellBack = false;
  std::optional<std::string> Warning;
};

} // namespace

AdvisorKind defaultAdvisorKind() { return AdvisorKind::Runner; }

std::shared_ptr<passes::FunctionAdvisor>
makeFunctionAdvisor(AdvisorKind Kind, const RunnerConfig &Config,
                    passes::BuiltinPolicyParams Params) {
  if (Kind == AdvisorKind::Builtin)
    return std::make_shared<passes::BuiltinFunctionAdvisor>(Params);
  RunnerFactory Factory = [Config, Params] {
    return createModelRunner(Config, passes::functionFeatureSpecs(),
                             passes::functionAdviceSpec(),
                             builtinCallback(Params));
  };
  return std::make_shared<RunnerFunctionAdvisor>(
      std::move(Factory), describeRunner(Config), Config.OnFailure, Params);
}

} // namespace mlbridge::plugins
