//===- main.cpp - Out-of-tree use of the installed mlbridge runtime -------===//
//
// Part of mlbridge. Builds a TensorSpec and a CallbackModelRunner through the
// installed headers and libraries and prints one checkable line. Built with
// MLBRIDGE_EXTERNAL_PIPE (linked to MLBridge::Pipe), it also asks a model
// over the named pipes whose base is its first argument, and prints its
// answer.
//
//===----------------------------------------------------------------------===//
#include "mlbridge/MLModelRunner.h"
#include "mlbridge/Tensor.h"
#include "mlbridge/TensorSpec.h"
#ifdef MLBRIDGE_EXTERNAL_PIPE
#include "mlbridge/PipeModelRunner.h"
#endif

#include "llvm/Support/Error.h"

#include <cstdio>
#include <vector>

using namespace mlbridge;

static int fail(llvm::Error E) {
  std::fprintf(stderr, "error: %s\n", llvm::toString(std::move(E)).c_str());
  return 1;
}

#ifdef MLBRIDGE_EXTERNAL_PIPE
/// Asks the model on the pipes \p Base for the advice on one feature.
static int askPipe(const char *Base) {
  PipeModelRunnerOptions O;
  O.ChannelBase = Base;
  O.ConnectTimeout = std::chrono::milliseconds(60000);
  O.Timeout = std::chrono::milliseconds(60000);
  auto Runner =
      PipeModelRunner::create({createSpec<int64_t>("basic_block_count", {1})},
                              createSpec<int64_t>("advice", {1}), std::move(O));
  if (!Runner)
    return fail(Runner.takeError());
  if (llvm::Error E = (*Runner)->setFeature("basic_block_count", int64_t{7}))
    return fail(std::move(E));
  llvm::Expected<int64_t> Answer = (*Runner)->evaluate<int64_t>();
  if (!Answer)
    return fail(Answer.takeError());
  if (llvm::Error E = (*Runner)->finish())
    return fail(std::move(E));
  std::printf("mlbridge-external: pipe advice %lld\n",
              static_cast<long long>(*Answer));
  return 0;
}
#endif

int main(int argc, char **argv) {
  std::vector<TensorSpec> Features{createSpec<int64_t>("x", {1})};
  TensorSpec Advice = createSpec<int64_t>("advice", {1});
  std::string SpecJSON = Features[0].toJSON();

  auto Runner = CallbackModelRunner::create(
      Features, Advice,
      [](llvm::ArrayRef<TensorRef> In) -> llvm::Expected<TensorValue> {
        return TensorValue::scalar<int64_t>("advice",
                                            In[0].data<int64_t>()[0] * 2 + 1);
      });
  if (!Runner)
    return fail(Runner.takeError());
  if (llvm::Error E = (*Runner)->setFeature("x", int64_t{20}))
    return fail(std::move(E));
  llvm::Expected<int64_t> Answer = (*Runner)->evaluate<int64_t>();
  if (!Answer)
    return fail(Answer.takeError());
  std::printf("mlbridge-external: spec %s advice %lld\n", SpecJSON.c_str(),
              static_cast<long long>(*Answer));
#ifdef MLBRIDGE_EXTERNAL_PIPE
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <channel base>\n", argv[0]);
    return 2;
  }
  return askPipe(argv[1]);
#else
  (void)argc;
  (void)argv;
  return 0;
#endif
}
