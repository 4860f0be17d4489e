//===- LoopUnroll.cpp - ML-guided loop unrolling for MLIR -----------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/loop_unroll/LoopUnroll.h"

#include "passes/loop_unroll/LoopFeatures.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Affine/LoopUtils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>

using namespace mlir;

namespace mlbridge::passes {

int64_t builtinUnrollFactor(llvm::ArrayRef<int64_t> F, unsigned Factor,
                            unsigned MaxUnrolledOps) {
  if (F[NestedLoops] > 0)
    return 1;
  int64_t Trip = F[TripCount];
  if (Trip == 0 || Trip == 1)
    return 1;
  int64_t Result = Factor;
  while (Result > 1 && F[BodyOps] * Result > MaxUnrolledOps)
    Result /= 2;
  if (Trip > 0)
    Result = std::min(Result, Trip);
  return std::max<int64_t>(Result, 1);
}

namespace {

constexpr const char *AdviceName = "unroll_factor";

struct LoopUnrollPass : public ModelGuidedPass<LoopUnrollPass, func::FuncOp> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LoopUnrollPass)

  explicit LoopUnrollPass(std::shared_ptr<const RunnerProvider> Provider)
      : ModelGuidedPass(std::move(Provider)) {}
  LoopUnrollPass(const LoopUnrollPass &Other) : ModelGuidedPass(Other) {}

  StringRef getArgument() const final { return "mlbridge-loop-unroll"; }
  StringRef getDescription() const final {
    return "Unroll affine.for and scf.for loops by factors a model chooses "
           "(features in docs/mlir.md)";
  }
  void getDependentDialects(DialectRegistry &Registry) const override {
    // The unrolling utilities create arith ops (bounds of cleanup loops).
    Registry
        .insert<arith::ArithDialect, affine::AffineDialect, scf::SCFDialect>();
  }

  LogicalResult initialize(MLIRContext *Ctx) override {
    if (MaxFactor < 1 || MaxFactor > MaxUnrollFactorLimit)
      return emitError(UnknownLoc::get(Ctx))
             << "mlbridge-loop-unroll: max-factor must be in [1, "
             << MaxUnrollFactorLimit << "], got "
             << static_cast<unsigned>(MaxFactor);
    if (HeuristicFactor < 1)
      return emitError(UnknownLoc::get(Ctx))
             << "mlbridge-loop-unroll: heuristic-factor must be at least 1";
    return checkRunnerOptions(Ctx);
  }

  int64_t builtin(llvm::ArrayRef<int64_t> F) const {
    return builtinUnrollFactor(F, HeuristicFactor, HeuristicMaxOps);
  }

  CallbackModelRunner::Callback builtinCallback() const {
    unsigned Factor = HeuristicFactor, MaxOps = HeuristicMaxOps;
    return
        [Factor, MaxOps](
            llvm::ArrayRef<TensorRef> Features) -> llvm::Expected<TensorValue> {
          LoopFeatureValues F;
          for (unsigned I = 0; I < NumLoopFeatures; ++I)
            F[I] = Features[I].data<int64_t>()[0];
          return TensorValue::scalar<int64_t>(
              AdviceName, builtinUnrollFactor(F, Factor, MaxOps));
        };
  }

  /// Reports a model failure at \p Loop: an error (fail), or the one warning
  /// (fallback). Returns failure when the pass must fail.
  LogicalResult modelFailed(func::FuncOp Func, Operation *Loop,
                            const std::string &Why) {
    if (onFailure() == OnFailure::Fail) {
      // The other functions stop asking (and waiting for) a failed model.
      Pool->markFailed();
      Loop->emitError() << "mlbridge-loop-unroll: no advice for a loop in '"
                        << Func.getSymName() << "': " << Why;
      return failure();
    }
    if (Pool->markFailed())
      Loop->emitWarning() << "mlbridge-loop-unroll: the model failed for '"
                          << Func.getSymName()
                          << "', using the built-in heuristic for the rest "
                             "of the compilation: "
                          << Why;
    return success();
  }

  /// Fills \p Advice with the model's factor for each loop, or the built-in
  /// heuristic's once the model has failed (fallback).
  LogicalResult decide(func::FuncOp Func, ArrayRef<Operation *> Loops,
                       ArrayRef<LoopFeatureValues> Features,
                       MutableArrayRef<int64_t> Advice) {
    size_t I = 0;
    // The compilation has already failed and said why.
    if (onFailure() == OnFailure::Fail && Pool->failed())
      return failure();
    if (!Pool->failed()) {
      llvm::Expected<std::optional<RunnerPool::Lease>> L = Pool->acquire(
          runnerOptions(), loopFeatureSpecs(),
          createSpec<int64_t>(AdviceName, {1}), builtinCallback());
      if (L && !*L) {
        // Another thread's model failure came first.
        if (onFailure() == OnFailure::Fail)
          return failure();
      } else if (!L) {
        if (failed(modelFailed(Func, Loops.front(),
                               "cannot create the " + describeRunner() + ": " +
                                   llvm::toString(L.takeError()))))
          return failure();
      } else {
        MLModelRunner &R = (*L)->runner();
        llvm::Error E = R.switchContext(Func.getSymName());
        const auto &Names = loopFeatureNames();
        for (; !E && I < Loops.size(); ++I) {
          for (unsigned K = 0; !E && K < NumLoopFeatures; ++K)
            E = R.setFeature(Names[K], Features[I][K]);
          if (E)
            break;
          llvm::Expected<int64_t> A = R.evaluate<int64_t>();
          if (!A) {
            E = A.takeError();
            break;
          }
          Advice[I] = *A;
        }
        if (E) {
          (*L)->discard();
          if (failed(modelFailed(Func, Loops[std::min(I, Loops.size() - 1)],
                                 llvm::toString(std::move(E)))))
            return failure();
        }
      }
    }
    for (; I < Loops.size(); ++I)
      Advice[I] = builtin(Features[I]);
    return success();
  }

  /// Unrolls \p Loop by \p Advice (clamped); true if the IR changed.
  bool apply(Operation *Loop, const LoopFeatureValues &F, int64_t Advice) {
    int64_t Factor = Advice;
    if (Factor > static_cast<int64_t>(MaxFactor)) {
      Loop->emitWarning() << "mlbridge-loop-unroll: unroll factor " << Advice
                          << " is above max-factor="
                          << static_cast<unsigned>(MaxFactor)
                          << "; unrolling by "
                          << static_cast<unsigned>(MaxFactor);
      Factor = MaxFactor;
    }
    // Never more copies than iterations: a factor equal to the trip count
    // unrolls the loop completely.
    if (F[TripCount] >= 0)
      Factor = std::min(Factor, F[TripCount]);
    if (Remarks)
      Loop->emitRemark() << "mlbridge-loop-unroll: factor "
                         << std::max<int64_t>(Factor, 1) << " (advice "
                         << Advice << ", trip count " << F[TripCount] << ")";
    if (Factor <= 1)
      return false;
    LogicalResult Done = failure();
    if (auto For = dyn_cast<affine::AffineForOp>(Loop))
      Done = affine::loopUnrollByFactor(For, Factor);
    else if (auto For = dyn_cast<scf::ForOp>(Loop))
      Done = mlir::loopUnrollByFactor(For, Factor);
    if (failed(Done))
      Loop->emitWarning() << "mlbridge-loop-unroll: MLIR cannot unroll this "
                             "loop by "
                          << Factor << "; left unchanged";
    return succeeded(Done);
  }

  void runOnOperation() override {
    func::FuncOp Func = getOperation();
    // Post-order: inner loops before the loops that contain them.
    SmallVector<Operation *> Loops;
    Func.walk([&](Operation *Op) {
      if (isCandidateLoop(Op))
        Loops.push_back(Op);
    });
    if (Loops.empty()) {
      markAllAnalysesPreserved();
      return;
    }
    // Every feature describes the input IR: computed before any unrolling.
    SmallVector<LoopFeatureValues> Features;
    for (Operation *Loop : Loops)
      Features.push_back(computeLoopFeatures(Loop));
    SmallVector<int64_t> Advice(Loops.size(), 1);
    if (failed(decide(Func, Loops, Features, Advice)))
      return signalPassFailure();
    bool Changed = false;
    // Unrolling a loop leaves the loops around it (and their pointers) as
    // they are; the copies it makes of inner loops are not visited again.
    for (size_t I = 0; I < Loops.size(); ++I)
      Changed |= apply(Loops[I], Features[I], Advice[I]);
    if (!Changed)
      markAllAnalysesPreserved();
  }

  Option<unsigned> MaxFactor{
      *this, "max-factor",
      llvm::cl::desc("Largest unroll factor applied; larger advice is "
                     "clamped with a warning (1..1024)"),
      llvm::cl::init(32)};
  Option<unsigned> HeuristicFactor{
      *this, "heuristic-factor",
      llvm::cl::desc("Built-in heuristic: the factor for small innermost "
                     "loops"),
      llvm::cl::init(4)};
  Option<unsigned> HeuristicMaxOps{
      *this, "heuristic-max-ops",
      llvm::cl::desc("Built-in heuristic: halve the factor while body_ops * "
                     "factor exceeds this"),
      llvm::cl::init(64)};
  Option<bool> Remarks{
      *this, "remarks",
      llvm::cl::desc("Emit a remark with the factor chosen for each loop"),
      llvm::cl::init(false)};
};

} // namespace

void registerLoopUnrollPass(std::shared_ptr<const RunnerProvider> Provider) {
  PassRegistration<LoopUnrollPass>(
      [Provider] { return std::make_unique<LoopUnrollPass>(Provider); });
}

} // namespace mlbridge::passes
