//===- AnnotateLoops.cpp - Loop features as attributes --------------------===//
//
// Part of mlbridge. See AnnotateLoops.h.
//
//===----------------------------------------------------------------------===//
#include "passes/loop_unroll/AnnotateLoops.h"

#include "mlir/Dialect/Affine/Analysis/LoopAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"

#include <optional>
#include <string>

using namespace mlir;

namespace mlbridge::passes {
namespace {

bool isAnnotatedLoop(Operation *Op) {
  return isa<affine::AffineForOp, scf::ForOp>(Op);
}

/// Number of enclosing affine.for / scf.for loops, the loop itself included,
/// stopping at the function.
int64_t loopDepth(Operation *Loop) {
  int64_t Depth = 0;
  for (Operation *Op = Loop; Op && !isa<func::FuncOp>(Op);
       Op = Op->getParentOp())
    if (isAnnotatedLoop(Op))
      ++Depth;
  return Depth;
}

std::optional<int64_t> constantTripCount(Operation *Loop) {
  if (auto For = dyn_cast<affine::AffineForOp>(Loop)) {
    if (std::optional<uint64_t> N = affine::getConstantTripCount(For))
      return static_cast<int64_t>(*N);
    return std::nullopt;
  }
  if (auto For = dyn_cast<scf::ForOp>(Loop)) {
    if (std::optional<llvm::APInt> N = For.getStaticTripCount())
      return N->getSExtValue();
    return std::nullopt;
  }
  return std::nullopt;
}

int64_t bodyOpCount(Operation *Loop, bool CountNested) {
  int64_t N = 0;
  for (Region &R : Loop->getRegions())
    for (Block &B : R)
      for (Operation &Op : B) {
        if (!Op.hasTrait<OpTrait::IsTerminator>())
          ++N;
        if (CountNested)
          Op.walk([&](Operation *Inner) {
            if (Inner != &Op && !Inner->hasTrait<OpTrait::IsTerminator>())
              ++N;
          });
      }
  return N;
}

struct AnnotateLoopsPass
    : public PassWrapper<AnnotateLoopsPass, OperationPass<func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(AnnotateLoopsPass)

  AnnotateLoopsPass() = default;
  AnnotateLoopsPass(const AnnotateLoopsPass &Other) : PassWrapper(Other) {}

  StringRef getArgument() const final { return "mlbridge-annotate-loops"; }
  StringRef getDescription() const final {
    return "Attach loop features (nesting depth, constant trip count, body "
           "op count) to affine.for and scf.for as <attr-prefix>.* attributes";
  }

  LogicalResult initialize(MLIRContext *Ctx) override {
    if (AttrPrefix.empty() ||
        StringRef(AttrPrefix).find_first_of(" \t\n\"") != StringRef::npos)
      return emitError(UnknownLoc::get(Ctx))
             << "mlbridge-annotate-loops: attr-prefix must be a non-empty "
                "name without spaces or quotes, got '"
             << AttrPrefix << "'";
    return success();
  }

  void runOnOperation() override {
    func::FuncOp Func = getOperation();
    Builder B(&getContext());
    std::string Prefix = AttrPrefix;
    Func.walk([&](Operation *Op) {
      if (!isAnnotatedLoop(Op))
        return;
      int64_t Depth = loopDepth(Op);
      if (MaxDepth != 0 && Depth > static_cast<int64_t>(MaxDepth))
        return;
      Op->setAttr(Prefix + ".depth", B.getI64IntegerAttr(Depth));
      if (std::optional<int64_t> N = constantTripCount(Op))
        Op->setAttr(Prefix + ".trip_count", B.getI64IntegerAttr(*N));
      else
        Op->setAttr(Prefix + ".trip_count", B.getStringAttr("unknown"));
      Op->setAttr(Prefix + ".body_ops",
                  B.getI64IntegerAttr(bodyOpCount(Op, CountNested)));
    });
    // Attributes only: every analysis stays valid.
    markAllAnalysesPreserved();
  }

  Option<std::string> AttrPrefix{
      *this, "attr-prefix",
      llvm::cl::desc("Prefix of the attributes attached to each loop"),
      llvm::cl::init("mlbridge")};
  Option<unsigned> MaxDepth{
      *this, "max-depth",
      llvm::cl::desc("Annotate loops up to this nesting depth (0: all)"),
      llvm::cl::init(0)};
  Option<bool> CountNested{
      *this, "count-nested",
      llvm::cl::desc("Count ops of nested regions in body_ops"),
      llvm::cl::init(true)};
};

} // namespace

std::unique_ptr<Pass> createAnnotateLoopsPass() {
  return std::make_unique<AnnotateLoopsPass>();
}

void registerAnnotateLoopsPass() { PassRegistration<AnnotateLoopsPass>(); }

} // namespace mlbridge::passes
