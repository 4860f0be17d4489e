//===- ModelSpecs.cpp - Does a model fit the compiler's features? ---------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/ModelSpecs.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace mlbridge {

static std::string shapeString(ArrayRef<int64_t> Shape) {
  std::string Out;
  writeShapeJSON(Shape, Out);
  return Out;
}

bool areShapesCompatible(ArrayRef<int64_t> A, ArrayRef<int64_t> B) {
  auto IsStatic = [](ArrayRef<int64_t> S) {
    return llvm::none_of(S, [](int64_t D) { return D == DynamicDim; });
  };
  if (A.size() == B.size()) {
    bool AllAgree = true;
    for (size_t I = 0; I < A.size(); ++I)
      if (A[I] != B[I] && A[I] != DynamicDim && B[I] != DynamicDim)
        AllAgree = false;
    if (AllAgree)
      return true;
  }
  if (!IsStatic(A) || !IsStatic(B))
    return false;
  std::optional<uint64_t> CountA = shapeElementCount(A);
  std::optional<uint64_t> CountB = shapeElementCount(B);
  return CountA && CountB && *CountA == *CountB;
}

std::vector<std::string>
listInputDifferences(ArrayRef<TensorSpec> CompilerFeatures,
                     ArrayRef<TensorSpec> ModelInputs) {
  StringMap<size_t> ByName;
  for (size_t I = 0; I < CompilerFeatures.size(); ++I)
    ByName.try_emplace(CompilerFeatures[I].name(), I);

  std::vector<std::string> Differences;
  StringMap<bool> Seen;
  for (const TensorSpec &Input : ModelInputs) {
    if (!Seen.try_emplace(Input.name(), true).second) {
      Differences.push_back("input '" + Input.name() +
                            "' is declared more than once");
      continue;
    }
    auto It = ByName.find(Input.name());
    if (It == ByName.end()) {
      Differences.push_back("input '" + Input.name() +
                            "' is not a feature the compiler sends");
      continue;
    }
    const TensorSpec &Feature = CompilerFeatures[It->second];
    if (Feature.type() != Input.type())
      Differences.push_back("input '" + Input.name() + "' is " +
                            elementTypeName(Input.type()).str() +
                            " but the compiler sends " +
                            elementTypeName(Feature.type()).str());
    if (!areShapesCompatible(Feature.shape(), Input.shape()))
      Differences.push_back("input '" + Input.name() + "' has shape " +
                            shapeString(Input.shape()) +
                            " but the compiler sends shape " +
                            shapeString(Feature.shape()));
  }
  return Differences;
}

static Error differencesError(StringRef ModelName,
                              ArrayRef<std::string> Differences,
                              ArrayRef<TensorSpec> CompilerFeatures) {
  std::string Message;
  raw_string_ostream OS(Message);
  OS << "model '" << ModelName << "' does not fit the compiler's features ("
     << Differences.size()
     << (Differences.size() == 1 ? " difference" : " differences") << "):";
  for (const std::string &D : Differences)
    OS << "\n  - " << D;
  OS << "\n  the compiler sends:";
  for (const TensorSpec &F : CompilerFeatures)
    OS << ' ' << F.name() << ':' << elementTypeName(F.type())
       << shapeString(F.shape());
  return createStringError(inconvertibleErrorCode(), Message);
}

Expected<std::vector<size_t>>
bindModelInputs(ArrayRef<TensorSpec> CompilerFeatures,
                ArrayRef<TensorSpec> ModelInputs, StringRef ModelName) {
  std::vector<std::string> Differences =
      listInputDifferences(CompilerFeatures, ModelInputs);
  if (!Differences.empty())
    return differencesError(ModelName, Differences, CompilerFeatures);
  std::vector<size_t> Binding;
  Binding.reserve(ModelInputs.size());
  for (const TensorSpec &Input : ModelInputs) {
    const TensorSpec *It =
        llvm::find_if(CompilerFeatures, [&](const TensorSpec &F) {
          return F.name() == Input.name();
        });
    Binding.push_back(static_cast<size_t>(It - CompilerFeatures.begin()));
  }
  return Binding;
}

Error checkModelOutput(const TensorSpec &Advice, const TensorSpec &ModelOutput,
                       StringRef ModelName) {
  std::vector<std::string> Problems;
  if (Advice.type() != ModelOutput.type())
    Problems.push_back("it is " + elementTypeName(ModelOutput.type()).str() +
                       " but the advice is " +
                       elementTypeName(Advice.type()).str());
  if (!areShapesCompatible(Advice.shape(), ModelOutput.shape()))
    Problems.push_back("it has shape " + shapeString(ModelOutput.shape()) +
                       " but the advice has shape " +
                       shapeString(Advice.shape()));
  if (Problems.empty())
    return Error::success();
  std::string Message = "model '" + ModelName.str() + "' output '" +
                        ModelOutput.name() + "' cannot answer as advice '" +
                        Advice.name() + "': " + Problems.front();
  for (size_t I = 1; I < Problems.size(); ++I)
    Message += "; " + Problems[I];
  return createStringError(inconvertibleErrorCode(), Message);
}

} // namespace mlbridge
