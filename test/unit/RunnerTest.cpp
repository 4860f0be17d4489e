//===- RunnerTest.cpp - MLModelRunner through CallbackModelRunner ---------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/MLModelRunner.h"

#include <limits>

using namespace mlbridge;
using namespace mlbridge::test;
using llvm::ArrayRef;
using llvm::Expected;
using llvm::StringRef;

namespace {

std::vector<TensorSpec> inlinerLikeSpecs() {
  return {createSpec<int64_t>("callee_basic_block_count", {1}),
          createSpec<float>("weights", {3}), createSpec<int32_t>("dyn", {-1}),
          createSpec<std::string>("callee_name", {1}),
          createSpec<bool>("flags", {2})};
}

/// Advises 1 iff callee_basic_block_count <= 1, and records what it saw.
struct Policy {
  std::vector<std::vector<TensorValue>> Seen;
  Expected<TensorValue> operator()(ArrayRef<TensorRef> Features) {
    std::vector<TensorValue> Copy;
    for (const TensorRef &R : Features)
      Copy.push_back(R.type() == ElementType::String
                         ? llvm::cantFail(TensorValue::fromStrings(
                               R.name(), R.shape(),
                               std::vector<std::string>(R.strings().begin(),
                                                        R.strings().end())))
                         : llvm::cantFail(TensorValue::fromBytes(
                               R.name(), R.type(), R.shape(), R.bytes())));
    Seen.push_back(std::move(Copy));
    int64_t Count = Features[0].data<int64_t>()[0];
    return TensorValue::scalar<int64_t>("inlining_decision", Count <= 1);
  }
};

std::unique_ptr<CallbackModelRunner> makeRunner(Policy &P) {
  return llvm::cantFail(CallbackModelRunner::create(
      inlinerLikeSpecs(), createSpec<int64_t>("inlining_decision", {1}),
      [&P](ArrayRef<TensorRef> F) { return P(F); }));
}

TEST(RunnerTest, EvaluateReturnsTheTypedAdvice) {
  Policy P;
  auto R = makeRunner(P);
  MLB_ASSERT_OK(R->setFeature("callee_basic_block_count", int64_t(1)));
  MLB_ASSERT_VALUE(A, R->evaluate<int64_t>());
  EXPECT_EQ(A, 1);
  *R->getTensor<int64_t>(0) = 13;
  MLB_ASSERT_VALUE(B, R->evaluate<int64_t>());
  EXPECT_EQ(B, 0);
}

TEST(RunnerTest, BuffersAreStableAndNotResetByEvaluate) {
  Policy P;
  auto R = makeRunner(P);
  int64_t *Count = R->getTensor<int64_t>(0);
  float *Weights = R->getTensor<float>(1);
  Count[0] = 7;
  Weights[2] = 2.5f;
  for (int I = 0; I < 3; ++I)
    ASSERT_TRUE(static_cast<bool>(R->evaluate<int64_t>()));
  EXPECT_EQ(R->getTensor<int64_t>(0), Count);
  EXPECT_EQ(R->getTensor<float>(1), Weights);
  EXPECT_EQ(Count[0], 7);
  EXPECT_EQ(Weights[2], 2.5f);
  ASSERT_EQ(P.Seen.size(), 3u);
  EXPECT_EQ(P.Seen[2][1].data<float>()[2], 2.5f);
}

TEST(RunnerTest, FeatureTypeMismatchNamesFeatureAndBothTypes) {
  Policy P;
  auto R = makeRunner(P);
  std::string Err = errorText(R->setFeature("callee_basic_block_count", 1));
  EXPECT_CONTAINS(Err, "callee_basic_block_count");
  EXPECT_CONTAINS(Err, "int64_t");
  EXPECT_CONTAINS(Err, "int32_t");
  EXPECT_CONTAINS(errorText(R->setFeature("weights", std::vector<double>{1})),
                  "double");
  EXPECT_CONTAINS(errorText(R->setFeature("nope", int64_t(1))), "'nope'");
}

TEST(RunnerTest, VectorFeaturesCheckLengthAndFillDynamicDims) {
  Policy P;
  auto R = makeRunner(P);
  MLB_ASSERT_OK(R->setFeature("weights", std::vector<float>{1, 2, 3}));
  EXPECT_CONTAINS(errorText(R->setFeature("weights", std::vector<float>{1, 2})),
                  "given 2");
  MLB_ASSERT_OK(R->setFeature("dyn", std::vector<int32_t>{4, 5, 6, 7, 8}));
  const int32_t Arr[] = {9, 10};
  MLB_ASSERT_OK(R->setFeature("flags", std::vector<bool>{true, false}));
  MLB_ASSERT_OK(R->setFeature("callee_name", std::string("foo")));
  MLB_ASSERT_VALUE(A, R->evaluate<int64_t>());
  (void)A;
  const std::vector<TensorValue> &Seen = P.Seen.back();
  EXPECT_EQ(Seen[2].shape(), ArrayRef<int64_t>({5}));
  EXPECT_EQ(Seen[2].data<int32_t>()[4], 8);
  EXPECT_EQ(Seen[3].data<std::string>()[0], "foo");
  EXPECT_EQ(Seen[4].data<bool>()[0], true);
  MLB_ASSERT_OK(R->setFeature("dyn", ArrayRef<int32_t>(Arr)));
  EXPECT_EQ(R->getFeature(2).shape(), ArrayRef<int64_t>({2}));
}

TEST(RunnerTest, TheModelSeesADynamicFeatureAfterItsBufferMoves) {
  Policy P;
  auto R = makeRunner(P);
  MLB_ASSERT_OK(R->setFeature("dyn", std::vector<int32_t>{1, 2}));
  ASSERT_TRUE(static_cast<bool>(R->evaluate<int64_t>()));
  // Far larger: the storage is reallocated, and the views must follow.
  std::vector<int32_t> Big(100000);
  for (size_t I = 0; I < Big.size(); ++I)
    Big[I] = static_cast<int32_t>(I);
  MLB_ASSERT_OK(R->setFeature("dyn", Big));
  ASSERT_TRUE(static_cast<bool>(R->evaluate<int64_t>()));
  const TensorValue &Seen = P.Seen.back()[2];
  EXPECT_EQ(Seen.shape(), ArrayRef<int64_t>({100000}));
  EXPECT_EQ(Seen.data<int32_t>()[99999], 99999);
}

/// Shows bufferEpoch(), which only runners see.
class EpochProbe final : public MLModelRunner {
public:
  EpochProbe() : MLModelRunner(inlinerLikeSpecs(), advice()) {}
  using MLModelRunner::bufferEpoch;

protected:
  Expected<TensorValue> evaluateUntyped(ArrayRef<TensorRef>) override {
    return TensorValue::scalar<int64_t>("inlining_decision", 0);
  }

private:
  static TensorSpec advice() {
    return createSpec<int64_t>("inlining_decision", {1});
  }
};

TEST(RunnerTest, BufferEpochChangesOnlyWhenABufferMayMove) {
  EpochProbe R;
  uint64_t Start = R.bufferEpoch();
  *R.getTensor<float>(1) = 3.0f;
  MLB_ASSERT_OK(R.setFeature("weights", std::vector<float>{1, 2, 3}));
  MLB_ASSERT_OK(R.setFeature("callee_name", std::string("f")));
  ASSERT_TRUE(static_cast<bool>(R.evaluate<int64_t>()));
  EXPECT_EQ(R.bufferEpoch(), Start) << "writing elements moves nothing";
  MLB_ASSERT_OK(R.setFeature("dyn", std::vector<int32_t>{1, 2}));
  uint64_t Resized = R.bufferEpoch();
  EXPECT_NE(Resized, Start);
  MLB_ASSERT_OK(R.setFeature("dyn", std::vector<int32_t>{3, 4}));
  EXPECT_EQ(R.bufferEpoch(), Resized) << "same shape, same storage";
  MLB_ASSERT_OK(R.setFeature("dyn", std::vector<int32_t>{5}));
  EXPECT_NE(R.bufferEpoch(), Resized);
}

TEST(RunnerTest, PopulateFeaturesSetsSeveralAndStopsAtTheFirstError) {
  Policy P;
  auto R = makeRunner(P);
  MLB_ASSERT_OK(R->populateFeatures(
      std::pair(StringRef("callee_basic_block_count"), int64_t(4)),
      std::make_pair("weights", std::vector<float>{1, 2, 3}),
      std::make_pair("callee_name", "bar")));
  EXPECT_EQ(*R->getTensor<int64_t>(0), 4);
  EXPECT_EQ(R->getFeature(3).data<std::string>()[0], "bar");
  std::string Err = errorText(R->populateFeatures(
      std::make_pair("callee_basic_block_count", int64_t(5)),
      std::make_pair("weights", 1.0), // wrong type: stops here
      std::make_pair("dyn", std::vector<int32_t>{1})));
  EXPECT_CONTAINS(Err, "weights");
  EXPECT_EQ(*R->getTensor<int64_t>(0), 5);
  EXPECT_EQ(R->getFeature(2).getElementCount(), 0u);
}

TEST(RunnerTest, EvaluateChecksTheRequestedType) {
  Policy P;
  auto R = makeRunner(P);
  std::string Err = errorText(R->evaluate<float>());
  EXPECT_CONTAINS(Err, "inlining_decision");
  EXPECT_CONTAINS(Err, "int64_t");
  EXPECT_CONTAINS(Err, "float");
  EXPECT_TRUE(P.Seen.empty()) << "the model must not run for a bad request";
}

TEST(RunnerTest, EvaluateChecksTheReplyAgainstTheAdviceSpec) {
  auto WrongType = llvm::cantFail(CallbackModelRunner::create(
      {}, createSpec<int64_t>("a", {1}), [](ArrayRef<TensorRef>) {
        return Expected<TensorValue>(TensorValue::scalar<float>("a", 1));
      }));
  EXPECT_CONTAINS(errorText(WrongType->evaluate<int64_t>()), "replied float");
  auto WrongShape = llvm::cantFail(CallbackModelRunner::create(
      {}, createSpec<int64_t>("a", {1}), [](ArrayRef<TensorRef>) {
        return Expected<TensorValue>(
            TensorValue::fromVector<int64_t>("a", {1, 2}));
      }));
  EXPECT_CONTAINS(errorText(WrongShape->evaluate<int64_t>()), "shape");
}

TEST(RunnerTest, VectorAdvice) {
  auto R = llvm::cantFail(CallbackModelRunner::create(
      {}, createSpec<double>("scores", {-1}), [](ArrayRef<TensorRef>) {
        return Expected<TensorValue>(
            TensorValue::fromVector<double>("scores", {0.5, 1.5, 2.5}));
      }));
  MLB_ASSERT_VALUE(V, R->evaluate<std::vector<double>>());
  EXPECT_EQ(V, (std::vector<double>{0.5, 1.5, 2.5}));
  MLB_ASSERT_VALUE(W, R->evaluateVector<double>());
  EXPECT_EQ(W.size(), 3u);
  EXPECT_CONTAINS(errorText(R->evaluate<double>()), "3 elements");
}

TEST(RunnerTest, ModelErrorsPassThrough) {
  auto R = llvm::cantFail(CallbackModelRunner::create(
      {}, createSpec<int64_t>("a", {1}),
      [](ArrayRef<TensorRef>) -> Expected<TensorValue> {
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "model is down");
      }));
  EXPECT_CONTAINS(errorText(R->evaluate<int64_t>()), "model is down");
}

TEST(RunnerTest, CreateRejectsDuplicateFeatureNames) {
  EXPECT_CONTAINS(
      errorText(CallbackModelRunner::create(
          {createSpec<float>("x", {1}), createSpec<float>("x", {2})},
          createSpec<float>("a", {1}),
          [](ArrayRef<TensorRef>) -> Expected<TensorValue> {
            return TensorValue::scalar<float>("a", 0);
          })),
      "'x'");
}

/// The shape of stock llc's eviction advice: an index below 33 whose `mask`
/// entry is 1. The policy answers whatever \p Answer holds.
std::unique_ptr<CallbackModelRunner> makeEvictionRunner(const int64_t &Answer) {
  TensorSpec Advice =
      llvm::cantFail(createSpec<int64_t>("index_to_evict", {1})
                         .withConstraints(ValueRange{0, 33}, "mask"));
  return llvm::cantFail(CallbackModelRunner::create(
      {createSpec<int64_t>("mask", {1, 33})}, Advice,
      [&Answer](ArrayRef<TensorRef>) -> Expected<TensorValue> {
        return TensorValue::scalar<int64_t>("index_to_evict", Answer);
      }));
}

TEST(RunnerTest, AdviceBelowItsRangeIsRefused) {
  int64_t Answer = -1;
  auto R = makeEvictionRunner(Answer);
  std::string Err = errorText(R->evaluate<int64_t>());
  EXPECT_CONTAINS(Err, "advice 'index_to_evict'");
  EXPECT_CONTAINS(Err, "is -1");
  EXPECT_CONTAINS(Err, "range [0, 33)");
}

TEST(RunnerTest, AdviceAtOrAboveItsRangeIsRefused) {
  for (int64_t V : {int64_t(33), int64_t(99), int64_t(1) << 40}) {
    int64_t Answer = V;
    auto R = makeEvictionRunner(Answer);
    std::string Err = errorText(R->evaluateChecked());
    EXPECT_CONTAINS(Err, "is " + std::to_string(V));
    EXPECT_CONTAINS(Err, "range [0, 33)");
  }
}

TEST(RunnerTest, AdviceWhoseMaskEntryIsZeroIsRefused) {
  int64_t Answer = 5;
  auto R = makeEvictionRunner(Answer);
  R->getTensor<int64_t>(0)[3] = 1;
  std::string Err = errorText(R->evaluate<int64_t>());
  EXPECT_CONTAINS(Err, "is 5");
  EXPECT_CONTAINS(Err, "mask feature 'mask' is 0");
  Answer = 3;
  MLB_ASSERT_VALUE(V, R->evaluate<int64_t>());
  EXPECT_EQ(V, 3);
}

TEST(RunnerTest, MaskFeatureTheModelLacksIsAnError) {
  TensorSpec Advice = llvm::cantFail(
      createSpec<int64_t>("a", {1}).withConstraints(std::nullopt, "mask"));
  auto R = llvm::cantFail(CallbackModelRunner::create(
      {}, Advice, [](ArrayRef<TensorRef>) -> Expected<TensorValue> {
        return TensorValue::scalar<int64_t>("a", 0);
      }));
  EXPECT_CONTAINS(errorText(R->evaluate<int64_t>()),
                  "masked by feature 'mask'");
}

TEST(RunnerTest, NaNAndInfinityAreOutsideAFloatRange) {
  float Answer = 0;
  TensorSpec Advice =
      llvm::cantFail(createSpec<float>("priority", {1})
                         .withConstraints(ValueRange{0, int64_t(1) << 32}));
  auto R = llvm::cantFail(CallbackModelRunner::create(
      {}, Advice, [&Answer](ArrayRef<TensorRef>) -> Expected<TensorValue> {
        return TensorValue::scalar<float>("priority", Answer);
      }));
  for (float Bad :
       {std::numeric_limits<float>::quiet_NaN(),
        std::numeric_limits<float>::infinity(), -0.5f, 4294967296.0f}) {
    Answer = Bad;
    std::string Err = errorText(R->evaluate<float>());
    EXPECT_CONTAINS(Err, "advice 'priority'");
    EXPECT_CONTAINS(Err, "range [0, 4294967296)");
  }
  Answer = 4294967040.0f; // The largest float below 2^32.
  MLB_ASSERT_VALUE(V, R->evaluate<float>());
  EXPECT_EQ(V, 4294967040.0f);
}

TEST(RunnerTest, UnsignedAdviceAgainstARange) {
  uint64_t Answer = UINT64_MAX;
  TensorSpec Advice = llvm::cantFail(
      createSpec<uint64_t>("u", {1}).withConstraints(ValueRange{-5, 10}));
  auto R = llvm::cantFail(CallbackModelRunner::create(
      {}, Advice, [&Answer](ArrayRef<TensorRef>) -> Expected<TensorValue> {
        return TensorValue::scalar<uint64_t>("u", Answer);
      }));
  EXPECT_CONTAINS(errorText(R->evaluate<uint64_t>()),
                  "is 18446744073709551615");
  Answer = 0;
  MLB_ASSERT_VALUE(V, R->evaluate<uint64_t>());
  EXPECT_EQ(V, 0u);
}

} // namespace
