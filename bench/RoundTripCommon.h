//===- RoundTripCommon.h - What every round-trip benchmark host shares ----===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The round-trip experiment of the ML-Compiler-Bridge paper: a float vector
/// of length L goes to a one-layer model (dot(x, w[:L]) + Bias) and one float
/// comes back. The inputs, weights and the check of each answer are the same
/// in every host (bench/RoundTrip.cpp over pipes and gRPC,
/// bench/InProcessRoundTrip.cpp over ONNX Runtime and TF AOT); the Python
/// sides compute the same weights (bench/roundtrip.py: weights()).
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_BENCH_ROUNDTRIPCOMMON_H
#define MLBRIDGE_BENCH_ROUNDTRIPCOMMON_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace mlbridge::bench {

inline constexpr float Bias = 0.25f;

/// The weight of element \p I: a hash of the index mapped to [-1, 1), exactly
/// representable (24-bit numerator).
inline float weight(uint32_t I) {
  uint32_t H = I * 2654435761u + 12345u;
  return static_cast<float>(H >> 8) / 16777216.0f * 2.0f - 1.0f;
}

/// Input element \p I of query \p Q, in [-1, 1).
inline float input(uint32_t Q, uint32_t I) {
  uint32_t H = (I + 0x9e3779b9u * (Q + 1)) * 2246822519u + 3266489917u;
  H ^= H >> 15;
  return static_cast<float>(H >> 8) / 16777216.0f * 2.0f - 1.0f;
}

/// The first \p N weights.
inline std::vector<float> weights(uint32_t N) {
  std::vector<float> W(N);
  for (uint32_t I = 0; I < N; ++I)
    W[I] = weight(I);
  return W;
}

/// One input per size, query Q of size Sizes[Q], made before timing starts.
inline std::vector<std::vector<float>>
makeInputs(llvm::ArrayRef<uint32_t> Sizes) {
  std::vector<std::vector<float>> Inputs;
  Inputs.reserve(Sizes.size());
  for (size_t Q = 0; Q < Sizes.size(); ++Q) {
    std::vector<float> X(Sizes[Q]);
    for (uint32_t I = 0; I < Sizes[Q]; ++I)
      X[I] = input(static_cast<uint32_t>(Q), I);
    Inputs.push_back(std::move(X));
  }
  return Inputs;
}

/// Checks answers against the exact layer, in double precision.
class AnswerChecker {
public:
  explicit AnswerChecker(uint32_t MaxLength) : W(weights(MaxLength)) {}

  /// Records whether \p Y answers \p X; the first mismatch is kept.
  void check(llvm::ArrayRef<float> X, float Y) {
    double Exact = Bias, Magnitude = 0;
    for (size_t I = 0; I < X.size(); ++I) {
      double P = static_cast<double>(X[I]) * static_cast<double>(W[I]);
      Exact += P;
      Magnitude += std::fabs(P);
    }
    // The model sums in float32 in its own order: allow its rounding (far
    // below a missing bias or a wrong element).
    double Tolerance = 1e-5 * Magnitude + 1e-4;
    ++Checked;
    if (!(std::fabs(static_cast<double>(Y) - Exact) <= Tolerance) &&
        Mismatches++ == 0)
      FirstMismatch = llvm::formatv("L={0}: model said {1:e9}, expected {2:e9}",
                                    X.size(), Y, Exact)
                          .str();
  }

  uint64_t checked() const { return Checked; }
  uint64_t mismatches() const { return Mismatches; }
  const std::string &firstMismatch() const { return FirstMismatch; }

private:
  std::vector<float> W;
  uint64_t Checked = 0, Mismatches = 0;
  std::string FirstMismatch;
};

/// Resident set size in KiB (from /proc/self/statm).
inline long rssKiB() {
  FILE *F = std::fopen("/proc/self/statm", "r");
  if (!F)
    return -1;
  long Size = 0, Resident = 0;
  int N = std::fscanf(F, "%ld %ld", &Size, &Resident);
  std::fclose(F);
  if (N != 2)
    return -1;
  return Resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/// User + system CPU time of this process so far, seconds.
inline double cpuSeconds() {
  struct rusage U;
  getrusage(RUSAGE_SELF, &U);
  return U.ru_utime.tv_sec + U.ru_stime.tv_sec +
         (U.ru_utime.tv_usec + U.ru_stime.tv_usec) / 1e6;
}

/// Peak resident set size of this program in KiB: VmHWM from
/// /proc/self/status. Not getrusage()'s ru_maxrss, which Linux carries over
/// exec from the process that forked us (the driver's peak, not ours).
inline long peakRssKiB() {
  FILE *F = std::fopen("/proc/self/status", "r");
  if (!F)
    return -1;
  char Line[256];
  long Peak = -1;
  while (std::fgets(Line, sizeof(Line), F))
    if (std::sscanf(Line, "VmHWM: %ld kB", &Peak) == 1)
      break;
  std::fclose(F);
  return Peak;
}

} // namespace mlbridge::bench

#endif // MLBRIDGE_BENCH_ROUNDTRIPCOMMON_H
