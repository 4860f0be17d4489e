//===- ModelRunnerAdvisor.cpp - FunctionAdvisor over a model runner -------===//
//
// Part of mlbridge. See ModelRunnerAdvisor.h.
//
//===----------------------------------------------------------------------===//
#include "passes/function_features/ModelRunnerAdvisor.h"

#include "llvm/Support/FormatVariadic.h"

using namespace llvm;

namespace mlbridge::passes {

std::vector<TensorSpec> functionFeatureSpecs() {
  std::vector<TensorSpec> Specs;
  for (StringRef Name : FunctionFeatures::featureNames())
    Specs.push_back(createSpec<int64_t>(Name, {1}));
  return Specs;
}

TensorSpec functionAdviceSpec() { return createSpec<int64_t>("advice", {1}); }

Expected<FunctionFeatures>
functionFeaturesFromTensors(ArrayRef<TensorRef> Tensors) {
  ArrayRef<StringRef> Names = FunctionFeatures::featureNames();
  if (Tensors.size() != Names.size())
    return createStringError(inconvertibleErrorCode(),
                             "expected %zu feature tensors, got %zu",
                             Names.size(), Tensors.size());
  int64_t Values[FunctionFeatures::NumFeatures];
  for (size_t I = 0; I < Names.size(); ++I) {
    const TensorRef &T = Tensors[I];
    if (T.name() != Names[I] || T.type() != ElementType::Int64 ||
        T.getElementCount() != 1)
      return createStringError(
          inconvertibleErrorCode(),
          formatv("feature {0}: expected int64 '{1}' with one element, got "
                  "'{2}' ({3}, {4} elements)",
                  I, Names[I], T.name(), elementTypeName(T.type()),
                  T.getElementCount())
              .str());
    Values[I] = T.data<int64_t>()[0];
  }
  FunctionFeatures F;
  F.InstructionCount = Values[0];
  F.BasicBlockCount = Values[1];
  F.CallCount = Values[2];
  F.LoopCount = Values[3];
  F.MaxLoopDepth = Values[4];
  F.ArgumentCount = Values[5];
  F.LoadCount = Values[6];
  F.StoreCount = Values[7];
  F.ConditionalBranchCount = Values[8];
  return F;
}

Expected<FunctionAdvice>
ModelRunnerAdvisor::advise(StringRef FunctionName,
                           const FunctionFeatures &Features) {
  // The pipe runner sends it as a context record; others ignore it.
  if (Error E = Runner->switchContext(FunctionName))
    return E;
  auto Values = Features.asArray();
  ArrayRef<StringRef> Names = FunctionFeatures::featureNames();
  for (size_t I = 0; I < Names.size(); ++I)
    if (Error E = Runner->setFeature(Names[I], Values[I]))
      return E;
  Expected<int64_t> Advice = Runner->evaluate<int64_t>();
  if (!Advice)
    return Advice.takeError();
  if (*Advice < 0 || *Advice >= NumFunctionAdvice)
    return createStringError(inconvertibleErrorCode(),
                             "the model returned advice %lld, expected 0..%lld",
                             static_cast<long long>(*Advice),
                             static_cast<long long>(NumFunctionAdvice - 1));
  return static_cast<FunctionAdvice>(*Advice);
}

} // namespace mlbridge::passes
