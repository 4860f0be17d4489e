//===- main.cpp - Out-of-tree use of the installed mlbridge runtime -------===//
//
// Part of mlbridge. Builds a TensorSpec and a CallbackModelRunner through the
// installed headers and libraries and prints one checkable line.
//
//===----------------------------------------------------------------------===//
#include "mlbridge/MLModelRunner.h"
#include "mlbridge/Tensor.h"
#include "mlbridge/TensorSpec.h"

#include "llvm/Support/Error.h"

#include <cstdio>
#include <vector>

int main() {
  using namespace mlbridge;
  std::vector<TensorSpec> Features{createSpec<int64_t>("x", {1})};
  TensorSpec Advice = createSpec<int64_t>("advice", {1});
  std::string SpecJSON = Features[0].toJSON();

  auto Runner = CallbackModelRunner::create(
      Features, Advice,
      [](llvm::ArrayRef<TensorRef> In) -> llvm::Expected<TensorValue> {
        return TensorValue::scalar<int64_t>("advice",
                                            In[0].data<int64_t>()[0] * 2 + 1);
      });
  if (!Runner) {
    std::fprintf(stderr, "error: %s\n",
                 llvm::toString(Runner.takeError()).c_str());
    return 1;
  }
  if (llvm::Error E = (*Runner)->setFeature("x", int64_t{20})) {
    std::fprintf(stderr, "error: %s\n", llvm::toString(std::move(E)).c_str());
    return 1;
  }
  llvm::Expected<int64_t> Answer = (*Runner)->evaluate<int64_t>();
  if (!Answer) {
    std::fprintf(stderr, "error: %s\n",
                 llvm::toString(Answer.takeError()).c_str());
    return 1;
  }
  std::printf("mlbridge-external: spec %s advice %lld\n", SpecJSON.c_str(),
              static_cast<long long>(*Answer));
  return 0;
}
