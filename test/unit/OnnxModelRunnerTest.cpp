//===- OnnxModelRunnerTest.cpp - OnnxModelRunner and the RL loop ----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Real ONNX Runtime on models written at build time by
// test/unit/Inputs/onnx/make_models.py; every answer is computed here too.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/OnnxModelRunner.h"
#include "mlbridge/Environment.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <pwd.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace mlbridge;
using llvm::Expected;

namespace {

#define ASSERT_OK(E)                                                           \
  do {                                                                         \
    if (llvm::Error Err_ = (E))                                                \
      FAIL() << llvm::toString(std::move(Err_));                               \
  } while (false)

#define ASSERT_VALUE(Var, Exp)                                                 \
  auto Var##OrErr = (Exp);                                                     \
  if (!Var##OrErr)                                                             \
    FAIL() << llvm::toString(Var##OrErr.takeError());                          \
  auto &Var = *Var##OrErr

template <typename T> std::string errorOf(Expected<T> V) {
  return V ? "<success>" : llvm::toString(V.takeError());
}

std::string modelPath(llvm::StringRef Name) {
  return std::string(MLBRIDGE_ONNX_TEST_MODELS) + "/" + Name.str();
}

/// The features of multi_input.onnx (declared there as c, a, b), listed in
/// another order and with one the model does not know.
std::vector<TensorSpec> multiInputFeatures() {
  return {createSpec<float>("b", {2}), createSpec<int32_t>("unused", {5}),
          createSpec<double>("c", {1}), createSpec<int64_t>("a", {1})};
}

/// What multi_input.onnx computes.
float multiInputScore(int64_t A, float B0, float B1, double C) {
  return static_cast<float>(A) + 10 * B0 + 100 * B1 +
         1000 * static_cast<float>(C);
}

TEST(OnnxModelRunnerTest, RuntimeVersionIsChecked) {
  std::string Version = getOnnxRuntimeVersion();
  EXPECT_EQ(Version.rfind("1.", 0), 0u) << Version;
  ASSERT_OK(checkOnnxRuntimeVersion());
  // A C API version no library has: the real library refuses it.
  std::string Message = llvm::toString(checkOnnxRuntimeVersion(999));
  EXPECT_NE(Message.find("ONNX Runtime " + Version + " is too old"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("C API version 999"), std::string::npos) << Message;
}

TEST(OnnxModelRunnerTest, RefusesAModelAnotherUserControls) {
  ASSERT_EQ(::geteuid(), 0u) << "chown needs root";
  llvm::SmallString<128> Dir;
  ASSERT_FALSE(
      llvm::sys::fs::createUniqueDirectory("mlbridge-onnx-trust", Dir));
  std::string Copy = (Dir + "/multi_input.onnx").str();
  ASSERT_FALSE(llvm::sys::fs::copy_file(modelPath("multi_input.onnx"), Copy));
  struct passwd *Nobody = ::getpwnam("nobody");
  ASSERT_NE(Nobody, nullptr);
  ASSERT_EQ(::chown(Copy.c_str(), Nobody->pw_uid, Nobody->pw_gid), 0);
  std::string Message = errorOf(OnnxModel::load(Copy));
  EXPECT_NE(Message.find("refusing to load ONNX model " + Copy +
                         ": it belongs to user 'nobody'"),
            std::string::npos)
      << Message;
  ASSERT_EQ(::chown(Copy.c_str(), 0, 0), 0);
  EXPECT_EQ(errorOf(OnnxModel::load(Copy)), "<success>");
  llvm::sys::fs::remove_directories(Dir);
}

TEST(OnnxModelRunnerTest, LoadedModelDescribesItsInputsAndOutputs) {
  ASSERT_VALUE(Model, OnnxModel::load(modelPath("multi_input.onnx")));
  std::vector<TensorSpec> Want = {createSpec<double>("c", {1}),
                                  createSpec<int64_t>("a", {1}),
                                  createSpec<float>("b", {2})};
  EXPECT_EQ(Model->inputs().vec(), Want);
  ASSERT_EQ(Model->outputs().size(), 1u);
  EXPECT_EQ(Model->outputs()[0], createSpec<float>("score", {1}));

  ASSERT_VALUE(Dyn, OnnxModel::load(modelPath("dynamic_scale.onnx")));
  EXPECT_EQ(Dyn->inputs()[0], createSpec<float>("x", {DynamicDim}));
}

TEST(OnnxModelRunnerTest, ModelMetadataIsReadByKey) {
  ASSERT_VALUE(Runner, OnnxModelRunner::create(
                           modelPath("multi_input.onnx"), multiInputFeatures(),
                           createSpec<float>("score", {1})));
  EXPECT_EQ(Runner->modelMetadata("test.weights"),
            std::optional<std::string>("1 10 100 1000"));
  EXPECT_EQ(Runner->modelMetadata("test.empty"),
            std::optional<std::string>(""));
  EXPECT_EQ(Runner->modelMetadata("test.absent"), std::nullopt);

  ASSERT_VALUE(None,
               OnnxModelRunner::create(modelPath("dynamic_scale.onnx"),
                                       {createSpec<float>("x", {DynamicDim})},
                                       createSpec<float>("y", {DynamicDim})));
  EXPECT_EQ(None->modelMetadata("test.weights"), std::nullopt);
}

TEST(OnnxModelRunnerTest, EveryInputIsFedByName) {
  ASSERT_VALUE(Runner, OnnxModelRunner::create(
                           modelPath("multi_input.onnx"), multiInputFeatures(),
                           createSpec<float>("score", {1})));
  ASSERT_OK(Runner->populateFeatures(
      std::pair(llvm::StringRef("a"), int64_t(3)),
      std::pair(llvm::StringRef("b"), std::vector<float>{5, 7}),
      std::pair(llvm::StringRef("c"), 2.0),
      std::pair(llvm::StringRef("unused"), std::vector<int32_t>(5, 9))));
  ASSERT_VALUE(Score, Runner->evaluate<float>());
  EXPECT_EQ(Score, 2753.0f);
  // Changing each input alone changes the answer by its own weight.
  ASSERT_OK(Runner->setFeature("a", int64_t(4)));
  ASSERT_VALUE(S1, Runner->evaluate<float>());
  EXPECT_EQ(S1, multiInputScore(4, 5, 7, 2));
  ASSERT_OK(Runner->setFeature("b", std::vector<float>{6, 7}));
  ASSERT_VALUE(S2, Runner->evaluate<float>());
  EXPECT_EQ(S2, multiInputScore(4, 6, 7, 2));
  ASSERT_OK(Runner->setFeature("b", std::vector<float>{6, 8}));
  ASSERT_VALUE(S3, Runner->evaluate<float>());
  EXPECT_EQ(S3, multiInputScore(4, 6, 8, 2));
  ASSERT_OK(Runner->setFeature("c", 3.0));
  ASSERT_VALUE(S4, Runner->evaluate<float>());
  EXPECT_EQ(S4, multiInputScore(4, 6, 8, 3));
  // The feature the model does not know is not fed.
  ASSERT_OK(Runner->setFeature("unused", std::vector<int32_t>(5, -1)));
  ASSERT_VALUE(S5, Runner->evaluate<float>());
  EXPECT_EQ(S5, S4);
}

TEST(OnnxModelRunnerTest, WritesThroughGetTensorAreSeen) {
  // MLGO passes keep the pointers from getTensor() and write through them:
  // the zero-copy input tensors must see those writes.
  ASSERT_VALUE(Runner, OnnxModelRunner::create(
                           modelPath("multi_input.onnx"), multiInputFeatures(),
                           createSpec<float>("score", {1})));
  size_t A = *Runner->getFeatureIndex("a");
  size_t B = *Runner->getFeatureIndex("b");
  int64_t *APtr = Runner->getTensor<int64_t>(A);
  float *BPtr = Runner->getTensor<float>(B);
  for (int I = 0; I < 20; ++I) {
    *APtr = I;
    BPtr[0] = static_cast<float>(I % 3);
    BPtr[1] = static_cast<float>(I % 5);
    ASSERT_VALUE(Score, Runner->evaluate<float>());
    EXPECT_EQ(Score, multiInputScore(I, I % 3, I % 5, 0)) << I;
  }
}

TEST(OnnxModelRunnerTest, MismatchesAreAllListed) {
  std::vector<TensorSpec> Features = {createSpec<int32_t>("a", {1}),
                                      createSpec<float>("b", {3})};
  std::string Message =
      errorOf(OnnxModelRunner::create(modelPath("multi_input.onnx"), Features,
                                      createSpec<float>("score", {1})));
  EXPECT_NE(Message.find("multi_input.onnx"), std::string::npos) << Message;
  EXPECT_NE(Message.find("3 differences"), std::string::npos) << Message;
  EXPECT_NE(Message.find("input 'c' is not a feature the compiler sends"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("input 'a' is int64_t but the compiler sends int32_t"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("input 'b' has shape [2] but the compiler sends "
                         "shape [3]"),
            std::string::npos)
      << Message;
}

TEST(OnnxModelRunnerTest, OutputTypeMismatchIsRefused) {
  std::string Message = errorOf(OnnxModelRunner::create(
      modelPath("identity_float.onnx"), {createSpec<float>("x", {3})},
      createSpec<int64_t>("y", {3})));
  EXPECT_NE(Message.find("output 'y' cannot answer as advice 'y'"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("it is float but the advice is int64_t"),
            std::string::npos)
      << Message;
  Message = errorOf(OnnxModelRunner::create(modelPath("identity_float.onnx"),
                                            {createSpec<float>("x", {3})},
                                            createSpec<float>("y", {4})));
  EXPECT_NE(Message.find("shape [3] but the advice has shape [4]"),
            std::string::npos)
      << Message;
}

TEST(OnnxModelRunnerTest, OutputIsChosenByName) {
  std::vector<TensorSpec> Features = {createSpec<float>("x", {2})};
  ASSERT_VALUE(Prod,
               OnnxModelRunner::create(modelPath("two_outputs.onnx"), Features,
                                       createSpec<float>("prod", {1})));
  ASSERT_VALUE(Sum,
               OnnxModelRunner::create(modelPath("two_outputs.onnx"), Features,
                                       createSpec<float>("sum", {1})));
  for (auto *R : {Prod.get(), Sum.get()})
    ASSERT_OK(R->setFeature("x", std::vector<float>{3, 5}));
  ASSERT_VALUE(P, Prod->evaluate<float>());
  ASSERT_VALUE(S, Sum->evaluate<float>());
  EXPECT_EQ(P, 15.0f);
  EXPECT_EQ(S, 8.0f);

  std::string Message = errorOf(OnnxModelRunner::create(
      modelPath("two_outputs.onnx"), Features, createSpec<float>("cost", {1})));
  EXPECT_NE(Message.find("no output named 'cost' (its outputs: 'sum', 'prod')"),
            std::string::npos)
      << Message;

  OnnxRunnerOptions Options;
  Options.OutputName = "prod";
  ASSERT_VALUE(
      Named, OnnxModelRunner::create(modelPath("two_outputs.onnx"), Features,
                                     createSpec<float>("cost", {1}), Options));
  ASSERT_OK(Named->setFeature("x", std::vector<float>{2, 4}));
  ASSERT_VALUE(N, Named->evaluate<float>());
  EXPECT_EQ(N, 8.0f);
}

TEST(OnnxModelRunnerTest, SingleOutputAnswersWhateverTheAdviceName) {
  ASSERT_VALUE(Runner,
               OnnxModelRunner::create(modelPath("batched.onnx"),
                                       {createSpec<float>("x", {3})},
                                       createSpec<float>("decision", {3})));
  ASSERT_OK(Runner->setFeature("x", std::vector<float>{1, 2, 3}));
  // The model reads and answers [1,3]; the pass sees its own shape [3].
  ASSERT_VALUE(Out, Runner->evaluateChecked());
  EXPECT_EQ(Out.shape().vec(), std::vector<int64_t>{3});
  EXPECT_EQ(Out.data<float>().vec(), (std::vector<float>{2, 3, 4}));
}

template <typename T>
void roundTrip(llvm::StringRef TypeName, std::vector<T> Values) {
  SCOPED_TRACE(TypeName.str());
  ASSERT_VALUE(Runner, OnnxModelRunner::create(
                           modelPath(("identity_" + TypeName + ".onnx").str()),
                           {createSpec<T>("x", {3})}, createSpec<T>("y", {3})));
  ASSERT_OK(Runner->setFeature("x", Values));
  ASSERT_VALUE(Out, Runner->template evaluateVector<T>());
  EXPECT_EQ(Out, Values);
}

TEST(OnnxModelRunnerTest, EveryElementTypeRoundTrips) {
  roundTrip<int8_t>("int8_t", {-128, 0, 127});
  roundTrip<uint8_t>("uint8_t", {0, 1, 255});
  roundTrip<int16_t>("int16_t", {-32768, 5, 32767});
  roundTrip<uint16_t>("uint16_t", {0, 7, 65535});
  roundTrip<int32_t>("int32_t", {std::numeric_limits<int32_t>::min(), -1,
                                 std::numeric_limits<int32_t>::max()});
  roundTrip<uint32_t>("uint32_t", {0, 3, std::numeric_limits<uint32_t>::max()});
  roundTrip<int64_t>("int64_t", {std::numeric_limits<int64_t>::min(), 0,
                                 std::numeric_limits<int64_t>::max()});
  roundTrip<uint64_t>("uint64_t", {0, 1, std::numeric_limits<uint64_t>::max()});
  roundTrip<float>("float", {-1.5f, 0.1f, 3.4e38f});
  roundTrip<double>("double", {-2.5, 0.1, 1e300});
  roundTrip<std::string>("string", {"", "inline", "caf\xc3\xa9"});
  // bool: std::vector<bool> is packed, so go through setFeature's copy.
  ASSERT_VALUE(Runner, OnnxModelRunner::create(modelPath("identity_bool.onnx"),
                                               {createSpec<bool>("x", {3})},
                                               createSpec<bool>("y", {3})));
  ASSERT_OK(Runner->setFeature("x", std::vector<bool>{true, false, true}));
  ASSERT_VALUE(Out, Runner->evaluateChecked());
  EXPECT_EQ(Out.data<bool>().vec(), (std::vector<bool>{true, false, true}));
}

TEST(OnnxModelRunnerTest, UnsupportedElementTypeIsNamed) {
  std::string Message =
      errorOf(OnnxModel::load(modelPath("identity_float16.onnx")));
  EXPECT_NE(Message.find("input 'x' has element type float16, which mlbridge "
                         "does not support"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("output 'y' has element type float16"),
            std::string::npos)
      << Message;
}

TEST(OnnxModelRunnerTest, DynamicShapedFeaturesWork) {
  ASSERT_VALUE(Scale,
               OnnxModelRunner::create(modelPath("dynamic_scale.onnx"),
                                       {createSpec<float>("x", {DynamicDim})},
                                       createSpec<float>("y", {DynamicDim})));
  ASSERT_VALUE(Sum,
               OnnxModelRunner::create(modelPath("dynamic_sum.onnx"),
                                       {createSpec<float>("x", {DynamicDim})},
                                       createSpec<float>("s", {1})));
  // Growing, shrinking and empty: the input tensor follows the buffer.
  for (size_t N : {3u, 7u, 1u, 0u, 5u}) {
    std::vector<float> X(N);
    for (size_t I = 0; I < N; ++I)
      X[I] = static_cast<float>(I + N);
    ASSERT_OK(Scale->setFeature("x", X));
    ASSERT_OK(Sum->setFeature("x", X));
    ASSERT_VALUE(Y, Scale->evaluateVector<float>());
    ASSERT_EQ(Y.size(), N);
    float Total = 0;
    for (size_t I = 0; I < N; ++I) {
      EXPECT_EQ(Y[I], 2 * X[I]);
      Total += X[I];
    }
    ASSERT_VALUE(S, Sum->evaluate<float>());
    EXPECT_EQ(S, Total) << N;
  }
  // A static feature may feed a dynamic input.
  ASSERT_VALUE(Static, OnnxModelRunner::create(modelPath("dynamic_sum.onnx"),
                                               {createSpec<float>("x", {4})},
                                               createSpec<float>("s", {1})));
  ASSERT_OK(Static->setFeature("x", std::vector<float>{1, 2, 3, 4}));
  ASSERT_VALUE(S, Static->evaluate<float>());
  EXPECT_EQ(S, 10.0f);
}

TEST(OnnxModelRunnerTest, DynamicFeatureOfWrongSizeForStaticInputIsAnError) {
  ASSERT_VALUE(Runner,
               OnnxModelRunner::create(modelPath("identity_float.onnx"),
                                       {createSpec<float>("x", {DynamicDim})},
                                       createSpec<float>("y", {3})));
  ASSERT_OK(Runner->setFeature("x", std::vector<float>{1, 2}));
  std::string Message = errorOf(Runner->evaluateChecked());
  EXPECT_NE(Message.find("feature 'x' has shape [2] (2 elements) but input "
                         "'x' needs 3"),
            std::string::npos)
      << Message;
  ASSERT_OK(Runner->setFeature("x", std::vector<float>{1, 2, 3}));
  ASSERT_VALUE(Out, Runner->evaluateVector<float>());
  EXPECT_EQ(Out, (std::vector<float>{1, 2, 3}));
}

TEST(OnnxModelRunnerTest, BadModelFilesGiveClearErrors) {
  std::string Missing = modelPath("no_such_model.onnx");
  std::string Message = errorOf(OnnxModel::load(Missing));
  EXPECT_NE(Message.find("cannot open ONNX model '" + Missing + "'"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("o such file"), std::string::npos) << Message;

  Message = errorOf(OnnxModel::load(MLBRIDGE_ONNX_TEST_MODELS));
  EXPECT_NE(Message.find("it is a directory"), std::string::npos) << Message;

  llvm::SmallString<128> Garbage;
  int FD = -1;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("mlbridge-garbage", "onnx",
                                                  FD, Garbage));
  {
    llvm::raw_fd_ostream OS(FD, /*shouldClose=*/true);
    OS << "this is not an ONNX model\n";
  }
  Message = errorOf(OnnxModel::load(Garbage));
  llvm::sys::fs::remove(Garbage);
  EXPECT_NE(
      Message.find("cannot load ONNX model '" + Garbage.str().str() + "'"),
      std::string::npos)
      << Message;

  // A truncated model: the first half of a real one.
  auto Whole = llvm::MemoryBuffer::getFile(modelPath("multi_input.onnx"));
  ASSERT_TRUE(static_cast<bool>(Whole));
  llvm::SmallString<128> Truncated;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("mlbridge-truncated", "onnx",
                                                  FD, Truncated));
  {
    llvm::raw_fd_ostream OS(FD, /*shouldClose=*/true);
    OS << (*Whole)->getBuffer().take_front((*Whole)->getBufferSize() / 2);
  }
  Message = errorOf(OnnxModel::load(Truncated));
  llvm::sys::fs::remove(Truncated);
  EXPECT_NE(
      Message.find("cannot load ONNX model '" + Truncated.str().str() + "'"),
      std::string::npos)
      << Message;

  OnnxRunnerOptions NoThreads;
  NoThreads.IntraOpThreads = 0;
  Message = errorOf(OnnxModel::load(modelPath("multi_input.onnx"), NoThreads));
  EXPECT_NE(Message.find("must be at least 1"), std::string::npos) << Message;
  Message = errorOf(OnnxModelRunner::create(std::shared_ptr<const OnnxModel>(),
                                            {}, createSpec<float>("y", {1})));
  EXPECT_NE(Message.find("no model"), std::string::npos) << Message;
}

/// A folder with a copy of dynamic_scale.onnx, to put ORT-format copies
/// beside: multi_input.ort, whose inputs tell which file was read.
struct OrtFormatCopyTest : ::testing::Test {
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mlbridge-ort", Dir));
    Model = (Dir + "/model.onnx").str();
    ASSERT_FALSE(
        llvm::sys::fs::copy_file(modelPath("dynamic_scale.onnx"), Model));
    Copy = ortFormatCopyPath(Model);
  }
  void TearDown() override { llvm::sys::fs::remove_directories(Dir); }
  /// Sets the modification time of \p File to \p Seconds since the epoch.
  static void touch(const std::string &File, int64_t Seconds) {
    int FD = -1;
    ASSERT_FALSE(llvm::sys::fs::openFileForWrite(
        File, FD, llvm::sys::fs::CD_OpenExisting, llvm::sys::fs::OF_Append));
    llvm::sys::TimePoint<> T{std::chrono::seconds(Seconds)};
    EXPECT_FALSE(llvm::sys::fs::setLastAccessAndModificationTime(FD, T, T));
    ::close(FD);
  }
  llvm::SmallString<128> Dir;
  std::string Model, Copy;
};

TEST_F(OrtFormatCopyTest, CopyIsNamedForThisOnnxRuntime) {
  EXPECT_EQ(
      Copy,
      (Dir + "/model.onnxruntime-" + getOnnxRuntimeVersion() + ".ort").str());
  EXPECT_EQ(ortFormatCopyPath("/m/agents"),
            "/m/agents.onnxruntime-" + getOnnxRuntimeVersion() + ".ort");
}

TEST_F(OrtFormatCopyTest, CopyIsReadInsteadOfTheModel) {
  ASSERT_FALSE(llvm::sys::fs::copy_file(modelPath("multi_input.ort"), Copy));
  touch(Model, 1000);
  touch(Copy, 2000);
  ASSERT_VALUE(Loaded, OnnxModel::load(Model));
  EXPECT_EQ(Loaded->path(), Model);
  EXPECT_EQ(Loaded->sessionFile(), Copy);
  // multi_input's inputs, not dynamic_scale's.
  EXPECT_EQ(Loaded->inputs().size(), 3u);
  EXPECT_EQ(Loaded->inputs()[0], createSpec<double>("c", {1}));
  // The copy keeps the model's metadata.
  EXPECT_EQ(Loaded->metadata("test.weights"),
            std::optional<std::string>("1 10 100 1000"));
}

TEST_F(OrtFormatCopyTest, CopyOlderThanTheModelIsIgnored) {
  ASSERT_FALSE(llvm::sys::fs::copy_file(modelPath("multi_input.ort"), Copy));
  touch(Model, 2000);
  touch(Copy, 1000);
  ASSERT_VALUE(Loaded, OnnxModel::load(Model));
  EXPECT_EQ(Loaded->sessionFile(), Model);
  EXPECT_EQ(Loaded->inputs()[0], createSpec<float>("x", {DynamicDim}));
}

TEST_F(OrtFormatCopyTest, CopyForAnotherOnnxRuntimeIsIgnored) {
  std::string Other = (Dir + "/model.onnxruntime-0.0.1.ort").str();
  ASSERT_FALSE(llvm::sys::fs::copy_file(modelPath("multi_input.ort"), Other));
  ASSERT_VALUE(Loaded, OnnxModel::load(Model));
  EXPECT_EQ(Loaded->sessionFile(), Model);
}

TEST_F(OrtFormatCopyTest, BrokenCopyIsNamedWithTheFix) {
  {
    std::error_code EC;
    llvm::raw_fd_ostream OS(Copy, EC);
    ASSERT_FALSE(EC);
    OS << "not an ORT-format model\n";
  }
  touch(Model, 1000);
  touch(Copy, 2000);
  std::string Message = errorOf(OnnxModel::load(Model));
  EXPECT_NE(Message.find("cannot load ONNX model '" + Model +
                         "' from its ORT-format copy '" + Copy + "'"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("remove the copy"), std::string::npos) << Message;
}

TEST(OnnxModelRunnerTest, OneModelServesManyThreads) {
  ASSERT_VALUE(Model, OnnxModel::load(modelPath("multi_input.onnx")));
  constexpr int NumThreads = 4;
  constexpr int PerThread = 500;
  std::atomic<int> Correct{0};
  std::vector<std::string> Failures(NumThreads);
  std::vector<std::thread> Threads;
  for (int T = 0; T < NumThreads; ++T)
    Threads.emplace_back([&, T] {
      Expected<std::unique_ptr<OnnxModelRunner>> Runner =
          OnnxModelRunner::create(Model, multiInputFeatures(),
                                  createSpec<float>("score", {1}));
      if (!Runner) {
        Failures[T] = llvm::toString(Runner.takeError());
        return;
      }
      for (int I = 0; I < PerThread; ++I) {
        int64_t A = T * 1000 + I;
        float B0 = static_cast<float>(I % 7), B1 = static_cast<float>(T);
        double C = static_cast<double>(I % 3);
        if (llvm::Error E = (*Runner)->populateFeatures(
                std::pair(llvm::StringRef("a"), A),
                std::pair(llvm::StringRef("b"), std::vector<float>{B0, B1}),
                std::pair(llvm::StringRef("c"), C))) {
          Failures[T] = llvm::toString(std::move(E));
          return;
        }
        Expected<float> Score = (*Runner)->evaluate<float>();
        if (!Score) {
          Failures[T] = llvm::toString(Score.takeError());
          return;
        }
        if (*Score != multiInputScore(A, B0, B1, C)) {
          Failures[T] = "thread " + std::to_string(T) + " evaluation " +
                        std::to_string(I) + ": got " + std::to_string(*Score);
          return;
        }
        ++Correct;
      }
    });
  for (std::thread &T : Threads)
    T.join();
  for (const std::string &F : Failures)
    EXPECT_EQ(F, "");
  EXPECT_EQ(Correct.load(), NumThreads * PerThread);
  // Every runner is gone; the model is still usable.
  EXPECT_EQ(Model.use_count(), 1);
}

TEST(OnnxModelRunnerTest, AnswersLikeNumpyForModelsFromMlbridgeExport) {
  // Written by mlbridge.export.export_numpy_dense, with numpy's answers.
  auto Text = llvm::MemoryBuffer::getFile(modelPath("exported_samples.json"));
  ASSERT_TRUE(static_cast<bool>(Text));
  Expected<llvm::json::Value> Samples = llvm::json::parse((*Text)->getBuffer());
  ASSERT_TRUE(static_cast<bool>(Samples))
      << llvm::toString(Samples.takeError());
  const llvm::json::Array *List = Samples->getAsArray();
  ASSERT_NE(List, nullptr);
  ASSERT_EQ(List->size(), 200u);

  // The pass sends the features in its own order, plus one the model lacks.
  std::vector<TensorSpec> Features = {
      createSpec<bool>("is_hot", {1}), createSpec<int64_t>("callee_size", {1}),
      createSpec<float>("weights", {2, 2}), createSpec<double>("newer", {1})};
  ASSERT_VALUE(Decision, OnnxModelRunner::create(
                             modelPath("exported_decision.onnx"), Features,
                             createSpec<int64_t>("decision", {1})));
  ASSERT_VALUE(Scores, OnnxModelRunner::create(
                           modelPath("exported_scores.onnx"), Features,
                           createSpec<float>("scores", {3})));
  size_t Checked = 0;
  for (const llvm::json::Value &V : *List) {
    const llvm::json::Object *O = V.getAsObject();
    ASSERT_NE(O, nullptr);
    std::vector<float> Weights;
    for (const llvm::json::Value &W : *O->getArray("weights"))
      Weights.push_back(static_cast<float>(*W.getAsNumber()));
    std::vector<float> Want;
    for (const llvm::json::Value &W : *O->getArray("scores"))
      Want.push_back(static_cast<float>(*W.getAsNumber()));
    for (MLModelRunner *R : {static_cast<MLModelRunner *>(Decision.get()),
                             static_cast<MLModelRunner *>(Scores.get())})
      ASSERT_OK(R->populateFeatures(
          std::pair(llvm::StringRef("callee_size"),
                    *O->getInteger("callee_size")),
          std::pair(llvm::StringRef("weights"), Weights),
          std::pair(llvm::StringRef("is_hot"), *O->getBoolean("is_hot")),
          std::pair(llvm::StringRef("newer"), 1.0)));
    ASSERT_VALUE(D, Decision->evaluate<int64_t>());
    EXPECT_EQ(D, *O->getInteger("decision")) << Checked;
    ASSERT_VALUE(S, Scores->evaluateVector<float>());
    ASSERT_EQ(S.size(), 3u);
    for (size_t I = 0; I < 3; ++I)
      EXPECT_NEAR(S[I], Want[I], 1e-5 * (1 + std::fabs(Want[I]))) << Checked;
    ++Checked;
  }
  EXPECT_EQ(Checked, 200u);
}

//===----------------------------------------------------------------------===//
// The RL loop (Environment, runEpisode) with ONNX agents.
//===----------------------------------------------------------------------===//

/// An environment that shows scripted observations to scripted agents and
/// records every action it is given.
class ScriptedEnvironment : public Environment {
public:
  ScriptedEnvironment(std::vector<std::vector<float>> Observations,
                      std::vector<size_t> Agents = {},
                      ActionSelection Selection = ActionSelection::Argmax)
      : Observations(std::move(Observations)), Agents(std::move(Agents)),
        Selection(Selection) {}

  llvm::Error reset() override {
    ++Resets;
    Step = 0;
    Taken.clear();
    return llvm::Error::success();
  }
  llvm::Error observe(MLModelRunner &Agent) override {
    return Agent.setFeature("obs", Observations[Step]);
  }
  llvm::Error step(const Action &A) override {
    Taken.push_back(A.Index);
    AgentsSeen.push_back(A.Agent);
    RawSeen.push_back(A.Advice.data<float>().vec());
    ++Step;
    return llvm::Error::success();
  }
  bool isDone() const override { return Step == Observations.size(); }
  size_t nextAgent() const override {
    return Agents.empty() ? 0 : Agents[Step];
  }
  ActionSelection actionSelection(size_t) const override { return Selection; }

  std::vector<std::vector<float>> Observations;
  std::vector<size_t> Agents;
  ActionSelection Selection;
  size_t Step = 0;
  int Resets = 0;
  std::vector<std::optional<size_t>> Taken;
  std::vector<size_t> AgentsSeen;
  std::vector<std::vector<float>> RawSeen;
};

std::unique_ptr<OnnxModelRunner> makePolicy(llvm::StringRef Name) {
  return llvm::cantFail(
      OnnxModelRunner::create(modelPath(Name), {createSpec<float>("obs", {4})},
                              createSpec<float>("logits", {4})));
}

TEST(EnvironmentTest, SingleAgentEpisodeTakesTheArgmaxActions) {
  std::unique_ptr<OnnxModelRunner> Agent = makePolicy("policy_max.onnx");
  ScriptedEnvironment Env(
      {{0, 1, 0, 0}, {3, 0, 0, 0}, {0, 0, -1, 9}, {0, 0, 5, 1}, {2, 2, 2, 2}});
  ASSERT_VALUE(Result, runEpisode(Env, *Agent));
  EXPECT_EQ(Result.Steps, 5u);
  EXPECT_EQ(Env.Resets, 1);
  std::vector<std::optional<size_t>> Want = {1, 0, 3, 2, 0};
  EXPECT_EQ(Env.Taken, Want);
  ASSERT_EQ(Result.Actions.size(), 5u);
  EXPECT_EQ(Result.Actions[2].Index, std::optional<size_t>(3));
  EXPECT_EQ(Result.Actions[2].Advice.data<float>().vec(),
            (std::vector<float>{0, 0, -1, 9}));
  // A second episode starts over.
  ASSERT_VALUE(Again, runEpisode(Env, *Agent));
  EXPECT_EQ(Again.Steps, 5u);
  EXPECT_EQ(Env.Resets, 2);
  EXPECT_EQ(Env.Taken, Want);
}

TEST(EnvironmentTest, MultiAgentEpisodeFollowsTheEnvironmentsChoice) {
  std::unique_ptr<OnnxModelRunner> Max = makePolicy("policy_max.onnx");
  std::unique_ptr<OnnxModelRunner> Min = makePolicy("policy_min.onnx");
  std::vector<float> Obs = {1, 4, 2, 3};
  ScriptedEnvironment Env({Obs, Obs, Obs, Obs, Obs}, {0, 1, 1, 0, 1});
  MLModelRunner *Agents[] = {Max.get(), Min.get()};
  ASSERT_VALUE(Result, runEpisode(Env, Agents));
  EXPECT_EQ(Result.Steps, 5u);
  EXPECT_EQ(Env.AgentsSeen, (std::vector<size_t>{0, 1, 1, 0, 1}));
  // The max agent picks index 1 (4), the min agent index 0 (1).
  std::vector<std::optional<size_t>> Want = {1, 0, 0, 1, 0};
  EXPECT_EQ(Env.Taken, Want);
  for (size_t I = 0; I < Result.Actions.size(); ++I)
    EXPECT_EQ(Result.Actions[I].Agent, Env.AgentsSeen[I]);
}

TEST(EnvironmentTest, RawSelectionPassesTheAdviceThrough) {
  std::unique_ptr<OnnxModelRunner> Min = makePolicy("policy_min.onnx");
  ScriptedEnvironment Env({{1, 2, 3, 4}, {-1, 0.5f, 0, 8}}, {},
                          ActionSelection::Raw);
  ASSERT_VALUE(Result, runEpisode(Env, *Min));
  EXPECT_EQ(Result.Steps, 2u);
  EXPECT_EQ(Env.Taken,
            (std::vector<std::optional<size_t>>{std::nullopt, std::nullopt}));
  EXPECT_EQ(Env.RawSeen[0], (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(Env.RawSeen[1], (std::vector<float>{1, -0.5f, 0, -8}));
}

/// Never done: the step limit must end the episode.
class EndlessEnvironment : public ScriptedEnvironment {
public:
  EndlessEnvironment() : ScriptedEnvironment({{0, 0, 1, 0}}) {}
  llvm::Error step(const Action &A) override {
    Taken.push_back(A.Index);
    return llvm::Error::success();
  }
  bool isDone() const override { return false; }
};

TEST(EnvironmentTest, StepLimitEndsAnEndlessEpisode) {
  std::unique_ptr<OnnxModelRunner> Agent = makePolicy("policy_max.onnx");
  EndlessEnvironment Env;
  EpisodeOptions Options;
  Options.MaxSteps = 10;
  std::string Message = errorOf(runEpisode(Env, *Agent, Options));
  EXPECT_NE(Message.find("episode not done after 10 steps"), std::string::npos)
      << Message;
  EXPECT_EQ(Env.Taken.size(), 10u);
}

TEST(EnvironmentTest, ErrorsEndTheEpisodeAndSayWhere) {
  std::unique_ptr<OnnxModelRunner> Agent = makePolicy("policy_max.onnx");
  // The environment picks an agent that does not exist.
  ScriptedEnvironment BadAgent({{1, 0, 0, 0}, {1, 0, 0, 0}}, {0, 7});
  std::string Message = errorOf(runEpisode(BadAgent, *Agent));
  EXPECT_NE(Message.find("episode step 1: the environment chose agent 7 but "
                         "there are 1 agents"),
            std::string::npos)
      << Message;
  // An observation the agent cannot take (wrong element count).
  ScriptedEnvironment BadObs({{1, 0, 0, 0}, {1, 2}});
  Message = errorOf(runEpisode(BadObs, *Agent));
  EXPECT_NE(Message.find("episode step 1: feature 'obs' has 4 elements"),
            std::string::npos)
      << Message;
  EXPECT_NE(errorOf(runEpisode(BadObs, {})).find("no agents"),
            std::string::npos);

  // Argmax over advice that has no order, from a non-ONNX agent: the loop
  // is runner-agnostic.
  auto Flags = llvm::cantFail(CallbackModelRunner::create(
      {createSpec<float>("obs", {4})}, createSpec<bool>("flags", {4}),
      [](llvm::ArrayRef<TensorRef>) -> Expected<TensorValue> {
        return TensorValue::fromVector<bool>("flags",
                                             {true, false, true, false});
      }));
  ScriptedEnvironment Env({{1, 0, 0, 0}});
  Message = errorOf(runEpisode(Env, *Flags));
  EXPECT_NE(Message.find("episode step 0: agent 0: advice 'flags' is bool: "
                         "argmax needs numeric logits"),
            std::string::npos)
      << Message;
}

TEST(EnvironmentTest, ArgmaxRefusesNaNAndPicksTheFirstOfTies) {
  EXPECT_EQ(*argmaxAction(TensorValue::fromVector<int32_t>("l", {3, 9, 9, 1})),
            1u);
  EXPECT_EQ(*argmaxAction(TensorValue::fromVector<uint64_t>("l", {0, 0})), 0u);
  std::string Message = errorOf(argmaxAction(
      TensorValue::fromVector<double>("l", {1.0, std::nan(""), 2.0})));
  EXPECT_NE(Message.find("element 1 is NaN"), std::string::npos) << Message;
  Message = errorOf(argmaxAction(
      TensorValue::fromVector<float>("l", llvm::ArrayRef<float>())));
  EXPECT_NE(Message.find("is empty"), std::string::npos) << Message;
}

} // namespace
