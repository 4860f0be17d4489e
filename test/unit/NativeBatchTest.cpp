//===- NativeBatchTest.cpp - Native models with a dynamic batch -----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// An ONNX model with a symbolic batch (Inputs/native/make_batch_model.py),
// compiled by `mlbridge compile` with the batch dynamic (set_batch) and with
// --dim batch=1 (no set_batch, as models built before it), run by the TF AOT
// runner linked in and loaded, against ONNX Runtime's answers.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/TFAOTModelRunner.h"

#include "TestUtil.h"
#include "batch_mlp_mlbridge.h"
#include "batch_mlp_static_mlbridge.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "gtest/gtest.h"

#include <cmath>

using namespace mlbridge;
using namespace mlbridge::test;
using namespace llvm;

namespace {

/// One batch and ONNX Runtime's outputs for it.
struct Case {
  int64_t Rows = 0;
  std::vector<float> X, Scale, Offset, Scores;
  std::vector<int64_t> Choice;
};

template <typename T>
std::vector<T> numbers(const json::Object &O, StringRef Key) {
  std::vector<T> Result;
  if (const json::Array *A = O.getArray(Key))
    for (const json::Value &V : *A)
      Result.push_back(static_cast<T>(*V.getAsNumber()));
  return Result;
}

std::vector<Case> readCases() {
  auto Buf = MemoryBuffer::getFile(NATIVE_ANSWERS);
  if (!Buf) {
    ADD_FAILURE() << "cannot read " << NATIVE_ANSWERS;
    return {};
  }
  Expected<json::Value> Doc = json::parse((*Buf)->getBuffer());
  if (!Doc) {
    ADD_FAILURE() << toString(Doc.takeError());
    return {};
  }
  std::vector<Case> Cases;
  for (const json::Value &V : *Doc->getAsObject()->getArray("cases")) {
    const json::Object &C = *V.getAsObject();
    const json::Object &In = *C.getObject("inputs");
    const json::Object &Out = *C.getObject("outputs");
    Case K;
    K.Rows = *C.getInteger("rows");
    K.X = numbers<float>(In, "x");
    K.Scale = numbers<float>(In, "scale");
    K.Offset = numbers<float>(In, "offset");
    K.Scores = numbers<float>(Out, "scores");
    K.Choice = numbers<int64_t>(Out, "choice");
    Cases.push_back(std::move(K));
  }
  return Cases;
}

/// The compiler's features: the batched ones with a dynamic leading
/// dimension, in another order than the model's.
std::vector<TensorSpec> batchFeatures() {
  return {createSpec<float>("offset", {3}), createSpec<float>("scale", {-1, 1}),
          createSpec<float>("x", {-1, 6})};
}

void setCase(MLModelRunner &R, const Case &C) {
  ASSERT_FALSE(R.setFeature("x", C.X));
  ASSERT_FALSE(R.setFeature("scale", C.Scale));
  ASSERT_FALSE(R.setFeature("offset", C.Offset));
}

/// Runs every case (1, 2, 7, 0 and 3 rows, so the batch grows and shrinks)
/// twice through a runner answering `choice` and one answering `scores`.
void expectOnnxRuntimeAnswers(MLModelRunner &Choice, MLModelRunner &Scores) {
  std::vector<Case> Cases = readCases();
  ASSERT_EQ(Cases.size(), 5u);
  for (int Round = 0; Round < 2; ++Round)
    for (const Case &C : Cases) {
      SCOPED_TRACE("batch of " + std::to_string(C.Rows));
      setCase(Choice, C);
      setCase(Scores, C);
      MLB_ASSERT_VALUE(Got, Choice.evaluateChecked());
      EXPECT_EQ(Got.shape().vec(), std::vector<int64_t>{C.Rows});
      ArrayRef<int64_t> Choices = Got.data<int64_t>();
      EXPECT_EQ(std::vector<int64_t>(Choices.begin(), Choices.end()), C.Choice);
      MLB_ASSERT_VALUE(S, Scores.evaluateChecked());
      EXPECT_EQ(S.shape().vec(), (std::vector<int64_t>{C.Rows, 3}));
      ArrayRef<float> Values = S.data<float>();
      ASSERT_EQ(Values.size(), C.Scores.size());
      // test_native.py's tolerance (rtol 1e-5, atol 1e-6), relative to the
      // row's largest score: the products' sums run in another order, so a
      // score that cancels to near 0 differs by an ulp of the row's terms.
      for (size_t I = 0; I < Values.size(); ++I) {
        size_t Row = I / 3;
        double Scale = 0;
        for (size_t J = Row * 3; J < Row * 3 + 3; ++J)
          Scale = std::max(Scale, std::fabs(double(C.Scores[J])));
        EXPECT_NEAR(Values[I], C.Scores[I], 1e-6 + 1e-5 * Scale)
            << "element " << I;
      }
    }
}

TEST(NativeBatch, LoadedModelAnswersLikeOnnxRuntimeAtEveryBatch) {
  MLB_ASSERT_VALUE(Choice,
                   TFAOTModelRunner::load(NATIVE_BATCH_SO, batchFeatures(),
                                          createSpec<int64_t>("choice", {-1})));
  MLB_ASSERT_VALUE(
      Scores, TFAOTModelRunner::load(NATIVE_BATCH_SO, batchFeatures(),
                                     createSpec<float>("scores", {-1, 3})));
  auto &AOT = static_cast<TFAOTModelRunner &>(*Choice);
  ASSERT_EQ(AOT.modelInputs().size(), 3u);
  EXPECT_EQ(AOT.modelInputs()[0].shape().vec(), (std::vector<int64_t>{-1, 6}));
  expectOnnxRuntimeAnswers(*Choice, *Scores);
}

TEST(NativeBatch, LinkedModelAnswersLikeOnnxRuntimeAtEveryBatch) {
  TFAOTFunctions Fns = mlbridge_aot::batch_mlp_functions();
  ASSERT_NE(Fns.SetBatch, nullptr);
  MLB_ASSERT_VALUE(
      Choice, TFAOTModelRunner::create(Fns, batchFeatures(),
                                       createSpec<int64_t>("choice", {-1})));
  MLB_ASSERT_VALUE(
      Scores, TFAOTModelRunner::create(Fns, batchFeatures(),
                                       createSpec<float>("scores", {-1, 3})));
  expectOnnxRuntimeAnswers(*Choice, *Scores);
}

TEST(NativeBatch, FeaturesAreCopiedIntoTheMovedBuffersWithoutSetArgData) {
  // set_batch moves the instance's own buffers: a runner that copies the
  // features in must write into the new ones.
  TFAOTFunctions Fns = mlbridge_aot::batch_mlp_functions();
  Fns.SetArgData = nullptr;
  MLB_ASSERT_VALUE(
      Choice, TFAOTModelRunner::create(Fns, batchFeatures(),
                                       createSpec<int64_t>("choice", {-1})));
  MLB_ASSERT_VALUE(
      Scores, TFAOTModelRunner::create(Fns, batchFeatures(),
                                       createSpec<float>("scores", {-1, 3})));
  expectOnnxRuntimeAnswers(*Choice, *Scores);
}

TEST(NativeBatch, StaticFeaturesFixTheBatch) {
  // A compiler that always sends two rows: static [2,6] features.
  Case C = readCases()[1];
  ASSERT_EQ(C.Rows, 2);
  MLB_ASSERT_VALUE(R,
                   TFAOTModelRunner::load(NATIVE_BATCH_SO,
                                          {createSpec<float>("x", {2, 6}),
                                           createSpec<float>("scale", {2, 1}),
                                           createSpec<float>("offset", {3})},
                                          createSpec<int64_t>("choice", {2})));
  setCase(*R, C);
  MLB_ASSERT_VALUE(Got, R->evaluate<std::vector<int64_t>>());
  EXPECT_EQ(Got, C.Choice);
}

TEST(NativeBatch, BatchedInputsMustAgreeOnTheRows) {
  MLB_ASSERT_VALUE(R,
                   TFAOTModelRunner::load(NATIVE_BATCH_SO, batchFeatures(),
                                          createSpec<int64_t>("choice", {-1})));
  MLB_ASSERT_OK(R->setFeature("x", std::vector<float>(12, 1.0f)));
  MLB_ASSERT_OK(R->setFeature("scale", std::vector<float>(3, 1.0f)));
  MLB_ASSERT_OK(R->setFeature("offset", std::vector<float>(3, 0.0f)));
  std::string Msg = errorText(R->evaluate<std::vector<int64_t>>());
  EXPECT_NE(Msg.find("the batched inputs disagree on the rows"),
            std::string::npos)
      << Msg;
  EXPECT_NE(Msg.find("'scale' has 3"), std::string::npos) << Msg;
  EXPECT_NE(Msg.find("'x' has 2"), std::string::npos) << Msg;
}

TEST(NativeBatch, AStaticAdviceTakesOnlyItsRows) {
  std::vector<Case> Cases = readCases();
  MLB_ASSERT_VALUE(R,
                   TFAOTModelRunner::load(NATIVE_BATCH_SO, batchFeatures(),
                                          createSpec<int64_t>("choice", {1})));
  setCase(*R, Cases[0]);
  MLB_ASSERT_VALUE(One, R->evaluate<int64_t>());
  EXPECT_EQ(One, Cases[0].Choice[0]);
  setCase(*R, Cases[1]);
  std::string Msg = errorText(R->evaluate<int64_t>());
  EXPECT_NE(Msg.find("model replied shape [2] for advice 'choice'"),
            std::string::npos)
      << Msg;
}

TEST(NativeBatch, ModelWithoutSetBatchStillLoadsWithStaticFeatures) {
  // --dim batch=1: static tables and no set_batch, as every model built
  // before set_batch (and every `mlbridge aot` model).
  Case C = readCases()[0];
  ASSERT_EQ(C.Rows, 1);
  std::vector<TensorSpec> Features = {createSpec<float>("x", {1, 6}),
                                      createSpec<float>("scale", {1, 1}),
                                      createSpec<float>("offset", {3})};
  MLB_ASSERT_VALUE(Loaded,
                   TFAOTModelRunner::load(NATIVE_STATIC_SO, Features,
                                          createSpec<int64_t>("choice", {1})));
  TFAOTFunctions Fns = mlbridge_aot::batch_mlp_static_functions();
  EXPECT_EQ(Fns.SetBatch, nullptr);
  MLB_ASSERT_VALUE(
      Linked, TFAOTModelRunner::create(Fns, Features,
                                       createSpec<int64_t>("choice", {1})));
  for (MLModelRunner *R : {Loaded.get(), Linked.get()}) {
    setCase(*R, C);
    MLB_ASSERT_VALUE(Got, R->evaluate<int64_t>());
    EXPECT_EQ(Got, C.Choice[0]);
  }
}

TEST(NativeBatch, ModelWithoutSetBatchRefusesDynamicFeatures) {
  std::string Msg = errorText(TFAOTModelRunner::load(
      NATIVE_STATIC_SO, batchFeatures(), createSpec<int64_t>("choice", {1})));
  EXPECT_NE(Msg.find("cannot take dynamic features"), std::string::npos) << Msg;
  EXPECT_NE(Msg.find("feature 'x' has the dynamic shape [-1,6] but model "
                     "input 'x' has the static shape [1,6]"),
            std::string::npos)
      << Msg;
  EXPECT_NE(Msg.find("feature 'scale'"), std::string::npos) << Msg;
  EXPECT_NE(Msg.find("it has no dynamic batch (no set_batch)"),
            std::string::npos)
      << Msg;
}

TEST(NativeBatch, DynamicTablesNeedSetBatch) {
  TFAOTFunctions Fns = mlbridge_aot::batch_mlp_functions();
  Fns.SetBatch = nullptr;
  std::string Msg = errorText(TFAOTModelRunner::create(
      Fns, batchFeatures(), createSpec<int64_t>("choice", {-1})));
  EXPECT_NE(Msg.find("its tables give a dynamic batch (a leading -1) but it "
                     "has no set_batch"),
            std::string::npos)
      << Msg;
}

} // namespace
