//===- LoopUnroll.h - ML-guided loop unrolling for MLIR ---------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// `mlbridge-loop-unroll` (on func.func): for every affine.for and scf.for,
/// innermost first, computes the loop's features (LoopFeatures.h), asks the
/// model runner for an `int64 [1]` unroll factor `unroll_factor`, and unrolls
/// with MLIR's own utilities (affine::loopUnrollByFactor,
/// mlir::loopUnrollByFactor), which add a cleanup/epilogue loop when the
/// factor does not divide the trip count or the trip count is unknown.
/// All features of a function are computed before any loop changes, so they
/// describe the input IR. docs/mlir.md documents features and options.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_LOOP_UNROLL_LOOPUNROLL_H
#define MLBRIDGE_PASSES_LOOP_UNROLL_LOOPUNROLL_H

#include "passes/support/ModelGuidedPass.h"

#include <memory>

namespace mlbridge::passes {

/// The largest unroll factor `max-factor` accepts.
constexpr unsigned MaxUnrollFactorLimit = 1024;

/// The built-in heuristic (also the callback runner's policy): loops with
/// nested loops or fewer than two iterations get 1; otherwise \p Factor,
/// halved while body_ops * factor exceeds \p MaxUnrolledOps, and at most the
/// constant trip count.
int64_t builtinUnrollFactor(llvm::ArrayRef<int64_t> Features, unsigned Factor,
                            unsigned MaxUnrolledOps);

/// Registers `mlbridge-loop-unroll`, whose runners come from \p Provider.
void registerLoopUnrollPass(std::shared_ptr<const RunnerProvider> Provider);

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_LOOP_UNROLL_LOOPUNROLL_H
