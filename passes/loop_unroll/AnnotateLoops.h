//===- AnnotateLoops.h - Loop features as attributes ------------*- C++ -*-===//
//
// Part of mlbridge. `mlbridge-annotate-loops` (on func.func) walks every
// affine.for and scf.for and attaches the features an ML loop-transformation
// model sees:
//   <prefix>.depth       : i64, 1 for an outermost loop
//   <prefix>.trip_count  : i64 when the trip count is a constant,
//                          the string "unknown" otherwise
//   <prefix>.body_ops    : i64, operations in the body (terminators excluded;
//                          nested ops included unless count-nested=false)
// Options (MLIR syntax): mlbridge-annotate-loops{attr-prefix=... max-depth=N
// count-nested=true|false}.
//
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_LOOP_UNROLL_ANNOTATELOOPS_H
#define MLBRIDGE_PASSES_LOOP_UNROLL_ANNOTATELOOPS_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlbridge::passes {

/// Creates the pass with its default options.
std::unique_ptr<mlir::Pass> createAnnotateLoopsPass();

/// Registers `mlbridge-annotate-loops` with MLIR's global pass registry.
void registerAnnotateLoopsPass();

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_LOOP_UNROLL_ANNOTATELOOPS_H
