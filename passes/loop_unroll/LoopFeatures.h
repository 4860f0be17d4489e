//===- LoopFeatures.h - What an ML loop model sees of a loop ----*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The features of one affine.for or scf.for loop, as int64 values. The
/// Python side (mlbridge.loop_unroll.features) computes the same values from
/// the same text; docs/mlir.md defines each one.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_LOOP_UNROLL_LOOPFEATURES_H
#define MLBRIDGE_PASSES_LOOP_UNROLL_LOOPFEATURES_H

#include "mlbridge/TensorSpec.h"

#include "mlir/IR/Operation.h"

#include <array>
#include <cstdint>
#include <vector>

namespace mlbridge::passes {

/// Feature indices; loopFeatureNames() gives their tensor names.
enum LoopFeature : unsigned {
  TripCount,      ///< constant trip count, -1 if not a constant
  Depth,          ///< loop nesting depth, 1 = outermost
  Step,           ///< constant step, -1 if not a constant
  ConstantBounds, ///< 1 if both bounds are constants
  BodyOps,        ///< ops in the body, nested included, terminators excluded
  ArithOps,       ///< arith and math dialect ops in the body (nested too)
  Loads,          ///< affine/memref/vector loads in the body (nested too)
  Stores,         ///< affine/memref/vector stores in the body (nested too)
  Calls,          ///< func.call and func.call_indirect in the body
  NestedLoops,    ///< affine.for/parallel, scf.for/while/parallel inside
  IterArgs,       ///< loop-carried values (iter_args)
  IsAffine,       ///< 1 for affine.for, 0 for scf.for
  NumLoopFeatures
};

using LoopFeatureValues = std::array<int64_t, NumLoopFeatures>;

/// The tensor name of each feature, in LoopFeature order.
const std::array<const char *, NumLoopFeatures> &loopFeatureNames();

/// One `int64 [1]` spec per feature, in LoopFeature order.
std::vector<TensorSpec> loopFeatureSpecs();

/// Whether \p Op is a loop the ML loop passes look at (affine.for, scf.for).
bool isCandidateLoop(mlir::Operation *Op);

/// The features of \p Loop (an affine.for or scf.for), as it stands now.
LoopFeatureValues computeLoopFeatures(mlir::Operation *Loop);

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_LOOP_UNROLL_LOOPFEATURES_H
