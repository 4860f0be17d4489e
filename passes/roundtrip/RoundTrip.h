//===- RoundTrip.h - The round-trip experiment shared by the hosts -*- C++
//-*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The round-trip experiment of the ML-Compiler-Bridge paper as the compiler
/// passes run it (`mlbridge-roundtrip` in opt and in mlir-opt): `Queries`
/// times, fill the float feature `input` of `Length` values, ask the runner
/// for the float `output`, and check it. The model is one fully-connected
/// layer, `output = w . input + b`, with the weights, bias and inputs of
/// mlbridge.bench.roundtrip_model (`roundtrip_weights`, `roundtrip_bias`,
/// `roundtrip_inputs`), so a Python, ONNX or TF AOT model of the same layer
/// answers exactly what the check expects. The in-process callback model of a
/// pass may instead be the plain sum of the inputs (the MLIR pass's floor).
///
/// Header-only: the LLVM and the MLIR pass libraries both include it; it
/// knows the runner API only, nothing of either IR.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_ROUNDTRIP_ROUNDTRIP_H
#define MLBRIDGE_PASSES_ROUNDTRIP_ROUNDTRIP_H

#include "mlbridge/MLModelRunner.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace mlbridge::passes::roundtrip {

/// The names of the experiment's tensors (as mlir_roundtrip.py and
/// mlbridge.bench.roundtrip_model.RoundTripModel expect).
inline constexpr llvm::StringLiteral InputName = "input";
inline constexpr llvm::StringLiteral OutputName = "output";

/// Element \p Index of query \p Query's input:
/// ((Query * 7 + Index * 13) mod 101) / 101 - 0.5, computed in float.
inline float input(int64_t Query, int64_t Index) {
  return static_cast<float>((Query * 7 + Index * 13) % 101) / 101.0f - 0.5f;
}

/// Weight \p Index of the layer: ((31 * Index) mod 17 - 8) / 8 (exact).
inline float weight(int64_t Index) {
  return static_cast<float>((31 * Index) % 17 - 8) / 8.0f;
}

/// The layer's bias.
inline constexpr float Bias = 0.5f;

/// What the model is expected to answer.
enum class Expect {
  /// Nothing is checked (answers are only recorded).
  None,
  /// The fully-connected layer, w . input + b.
  Dense,
  /// The sum of the inputs (the MLIR pass's in-process callback model).
  Sum,
};

/// Parses "none", "dense" or "sum".
inline std::optional<Expect> parseExpect(llvm::StringRef Name) {
  if (Name == "none")
    return Expect::None;
  if (Name == "dense")
    return Expect::Dense;
  if (Name == "sum")
    return Expect::Sum;
  return std::nullopt;
}

/// The exact answer (in double) to \p X under \p E, and the sum of the
/// magnitudes of its terms, which scales the tolerance of the check.
struct Exact {
  double Value = 0;
  double Magnitude = 0;
};

inline Exact exactAnswer(Expect E, llvm::ArrayRef<float> X) {
  Exact R;
  if (E == Expect::Dense)
    R.Value = Bias;
  for (size_t I = 0; I < X.size(); ++I) {
    double P = static_cast<double>(X[I]);
    if (E == Expect::Dense)
      P *= static_cast<double>(weight(static_cast<int64_t>(I)));
    R.Value += P;
    R.Magnitude += std::fabs(P);
  }
  return R;
}

/// Whether \p Answer is \p Want up to float32 rounding: the model sums in
/// float32 in its own order (numpy, ONNX Runtime, XLA), which is far below
/// a missing bias or a wrong element.
inline bool closeEnough(float Answer, const Exact &Want) {
  double Tolerance = 1e-5 * Want.Magnitude + 1e-4;
  return std::fabs(static_cast<double>(Answer) - Want.Value) <= Tolerance;
}

/// The in-process models of the experiment, for a callback runner.
inline CallbackModelRunner::Callback callbackModel(Expect E) {
  return [E](llvm::ArrayRef<TensorRef> F) -> llvm::Expected<TensorValue> {
    llvm::ArrayRef<float> X = F[0].data<float>();
    if (E == Expect::Sum)
      return TensorValue::scalar<float>(
          OutputName, std::accumulate(X.begin(), X.end(), 0.0f));
    float Y = Bias;
    for (size_t I = 0; I < X.size(); ++I)
      Y += X[I] * weight(static_cast<int64_t>(I));
    return TensorValue::scalar<float>(OutputName, Y);
  };
}

/// What one run of the experiment gives.
struct Result {
  /// The model's answer to each query, in order.
  std::vector<float> Answers;
  /// Wall time of each query (fill, evaluate), in seconds. The first
  /// includes connecting to an inter-process model.
  std::vector<double> Seconds;
  /// Answers checked, and how many were wrong (Expect::None checks none).
  unsigned Checked = 0;
  unsigned Mismatches = 0;
  /// The first wrong answer, described; empty if none.
  std::string FirstMismatch;
};

/// Runs the experiment on \p R, whose only feature is the float `input` of
/// \p Length values. The feature buffer is filled in place (MLGO contract:
/// the runner's buffers are stable). A failed evaluation is an error naming
/// the query; wrong answers are counted in the result, not an error, so the
/// caller can report all of them.
inline llvm::Expected<Result> run(MLModelRunner &R, unsigned Length,
                                  unsigned Queries, Expect E) {
  using Clock = std::chrono::steady_clock;
  Result Out;
  Out.Answers.reserve(Queries);
  Out.Seconds.reserve(Queries);
  float *In = R.getTensor<float>(0);
  for (unsigned Q = 0; Q < Queries; ++Q) {
    Clock::time_point T0 = Clock::now();
    for (unsigned I = 0; I < Length; ++I)
      In[I] = input(Q, I);
    llvm::Expected<float> A = R.evaluate<float>();
    Clock::time_point T1 = Clock::now();
    if (!A)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("no answer to query {0} of {1}: {2}", Q, Queries,
                        llvm::toString(A.takeError())));
    Out.Answers.push_back(*A);
    Out.Seconds.push_back(std::chrono::duration<double>(T1 - T0).count());
    if (E == Expect::None)
      continue;
    Exact Want = exactAnswer(E, llvm::ArrayRef<float>(In, Length));
    ++Out.Checked;
    if (!closeEnough(*A, Want) && Out.Mismatches++ == 0)
      Out.FirstMismatch =
          llvm::formatv("query {0} (L={1}): the model answered {2:e9}, "
                        "expected {3:e9}",
                        Q, Length, *A, Want.Value)
              .str();
  }
  return Out;
}

} // namespace mlbridge::passes::roundtrip

#endif // MLBRIDGE_PASSES_ROUNDTRIP_ROUNDTRIP_H
