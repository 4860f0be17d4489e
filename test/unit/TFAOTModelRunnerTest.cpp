//===- TFAOTModelRunnerTest.cpp - TensorFlow AOT runner tests -------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Real TensorFlow models (mlbridge.aot.testmodels) compiled by `mlbridge aot`,
// run linked in and loaded from shared objects, and compared with the answers
// TensorFlow itself gave for the same inputs.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/TFAOTModelRunner.h"

#include "TestUtil.h"
#include "mixed_mlbridge.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "gtest/gtest.h"

#include <cmath>
#include <dlfcn.h>
#include <pwd.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace mlbridge;
using namespace mlbridge::test;
using namespace llvm;

namespace {

/// One input set and TensorFlow's outputs for it.
struct Case {
  std::vector<float> X;
  std::vector<int64_t> Count;
  std::vector<int32_t> Flags;
  std::map<std::string, std::vector<double>> Outputs;
};

template <typename T>
std::vector<T> numbers(const json::Object &O, StringRef Key) {
  std::vector<T> Result;
  if (const json::Array *A = O.getArray(Key))
    for (const json::Value &V : *A)
      Result.push_back(static_cast<T>(*V.getAsNumber()));
  return Result;
}

/// Reads <model>.answers.json written beside the SavedModel.
std::vector<Case> readAnswers(StringRef Model) {
  std::string Path =
      std::string(AOT_MODELS_DIR) + "/" + Model.str() + ".answers.json";
  auto Buf = MemoryBuffer::getFile(Path);
  if (!Buf)
    ADD_FAILURE() << "cannot read " << Path;
  if (!Buf)
    return {};
  Expected<json::Value> Doc = json::parse((*Buf)->getBuffer());
  if (!Doc) {
    ADD_FAILURE() << toString(Doc.takeError());
    return {};
  }
  std::vector<Case> Cases;
  for (const json::Value &C : *Doc->getAsObject()->getArray("cases")) {
    const json::Object &In = *C.getAsObject()->getObject("inputs");
    const json::Object &Out = *C.getAsObject()->getObject("outputs");
    Case K;
    K.X = numbers<float>(In, "x");
    K.Count = numbers<int64_t>(In, "count");
    K.Flags = numbers<int32_t>(In, "flags");
    for (const auto &KV : Out)
      K.Outputs[KV.first.str()] = numbers<double>(Out, KV.first);
    Cases.push_back(std::move(K));
  }
  return Cases;
}

/// The compiler's features for the mixed model, deliberately not in the
/// model's argument order (count, flags, x) and with `x` as a flat [4].
std::vector<TensorSpec> mixedFeatures() {
  return {createSpec<int32_t>("flags", {2}), createSpec<float>("x", {4}),
          createSpec<int64_t>("count", {1})};
}

void setMixed(MLModelRunner &R, const Case &C) {
  ASSERT_FALSE(R.setFeature("x", C.X));
  ASSERT_FALSE(R.setFeature("count", C.Count));
  ASSERT_FALSE(R.setFeature("flags", C.Flags));
}

bool isLoaded(const char *Path) {
  void *H = dlopen(Path, RTLD_NOW | RTLD_NOLOAD);
  if (H)
    dlclose(H);
  return H != nullptr;
}

TEST(TFAOTModelRunner, SharedObjectAnswersLikeTensorFlow) {
  std::vector<Case> Cases = readAnswers("mixed");
  ASSERT_EQ(Cases.size(), 2u);
  MLB_ASSERT_VALUE(Score,
                   TFAOTModelRunner::load(AOT_MIXED_SO, mixedFeatures(),
                                          createSpec<float>("score", {1})));
  MLB_ASSERT_VALUE(Doubled,
                   TFAOTModelRunner::load(AOT_MIXED_SO, mixedFeatures(),
                                          createSpec<int64_t>("doubled", {1})));
  for (const Case &C : Cases) {
    setMixed(*Score, C);
    setMixed(*Doubled, C);
    MLB_ASSERT_VALUE(S, Score->evaluate<float>());
    EXPECT_NEAR(S, C.Outputs.at("score")[0], 1e-5);
    MLB_ASSERT_VALUE(D, Doubled->evaluate<int64_t>());
    EXPECT_EQ(D, static_cast<int64_t>(C.Outputs.at("doubled")[0]));
  }
}

// evaluate<T>() of a one-element advice takes the runner's shortcut (no
// TensorValue); it answers as the general path does.
TEST(TFAOTModelRunner, ScalarAnswerIsTheGeneralPathsAnswer) {
  std::vector<Case> Cases = readAnswers("mixed");
  ASSERT_EQ(Cases.size(), 2u);
  MLB_ASSERT_VALUE(R,
                   TFAOTModelRunner::load(AOT_MIXED_SO, mixedFeatures(),
                                          createSpec<int64_t>("doubled", {1})));
  for (const Case &C : Cases) {
    setMixed(*R, C);
    MLB_ASSERT_VALUE(Scalar, R->evaluate<int64_t>());
    MLB_ASSERT_VALUE(Vector, R->evaluateVector<int64_t>());
    ASSERT_EQ(Vector.size(), 1u);
    EXPECT_EQ(Scalar, Vector[0]);
    EXPECT_EQ(Scalar, static_cast<int64_t>(C.Outputs.at("doubled")[0]));
  }
}

// The shortcut checks the advice's declared range before the caller sees it,
// with the general path's words.
TEST(TFAOTModelRunner, ScalarAnswerOutsideItsRangeIsAnError) {
  std::vector<Case> Cases = readAnswers("mixed");
  ASSERT_EQ(Cases.size(), 2u);
  MLB_ASSERT_VALUE(Advice, createSpec<int64_t>("doubled", {1})
                               .withConstraints(ValueRange{0, 11}, ""));
  MLB_ASSERT_VALUE(R, TFAOTModelRunner::load(AOT_MIXED_SO, mixedFeatures(),
                                             std::move(Advice)));
  setMixed(*R, Cases[0]); // doubled = 11
  std::string Scalar = errorText(R->evaluate<int64_t>().takeError());
  EXPECT_EQ(Scalar,
            "advice 'doubled' element 0 is 11, outside its range [0, 11)");
  EXPECT_EQ(errorText(R->evaluateVector<int64_t>().takeError()), Scalar);
}

TEST(TFAOTModelRunner, LinkedModelAnswersLikeTensorFlow) {
  std::vector<Case> Cases = readAnswers("mixed");
  ASSERT_EQ(Cases.size(), 2u);
  MLB_ASSERT_VALUE(R, TFAOTModelRunner::create(
                          mlbridge_aot::mixed_functions(), mixedFeatures(),
                          createSpec<float>("score", {1})));
  auto &AOT = static_cast<TFAOTModelRunner &>(*R);
  EXPECT_EQ(AOT.modelName(), "mixed");
  ASSERT_EQ(AOT.modelInputs().size(), 3u);
  for (const Case &C : Cases) {
    setMixed(*R, C);
    MLB_ASSERT_VALUE(S, R->evaluate<float>());
    EXPECT_NEAR(S, C.Outputs.at("score")[0], 1e-5);
  }
}

TEST(TFAOTModelRunner, ModelsWithoutSetArgDataGetTheFeaturesCopied) {
  std::vector<Case> Cases = readAnswers("mixed");
  ASSERT_EQ(Cases.size(), 2u);
  // What a model built before set_arg_data looks like to the runner.
  TFAOTFunctions Fns = mlbridge_aot::mixed_functions();
  ASSERT_NE(Fns.SetArgData, nullptr);
  Fns.SetArgData = nullptr;
  MLB_ASSERT_VALUE(R,
                   TFAOTModelRunner::create(Fns, mixedFeatures(),
                                            createSpec<float>("score", {1})));
  for (const Case &C : Cases) {
    setMixed(*R, C);
    MLB_ASSERT_VALUE(S, R->evaluate<float>());
    EXPECT_NEAR(S, C.Outputs.at("score")[0], 1e-5);
  }
}

TEST(TFAOTModelRunner, FeaturesWrittenInPlaceAreSeenByEveryCall) {
  // The model reads the feature buffers themselves: writing them through
  // getTensor() between calls must change the answer each time.
  std::vector<Case> Cases = readAnswers("mixed");
  ASSERT_EQ(Cases.size(), 2u);
  MLB_ASSERT_VALUE(R, TFAOTModelRunner::load(AOT_MIXED_SO, mixedFeatures(),
                                             createSpec<float>("score", {1})));
  for (int Round = 0; Round < 2; ++Round)
    for (const Case &C : Cases) {
      std::copy(C.X.begin(), C.X.end(), R->getTensor<float>(1));
      std::copy(C.Count.begin(), C.Count.end(), R->getTensor<int64_t>(2));
      std::copy(C.Flags.begin(), C.Flags.end(), R->getTensor<int32_t>(0));
      MLB_ASSERT_VALUE(S, R->evaluate<float>());
      EXPECT_NEAR(S, C.Outputs.at("score")[0], 1e-5);
    }
}

TEST(TFAOTModelRunner, DenseFiftyThousandFloats) {
  std::vector<Case> Cases = readAnswers("dense50k");
  ASSERT_EQ(Cases.size(), 2u);
  MLB_ASSERT_VALUE(R, TFAOTModelRunner::load(AOT_DENSE_SO,
                                             {createSpec<float>("x", {50000})},
                                             createSpec<float>("y", {1})));
  for (const Case &C : Cases) {
    ASSERT_EQ(C.X.size(), 50000u);
    MLB_ASSERT_OK(R->setFeature("x", C.X));
    MLB_ASSERT_VALUE(Y, R->evaluate<float>());
    double Want = C.Outputs.at("y")[0];
    EXPECT_NEAR(Y, Want, 1e-4 * std::max(1.0, std::fabs(Want)));
  }
}

TEST(TFAOTModelRunner, ExtraFeaturesAreNotFed) {
  std::vector<TensorSpec> Features = mixedFeatures();
  Features.insert(Features.begin(), createSpec<double>("newer_feature", {3}));
  MLB_ASSERT_VALUE(R, TFAOTModelRunner::load(AOT_MIXED_SO, Features,
                                             createSpec<float>("score", {1})));
  Case C = readAnswers("mixed").front();
  setMixed(*R, C);
  MLB_ASSERT_OK(R->setFeature("newer_feature", std::vector<double>{1, 2, 3}));
  MLB_ASSERT_VALUE(S, R->evaluate<float>());
  EXPECT_NEAR(S, C.Outputs.at("score")[0], 1e-5);
}

TEST(TFAOTModelRunner, MissingAndMismatchedFeaturesAreAllListed) {
  // No `count`; `x` is double; `flags` has 3 elements.
  std::vector<TensorSpec> Features = {createSpec<double>("x", {4}),
                                      createSpec<int32_t>("flags", {3})};
  std::string Msg = errorText(TFAOTModelRunner::load(
      AOT_MIXED_SO, Features, createSpec<float>("score", {1})));
  EXPECT_NE(Msg.find("model 'mixed'"), std::string::npos) << Msg;
  EXPECT_NE(Msg.find("3 differences"), std::string::npos) << Msg;
  EXPECT_NE(Msg.find("'count'"), std::string::npos) << Msg;
  EXPECT_NE(Msg.find("'x'"), std::string::npos) << Msg;
  EXPECT_NE(Msg.find("'flags'"), std::string::npos) << Msg;
}

TEST(TFAOTModelRunner, AdviceMustBeAnOutput) {
  std::string Msg = errorText(TFAOTModelRunner::load(
      AOT_MIXED_SO, mixedFeatures(), createSpec<float>("decision", {1})));
  EXPECT_NE(Msg.find("no output named 'decision'"), std::string::npos) << Msg;
  EXPECT_NE(Msg.find("doubled, score"), std::string::npos) << Msg;
  Msg = errorText(TFAOTModelRunner::load(AOT_MIXED_SO, mixedFeatures(),
                                         createSpec<int32_t>("score", {1})));
  EXPECT_NE(Msg.find("output 'score' cannot answer"), std::string::npos) << Msg;
}

TEST(TFAOTModelRunner, BadSharedObjectsAreRefused) {
  std::string Msg =
      errorText(TFAOTModelRunner::load("/nonexistent/model.so", mixedFeatures(),
                                       createSpec<float>("score", {1})));
  EXPECT_NE(Msg.find("cannot use TF AOT model /nonexistent/model.so"),
            std::string::npos)
      << Msg;
  Msg = errorText(TFAOTModelRunner::load(AOT_NO_ABI_SO, mixedFeatures(),
                                         createSpec<float>("score", {1})));
  EXPECT_NE(Msg.find("is not an mlbridge AOT model"), std::string::npos) << Msg;
  Msg = errorText(TFAOTModelRunner::load(AOT_WRONG_ABI_SO, mixedFeatures(),
                                         createSpec<float>("score", {1})));
  EXPECT_NE(Msg.find("has mlbridge AOT ABI version 99 but this mlbridge "
                     "reads version 1"),
            std::string::npos)
      << Msg;
  // A text file is not a shared object either.
  Msg = errorText(TFAOTModelRunner::load(
      std::string(AOT_MODELS_DIR) + "/mixed.answers.json", mixedFeatures(),
      createSpec<float>("score", {1})));
  EXPECT_NE(Msg.find("cannot load TF AOT model"), std::string::npos) << Msg;
}

/// The features of TFAOTRowsModel.cpp: two inputs with rows of their own,
/// one the model does not read.
std::vector<TensorSpec> rowsFeatures() {
  return {createSpec<float>("weights", {-1}), createSpec<int64_t>("count", {1}),
          createSpec<float>("unread", {2}),
          createSpec<float>("values", {-1, 2})};
}

/// Each input with rows of its own takes its feature's rows, read in place,
/// whatever they are from one evaluation to the next (none too).
TEST(TFAOTModelRunner, InputsWithRowsOfTheirOwnTakeEachFeaturesRows) {
  MLB_ASSERT_VALUE(R, TFAOTModelRunner::load(AOT_ROWS_SO, rowsFeatures(),
                                             createSpec<float>("total", {1})));
  ASSERT_FALSE(R->setFeature("count", int64_t(100)));
  for (int64_t Rows : {3, 1, 5, 0, 2}) {
    std::vector<float> Values, Weights;
    float Want = 100;
    for (int64_t I = 0; I < Rows; ++I) {
      Values.insert(Values.end(), {float(I), 0.5f});
      Weights.push_back(float(10 * I));
      Want += float(I) + 0.5f + float(10 * I);
    }
    ASSERT_FALSE(R->setFeatureWithShape<float>("values", {Rows, 2}, Values));
    ASSERT_FALSE(
        R->setFeatureWithShape<float>("weights", {Rows}, ArrayRef(Weights)));
    MLB_ASSERT_VALUE(Total, R->evaluate<float>());
    EXPECT_EQ(Total, Want) << Rows << " rows";
  }
}

/// A run the model refuses is an error with the model's own reason.
TEST(TFAOTModelRunner, ARefusedRunGivesTheModelsReason) {
  MLB_ASSERT_VALUE(R, TFAOTModelRunner::load(AOT_ROWS_SO, rowsFeatures(),
                                             createSpec<float>("total", {1})));
  ASSERT_FALSE(R->setFeatureWithShape<float>("values", {2, 2}, {1, 2, 3, 4}));
  ASSERT_FALSE(R->setFeatureWithShape<float>("weights", {3}, {1, 2, 3}));
  std::string Msg = errorText(R->evaluate<float>());
  EXPECT_NE(Msg.find("model 'rows' failed to run: values and weights have "
                     "different rows"),
            std::string::npos)
      << Msg;
  // Fixed, it answers again.
  ASSERT_FALSE(R->setFeatureWithShape<float>("weights", {2}, {1, 2}));
  MLB_ASSERT_VALUE(Total, R->evaluate<float>());
  EXPECT_EQ(Total, 13.0f);
}

/// Inputs with rows are read in place: a model that cannot is refused.
TEST(TFAOTModelRunner, RowsWithoutSetArgDataAreRefused) {
  std::string Msg = errorText(
      TFAOTModelRunner::load(AOT_ROWS_NO_SET_ARG_DATA_SO, rowsFeatures(),
                             createSpec<float>("total", {1})));
  EXPECT_NE(Msg.find("has set_arg_rows but also set_batch, or no "
                     "set_arg_data"),
            std::string::npos)
      << Msg;
}

/// dlopen() runs a library's constructors: a model file another user
/// controls is refused before it is loaded.
TEST(TFAOTModelRunner, RefusesASharedObjectAnotherUserControls) {
  ASSERT_EQ(::geteuid(), 0u) << "chown needs root";
  SmallString<128> Dir;
  ASSERT_FALSE(sys::fs::createUniqueDirectory("mlbridge-aot-trust", Dir));
  std::string Copy = (Dir + "/mixed.so").str();
  ASSERT_FALSE(sys::fs::copy_file(AOT_MIXED_SO, Copy));
  struct passwd *Nobody = ::getpwnam("nobody");
  ASSERT_NE(Nobody, nullptr);
  ASSERT_EQ(::chown(Copy.c_str(), Nobody->pw_uid, Nobody->pw_gid), 0);
  std::string Msg = errorText(TFAOTModelRunner::load(
      Copy, mixedFeatures(), createSpec<float>("score", {1})));
  EXPECT_NE(Msg.find("refusing to load TF AOT model " + Copy +
                     ": it belongs to user 'nobody'"),
            std::string::npos)
      << Msg;
  ASSERT_EQ(::chown(Copy.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(Copy.c_str(), 0646), 0);
  Msg = errorText(TFAOTModelRunner::load(Copy, mixedFeatures(),
                                         createSpec<float>("score", {1})));
  EXPECT_NE(Msg.find("its group or others may write it (mode 0646)"),
            std::string::npos)
      << Msg;
  // Once it is the user's and private, the same file loads.
  ASSERT_EQ(::chmod(Copy.c_str(), 0644), 0);
  EXPECT_EQ(errorText(TFAOTModelRunner::load(Copy, mixedFeatures(),
                                             createSpec<float>("score", {1}))),
            "<success>");
  sys::fs::remove_directories(Dir);
}

TEST(TFAOTModelRunner, RunnersShareOneLoadedLibrary) {
  ASSERT_FALSE(isLoaded(AOT_DENSE_SO));
  std::vector<Case> Cases = readAnswers("dense50k");
  ASSERT_EQ(Cases.size(), 2u);
  auto Make = [] {
    return TFAOTModelRunner::load(AOT_DENSE_SO,
                                  {createSpec<float>("x", {50000})},
                                  createSpec<float>("y", {1}));
  };
  MLB_ASSERT_VALUE(A, Make());
  {
    MLB_ASSERT_VALUE(B, Make());
    EXPECT_TRUE(isLoaded(AOT_DENSE_SO));
    // Separate instances: B's inputs do not leak into A's.
    MLB_ASSERT_OK(A->setFeature("x", Cases[0].X));
    MLB_ASSERT_OK(B->setFeature("x", Cases[1].X));
    MLB_ASSERT_VALUE(YB, B->evaluate<float>());
    MLB_ASSERT_VALUE(YA, A->evaluate<float>());
    EXPECT_NEAR(YA, Cases[0].Outputs.at("y")[0], 1e-4);
    EXPECT_NEAR(YB, Cases[1].Outputs.at("y")[0],
                1e-4 * std::max(1.0, std::fabs(Cases[1].Outputs.at("y")[0])));
  }
  // B is gone; A still runs on the library.
  MLB_ASSERT_VALUE(Again, A->evaluate<float>());
  EXPECT_NEAR(Again, Cases[0].Outputs.at("y")[0], 1e-4);
  EXPECT_TRUE(isLoaded(AOT_DENSE_SO));
  A.reset();
  EXPECT_FALSE(isLoaded(AOT_DENSE_SO));
}

TEST(TFAOTModelRunner, ThreadsEachWithTheirOwnRunner) {
  std::vector<Case> Cases = readAnswers("mixed");
  ASSERT_EQ(Cases.size(), 2u);
  constexpr int NumThreads = 4;
  std::vector<std::string> Failures(NumThreads);
  std::vector<std::thread> Threads;
  for (int T = 0; T < NumThreads; ++T)
    Threads.emplace_back([&, T] {
      auto R = T % 2
                   ? TFAOTModelRunner::load(AOT_MIXED_SO, mixedFeatures(),
                                            createSpec<float>("score", {1}))
                   : TFAOTModelRunner::create(mlbridge_aot::mixed_functions(),
                                              mixedFeatures(),
                                              createSpec<float>("score", {1}));
      if (!R) {
        Failures[T] = toString(R.takeError());
        return;
      }
      for (int I = 0; I < 500; ++I) {
        const Case &C = Cases[(I + T) % 2];
        if (Error E = (*R)->populateFeatures(
                std::make_pair("x", C.X), std::make_pair("count", C.Count),
                std::make_pair("flags", C.Flags))) {
          Failures[T] = toString(std::move(E));
          return;
        }
        Expected<float> S = (*R)->evaluate<float>();
        if (!S) {
          Failures[T] = toString(S.takeError());
          return;
        }
        if (std::fabs(*S - C.Outputs.at("score")[0]) > 1e-5) {
          Failures[T] = "wrong score " + std::to_string(*S);
          return;
        }
      }
    });
  for (std::thread &T : Threads)
    T.join();
  for (int T = 0; T < NumThreads; ++T)
    EXPECT_EQ(Failures[T], "") << "thread " << T;
}

TEST(TFAOTModelRunner, LinkedFunctionsMustBeComplete) {
  TFAOTFunctions Fns = mlbridge_aot::mixed_functions();
  Fns.Run = nullptr;
  std::string Msg = errorText(TFAOTModelRunner::create(
      Fns, mixedFeatures(), createSpec<float>("score", {1})));
  EXPECT_NE(Msg.find("function run is not set"), std::string::npos) << Msg;
}

} // namespace
