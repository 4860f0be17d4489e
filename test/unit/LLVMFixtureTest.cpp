//===- LLVMFixtureTest.cpp - Bytes written by stock opt 22 ----------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

using namespace mlbridge;
using namespace mlbridge::test;

namespace {

constexpr const char *Fixture =
    "test/vectors/llvm22/llvm22-opt-inliner-interactive.rawlog";

class LLVMFixtureTest : public testing::Test {
protected:
  void SetUp() override {
    bool Found = false;
    Bytes = readSourceFile(Fixture, Found);
    ASSERT_TRUE(Found) << "missing " << Fixture;
  }
  std::string Bytes;
};

int64_t feature(const Message &M, const Header &H, llvm::StringRef Name) {
  for (size_t I = 0; I < H.Features.size(); ++I)
    if (H.Features[I].name() == Name)
      return M.Tensors[I].data<int64_t>()[0];
  ADD_FAILURE() << "no feature " << Name.str();
  return 0;
}

TEST_F(LLVMFixtureTest, BitstreamReaderDecodesOptsInlinerLog) {
  MLB_ASSERT_VALUE(Records, decodeBytes(SerDesKind::Bitstream, Bytes));
  ASSERT_EQ(Records.size(), 9u); // header, context, 7 observations
  const Header &H = std::get<Header>(Records[0]);
  ASSERT_EQ(H.Features.size(), 39u);
  for (const TensorSpec &S : H.Features)
    EXPECT_EQ(S, createSpec<int64_t>(S.name(), {1}));
  EXPECT_EQ(H.Features.front().name(), "sroa_savings");
  EXPECT_EQ(H.Features.back().name(), "inlining_default");
  ASSERT_TRUE(H.Advice);
  EXPECT_EQ(*H.Advice, createSpec<int64_t>("inlining_decision", {1}));
  EXPECT_FALSE(H.Score);
  EXPECT_EQ(std::get<Context>(Records[1]).Name, "");

  const int64_t BlockCounts[] = {1, 1, 1, 13, 4, 1, 1};
  const int64_t CostEstimates[] = {-30, -35, -35, -14910, 10, -15030, -15035};
  for (int64_t I = 0; I < 7; ++I) {
    const Message &M = std::get<Message>(Records[2 + I]);
    EXPECT_EQ(M.Kind, MessageKind::Observation);
    EXPECT_EQ(M.Id, I);
    ASSERT_EQ(M.Tensors.size(), 39u);
    EXPECT_EQ(feature(M, H, "callee_basic_block_count"), BlockCounts[I]);
    EXPECT_EQ(feature(M, H, "cost_estimate"), CostEstimates[I]);
    EXPECT_EQ(feature(M, H, "inlining_default"), 1);
  }
}

TEST_F(LLVMFixtureTest, BitstreamWriterReproducesOptsBytes) {
  MLB_ASSERT_VALUE(Records, decodeBytes(SerDesKind::Bitstream, Bytes));
  MLB_ASSERT_VALUE(Again, encodeAll(SerDesKind::Bitstream, Records));
  EXPECT_TRUE(Again == Bytes) << "re-encoded stream differs from opt's";
}

} // namespace
