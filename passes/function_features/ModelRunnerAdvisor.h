//===- ModelRunnerAdvisor.h - FunctionAdvisor over a model runner -*- C++
//-*-===//
//
// Part of mlbridge. Asks any `mlbridge::MLModelRunner` (callback, pipe, gRPC,
// ONNX, TF AOT: the pass does not know which) for a function's advice. The
// model's interface, which every runner for this pass must accept:
//   features: one int64 tensor of shape [1] per name in
//             FunctionFeatures::featureNames(), in that order;
//   advice:   int64 "advice", shape [1], a FunctionAdvice class index.
//
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_FUNCTION_FEATURES_MODELRUNNERADVISOR_H
#define MLBRIDGE_PASSES_FUNCTION_FEATURES_MODELRUNNERADVISOR_H

#include "passes/function_features/FunctionFeatures.h"

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/Tensor.h"
#include "mlbridge/TensorSpec.h"

#include <memory>
#include <vector>

namespace mlbridge::passes {

/// The feature specs of the model interface above.
std::vector<TensorSpec> functionFeatureSpecs();
/// The advice spec of the model interface above.
TensorSpec functionAdviceSpec();

/// The inverse mapping, for in-process policies behind a CallbackModelRunner:
/// reads the features back from the runner's tensors (in spec order).
llvm::Expected<FunctionFeatures>
functionFeaturesFromTensors(llvm::ArrayRef<TensorRef> Tensors);

class ModelRunnerAdvisor final : public FunctionAdvisor {
public:
  explicit ModelRunnerAdvisor(std::unique_ptr<MLModelRunner> Runner)
      : Runner(std::move(Runner)) {}
  llvm::Expected<FunctionAdvice>
  advise(llvm::StringRef FunctionName,
         const FunctionFeatures &Features) override;

private:
  std::unique_ptr<MLModelRunner> Runner;
};

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_FUNCTION_FEATURES_MODELRUNNERADVISOR_H
