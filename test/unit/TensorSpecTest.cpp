//===- TensorSpecTest.cpp - TensorSpec and element types ------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/TensorSpec.h"

using namespace mlbridge;
using namespace mlbridge::test;
using llvm::ArrayRef;

namespace {

TEST(ElementTypeTest, NamesAreLLVMsAndRoundTrip) {
  EXPECT_EQ(elementTypeName(ElementType::Int64), "int64_t");
  EXPECT_EQ(elementTypeName(ElementType::UInt8), "uint8_t");
  EXPECT_EQ(elementTypeName(ElementType::Float), "float");
  EXPECT_EQ(elementTypeName(ElementType::Double), "double");
  EXPECT_EQ(elementTypeName(ElementType::Bool), "bool");
  EXPECT_EQ(elementTypeName(ElementType::String), "string");
  for (unsigned I = 0; I < NumElementTypes; ++I) {
    auto T = static_cast<ElementType>(I);
    MLB_ASSERT_VALUE(Parsed, parseElementType(elementTypeName(T)));
    EXPECT_EQ(Parsed, T);
  }
}

TEST(ElementTypeTest, UnknownNameIsAnErrorNamingIt) {
  EXPECT_NE(errorText(parseElementType("int128_t")).find("int128_t"),
            std::string::npos);
}

TEST(ElementTypeTest, SizesMatchTheDoc) {
  EXPECT_EQ(elementSize(ElementType::Int8), 1u);
  EXPECT_EQ(elementSize(ElementType::UInt16), 2u);
  EXPECT_EQ(elementSize(ElementType::Float), 4u);
  EXPECT_EQ(elementSize(ElementType::UInt64), 8u);
  EXPECT_EQ(elementSize(ElementType::Bool), 1u);
  EXPECT_EQ(elementSize(ElementType::String), 0u);
}

TEST(ElementTypeTest, TraitMapsExactCppTypes) {
  static_assert(elementTypeOf<int8_t> == ElementType::Int8);
  static_assert(elementTypeOf<uint64_t> == ElementType::UInt64);
  static_assert(elementTypeOf<float> == ElementType::Float);
  static_assert(elementTypeOf<bool> == ElementType::Bool);
  static_assert(elementTypeOf<std::string> == ElementType::String);
  static_assert(!IsElementType<char>::value);
  static_assert(!IsElementType<long double>::value);
}

TEST(TensorSpecTest, JSONIsLLVMsExactBytes) {
  TensorSpec S = createSpec<int64_t>("callee_basic_block_count", {1});
  EXPECT_EQ(S.toJSON(), "{\"name\":\"callee_basic_block_count\",\"type\":"
                        "\"int64_t\",\"port\":0,\"shape\":[1]}");
  TensorSpec M = createSpec<float>("x", {2, -1}, 3);
  EXPECT_EQ(M.toJSON(),
            "{\"name\":\"x\",\"type\":\"float\",\"port\":3,\"shape\":[2,-1]}");
}

TEST(TensorSpecTest, JSONRoundTrips) {
  for (const TensorSpec &S :
       {createSpec<int64_t>("a", {1}), createSpec<double>("b", {}),
        createSpec<std::string>("c\"\\\n", {-1}),
        createSpec<bool>("d", {2, 3, 4}, 7)}) {
    MLB_ASSERT_VALUE(Back, TensorSpec::parseJSON(S.toJSON()));
    EXPECT_EQ(Back, S);
  }
}

TEST(TensorSpecTest, ParseRejectsBadSpecs) {
  EXPECT_NE(errorText(TensorSpec::parseJSON("[1]")), "<success>");
  EXPECT_NE(errorText(TensorSpec::parseJSON(
                          "{\"name\":\"a\",\"type\":\"int128\",\"shape\":[1]}"))
                .find("int128"),
            std::string::npos);
  EXPECT_NE(errorText(TensorSpec::parseJSON(
                "{\"name\":\"\",\"type\":\"float\",\"shape\":[1]}")),
            "<success>");
  EXPECT_NE(errorText(TensorSpec::parseJSON(
                "{\"name\":\"a\",\"type\":\"float\",\"shape\":[-2]}")),
            "<success>");
  EXPECT_NE(errorText(TensorSpec::parseJSON(
                "{\"name\":\"a\",\"type\":\"float\",\"shape\":[1.5]}")),
            "<success>");
}

TEST(TensorSpecTest, ConstraintsAreWrittenOnlyWhenPresent) {
  TensorSpec S =
      llvm::cantFail(createSpec<int64_t>("index_to_evict", {1})
                         .withConstraints(ValueRange{0, 33}, "mask"));
  EXPECT_EQ(S.toJSON(),
            "{\"name\":\"index_to_evict\",\"type\":\"int64_t\",\"port\":0,"
            "\"shape\":[1],\"range\":[0,33],\"mask\":\"mask\"}");
  MLB_ASSERT_VALUE(Back, TensorSpec::parseJSON(S.toJSON()));
  EXPECT_EQ(Back, S);
  EXPECT_NE(Back, createSpec<int64_t>("index_to_evict", {1}));
  TensorSpec R = llvm::cantFail(
      createSpec<float>("p", {1}).withConstraints(ValueRange{-3, 7}));
  EXPECT_EQ(R.toJSON(), "{\"name\":\"p\",\"type\":\"float\",\"port\":0,"
                        "\"shape\":[1],\"range\":[-3,7]}");
  EXPECT_FALSE(createSpec<float>("p", {1}).hasConstraints());
}

TEST(TensorSpecTest, ParseRejectsBadConstraints) {
  auto Parse = [](const char *Rest) {
    return errorText(TensorSpec::parseJSON(
        std::string("{\"name\":\"a\",\"type\":\"int64_t\",\"shape\":[1],") +
        Rest + "}"));
  };
  EXPECT_NE(Parse("\"range\":[0]").find("two 64-bit integers"),
            std::string::npos);
  EXPECT_NE(Parse("\"range\":[0,1.5]").find("two 64-bit integers"),
            std::string::npos);
  EXPECT_NE(Parse("\"range\":\"0,1\"").find("'range'"), std::string::npos);
  EXPECT_NE(Parse("\"range\":[3,3]").find("empty range [3, 3)"),
            std::string::npos);
  EXPECT_NE(Parse("\"range\":[0,true]").find("two 64-bit integers"),
            std::string::npos);
  EXPECT_NE(Parse("\"range\":[0,9223372036854775808]").find("two 64-bit"),
            std::string::npos);
  EXPECT_NE(Parse("\"range\":null").find("'range'"), std::string::npos);
  // As in Python: an integral float is an integer (LLVM's JSON reader).
  EXPECT_EQ(Parse("\"range\":[0.0,33]"), "<success>");
  EXPECT_NE(Parse("\"mask\":\"\"").find("'mask'"), std::string::npos);
  EXPECT_NE(Parse("\"mask\":1").find("'mask'"), std::string::npos);
  EXPECT_NE(errorText(TensorSpec::parseJSON(
                          "{\"name\":\"a\",\"type\":\"float\",\"shape\":[1],"
                          "\"mask\":\"m\"}"))
                .find("not an integer type"),
            std::string::npos);
  EXPECT_NE(errorText(TensorSpec::parseJSON(
                          "{\"name\":\"a\",\"type\":\"bool\",\"shape\":[1],"
                          "\"range\":[0,1]}"))
                .find("not numeric"),
            std::string::npos);
}

TEST(TensorSpecTest, PortDefaultsToZero) {
  MLB_ASSERT_VALUE(S, TensorSpec::parseJSON(
                          "{\"name\":\"a\",\"type\":\"float\",\"shape\":[1]}"));
  EXPECT_EQ(S.port(), 0);
}

TEST(TensorSpecTest, CreateRejectsOverflowingShape) {
  EXPECT_NE(errorText(TensorSpec::create("a", ElementType::Int8,
                                         {int64_t(1) << 40, int64_t(1) << 40})),
            "<success>");
}

TEST(TensorSpecTest, CountsAndDynamicShapes) {
  TensorSpec S = createSpec<int32_t>("a", {2, 3});
  EXPECT_FALSE(S.isDynamic());
  EXPECT_EQ(S.getElementCount(), std::optional<uint64_t>(6));
  EXPECT_EQ(S.getByteSize(), std::optional<uint64_t>(24));
  EXPECT_EQ(createSpec<int32_t>("s", {}).getElementCount(),
            std::optional<uint64_t>(1));
  TensorSpec D = createSpec<int32_t>("d", {-1, 3});
  EXPECT_TRUE(D.isDynamic());
  EXPECT_FALSE(D.getElementCount());
  EXPECT_FALSE(createSpec<std::string>("t", {2}).getByteSize());
}

TEST(TensorSpecTest, MatchesConcreteShape) {
  TensorSpec D = createSpec<int32_t>("d", {-1, 3});
  EXPECT_TRUE(D.matchesConcreteShape({5, 3}));
  EXPECT_TRUE(D.matchesConcreteShape({0, 3}));
  EXPECT_FALSE(D.matchesConcreteShape({5, 4}));
  EXPECT_FALSE(D.matchesConcreteShape({5}));
  EXPECT_FALSE(D.matchesConcreteShape({-1, 3}));
}

TEST(TensorSpecTest, EqualityComparesAllFields) {
  EXPECT_EQ(createSpec<float>("a", {1}), createSpec<float>("a", {1}));
  EXPECT_NE(createSpec<float>("a", {1}), createSpec<double>("a", {1}));
  EXPECT_NE(createSpec<float>("a", {1}), createSpec<float>("b", {1}));
  EXPECT_NE(createSpec<float>("a", {1}), createSpec<float>("a", {2}));
  EXPECT_NE(createSpec<float>("a", {1}), createSpec<float>("a", {1}, 1));
}

TEST(TensorValueTest, TypedAccessorsCheckTheType) {
  TensorValue V = TensorValue::fromVector<int32_t>("v", {1, 2, 3});
  MLB_ASSERT_VALUE(D, V.getData<int32_t>());
  EXPECT_EQ(D.size(), 3u);
  EXPECT_EQ(D[2], 3);
  std::string Err = errorText(V.getData<float>());
  EXPECT_NE(Err.find("'v'"), std::string::npos) << Err;
  EXPECT_NE(Err.find("int32_t"), std::string::npos) << Err;
  EXPECT_NE(Err.find("float"), std::string::npos) << Err;
}

TEST(TensorValueTest, ReshapeKeepsLeadingElementsAndZeroesTheRest) {
  TensorValue V = TensorValue::fromVector<int16_t>("v", {1, 2, 3});
  ASSERT_FALSE(V.reshape({2}));
  EXPECT_EQ(V.data<int16_t>(), ArrayRef<int16_t>({1, 2}));
  // Growing within the storage and beyond it: old elements stay, new are 0
  // (also the bytes the shrink left behind in the last word).
  ASSERT_FALSE(V.reshape({5}));
  EXPECT_EQ(V.data<int16_t>(), ArrayRef<int16_t>({1, 2, 0, 0, 0}));
  V.mutableData<int16_t>()[4] = 7;
  ASSERT_FALSE(V.reshape({1000}));
  ASSERT_EQ(V.getElementCount(), 1000u);
  EXPECT_EQ(V.data<int16_t>()[4], 7);
  for (size_t I = 5; I < 1000; ++I)
    ASSERT_EQ(V.data<int16_t>()[I], 0) << I;
}

TEST(TensorValueTest, StorageIsAlignedForModels) {
  auto Aligned = [](const TensorValue &V) {
    return reinterpret_cast<uintptr_t>(V.bytes().data()) % TensorAlignment;
  };
  for (int I = 0; I < 8; ++I) {
    TensorValue V = TensorValue::fromVector<int8_t>("v", {1, 2, 3});
    EXPECT_EQ(Aligned(V), 0u);
    TensorValue Copy = V;
    EXPECT_EQ(Aligned(Copy), 0u);
    EXPECT_EQ(Copy, V);
    ASSERT_FALSE(V.reshape({100 + I}));
    EXPECT_EQ(Aligned(V), 0u);
  }
}

TEST(TensorValueTest, FromBytesChecksSizeAndBools) {
  const char Two[] = {1, 0};
  EXPECT_NE(errorText(TensorValue::fromBytes("b", ElementType::Int32, {1},
                                             ArrayRef<char>(Two))),
            "<success>");
  const char BadBool[] = {1, 2};
  std::string Err = errorText(TensorValue::fromBytes(
      "flags", ElementType::Bool, {2}, ArrayRef<char>(BadBool)));
  EXPECT_NE(Err.find("flags"), std::string::npos) << Err;
}

TEST(TensorValueTest, RefViewsWithoutCopying) {
  TensorValue V = TensorValue::fromVector<double>("d", {1.5, 2.5});
  TensorRef R = V.ref();
  EXPECT_EQ(R.bytes().data(), V.bytes().data());
  EXPECT_EQ(R.getElementCount(), 2u);
  EXPECT_EQ(R.data<double>()[1], 2.5);
}

} // namespace
