//===- RoundTrip.cpp - The MLIR round-trip experiment ---------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/mlir/RoundTrip.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

#include <numeric>
#include <vector>

using namespace mlir;

namespace mlbridge::passes {

float roundTripInput(int64_t Query, int64_t Index) {
  return static_cast<float>((Query * 7 + Index * 13) % 101) / 101.0f - 0.5f;
}

namespace {

struct RoundTripPass : public ModelGuidedPass<RoundTripPass, ModuleOp> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(RoundTripPass)

  explicit RoundTripPass(std::shared_ptr<const RunnerProvider> Provider)
      : ModelGuidedPass(std::move(Provider)) {}
  RoundTripPass(const RoundTripPass &Other) : ModelGuidedPass(Other) {}

  StringRef getArgument() const final { return "mlbridge-roundtrip"; }
  StringRef getDescription() const final {
    return "Round-trip experiment: send 'queries' float vectors of 'length' "
           "values to the model, record its float answers as "
           "mlbridge.roundtrip_answers";
  }

  LogicalResult initialize(MLIRContext *Ctx) override {
    if (Length < 1 || Length > (1u << 24))
      return emitError(UnknownLoc::get(Ctx))
             << "mlbridge-roundtrip: length must be in [1, 16777216], got "
             << static_cast<unsigned>(Length);
    return checkRunnerOptions(Ctx);
  }

  void runOnOperation() override {
    ModuleOp Module = getOperation();
    // The callback runner's model: the sum of the inputs.
    CallbackModelRunner::Callback Sum =
        [](llvm::ArrayRef<TensorRef> F) -> llvm::Expected<TensorValue> {
      llvm::ArrayRef<float> X = F[0].data<float>();
      return TensorValue::scalar<float>(
          "output", std::accumulate(X.begin(), X.end(), 0.0f));
    };
    llvm::Expected<std::optional<RunnerPool::Lease>> L = Pool->acquire(
        runnerOptions(), {createSpec<float>("input", {int64_t(Length)})},
        createSpec<float>("output", {1}), Sum);
    if (!L) {
      Module.emitError() << "mlbridge-roundtrip: cannot create the "
                         << describeRunner() << ": "
                         << llvm::toString(L.takeError());
      return signalPassFailure();
    }
    if (!*L) // One module per pass instance: no earlier failure possible.
      return signalPassFailure();
    MLModelRunner &R = (*L)->runner();
    std::vector<float> Answers;
    Answers.reserve(Queries);
    // Filled in place: the runner's buffer is stable (MLGO contract).
    float *Input = R.getTensor<float>(0);
    for (unsigned Q = 0; Q < Queries; ++Q) {
      for (unsigned I = 0; I < Length; ++I)
        Input[I] = roundTripInput(Q, I);
      llvm::Expected<float> A = R.evaluate<float>();
      if (!A) {
        (*L)->discard();
        Module.emitError() << "mlbridge-roundtrip: no answer to query " << Q
                           << ": " << llvm::toString(A.takeError());
        return signalPassFailure();
      }
      Answers.push_back(*A);
    }
    Module->setAttr("mlbridge.roundtrip_answers",
                    DenseF32ArrayAttr::get(&getContext(), Answers));
  }

  Option<unsigned> Length{*this, "length",
                          llvm::cl::desc("Floats per query (L)"),
                          llvm::cl::init(500)};
  Option<unsigned> Queries{
      *this, "queries", llvm::cl::desc("Number of queries"), llvm::cl::init(1)};
};

} // namespace

void registerRoundTripPass(std::shared_ptr<const RunnerProvider> Provider) {
  PassRegistration<RoundTripPass>(
      [Provider] { return std::make_unique<RoundTripPass>(Provider); });
}

} // namespace mlbridge::passes
