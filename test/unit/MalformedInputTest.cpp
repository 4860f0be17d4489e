//===- MalformedInputTest.cpp - Decoders refuse bad input cleanly ---------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/SerDes/Bitstream.h"

#include "llvm/Support/Endian.h"

#include <cmath>

#ifdef MLBRIDGE_HAVE_PROTOBUF
#include "mlbridge/v1/tensor.pb.h"
#endif

using namespace mlbridge;
using namespace mlbridge::test;
using llvm::StringRef;

namespace {

/// Decodes \p Bytes with \p Kind and returns the error text (or
/// "<success>").
std::string decodeError(SerDesKind Kind, StringRef Bytes,
                        const DecoderLimits &Limits = DecoderLimits()) {
  return errorText(decodeBytes(Kind, Bytes, Limits));
}

const char *const Int64Header =
    "{\"features\":[{\"name\":\"x\",\"type\":\"int64_t\",\"port\":0,"
    "\"shape\":[4]}]}\n";

TEST(BitstreamMalformedTest, HeaderLyingAboutSizesIsATruncationError) {
  std::string S = Int64Header;
  S += "{\"observation\":0}\n";
  S += std::string(8, '\1'); // 8 of the 32 bytes the header promises.
  std::string Err = decodeError(SerDesKind::Bitstream, S);
  EXPECT_CONTAINS(Err, "truncated");
  EXPECT_CONTAINS(Err, "'x'");
  EXPECT_CONTAINS(Err, "offset");
}

TEST(BitstreamMalformedTest, UnknownTypeInHeader) {
  std::string Err = decodeError(
      SerDesKind::Bitstream,
      "{\"features\":[{\"name\":\"x\",\"type\":\"int128_t\",\"port\":0,"
      "\"shape\":[1]}]}\n");
  EXPECT_CONTAINS(Err, "int128_t");
}

TEST(BitstreamMalformedTest, AbsurdShapeRefusedBeforeAllocating) {
  std::string S =
      "{\"features\":[{\"name\":\"x\",\"type\":\"int64_t\",\"port\":0,"
      "\"shape\":[-1,-1]}]}\n"
      "{\"observation\":0,\"shapes\":{\"x\":[1099511627776,1099511627776]}}\n";
  std::string Err = decodeError(SerDesKind::Bitstream, S);
  EXPECT_CONTAINS(Err, "MaxMessageBytes");
  EXPECT_CONTAINS(Err, "'x'");
}

TEST(BitstreamMalformedTest, DimensionAboveLimitInHeader) {
  std::string Err = decodeError(
      SerDesKind::Bitstream,
      "{\"features\":[{\"name\":\"x\",\"type\":\"int8_t\",\"port\":0,"
      "\"shape\":[2199023255552]}]}\n");
  EXPECT_CONTAINS(Err, "MaxDimension");
}

TEST(BitstreamMalformedTest, BadBoolByte) {
  std::string S = "{\"features\":[{\"name\":\"b\",\"type\":\"bool\",\"port\":"
                  "0,\"shape\":[2]}]}\n{\"observation\":0}\n";
  S += std::string("\1\2\n", 3);
  std::string Err = decodeError(SerDesKind::Bitstream, S);
  EXPECT_CONTAINS(Err, "bool");
  EXPECT_CONTAINS(Err, "'b'");
}

TEST(BitstreamMalformedTest, MissingFinalNewline) {
  std::string S = Int64Header;
  S += "{\"observation\":0}\n" + std::string(32, '\0') + "X";
  EXPECT_CONTAINS(decodeError(SerDesKind::Bitstream, S), "final '\\n'");
  std::string Cut = Int64Header;
  Cut += "{\"observation\":0}\n" + std::string(32, '\0');
  EXPECT_CONTAINS(decodeError(SerDesKind::Bitstream, Cut), "truncated");
}

TEST(BitstreamMalformedTest, ShapesContradictingTheHeader) {
  std::string H = "{\"features\":[{\"name\":\"x\",\"type\":\"int8_t\","
                  "\"port\":0,\"shape\":[-1,2]}]}\n";
  EXPECT_CONTAINS(
      decodeError(SerDesKind::Bitstream,
                  H + "{\"observation\":0,\"shapes\":{\"x\":[1,3]}}\n"),
      "contradicts");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::Bitstream, H + "{\"observation\":0}\n"),
      "no shape");
  EXPECT_CONTAINS(decodeError(SerDesKind::Bitstream,
                              H + "{\"observation\":0,\"shapes\":{\"x\":[1,2],"
                                  "\"y\":[1]}}\n"),
                  "'y'");
}

TEST(BitstreamMalformedTest, MessageBeforeHeaderOrWithoutAdviceSpec) {
  EXPECT_CONTAINS(decodeError(SerDesKind::Bitstream, "{\"observation\":0}\n"),
                  "before any header");
  EXPECT_CONTAINS(decodeError(SerDesKind::Bitstream,
                              std::string(Int64Header) + "{\"advice\":0}\n"),
                  "no advice spec");
}

TEST(BitstreamMalformedTest, StringLengthAboveLimit) {
  std::string S = "{\"features\":[{\"name\":\"s\",\"type\":\"string\","
                  "\"port\":0,\"shape\":[1]}]}\n{\"observation\":0}\n";
  S += "\xff\xff\xff\xff";
  DecoderLimits L;
  L.MaxMessageBytes = 1 << 20;
  EXPECT_CONTAINS(decodeError(SerDesKind::Bitstream, S, L), "MaxMessageBytes");
}

TEST(BitstreamMalformedTest, InvalidJSONLine) {
  EXPECT_CONTAINS(decodeError(SerDesKind::Bitstream, "{\"features\":[\n"),
                  "invalid JSON");
  EXPECT_CONTAINS(decodeError(SerDesKind::Bitstream, "[1]\n"),
                  "not a JSON object");
  EXPECT_CONTAINS(decodeError(SerDesKind::Bitstream, "{\"what\":1}\n"),
                  "unrecognized");
}

TEST(BitstreamWriterTest, RefusesMessagesThatDoNotMatchTheHeader) {
  std::unique_ptr<SerDes> S = makeSerDes(SerDesKind::Bitstream);
  std::string Out;
  Header H;
  H.Features = {createSpec<int64_t>("a", {2}), createSpec<float>("b", {-1})};
  MLB_ASSERT_OK(S->encodeHeader(H, Out));
  size_t HeaderSize = Out.size();
  TensorValue A = TensorValue::fromVector<int64_t>("a", {1, 2});
  TensorValue B = TensorValue::fromVector<float>("b", {1, 2, 3});
  TensorValue WrongType = TensorValue::fromVector<double>("b", {1});
  TensorValue WrongShape = TensorValue::fromVector<int64_t>("a", {1, 2, 3});
  auto Encode = [&](std::vector<TensorRef> Refs) {
    return errorText(S->encodeMessage(MessageKind::Observation, 0, Refs, Out));
  };
  EXPECT_CONTAINS(Encode({A.ref()}), "1 tensors");
  EXPECT_CONTAINS(Encode({B.ref(), A.ref()}), "expects 'a'");
  EXPECT_CONTAINS(Encode({A.ref(), WrongType.ref()}), "double");
  EXPECT_CONTAINS(Encode({WrongShape.ref(), B.ref()}), "shape");
  EXPECT_EQ(Out.size(), HeaderSize) << "failed encodes must not write";
  EXPECT_EQ(Encode({A.ref(), B.ref()}), "<success>");
  EXPECT_CONTAINS(Out, "{\"observation\":0,\"shapes\":{\"b\":[3]}}\n");
}

TEST(BitstreamRawTest, DecodesLLVMsRawReply) {
  TensorSpec Spec = createSpec<int64_t>("inlining_decision", {1});
  std::string Bytes(8, '\0');
  llvm::support::endian::write64le(Bytes.data(), 1);
  MLB_ASSERT_VALUE(V, decodeRawTensor(Spec, Bytes));
  EXPECT_EQ(V.data<int64_t>()[0], 1);
  EXPECT_CONTAINS(
      errorText(decodeRawTensor(Spec, StringRef(Bytes).take_front(5))),
      "truncated");
  EXPECT_CONTAINS(errorText(decodeRawTensor(Spec, Bytes + "x")), "after");
}

TEST(JSONMalformedTest, InvalidJSON) {
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, "{\"observation\":1,\"tensors\":[\n"),
      "invalid JSON");
  EXPECT_CONTAINS(decodeError(SerDesKind::JSON, "{\"observation\":1}"),
                  "truncated");
}

std::string jsonMessage(StringRef Type, StringRef Shape, StringRef Data) {
  return ("{\"observation\":0,\"tensors\":[{\"name\":\"t\",\"type\":\"" + Type +
          "\",\"shape\":" + Shape + ",\"data\":" + Data + "}]}\n")
      .str();
}

TEST(JSONMalformedTest, UnknownType) {
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("complex", "[1]", "[1]")),
      "complex");
}

TEST(JSONMalformedTest, AbsurdShapeRefusedBeforeAllocating) {
  std::string Err = decodeError(
      SerDesKind::JSON,
      jsonMessage("int64_t", "[1099511627776,1099511627776]", "[]"));
  EXPECT_CONTAINS(Err, "MaxMessageBytes");
  EXPECT_CONTAINS(decodeError(SerDesKind::JSON,
                              jsonMessage("int8_t", "[2199023255552]", "[]")),
                  "MaxDimension");
  EXPECT_CONTAINS(
      decodeError(
          SerDesKind::JSON,
          jsonMessage("int8_t", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", "[1]")),
      "MaxRank");
}

TEST(JSONMalformedTest, IntegerTensorsRejectFractionsExponentsAndRange) {
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("int32_t", "[1]", "[1.0]")),
      "fraction or exponent");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("int32_t", "[1]", "[-5.0]")),
      "fraction or exponent");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("int64_t", "[1]", "[1e3]")),
      "fraction or exponent");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("int8_t", "[1]", "[128]")),
      "out of range");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("uint8_t", "[1]", "[-1]")),
      "out of range");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON,
                  jsonMessage("int64_t", "[1]", "[-9223372036854775809]")),
      "out of range");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON,
                  jsonMessage("uint64_t", "[1]", "[18446744073709551616]")),
      "out of range");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("int32_t", "[1]", "[\"1\"]")),
      "string");
}

TEST(JSONMalformedTest, DataLengthMustMatchShape) {
  std::string Err =
      decodeError(SerDesKind::JSON, jsonMessage("float", "[2,2]", "[1,2,3]"));
  EXPECT_CONTAINS(Err, "3 elements");
  EXPECT_CONTAINS(Err, "needs 4");
}

TEST(JSONMalformedTest, BoolAndStringTypeChecks) {
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("bool", "[1]", "[1]")),
      "not a bool");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("string", "[1]", "[1]")),
      "not a string");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("float", "[1]", "[\"inf\"]")),
      "inf");
}

TEST(JSONMalformedTest, InvalidUTF8Input) {
  std::string Err =
      decodeError(SerDesKind::JSON, jsonMessage("string", "[1]", "[\"\xff\"]"));
  EXPECT_CONTAINS(Err, "invalid JSON");
}

TEST(JSONWriterTest, RefusesInvalidUTF8NamingTheTensor) {
  std::unique_ptr<SerDes> S = makeSerDes(SerDesKind::JSON);
  MLB_ASSERT_VALUE(T, TensorValue::fromStrings("blob", {2}, {"ok", "\xc3("}));
  std::string Out = "keep";
  std::vector<TensorRef> Refs = {T.ref()};
  std::string Err =
      errorText(S->encodeMessage(MessageKind::Observation, 0, Refs, Out));
  EXPECT_CONTAINS(Err, "'blob'");
  EXPECT_CONTAINS(Err, "UTF-8");
  EXPECT_EQ(Out, "keep");
}

TEST(JSONReaderTest, AcceptsIntegerLiteralsAndSpecialsForFloats) {
  MLB_ASSERT_VALUE(R, decodeBytes(SerDesKind::JSON,
                                  jsonMessage("double", "[5]",
                                              "[1, -3, \"Infinity\", \"NaN\", "
                                              "\"-Infinity\"]")));
  ASSERT_EQ(R.size(), 1u);
  llvm::ArrayRef<double> D = std::get<Message>(R[0]).Tensors[0].data<double>();
  EXPECT_EQ(D[0], 1.0);
  EXPECT_EQ(D[1], -3.0);
  EXPECT_TRUE(std::isinf(D[2]));
  EXPECT_TRUE(std::isnan(D[3]));
  EXPECT_TRUE(std::isinf(D[4]) && D[4] < 0);
}

TEST(JSONReaderTest, FloatLiteralsRoundOnceToFloat) {
  // 1.00000005960464477539062500001 lies just above the midpoint between
  // 1 and the next float; rounding through double would give 1.
  MLB_ASSERT_VALUE(
      R, decodeBytes(
             SerDesKind::JSON,
             jsonMessage("float", "[1]", "[1.00000005960464477539062500001]")));
  EXPECT_EQ(std::get<Message>(R[0]).Tensors[0].data<float>()[0],
            std::nextafter(1.0f, 2.0f));
}

TEST(JSONReaderTest, LiteralsAreMatchedToTheRightTensor) {
  // Keys out of canonical order and an escaped key must not confuse the
  // literal pass.
  std::string Line =
      "{\"tensors\":[{\"data\":[1.5],\"name\":\"f\",\"type\":\"float\","
      "\"shape\":[1]},{\"name\":\"i\",\"d\\u0061ta\":[-7],\"shape\":[1],"
      "\"type\":\"int32_t\"}],\"observation\":2}\n";
  MLB_ASSERT_VALUE(R, decodeBytes(SerDesKind::JSON, Line));
  const Message &M = std::get<Message>(R[0]);
  EXPECT_EQ(M.Tensors[0].data<float>()[0], 1.5f);
  EXPECT_EQ(M.Tensors[1].data<int32_t>()[0], -7);
}

/// A reader over a buffer that records the largest single readExact()
/// request: what a decoder allocated on a claim before the bytes came.
class RequestTrackingReader final : public ByteReader {
public:
  explicit RequestTrackingReader(StringRef Buffer) : Inner(Buffer) {}
  llvm::Error readExact(llvm::MutableArrayRef<char> Buffer) override {
    Largest = std::max(Largest, Buffer.size());
    return Inner.readExact(Buffer);
  }
  llvm::Error readLine(std::string &Line, size_t MaxLen) override {
    return Inner.readLine(Line, MaxLen);
  }
  uint64_t offset() const override { return Inner.offset(); }
  size_t Largest = 0;

private:
  MemoryByteReader Inner;
};

/// Decodes \p Bytes and returns the largest read request (the error must
/// be a truncation).
size_t largestRequest(SerDesKind Kind, StringRef Bytes) {
  std::unique_ptr<SerDes> S = llvm::cantFail(createSerDes(Kind));
  RequestTrackingReader Reader(Bytes);
  std::string Err = errorText(decodeAll(*S, Reader));
  EXPECT_CONTAINS(Err, "truncated");
  return Reader.Largest;
}

std::string nested(size_t Depth) {
  return std::string(Depth, '[') + std::string(Depth, ']');
}

TEST(DepthLimitTest, DeepJSONLineIsALimitErrorNotAStackOverflow) {
  std::string Line = "{\"observation\":0,\"tensors\":" + nested(100000) + "}\n";
  std::string Err = decodeError(SerDesKind::JSON, Line);
  EXPECT_CONTAINS(Err, "MaxDepth");
  EXPECT_CONTAINS(Err, "32 deep");
}

TEST(DepthLimitTest, DeepBitstreamHeaderIsALimitErrorNotAStackOverflow) {
  std::string Err = decodeError(SerDesKind::Bitstream,
                                "{\"features\":" + nested(100000) + "}\n");
  EXPECT_CONTAINS(Err, "MaxDepth");
}

TEST(DepthLimitTest, DepthAtTheLimitPassesTheScanAndOneMoreFails) {
  DecoderLimits Limits;
  Limits.MaxDepth = 4;
  // Depth 4 (object, array, object, array): a valid message.
  std::string Ok = jsonMessage("float", "[1]", "[1]");
  EXPECT_EQ(decodeError(SerDesKind::JSON, Ok, Limits), "<success>");
  Limits.MaxDepth = 3;
  EXPECT_CONTAINS(decodeError(SerDesKind::JSON, Ok, Limits), "MaxDepth");
}

TEST(DepthLimitTest, BracketsInsideStringsDoNotCount) {
  DecoderLimits Limits;
  Limits.MaxDepth = 4;
  std::string Line = "{\"observation\":0,\"tensors\":[{\"name\":\"" +
                     std::string(50, '[') + "\\\"" + std::string(50, '{') +
                     "\",\"type\":\"float\",\"shape\":[1],\"data\":[1]}]}\n";
  EXPECT_EQ(decodeError(SerDesKind::JSON, Line, Limits), "<success>");
}

TEST(JSONMalformedTest, NumberBeyondTheDoubleRangeIsRefusedNamingTheTensor) {
  std::string Err =
      decodeError(SerDesKind::JSON, jsonMessage("float", "[1]", "[1e400]"));
  EXPECT_CONTAINS(Err, "'t'");
  EXPECT_CONTAINS(Err, "out of range");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("double", "[1]", "[-1e400]")),
      "out of range");
}

TEST(JSONMalformedTest, NumberBeyondTheFloatRangeIsRefused) {
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("float", "[1]", "[1e39]")),
      "out of range for float");
}

TEST(BitstreamMalformedTest, LargeValueClaimAllocatesOnlyAsBytesArrive) {
  // 6 bytes of values after a line claiming 2^25 int64 (256 MiB).
  std::string S = "{\"features\":[{\"name\":\"x\",\"type\":\"int64_t\","
                  "\"port\":0,\"shape\":[-1]}]}\n"
                  "{\"observation\":0,\"shapes\":{\"x\":[33554431]}}\n";
  S += std::string(6, '\0');
  EXPECT_LE(largestRequest(SerDesKind::Bitstream, S), size_t(1) << 20);
}

TEST(BitstreamMalformedTest, LargeStringClaimAllocatesOnlyAsBytesArrive) {
  std::string S = "{\"features\":[{\"name\":\"s\",\"type\":\"string\","
                  "\"port\":0,\"shape\":[1]}]}\n{\"observation\":0}\n";
  char Len[4];
  llvm::support::endian::write32le(Len, 200000000);
  S += std::string(Len, 4) + "ab";
  EXPECT_LE(largestRequest(SerDesKind::Bitstream, S), size_t(1) << 20);
}

#ifdef MLBRIDGE_HAVE_PROTOBUF
std::string delimited(const v1::Record &R) {
  std::string Body = R.SerializeAsString();
  std::string Out;
  uint64_t Len = Body.size();
  do {
    char B = Len & 0x7f;
    Len >>= 7;
    Out += static_cast<char>(B | (Len ? 0x80 : 0));
  } while (Len);
  return Out + Body;
}

v1::Record oneTensor(v1::ElementType Type, std::vector<int64_t> Shape,
                     std::string Data) {
  v1::Record R;
  v1::Tensor *T = R.mutable_message()->add_tensors();
  T->set_name("t");
  T->set_type(Type);
  for (int64_t D : Shape)
    T->add_shape(D);
  T->set_data(Data);
  return R;
}

TEST(ProtobufMalformedTest, LengthAboveLimitRefusedBeforeAllocating) {
  std::string Err =
      decodeError(SerDesKind::Protobuf, "\xff\xff\xff\xff\xff\xff\xff\xff\x7f");
  EXPECT_CONTAINS(Err, "MaxMessageBytes");
  EXPECT_CONTAINS(decodeError(SerDesKind::Protobuf,
                              "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"),
                  "overflows");
  EXPECT_CONTAINS(decodeError(SerDesKind::Protobuf, std::string(12, '\x81')),
                  "overflows");
}

TEST(ProtobufMalformedTest, LargeLengthClaimAllocatesOnlyAsBytesArrive) {
  // A 6-byte input whose length prefix claims 256 MiB - 1.
  EXPECT_LE(largestRequest(SerDesKind::Protobuf,
                           std::string("\xff\xff\xff\x7f\x0a\x00", 6)),
            size_t(1) << 20);
}

TEST(ProtobufMalformedTest, ShapeWithTheWrongWireTypeIsRefused) {
  // Tensor.shape (field 3) sent as a 64-bit fixed value (wire type 1):
  // protobuf keeps it as an unknown field and the shape would read as [].
  v1::Tensor Tensor;
  v1::Tensor *T = &Tensor;
  T->set_name("t");
  T->set_type(v1::ELEMENT_TYPE_INT64);
  T->set_data(std::string(8, '\0'));
  // The bad field goes inside the tensor, so the records are built by hand.
  std::string TensorBytes = T->SerializeAsString();
  TensorBytes += std::string("\x19\x01\0\0\0\0\0\0\0", 9); // field 3, fixed64
  std::string Message = "\x1a" + std::string(1, char(TensorBytes.size())) +
                        TensorBytes; // TensorMessage.tensors = 3
  std::string Rec =
      "\x1a" + std::string(1, char(Message.size())) + Message; // Record.message
  std::string Framed = std::string(1, char(Rec.size())) + Rec;
  std::string Err = decodeError(SerDesKind::Protobuf, Framed);
  EXPECT_CONTAINS(Err, "'shape'");
  EXPECT_CONTAINS(Err, "wrong wire type");
}

TEST(ProtobufMalformedTest, HeaderLyingAboutSizes) {
  std::string Err = decodeError(
      SerDesKind::Protobuf,
      delimited(oneTensor(v1::ELEMENT_TYPE_INT64, {4}, std::string(8, 'a'))));
  EXPECT_CONTAINS(Err, "'t'");
  EXPECT_CONTAINS(Err, "32 bytes");
}

TEST(ProtobufMalformedTest, UnknownType) {
  std::string Err = decodeError(
      SerDesKind::Protobuf,
      delimited(oneTensor(static_cast<v1::ElementType>(99), {1}, "x")));
  EXPECT_CONTAINS(Err, "unknown element type 99");
}

TEST(ProtobufMalformedTest, AbsurdShapeRefusedBeforeAllocating) {
  std::string Err = decodeError(
      SerDesKind::Protobuf,
      delimited(oneTensor(v1::ELEMENT_TYPE_INT64,
                          {int64_t(1) << 40, int64_t(1) << 40}, "")));
  EXPECT_CONTAINS(Err, "MaxMessageBytes");
}

TEST(ProtobufMalformedTest, BadBoolByte) {
  std::string Err = decodeError(
      SerDesKind::Protobuf,
      delimited(oneTensor(v1::ELEMENT_TYPE_BOOL, {2}, std::string("\1\2", 2))));
  EXPECT_CONTAINS(Err, "bool");
}

TEST(ProtobufMalformedTest, GarbageAndEmptyRecords) {
  EXPECT_CONTAINS(decodeError(SerDesKind::Protobuf, "\x03\xff\xff\xff"),
                  "not a valid");
  EXPECT_CONTAINS(decodeError(SerDesKind::Protobuf, std::string("\0", 1)),
                  "empty");
}
#endif

} // namespace

// What llvm::json lets through but the wire format refuses (the Python side
// refuses the same: test_differential.py).
TEST(JSONLexicalTest, NumbersOutsideJSONsGrammarAreRefused) {
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("float", "[1]", "[01]")),
      "invalid JSON number '01'");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, "{\"observation\":00,\"tensors\":[]}\n"),
      "invalid JSON number '00'");
}

TEST(JSONLexicalTest, IntegerFieldsTakeOnlyIntegerLiterals) {
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, "{\"observation\":1.0,\"tensors\":[]}\n"),
      "'1.0' where an integer is expected ('observation')");
  EXPECT_CONTAINS(
      decodeError(SerDesKind::JSON, jsonMessage("float", "[1e0]", "[1]")),
      "'1e0' where an integer is expected (a dimension)");
  EXPECT_CONTAINS(decodeError(SerDesKind::JSON,
                              "{\"observation\":-9223372036854775809,"
                              "\"tensors\":[]}\n"),
                  "outside the 64-bit range");
  // Float data may be written either way.
  EXPECT_EQ(
      decodeError(SerDesKind::JSON, jsonMessage("float", "[2]", "[1e0,2]")),
      "<success>");
}

TEST(JSONLexicalTest, SurrogateEscapesComeInPairs) {
  auto Named = [](StringRef Name) {
    return ("{\"observation\":0,\"tensors\":[{\"name\":\"" + Name +
            "\",\"type\":\"float\",\"shape\":[1],\"data\":[1]}]}\n")
        .str();
  };
  EXPECT_CONTAINS(decodeError(SerDesKind::JSON, Named("a\\ud800")),
                  "high surrogate escape without a low one");
  EXPECT_CONTAINS(decodeError(SerDesKind::JSON, Named("a\\udc00")),
                  "low surrogate escape without a high one");
  EXPECT_EQ(decodeError(SerDesKind::JSON, Named("a\\ud800\\udc00")),
            "<success>");
}

TEST(JSONMalformedTest, TensorObjectsHaveExactlyTheFourKeys) {
  std::string Extra =
      "{\"observation\":0,\"tensors\":[{\"name\":\"t\",\"type\":"
      "\"float\",\"shape\":[1],\"data\":[1],\"datum\":[1]}]}\n";
  EXPECT_CONTAINS(decodeError(SerDesKind::JSON, Extra),
                  "exactly the keys name, type, shape and data");
  std::string Reordered =
      "{\"observation\":0,\"tensors\":[{\"data\":[1],"
      "\"shape\":[1],\"type\":\"float\",\"name\":\"t\"}]}\n";
  EXPECT_EQ(decodeError(SerDesKind::JSON, Reordered), "<success>");
}
