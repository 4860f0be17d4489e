//===- MLIRRoundTrip.cpp - The MLIR round-trip experiment -----------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/roundtrip/MLIRRoundTrip.h"
#include "passes/roundtrip/RoundTrip.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace mlbridge::passes {

float roundTripInput(int64_t Query, int64_t Index) {
  return roundtrip::input(Query, Index);
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
           "mlbridge.roundtrip_answers (and each query's seconds as "
           "mlbridge.roundtrip_seconds); with 'expect', check each one";
  }

  LogicalResult initialize(MLIRContext *Ctx) override {
    if (Length < 1 || Length > (1u << 24))
      return emitError(UnknownLoc::get(Ctx))
             << "mlbridge-roundtrip: length must be in [1, 16777216], got "
             << static_cast<unsigned>(Length);
    if (!roundtrip::parseExpect(ExpectName))
      return emitError(UnknownLoc::get(Ctx))
             << "mlbridge-roundtrip: expect must be none, dense or sum, got '"
             << ExpectName << "'";
    return checkRunnerOptions(Ctx);
  }

  void runOnOperation() override {
    ModuleOp Module = getOperation();
    // The callback runner's model: the sum of the inputs (the floor).
    llvm::Expected<std::optional<RunnerPool::Lease>> L = Pool->acquire(
        runnerOptions(),
        {createSpec<float>(roundtrip::InputName.str(), {int64_t(Length)})},
        createSpec<float>(roundtrip::OutputName.str(), {1}),
        roundtrip::callbackModel(roundtrip::Expect::Sum));
    if (!L) {
      Module.emitError() << "mlbridge-roundtrip: cannot create the "
                         << describeRunner() << ": "
                         << llvm::toString(L.takeError());
      return signalPassFailure();
    }
    if (!*L) // One module per pass instance: no earlier failure possible.
      return signalPassFailure();
    llvm::Expected<roundtrip::Result> R = roundtrip::run(
        (*L)->runner(), Length, Queries, *roundtrip::parseExpect(ExpectName));
    if (!R) {
      (*L)->discard();
      Module.emitError() << "mlbridge-roundtrip: "
                         << llvm::toString(R.takeError());
      return signalPassFailure();
    }
    if (R->Mismatches) {
      Module.emitError() << "mlbridge-roundtrip: " << R->Mismatches << " of "
                         << R->Checked << " answers are wrong; the first: "
                         << R->FirstMismatch;
      return signalPassFailure();
    }
    Module->setAttr("mlbridge.roundtrip_answers",
                    DenseF32ArrayAttr::get(&getContext(), R->Answers));
    // Each query's wall time, so that a benchmark can leave out connecting.
    Module->setAttr("mlbridge.roundtrip_seconds",
                    DenseF64ArrayAttr::get(&getContext(), R->Seconds));
  }

  Option<unsigned> Length{*this, "length",
                          llvm::cl::desc("Floats per query (L)"),
                          llvm::cl::init(500)};
  Option<unsigned> Queries{
      *this, "queries", llvm::cl::desc("Number of queries"), llvm::cl::init(1)};
  Option<std::string> ExpectName{
      *this, "expect",
      llvm::cl::desc(
          "Check every answer: 'dense' (w . input + b, the layer "
          "of mlbridge.bench.roundtrip_model), 'sum' (the callback model), "
          "or 'none' (only record them; default)"),
      llvm::cl::init("none")};
};

} // namespace

void registerRoundTripPass(std::shared_ptr<const RunnerProvider> Provider) {
  PassRegistration<RoundTripPass>(
      [Provider] { return std::make_unique<RoundTripPass>(Provider); });
}

} // namespace mlbridge::passes
