//===- RunnerFactoryTest.cpp - createModelRunner and the registry ---------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/Registry.h"
#include "mlbridge/RunnerFactory.h"

#include <string>
#include <system_error>

using namespace mlbridge;
using namespace mlbridge::test;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;

namespace {

std::vector<TensorSpec> features() {
  return {createSpec<int64_t>("callee_basic_block_count", {1})};
}
TensorSpec advice() { return createSpec<int64_t>("inlining_decision", {1}); }

CallbackModelRunner::Callback alwaysOne() {
  return [](llvm::ArrayRef<TensorRef>) -> Expected<TensorValue> {
    return TensorValue::fromBytes("inlining_decision", ElementType::Int64, {1},
                                  llvm::ArrayRef<char>("\1\0\0\0\0\0\0\0", 8));
  };
}

std::string createError(const RunnerConfig &C,
                        CallbackModelRunner::Callback Builtin = nullptr) {
  Expected<std::unique_ptr<MLModelRunner>> R =
      createModelRunner(C, features(), advice(), std::move(Builtin));
  if (R)
    return "";
  return errorText(R.takeError());
}

TEST(RunnerFactoryTest, CallbackRunnerAnswersWithItsPolicy) {
  RunnerConfig C;
  MLB_ASSERT_VALUE(R, createModelRunner(C, features(), advice(), alwaysOne()));
  MLB_ASSERT_VALUE(V, R->evaluate<int64_t>());
  EXPECT_EQ(V, 1);
  EXPECT_FALSE(R->capabilities().Outcomes);
  EXPECT_FALSE(R->capabilities().SpecChanges);
}

TEST(RunnerFactoryTest, CallbackRunnerWithoutAPolicyNamesTheRunnerOption) {
  RunnerConfig C;
  EXPECT_CONTAINS(createError(C), "-mlbridge-runner");
}

TEST(RunnerFactoryTest, PipeRunnerNeedsAChannelNamedByTheCallersOption) {
  RunnerConfig C;
  C.Kind = RunnerKind::Pipe;
  C.KindGiven = true;
  C.OptionPrefix = "mlbridge-inline-";
  EXPECT_CONTAINS(createError(C), "-mlbridge-inline-channel=<base>");
}

TEST(RunnerFactoryTest, PipeRunnerCarriesTheScoreSpecAndSaysWhatItCan) {
  RunnerConfig C;
  C.Kind = RunnerKind::Pipe;
  C.KindGiven = true;
  C.Channel = "/nonexistent/mlbridge-factory-test";
  C.Score = createSpec<float>("reward", {1});
  // The pipe runner connects on first use: creating it opens nothing.
  MLB_ASSERT_VALUE(R, createModelRunner(C, features(), advice()));
  EXPECT_TRUE(R->capabilities().Outcomes);
  EXPECT_TRUE(R->capabilities().SpecChanges);
  ASSERT_TRUE(R->scoreSpec().has_value());
  EXPECT_EQ(R->scoreSpec()->name(), "reward");
  EXPECT_TRUE(R->usable());
  MLB_ASSERT_OK(R->finish());
  EXPECT_FALSE(R->usable());
}

TEST(RunnerFactoryTest, GrpcRunnerRefusesAnotherSerDes) {
  RunnerConfig C;
  C.Kind = RunnerKind::Grpc;
  C.KindGiven = true;
  C.Address = "localhost:1";
  C.SerDes = SerDesKind::JSON;
  C.SerDesGiven = true;
  EXPECT_CONTAINS(createError(C), "speaks protobuf only");
}

TEST(RunnerFactoryTest, GrpcServerRunnerOnAFreePortNeedsAReadyFile) {
  RunnerConfig C;
  C.Kind = RunnerKind::GrpcServer;
  C.KindGiven = true;
  EXPECT_CONTAINS(createError(C), "on a free port ('127.0.0.1:0') the trainer "
                                  "can learn the address only from a file");
  EXPECT_CONTAINS(createError(C), "-mlbridge-ready-file=<path>");
}

TEST(RunnerFactoryTest, GrpcServerRunnerRefusesAChannelAndAnotherSerDes) {
  RunnerConfig C;
  C.Kind = RunnerKind::GrpcServer;
  C.KindGiven = true;
  C.ReadyFile = "/tmp/ready";
  C.Channel = "/tmp/x";
  EXPECT_CONTAINS(createError(C), "listens on an address, not a channel base");
  C.Channel.clear();
  C.SerDes = SerDesKind::JSON;
  C.SerDesGiven = true;
  EXPECT_CONTAINS(createError(C), "speaks protobuf only");
}

TEST(RunnerFactoryTest, GrpcServerIsARunnerKindByName) {
  EXPECT_EQ(parseRunnerKind("grpc-server"), RunnerKind::GrpcServer);
  EXPECT_EQ(runnerKindName(RunnerKind::GrpcServer), "grpc-server");
}

TEST(RunnerFactoryTest, ModelOptionIsRefusedForARunnerWithoutModels) {
  RunnerConfig C;
  C.Kind = RunnerKind::Pipe;
  C.KindGiven = true;
  C.Channel = "/tmp/x";
  C.Model = "inliner-oz";
  EXPECT_CONTAINS(createError(C), "is for the onnx and tfaot runners");
}

TEST(RunnerFactoryTest, ModelFileIsLoadedByPathNotLookedUp) {
  RunnerConfig C;
  C.Kind = RunnerKind::Onnx;
  C.KindGiven = true;
  C.Model = "no-such-model.onnx";
  C.ModelIsFile = true;
  std::string Message = createError(C);
  EXPECT_CONTAINS(Message, "no-such-model.onnx");
  EXPECT_EQ(Message.find("registry"), std::string::npos) << Message;
}

TEST(RunnerFactoryTest, CallbackRunnerCannotChangeSpecs) {
  RunnerConfig C;
  MLB_ASSERT_VALUE(R, createModelRunner(C, features(), advice(), alwaysOne()));
  Error E = R->changeSpecs(features(), advice());
  ASSERT_TRUE(bool(E));
  EXPECT_EQ(llvm::errorToErrorCode(std::move(E)),
            std::make_error_code(std::errc::not_supported));
}

TEST(RunnerFactoryTest, EveryRunnerOfThisBuildIsRegistered) {
  // Linking MLBridge::RuntimeStatic is enough for each to register itself.
  std::vector<StringRef> Names = {"pipe"};
#ifdef MLBRIDGE_HAVE_GRPC
  Names.push_back("grpc");
#endif
#ifdef MLBRIDGE_HAVE_ONNX
  Names.push_back("onnx");
#endif
#ifdef MLBRIDGE_HAVE_TF_AOT
  Names.push_back("tfaot");
#endif
  for (StringRef Name : Names) {
    Expected<RunnerFactoryFn> F = findRunner(Name);
    EXPECT_TRUE(bool(F)) << Name.str() << ": "
                         << (F ? "" : errorText(F.takeError()));
  }
}

// The component loader is asked for a name nobody registered, and its error
// is what the caller sees; without a loader the core names what is missing.
Error refusingLoader(StringRef What, StringRef Name) {
  return llvm::createStringError(std::make_error_code(std::errc::io_error),
                                 "loader asked for " + What + " " + Name);
}

TEST(RunnerFactoryTest, UnregisteredRunnerIsAskedOfTheComponentLoader) {
  setComponentLoader(refusingLoader);
  Expected<RunnerFactoryFn> F = findRunner("no-such-runner");
  setComponentLoader(nullptr);
  ASSERT_FALSE(bool(F));
  EXPECT_EQ(errorText(F.takeError()), "loader asked for runner no-such-runner");
}

TEST(RunnerFactoryTest, UnknownRunnerWithoutALoaderIsNamed) {
  Expected<RunnerFactoryFn> F = findRunner("no-such-runner");
  ASSERT_FALSE(bool(F));
  EXPECT_CONTAINS(errorText(F.takeError()),
                  "there is no no-such-runner runner");
}

TEST(RunnerFactoryTest, TaskModelOptionNamesTheToolThatTakesTheModel) {
  EXPECT_EQ(taskModelOption("inliner"), "-mlbridge-inline-model (opt)");
  EXPECT_EQ(taskModelOption("regalloc"), "-mlbridge-regalloc-model (llc)");
  EXPECT_EQ(taskModelOption("no-such-task"), "");
}

} // namespace
