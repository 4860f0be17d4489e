//===- SerDesTest.cpp - Round trips of every SerDes -----------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/SerDes/Bitstream.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlbridge;
using namespace mlbridge::test;
using llvm::ArrayRef;

namespace {

/// Deterministic element values that include each type's extremes.
TensorValue makeTensor(llvm::StringRef Name, ElementType Type,
                       ArrayRef<int64_t> Shape) {
  TensorValue V = llvm::cantFail(TensorValue::create(Name, Type, Shape));
  size_t N = V.getElementCount();
  auto Fill = [&](auto Values) {
    using T = typename decltype(Values)::value_type;
    llvm::MutableArrayRef<T> D = V.mutableData<T>();
    for (size_t I = 0; I < N; ++I)
      D[I] = Values[I % Values.size()];
  };
  switch (Type) {
  case ElementType::Int8:
    Fill(std::vector<int8_t>{-128, 127, 0, -1, 5});
    break;
  case ElementType::UInt8:
    Fill(std::vector<uint8_t>{255, 0, 10});
    break;
  case ElementType::Int16:
    Fill(std::vector<int16_t>{-32768, 32767, 0, -7});
    break;
  case ElementType::UInt16:
    Fill(std::vector<uint16_t>{65535, 0, 300});
    break;
  case ElementType::Int32:
    Fill(std::vector<int32_t>{INT32_MIN, INT32_MAX, 0, -42});
    break;
  case ElementType::UInt32:
    Fill(std::vector<uint32_t>{UINT32_MAX, 0, 123456});
    break;
  case ElementType::Int64:
    Fill(std::vector<int64_t>{INT64_MIN, INT64_MAX, 0, -1});
    break;
  case ElementType::UInt64:
    Fill(std::vector<uint64_t>{UINT64_MAX, 0, uint64_t(1) << 63});
    break;
  case ElementType::Float:
    Fill(std::vector<float>{0.1f, -0.0f, 3.4028235e38f, 1e-45f,
                            std::numeric_limits<float>::infinity(), 2.0f,
                            std::numeric_limits<float>::quiet_NaN(), 1e-6f});
    break;
  case ElementType::Double:
    Fill(std::vector<double>{0.1, -0.0, 1.7976931348623157e308, 5e-324,
                             -std::numeric_limits<double>::infinity(), 1e16,
                             std::numeric_limits<double>::quiet_NaN(),
                             1.2499999999999999e-6});
    break;
  case ElementType::Bool:
    Fill(std::vector<bool>{true, false, false});
    break;
  case ElementType::String:
    Fill(std::vector<std::string>{"", "inline", std::string("a\0b\n\"\\", 6),
                                  "h\xc3\xa9llo \xe2\x82\xac",
                                  "\x01\x1f\x7f/"});
    break;
  }
  return V;
}

/// A stream with one feature of \p Type and \p Shape (declared with
/// \p SpecShape), an advice, an outcome and all record kinds.
std::vector<Record> makeStream(ElementType Type, ArrayRef<int64_t> Shape,
                               ArrayRef<int64_t> SpecShape) {
  Header H;
  H.Features.push_back(
      llvm::cantFail(TensorSpec::create("feature", Type, SpecShape)));
  H.Features.push_back(createSpec<int32_t>("other", {2}));
  H.Advice = createSpec<int64_t>("advice", {1});
  H.Score = createSpec<float>("reward", {1});
  std::vector<Record> Records;
  Records.push_back(H);
  Records.push_back(Context{"main"});
  for (int64_t Id = 0; Id < 2; ++Id) {
    Message M;
    M.Id = Id;
    M.Tensors.push_back(makeTensor("feature", Type, Shape));
    M.Tensors.push_back(TensorValue::fromVector<int32_t>("other", {7, -7}));
    Records.push_back(std::move(M));
    Message A;
    A.Kind = MessageKind::Advice;
    A.Id = Id;
    A.Tensors.push_back(TensorValue::scalar<int64_t>("advice", Id + 1));
    Records.push_back(std::move(A));
  }
  Message O;
  O.Kind = MessageKind::Outcome;
  O.Id = 1;
  O.Tensors.push_back(TensorValue::scalar<float>("reward", 0.5f));
  Records.push_back(std::move(O));
  Records.push_back(End{});
  return Records;
}

class SerDesRoundTrip : public testing::TestWithParam<SerDesKind> {};

void expectRoundTrip(SerDesKind Kind, const std::vector<Record> &Records) {
  MLB_ASSERT_VALUE(Bytes, encodeAll(Kind, Records));
  MLB_ASSERT_VALUE(Back, decodeBytes(Kind, Bytes));
  ASSERT_EQ(Back.size(), Records.size());
  for (size_t I = 0; I < Records.size(); ++I)
    EXPECT_TRUE(Back[I] == Records[I]) << "record " << I;
  // Re-encoding what was decoded gives the same bytes.
  MLB_ASSERT_VALUE(Again, encodeAll(Kind, Back));
  EXPECT_EQ(Again, Bytes);
}

TEST_P(SerDesRoundTrip, EveryElementTypeScalarVectorMatrixAndEmpty) {
  for (unsigned T = 0; T < NumElementTypes; ++T) {
    auto Type = static_cast<ElementType>(T);
    if (Type == ElementType::String && GetParam() == SerDesKind::JSON)
      continue; // Covered with UTF-8-only strings below.
    for (std::vector<int64_t> Shape : std::vector<std::vector<int64_t>>{
             {}, {1}, {5}, {2, 3}, {0}, {2, 0, 3}}) {
      SCOPED_TRACE(std::string(elementTypeName(Type)) + " rank " +
                   std::to_string(Shape.size()));
      expectRoundTrip(GetParam(), makeStream(Type, Shape, Shape));
    }
  }
}

TEST_P(SerDesRoundTrip, StringTensorsIncludingEmptyAndNonASCII) {
  // Includes "", NUL, quotes, control characters and multi-byte UTF-8.
  expectRoundTrip(GetParam(), makeStream(ElementType::String, {5}, {5}));
}

// Every SerDes carries an advice's range and mask feature (protobuf in the
// TensorSpec fields `range` and `mask`), so the model side can check its
// answers against them.
TEST_P(SerDesRoundTrip, AdviceConstraintsInTheHeader) {
  Header H;
  H.Features.push_back(createSpec<int64_t>("mask", {1, 33}));
  MLB_ASSERT_VALUE(Advice, createSpec<int64_t>("index_to_evict", {1})
                               .withConstraints(ValueRange{0, 33}, "mask"));
  MLB_ASSERT_VALUE(
      Score, createSpec<float>("score", {}).withConstraints(ValueRange{-5, 9}));
  H.Advice = Advice;
  H.Score = Score;
  expectRoundTrip(GetParam(), {H, End{}});
  MLB_ASSERT_VALUE(Bytes, encodeAll(GetParam(), {H}));
  MLB_ASSERT_VALUE(Back, decodeBytes(GetParam(), Bytes));
  const auto *Decoded = std::get_if<Header>(&Back.front());
  ASSERT_NE(Decoded, nullptr);
  EXPECT_EQ(Decoded->Advice->validRange(), (ValueRange{0, 33}));
  EXPECT_EQ(Decoded->Advice->maskFeature(), "mask");
  EXPECT_EQ(Decoded->Score->validRange(), (ValueRange{-5, 9}));
  EXPECT_EQ(Decoded->Score->maskFeature(), "");
}

TEST_P(SerDesRoundTrip, DynamicShapes) {
  for (unsigned T = 0; T < NumElementTypes; ++T) {
    auto Type = static_cast<ElementType>(T);
    SCOPED_TRACE(elementTypeName(Type).str());
    expectRoundTrip(GetParam(), makeStream(Type, {3, 2}, {-1, 2}));
    expectRoundTrip(GetParam(), makeStream(Type, {0, 2}, {-1, -1}));
  }
}

// encodeMessagePieces() (what the pipe runner writes with writev) gives the
// bytes of encodeMessage(), for every type, static and dynamic shapes.
TEST_P(SerDesRoundTrip, MessagePiecesAreTheMessageBytes) {
  for (unsigned T = 0; T < NumElementTypes; ++T) {
    auto Type = static_cast<ElementType>(T);
    if (Type == ElementType::String && GetParam() == SerDesKind::JSON)
      continue; // binary strings are not JSON
    SCOPED_TRACE(elementTypeName(Type).str());
    for (auto [Shape, SpecShape] :
         {std::pair<std::vector<int64_t>, std::vector<int64_t>>{{5}, {5}},
          {{3, 2}, {-1, 2}},
          {{0}, {-1}}}) {
      std::vector<Record> Records = makeStream(Type, Shape, SpecShape);
      MLB_ASSERT_VALUE(S, createSerDes(GetParam()));
      std::string Header;
      ASSERT_FALSE(S->encode(Records[0], Header));
      const Message &M = std::get<Message>(Records[2]);
      std::vector<TensorRef> Refs = makeRefs(M.Tensors);
      std::string Whole;
      ASSERT_FALSE(S->encodeMessage(M.Kind, M.Id, Refs, Whole));
      std::string Scratch = "kept";
      std::vector<SerDes::Piece> Pieces;
      ASSERT_FALSE(S->encodeMessagePieces(M.Kind, M.Id, Refs, Scratch, Pieces));
      EXPECT_EQ(Scratch.substr(0, 4), "kept");
      std::string Joined;
      for (const SerDes::Piece &P : Pieces)
        Joined += P.External ? std::string(P.External, P.Size)
                             : Scratch.substr(P.Offset, P.Size);
      EXPECT_EQ(Joined, Whole);
      if (GetParam() == SerDesKind::Bitstream && Type != ElementType::String &&
          M.Tensors[0].getElementCount() > 0) {
        // The values are referenced in place, not copied.
        EXPECT_TRUE(llvm::any_of(Pieces, [&](const SerDes::Piece &P) {
          return P.External == M.Tensors[0].bytes().data();
        }));
      }
    }
  }
}

TEST_P(SerDesRoundTrip, NegativeAndLargeIds) {
  std::vector<Record> R = makeStream(ElementType::Int64, {1}, {1});
  std::get<Message>(R[2]).Id = INT64_MAX;
  std::get<Message>(R[4]).Id = -5;
  expectRoundTrip(GetParam(), R);
}

TEST_P(SerDesRoundTrip, EmptyInputIsACleanEnd) {
  MLB_ASSERT_VALUE(Records, decodeBytes(GetParam(), ""));
  EXPECT_TRUE(Records.empty());
}

TEST_P(SerDesRoundTrip, TruncationAtEveryOffsetIsAnErrorNeverACrash) {
  std::vector<Record> Records =
      makeStream(ElementType::String, {3, 2}, {-1, 2});
  MLB_ASSERT_VALUE(Bytes, encodeAll(GetParam(), Records));
  for (size_t N = 0; N < Bytes.size(); ++N) {
    llvm::Expected<std::vector<Record>> R =
        decodeBytes(GetParam(), llvm::StringRef(Bytes).take_front(N));
    if (R) {
      // Only a cut between records may succeed, and with fewer records.
      EXPECT_LT(R->size(), Records.size()) << "prefix " << N;
    } else {
      llvm::consumeError(R.takeError());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllSerDes, SerDesRoundTrip,
                         testing::ValuesIn(allSerDesKinds()), kindTestName);

/// The SerDes that carry any bytes in strings (JSON refuses non-UTF-8).
class BinarySerDesRoundTrip : public testing::TestWithParam<SerDesKind> {};

TEST_P(BinarySerDesRoundTrip, NonUTF8Strings) {
  std::vector<Record> R = makeStream(ElementType::String, {2}, {2});
  std::get<Message>(R[2]).Tensors[0].mutableStrings()[0] =
      std::string("\xff\xfe\x00", 3);
  expectRoundTrip(GetParam(), R);
}

INSTANTIATE_TEST_SUITE_P(BinarySerDes, BinarySerDesRoundTrip,
                         testing::ValuesIn([] {
                           std::vector<SerDesKind> Kinds = allSerDesKinds();
                           llvm::erase(Kinds, SerDesKind::JSON);
                           return Kinds;
                         }()),
                         kindTestName);

TEST(SerDesKindTest, ParsesNamesAndRejectsOthers) {
  MLB_ASSERT_VALUE(K, parseSerDesKind("json"));
  EXPECT_EQ(K, SerDesKind::JSON);
  std::string Err = errorText(parseSerDesKind("yaml"));
  EXPECT_NE(Err.find("yaml"), std::string::npos);
  for (SerDesKind Kind : allSerDesKinds()) {
    std::unique_ptr<SerDes> S = makeSerDes(Kind);
    EXPECT_EQ(S->kind(), Kind);
    EXPECT_EQ(S->name(), serDesKindName(Kind));
  }
}

TEST(ByteReaderTest, EndOfStreamIsDistinctFromTruncation) {
  MemoryByteReader R("abc");
  char Buf[2];
  MLB_ASSERT_OK(R.readExact(Buf));
  EXPECT_EQ(R.offset(), 2u);
  llvm::Error E = R.readExact(Buf);
  EXPECT_FALSE(isEndOfStream(E));
  EXPECT_NE(errorText(std::move(E)).find("offset"), std::string::npos);
  char One;
  MLB_ASSERT_OK(R.readExact(llvm::MutableArrayRef<char>(One)));
  llvm::Error End = R.readExact(llvm::MutableArrayRef<char>(One));
  EXPECT_TRUE(isEndOfStream(End));
  llvm::consumeError(std::move(End));
}

TEST(ByteReaderTest, ReadLineEnforcesTheLimit) {
  MemoryByteReader R("abcdef\nxy\n");
  std::string Line;
  EXPECT_NE(errorText(R.readLine(Line, 3)).find("limit"), std::string::npos);
  MLB_ASSERT_OK(R.readLine(Line, 6));
  EXPECT_EQ(Line, "abcdef");
  MLB_ASSERT_OK(R.readLine(Line, 6));
  EXPECT_EQ(Line, "xy");
  llvm::Error End = R.readLine(Line, 6);
  EXPECT_TRUE(isEndOfStream(End));
  llvm::consumeError(std::move(End));
}

} // namespace
