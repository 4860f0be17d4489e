//===- ShortestFloat.h - Shortest round-trip digits of a float -*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The shortest decimal that reads back as a given binary32 (and, of those,
/// the closest, ties to even): Schubfach (R. Giulietti, "The Schubfach way to
/// render doubles", 2020), binary32 case. It gives the same digits as
/// std::to_chars(float) and orjson (Ryu), in a fraction of the time: the
/// JSON SerDes writes floats with it. JSONFormatTest compares it with
/// std::to_chars.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_SERDES_SHORTESTFLOAT_H
#define MLBRIDGE_SERDES_SHORTESTFLOAT_H

#include "llvm/Support/Compiler.h"

#include <cstdint>

namespace mlbridge {
namespace shortest {

/// A positive decimal Digits * 10^Exponent; Digits has no trailing zero.
struct Decimal32 {
  uint32_t Digits;
  int Exponent;
};

/// g(k) = floor(10^k * 2^(63 - floor(log2(10^k)))) + 1 for k in [-31, 45],
/// generated with exact rational arithmetic (Python's fractions).
inline constexpr int MinPow10 = -31;
inline constexpr uint64_t Pow10Table[] = {
    0x81CEB32C4B43FCF5, 0xA2425FF75E14FC32, 0xCAD2F7F5359A3B3F,
    0xFD87B5F28300CA0E, 0x9E74D1B791E07E49, 0xC612062576589DDB,
    0xF79687AED3EEC552, 0x9ABE14CD44753B53, 0xC16D9A0095928A28,
    0xF1C90080BAF72CB2, 0x971DA05074DA7BEF, 0xBCE5086492111AEB,
    0xEC1E4A7DB69561A6, 0x9392EE8E921D5D08, 0xB877AA3236A4B44A,
    0xE69594BEC44DE15C, 0x901D7CF73AB0ACDA, 0xB424DC35095CD810,
    0xE12E13424BB40E14, 0x8CBCCC096F5088CC, 0xAFEBFF0BCB24AAFF,
    0xDBE6FECEBDEDD5BF, 0x89705F4136B4A598, 0xABCC77118461CEFD,
    0xD6BF94D5E57A42BD, 0x8637BD05AF6C69B6, 0xA7C5AC471B478424,
    0xD1B71758E219652C, 0x83126E978D4FDF3C, 0xA3D70A3D70A3D70B,
    0xCCCCCCCCCCCCCCCD, 0x8000000000000001, 0xA000000000000001,
    0xC800000000000001, 0xFA00000000000001, 0x9C40000000000001,
    0xC350000000000001, 0xF424000000000001, 0x9896800000000001,
    0xBEBC200000000001, 0xEE6B280000000001, 0x9502F90000000001,
    0xBA43B74000000001, 0xE8D4A51000000001, 0x9184E72A00000001,
    0xB5E620F480000001, 0xE35FA931A0000001, 0x8E1BC9BF04000001,
    0xB1A2BC2EC5000001, 0xDE0B6B3A76400001, 0x8AC7230489E80001,
    0xAD78EBC5AC620001, 0xD8D726B7177A8001, 0x878678326EAC9001,
    0xA968163F0A57B401, 0xD3C21BCECCEDA101, 0x84595161401484A1,
    0xA56FA5B99019A5C9, 0xCECB8F27F4200F3B, 0x813F3978F8940985,
    0xA18F07D736B90BE6, 0xC9F2C9CD04674EDF, 0xFC6F7C4045812297,
    0x9DC5ADA82B70B59E, 0xC5371912364CE306, 0xF684DF56C3E01BC7,
    0x9A130B963A6C115D, 0xC097CE7BC90715B4, 0xF0BDC21ABB48DB21,
    0x96769950B50D88F5, 0xBC143FA4E250EB32, 0xEB194F8E1AE525FE,
    0x92EFD1B8D0CF37BF, 0xB7ABC627050305AE, 0xE596B7B0C643C71A,
    0x8F7E32CE7BEA5C70, 0xB35DBF821AE4F38C,
};

// floor(log2(10^E)), floor(log10(2^E)), floor(log10(3/4 * 2^E)) for the
// exponents of binary32 (the paper's integer approximations; the right shifts
// of negative values are arithmetic, i.e. floor).
inline int floorLog2Pow10(int E) { return (E * 1741647) >> 19; }
inline int floorLog10Pow2(int E) { return (E * 1262611) >> 22; }
inline int floorLog10ThreeQuartersPow2(int E) {
  return (E * 1262611 - 524031) >> 22;
}

/// The top 32 bits of G * CP (a 96-bit product), rounded to odd.
inline uint32_t roundToOdd(uint64_t G, uint32_t CP) {
  uint64_t Low = (G & 0xffffffffu) * CP;
  uint64_t High = (G >> 32) * CP + (Low >> 32);
  return static_cast<uint32_t>(High >> 32) |
         (static_cast<uint32_t>(High) > 1 ? 1u : 0u);
}

/// The shortest decimal of the positive, finite, non-zero binary32 whose bits
/// are \p Bits (sign bit clear). Always inlined: in the JSON writer's loop
/// over a tensor's elements that is about 15% faster per element.
LLVM_ATTRIBUTE_ALWAYS_INLINE Decimal32 toDecimal(uint32_t Bits) {
  uint32_t Mantissa = Bits & ((1u << 23) - 1);
  uint32_t BiasedExp = Bits >> 23;
  uint32_t C;
  int Q;
  if (BiasedExp != 0) {
    C = Mantissa | (1u << 23);
    Q = static_cast<int>(BiasedExp) - 150;
  } else {
    C = Mantissa;
    Q = -149;
  }
  Decimal32 D;
  if (Q <= 0 && Q > -24 && (C & ((1u << -Q) - 1)) == 0) {
    // An integer below 2^24: its own digits are the shortest.
    D = {C >> -Q, 0};
  } else {
    bool IsEven = C % 2 == 0;
    bool LowerCloser = Mantissa == 0 && BiasedExp > 1;
    uint32_t CBL = 4 * C - 2 + (LowerCloser ? 1 : 0);
    uint32_t CB = 4 * C;
    uint32_t CBR = 4 * C + 2;
    int K = LowerCloser ? floorLog10ThreeQuartersPow2(Q) : floorLog10Pow2(Q);
    int H = Q + floorLog2Pow10(-K) + 1;
    uint64_t G = Pow10Table[-K - MinPow10];
    uint32_t VBL = roundToOdd(G, CBL << H);
    uint32_t VB = roundToOdd(G, CB << H);
    uint32_t VBR = roundToOdd(G, CBR << H);
    uint32_t Lower = VBL + (IsEven ? 0 : 1);
    uint32_t Upper = VBR - (IsEven ? 0 : 1);
    uint32_t S = VB / 4;
    bool Done = false;
    if (S >= 10) {
      uint32_t SP = S / 10;
      bool UpInside = Lower <= 40 * SP;
      bool WpInside = 40 * SP + 40 <= Upper;
      if (UpInside != WpInside) {
        D = {SP + (WpInside ? 1 : 0), K + 1};
        Done = true;
      }
    }
    if (!Done) {
      bool UInside = Lower <= 4 * S;
      bool WInside = 4 * S + 4 <= Upper;
      if (UInside != WInside) {
        D = {S + (WInside ? 1 : 0), K};
      } else {
        uint32_t Mid = 4 * S + 2;
        bool RoundUp = VB > Mid || (VB == Mid && (S & 1) != 0);
        D = {S + (RoundUp ? 1 : 0), K};
      }
    }
  }
  while (D.Digits % 10 == 0) {
    D.Digits /= 10;
    ++D.Exponent;
  }
  return D;
}

} // namespace shortest
} // namespace mlbridge

#endif // MLBRIDGE_SERDES_SHORTESTFLOAT_H
