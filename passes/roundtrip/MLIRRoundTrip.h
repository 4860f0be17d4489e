//===- MLIRRoundTrip.h - The MLIR round-trip experiment ---------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// `mlbridge-roundtrip` (on builtin.module), the round-trip experiment of
/// bench/mlir_roundtrip.py: `queries` times, fills the float feature `input`
/// of `length` values, asks the model runner for the float `output`, and
/// records the answers as the module attribute `mlbridge.roundtrip_answers`
/// (array<f32: ...>) so that the caller can check every one, and each
/// query's wall time in seconds as `mlbridge.roundtrip_seconds`
/// (array<f64: ...>). The input, the layer and the query loop are
/// passes/roundtrip/RoundTrip.h, shared with the opt pass.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_ROUNDTRIP_MLIRROUNDTRIP_H
#define MLBRIDGE_PASSES_ROUNDTRIP_MLIRROUNDTRIP_H

#include "passes/support/ModelGuidedPass.h"

#include <cstdint>
#include <memory>

namespace mlbridge::passes {

/// Element \p Index of query \p Query's input:
/// ((Query * 7 + Index * 13) mod 101) / 101 - 0.5 (as float).
float roundTripInput(int64_t Query, int64_t Index);

/// Registers `mlbridge-roundtrip`, whose runners come from \p Provider.
void registerRoundTripPass(std::shared_ptr<const RunnerProvider> Provider);

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_ROUNDTRIP_MLIRROUNDTRIP_H
