//===- LoopFeatures.cpp - What an ML loop model sees of a loop ------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/loop_unroll/LoopFeatures.h"

#include "mlir/Dialect/Affine/Analysis/LoopAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace mlbridge::passes {

const std::array<const char *, NumLoopFeatures> &loopFeatureNames() {
  static const std::array<const char *, NumLoopFeatures> Names = {
      "trip_count", "depth",        "step",      "constant_bounds",
      "body_ops",   "arith_ops",    "loads",     "stores",
      "calls",      "nested_loops", "iter_args", "is_affine"};
  return Names;
}

std::vector<TensorSpec> loopFeatureSpecs() {
  std::vector<TensorSpec> Specs;
  for (const char *Name : loopFeatureNames())
    Specs.push_back(createSpec<int64_t>(Name, {1}));
  return Specs;
}

bool isCandidateLoop(Operation *Op) {
  return isa<affine::AffineForOp, scf::ForOp>(Op);
}

namespace {

/// Ops are classified by name so that the Python side, which sees names
/// only, counts exactly the same ones.
enum class OpKind { Other, Arith, Load, Store, Call, Loop };

OpKind classify(Operation *Op) {
  StringRef Name = Op->getName().getStringRef();
  StringRef Dialect = Op->getName().getDialectNamespace();
  if (Dialect == "arith" || Dialect == "math")
    return OpKind::Arith;
  return llvm::StringSwitch<OpKind>(Name)
      .Cases(
          {"affine.load", "memref.load", "affine.vector_load", "vector.load"},
          OpKind::Load)
      .Cases({"affine.store", "memref.store", "affine.vector_store",
              "vector.store"},
             OpKind::Store)
      .Cases({"func.call", "func.call_indirect"}, OpKind::Call)
      .Cases({"affine.for", "affine.parallel", "scf.for", "scf.while",
              "scf.parallel"},
             OpKind::Loop)
      .Default(OpKind::Other);
}

int64_t loopDepth(Operation *Loop) {
  int64_t Depth = 0;
  for (Operation *Op = Loop; Op && !isa<func::FuncOp>(Op);
       Op = Op->getParentOp())
    if (isCandidateLoop(Op))
      ++Depth;
  return Depth;
}

int64_t orUnknown(std::optional<int64_t> V) { return V ? *V : -1; }

} // namespace

LoopFeatureValues computeLoopFeatures(Operation *Loop) {
  LoopFeatureValues F{};
  F[Depth] = loopDepth(Loop);
  if (auto For = dyn_cast<affine::AffineForOp>(Loop)) {
    std::optional<uint64_t> N = affine::getConstantTripCount(For);
    F[TripCount] = N ? static_cast<int64_t>(*N) : -1;
    F[Step] = For.getStepAsInt();
    F[ConstantBounds] = For.hasConstantBounds();
    F[IterArgs] = For.getNumIterOperands();
    F[IsAffine] = 1;
  } else if (auto For = dyn_cast<scf::ForOp>(Loop)) {
    std::optional<llvm::APInt> N = For.getStaticTripCount();
    F[TripCount] = N ? N->getSExtValue() : -1;
    F[Step] = orUnknown(getConstantIntValue(For.getStep()));
    F[ConstantBounds] = getConstantIntValue(For.getLowerBound()) &&
                        getConstantIntValue(For.getUpperBound());
    F[IterArgs] = For.getInitArgs().size();
    F[IsAffine] = 0;
  }
  for (Region &R : Loop->getRegions())
    R.walk([&](Operation *Op) {
      if (Op->hasTrait<OpTrait::IsTerminator>())
        return;
      ++F[BodyOps];
      switch (classify(Op)) {
      case OpKind::Arith:
        ++F[ArithOps];
        break;
      case OpKind::Load:
        ++F[Loads];
        break;
      case OpKind::Store:
        ++F[Stores];
        break;
      case OpKind::Call:
        ++F[Calls];
        break;
      case OpKind::Loop:
        ++F[NestedLoops];
        break;
      case OpKind::Other:
        break;
      }
    });
  return F;
}

} // namespace mlbridge::passes
