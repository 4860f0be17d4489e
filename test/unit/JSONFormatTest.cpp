//===- JSONFormatTest.cpp - Number layout of the JSON SerDes --------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/SerDes/JSON.h"

#include <charconv>
#include <cstring>
#include <limits>

using namespace mlbridge;
using namespace mlbridge::test;

namespace {

std::string formatDouble(double V) {
  std::string S;
  writeJSONDouble(V, S);
  return S;
}

std::string formatFloat(float V) {
  std::string S;
  writeJSONFloat(V, S);
  return S;
}

/// The significant digits (no leading or trailing zeros) and the exponent of
/// the decimal that a number literal denotes: "-0.0125" -> ("125", -4).
std::pair<std::string, int> normalizeDecimal(llvm::StringRef Text) {
  Text.consume_front("-");
  auto [Mantissa, ExpText] = Text.lower().find('e') == std::string::npos
                                 ? std::pair(Text, llvm::StringRef())
                                 : Text.split(Text.contains('e') ? 'e' : 'E');
  int Exp = 0;
  if (!ExpText.empty()) {
    ExpText.consume_front("+");
    EXPECT_FALSE(ExpText.getAsInteger(10, Exp)) << Text.str();
  }
  auto [Int, Frac] = Mantissa.split('.');
  std::string Digits = (Int + Frac).str();
  Exp -= static_cast<int>(Frac.size());
  size_t First = Digits.find_first_not_of('0');
  if (First == std::string::npos)
    return {"0", 0};
  Digits.erase(0, First);
  while (Digits.back() == '0') {
    Digits.pop_back();
    ++Exp;
  }
  return {Digits, Exp};
}

// The float writer has its own shortest-digits algorithm (Schubfach): over a
// sweep of every exponent, mantissa boundaries and subnormals, its digits are
// std::to_chars's shortest ones and read back to the same bits.
TEST(JSONFormatTest, FloatDigitsAreToCharsShortest) {
  std::vector<uint32_t> Bits;
  for (uint64_t B = 1; B < 0x7f800000u; B += 40009)
    Bits.push_back(static_cast<uint32_t>(B));
  for (uint32_t E = 0; E < 255; ++E)
    for (uint32_t M : {0u, 1u, 2u, 0x400000u, 0x7ffffeu, 0x7fffffu})
      Bits.push_back(E << 23 | M);
  for (uint32_t B = 1; B < 2000; ++B)
    Bits.push_back(B);
  size_t Checked = 0;
  for (uint32_t B : Bits) {
    for (uint32_t Sign : {0u, 0x80000000u}) {
      float F;
      uint32_t U = B | Sign;
      std::memcpy(&F, &U, 4);
      if (F == 0.0f)
        continue;
      std::string Ours = formatFloat(F);
      char Buf[64];
      // Scientific: plain to_chars prints big integers with all their digits.
      char *End = std::to_chars(Buf, Buf + sizeof(Buf), F,
                                std::chars_format::scientific)
                      .ptr;
      ASSERT_EQ(normalizeDecimal(Ours),
                normalizeDecimal(llvm::StringRef(Buf, End - Buf)))
          << "bits " << U << ": " << Ours << " vs " << std::string(Buf, End);
      float Back = 0;
      std::from_chars_result R =
          std::from_chars(Ours.data(), Ours.data() + Ours.size(), Back);
      ASSERT_EQ(R.ptr, Ours.data() + Ours.size()) << Ours;
      uint32_t BackBits;
      std::memcpy(&BackBits, &Back, 4);
      ASSERT_EQ(BackBits, U) << Ours;
      ++Checked;
    }
  }
  EXPECT_GT(Checked, 100000u);
}

TEST(JSONFormatTest, DoubleTable) {
  constexpr double Inf = std::numeric_limits<double>::infinity();
  const std::pair<double, const char *> Table[] = {
      {2.0, "2.0"},
      {0.1, "0.1"},
      {12.5, "12.5"},
      {-3.0, "-3.0"},
      {1e-5, "0.00001"},
      {0.0000125, "0.0000125"},
      {1e-6, "1e-6"},
      {1.25e-7, "1.25e-7"},
      {1e15, "1000000000000000.0"},
      {1e16, "1e+16"},
      {123456789.125, "123456789.125"},
      {1.2499999999999999e-6, "1.2499999999999999e-6"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {std::numeric_limits<double>::quiet_NaN(), "\"NaN\""},
      {Inf, "\"Infinity\""},
      {-Inf, "\"-Infinity\""},
  };
  for (const auto &[Value, Expected] : Table)
    EXPECT_EQ(formatDouble(Value), Expected) << "double " << Expected;
}

TEST(JSONFormatTest, FloatTableUsesFloatsOwnShortestDigits) {
  const std::pair<float, const char *> Table[] = {
      {2.0f, "2.0"},
      {0.1f, "0.1"},
      {1e-5f, "0.00001"},
      {1e-6f, "0.000001"},
      {1e-7f, "1e-7"},
      {1e12f, "1000000000000.0"},
      {1e13f, "1e+13"},
      {3.4028235e+38f, "3.4028235e+38"},
      {1e-45f, "1e-45"},
      {16777216.0f, "16777216.0"},
      {-0.0f, "-0.0"},
      {std::numeric_limits<float>::quiet_NaN(), "\"NaN\""},
      {std::numeric_limits<float>::infinity(), "\"Infinity\""},
  };
  for (const auto &[Value, Expected] : Table)
    EXPECT_EQ(formatFloat(Value), Expected) << "float " << Expected;
}

TEST(JSONFormatTest, MessageLayoutIsCanonical) {
  std::unique_ptr<SerDes> S = makeSerDes(SerDesKind::JSON);
  TensorValue F = TensorValue::fromVector<float>("f", {0.1f, 2.0f});
  TensorValue U = TensorValue::scalar<uint64_t>("u", UINT64_MAX);
  TensorValue I = TensorValue::scalar<int64_t>("i", INT64_MIN);
  TensorValue B = TensorValue::fromVector<bool>("b", {true, false});
  MLB_ASSERT_VALUE(
      Str, TensorValue::fromStrings("s", {}, {"\"\\\x01\x7f\xc3\xa9/"}));
  std::vector<TensorRef> Refs = {F.ref(), U.ref(), I.ref(), B.ref(), Str.ref()};
  std::string Out;
  MLB_ASSERT_OK(S->encodeMessage(MessageKind::Advice, 4, Refs, Out));
  EXPECT_EQ(Out,
            "{\"advice\":4,\"tensors\":["
            "{\"name\":\"f\",\"type\":\"float\",\"shape\":[2],\"data\":[0.1,"
            "2.0]},"
            "{\"name\":\"u\",\"type\":\"uint64_t\",\"shape\":[1],\"data\":"
            "[18446744073709551615]},"
            "{\"name\":\"i\",\"type\":\"int64_t\",\"shape\":[1],\"data\":"
            "[-9223372036854775808]},"
            "{\"name\":\"b\",\"type\":\"bool\",\"shape\":[2],\"data\":[true,"
            "false]},"
            "{\"name\":\"s\",\"type\":\"string\",\"shape\":[],\"data\":"
            "[\"\\\"\\\\\\u0001\x7f\xc3\xa9/\"]}]}\n");
}

TEST(JSONFormatTest, UInt64MaxIsExactBothWays) {
  std::unique_ptr<SerDes> S = makeSerDes(SerDesKind::JSON);
  TensorValue U =
      TensorValue::fromVector<uint64_t>("u", {UINT64_MAX, UINT64_MAX - 1});
  std::vector<TensorRef> Refs = {U.ref()};
  std::string Out;
  MLB_ASSERT_OK(S->encodeMessage(MessageKind::Observation, 0, Refs, Out));
  EXPECT_NE(Out.find("[18446744073709551615,18446744073709551614]"),
            std::string::npos);
  MLB_ASSERT_VALUE(R, decodeBytes(SerDesKind::JSON, Out));
  EXPECT_EQ(std::get<Message>(R[0]).Tensors[0], U);
}

TEST(JSONFormatTest, ControlCharactersUseTheDocsEscapes) {
  std::string Out;
  writeJSONString(std::string("\b\t\n\f\r\x00\x1f", 7), Out);
  EXPECT_EQ(Out, "\"\\b\\t\\n\\f\\r\\u0000\\u001f\"");
}

} // namespace
