//===- UserProtoTest.cpp - Tensors in a user's protobuf message -----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/SerDes/UserProtoSerDes.h"

#include "user_test.pb.h"

using namespace mlbridge;
using namespace mlbridge::test;

namespace {

TEST(UserProtoTest, FillsFieldsByNameAndType) {
  UserProtoSerDes S(*unittest::InlinerFeatures::descriptor());
  TensorValue Count =
      TensorValue::scalar<int64_t>("callee_basic_block_count", 3);
  TensorValue Weights = TensorValue::fromVector<float>("weights", {0.5f, 1.5f});
  TensorValue Delta = TensorValue::scalar<int32_t>("delta", -4);
  TensorValue Hot = TensorValue::scalar<bool>("is_hot", true);
  TensorValue Name = TensorValue::scalar<std::string>("callee_name", "foo");
  std::vector<TensorRef> Refs = {Count.ref(), Weights.ref(), Delta.ref(),
                                 Hot.ref(), Name.ref()};
  unittest::InlinerFeatures Msg;
  MLB_ASSERT_OK(S.fill(Refs, Msg));
  EXPECT_EQ(Msg.callee_basic_block_count(), 3);
  ASSERT_EQ(Msg.weights_size(), 2);
  EXPECT_EQ(Msg.weights(1), 1.5f);
  EXPECT_EQ(Msg.delta(), -4);
  EXPECT_TRUE(Msg.is_hot());
  EXPECT_EQ(Msg.callee_name(), "foo");
}

TEST(UserProtoTest, SerializeAndDeserializeRoundTrip) {
  UserProtoSerDes S(*unittest::InlinerFeatures::descriptor());
  TensorValue Hash = TensorValue::scalar<uint64_t>("hash", UINT64_MAX);
  MLB_ASSERT_VALUE(Blobs, TensorValue::fromStrings(
                              "blobs", {2}, {std::string("\0\xff", 2), ""}));
  std::vector<TensorRef> Refs = {Hash.ref(), Blobs.ref()};
  MLB_ASSERT_VALUE(Bytes, S.serialize(Refs));
  unittest::InlinerFeatures Generated;
  ASSERT_TRUE(Generated.ParseFromString(Bytes));
  EXPECT_EQ(Generated.hash(), UINT64_MAX);
  MLB_ASSERT_VALUE(Tensors, S.deserialize(Bytes));
  // One tensor per field, in field-number order.
  ASSERT_EQ(Tensors.size(), 9u);
  EXPECT_EQ(Tensors[0].name(), "callee_basic_block_count");
  EXPECT_EQ(Tensors[3], Hash);
  EXPECT_EQ(Tensors[6], Blobs);
  EXPECT_EQ(Tensors[7].name(), "depth");
  EXPECT_EQ(Tensors[8].name(), "score");
  EXPECT_EQ(Tensors[1].shape(), llvm::ArrayRef<int64_t>({0}));
  EXPECT_EQ(Tensors[0].shape(), llvm::ArrayRef<int64_t>({1}));
}

TEST(UserProtoTest, MismatchesNameTheField) {
  UserProtoSerDes S(*unittest::InlinerFeatures::descriptor());
  unittest::InlinerFeatures Msg;
  TensorValue WrongType =
      TensorValue::scalar<int32_t>("callee_basic_block_count", 1);
  std::vector<TensorRef> R1 = {WrongType.ref()};
  std::string Err = errorText(S.fill(R1, Msg));
  EXPECT_CONTAINS(Err, "callee_basic_block_count");
  EXPECT_CONTAINS(Err, "int64_t");
  TensorValue Unknown = TensorValue::scalar<int64_t>("no_such_field", 1);
  std::vector<TensorRef> R2 = {Unknown.ref()};
  EXPECT_CONTAINS(errorText(S.fill(R2, Msg)), "no_such_field");
  TensorValue TooMany = TensorValue::fromVector<double>("score", {1, 2});
  std::vector<TensorRef> R3 = {TooMany.ref()};
  EXPECT_CONTAINS(errorText(S.fill(R3, Msg)), "singular");
}

TEST(UserProtoTest, MessageFieldsHoldNoTensor) {
  UserProtoSerDes S(*unittest::WithNested::descriptor());
  unittest::WithNested Msg;
  EXPECT_CONTAINS(errorText(S.extract(Msg)), "inner");
}

} // namespace
