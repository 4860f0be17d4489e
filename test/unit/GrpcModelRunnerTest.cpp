//===- GrpcModelRunnerTest.cpp - The gRPC runners -------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Inference: GrpcModelRunner against a real Python model server
// (`python -m mlbridge serve test/unit/grpc_policies.py:NAME`) and, for
// replies Python would never send, a C++ ModelService in this process.
// Training: GrpcCompilerServer driven by a real Python trainer
// (test/unit/grpc_trainer.py). Every wait is bounded; no assertion on speed.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/GrpcModelRunner.h"
#include "mlbridge/v1/model_service.grpc.pb.h"
#include "user_service.pb.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/grpcpp.h>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <future>
#include <grpcpp/generic/generic_stub.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace mlbridge;
using namespace mlbridge::test;
using namespace std::chrono_literals;
using llvm::Expected;
using llvm::StringRef;

namespace {

/// A fault must end (not hang) well within this, whatever the load: the
/// bounds under test are 0.1-1 s, and a sanitizer build on a busy 2-core
/// machine runs them many times slower. A hang detector, never a speed claim.
constexpr auto HangBound = std::chrono::seconds(60);

std::vector<TensorSpec> features() {
  return {createSpec<int64_t>("x", {1}), createSpec<float>("v", {-1}),
          createSpec<std::string>("name", {1})};
}
TensorSpec advice() { return createSpec<int64_t>("y", {1}); }

std::string policyPath(StringRef Name) {
  return std::string(MLBRIDGE_SOURCE_DIR) +
         "/test/unit/grpc_policies.py:" + Name.str();
}

/// A private folder for ready files and logs, removed with its files.
class TempDir {
public:
  TempDir() {
    std::string Tmpl = "/tmp/mlbridge-grpc-test-XXXXXX";
    if (::mkdtemp(Tmpl.data()))
      Path = Tmpl;
  }
  ~TempDir() {
    if (!Path.empty())
      llvm::sys::fs::remove_directories(Path);
  }
  std::string file(StringRef Name) const { return Path + "/" + Name.str(); }
  std::string Path;
};

/// Waits at most \p Bound for \p File to hold a line; returns it, or "".
std::string waitForLine(const std::string &File, std::chrono::seconds Bound,
                        const std::function<bool()> &Alive) {
  auto Deadline = std::chrono::steady_clock::now() + Bound;
  while (std::chrono::steady_clock::now() < Deadline) {
    if (auto Buf = llvm::MemoryBuffer::getFile(File)) {
      StringRef Text = (*Buf)->getBuffer();
      if (Text.ends_with("\n"))
        return Text.trim().str();
    }
    if (!Alive())
      return "";
    std::this_thread::sleep_for(20ms);
  }
  return "";
}

/// A child process, terminated (SIGTERM, then SIGKILL) when destroyed.
class Child {
public:
  Child(std::vector<std::string> Args, const std::string &Log)
      : Args(std::move(Args)) {
    std::vector<StringRef> Argv(this->Args.begin(), this->Args.end());
    std::optional<StringRef> Redirects[] = {std::nullopt, StringRef(Log),
                                            StringRef(Log)};
    std::string Err;
    bool Failed = false;
    PI = llvm::sys::ExecuteNoWait(this->Args[0], Argv, std::nullopt, Redirects,
                                  0, &Err, &Failed);
    Started = !Failed && PI.Pid > 0;
    StartError = Err;
  }
  ~Child() { stop(); }

  bool alive() {
    if (Exited)
      return false;
    std::string Err;
    llvm::sys::ProcessInfo R =
        llvm::sys::Wait(PI, 0u, &Err, nullptr, /*Polling=*/true);
    if (R.Pid != 0) {
      Exited = true;
      ReturnCode = R.ReturnCode;
    }
    return !Exited;
  }
  /// Waits at most \p Seconds for the exit; returns the exit code, or -100.
  int wait(unsigned Seconds) {
    if (!Exited) {
      std::string Err;
      llvm::sys::ProcessInfo R = llvm::sys::Wait(PI, Seconds, &Err);
      if (R.Pid != 0) {
        Exited = true;
        ReturnCode = R.ReturnCode;
      }
    }
    return Exited ? ReturnCode : -100;
  }
  void kill(int Signal) {
    if (!Exited)
      ::kill(PI.Pid, Signal);
  }
  void stop() {
    if (!Started || Exited)
      return;
    kill(SIGTERM);
    if (wait(10) == -100) {
      kill(SIGKILL);
      wait(10);
    }
  }

  std::vector<std::string> Args;
  llvm::sys::ProcessInfo PI;
  bool Started = false, Exited = false;
  int ReturnCode = 0;
  std::string StartError;
};

/// `python -m mlbridge serve POLICY --ready-file ...` with its address.
class PythonServer {
public:
  explicit PythonServer(StringRef Policy, std::vector<std::string> Extra = {})
      : Proc(args(Policy, std::move(Extra)), Dir.file("serve.log")) {
    if (Proc.Started)
      Address =
          waitForLine(Dir.file("ready"), 60s, [&] { return Proc.alive(); });
  }
  std::string log() const {
    auto Buf = llvm::MemoryBuffer::getFile(Dir.file("serve.log"));
    return Buf ? (*Buf)->getBuffer().str() : std::string();
  }

  TempDir Dir;
  Child Proc;
  std::string Address;

private:
  std::vector<std::string> args(StringRef Policy,
                                std::vector<std::string> Extra) {
    std::vector<std::string> A = {
        MLBRIDGE_PYTHON,    "-m",           "mlbridge",       "serve",
        policyPath(Policy), "--ready-file", Dir.file("ready")};
    A.insert(A.end(), Extra.begin(), Extra.end());
    return A;
  }
};

#define ASSERT_SERVING(S)                                                      \
  ASSERT_TRUE((S).Proc.Started) << (S).Proc.StartError;                        \
  ASSERT_FALSE((S).Address.empty()) << "server not ready:\n" << (S).log()

/// A port on 127.0.0.1 that nothing listens on (bound, then released).
int unusedPort() {
  int FD = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in A{};
  A.sin_family = AF_INET;
  A.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  A.sin_port = 0;
  socklen_t Len = sizeof(A);
  int Port = -1;
  if (::bind(FD, reinterpret_cast<sockaddr *>(&A), sizeof(A)) == 0 &&
      ::getsockname(FD, reinterpret_cast<sockaddr *>(&A), &Len) == 0)
    Port = ntohs(A.sin_port);
  ::close(FD);
  return Port;
}

GrpcModelRunnerOptions clientOptions(const std::string &Address) {
  GrpcModelRunnerOptions O;
  O.Address = Address;
  O.Timeout = 20s;
  O.ConnectTimeout = 20s;
  return O;
}

llvm::Error decide(MLModelRunner &R, int64_t X, std::vector<float> V) {
  return R.populateFeatures(std::make_pair("x", X), std::make_pair("v", V),
                            std::make_pair("name", std::string("f")));
}

// -- inference --------------------------------------------------------------

TEST(GrpcModelRunner, DecisionsFromPythonServer) {
  PythonServer S("affine");
  ASSERT_SERVING(S);
  MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(),
                                              clientOptions(S.Address)));
  EXPECT_EQ(R->address(), S.Address);
  for (int64_t I = 0; I < 20; ++I) {
    std::string Ctx(static_cast<size_t>(I % 4), 'c');
    R->setContext(Ctx);
    std::vector<float> V(static_cast<size_t>(I % 5), 0.25f);
    MLB_ASSERT_OK(decide(*R, 7 * I, V));
    Expected<int64_t> Y = R->evaluate<int64_t>();
    ASSERT_TRUE(!!Y) << errorText(Y.takeError());
    // affine: 10 * x + len(v) + 1000 * id + len(context).
    EXPECT_EQ(*Y, 70 * I + I % 5 + 1000 * I + I % 4) << "decision " << I;
  }
}

TEST(GrpcModelRunner, ClassPolicyKeepsStateAcrossCalls) {
  PythonServer S("Counter");
  ASSERT_SERVING(S);
  MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(),
                                              clientOptions(S.Address)));
  for (int64_t I = 1; I <= 3; ++I) {
    Expected<int64_t> Y = R->evaluate<int64_t>();
    ASSERT_TRUE(!!Y) << errorText(Y.takeError());
    EXPECT_EQ(*Y, I);
  }
}

TEST(GrpcModelRunner, ServerNeverStartedFailsWithinBound) {
  int Port = unusedPort();
  ASSERT_GT(Port, 0);
  GrpcModelRunnerOptions O = clientOptions("127.0.0.1:" + std::to_string(Port));
  O.ConnectTimeout = 1s;
  auto Start = std::chrono::steady_clock::now();
  auto R = GrpcModelRunner::create(features(), advice(), O);
  ASSERT_FALSE(!!R);
  std::string Msg = errorText(R.takeError());
  EXPECT_LT(std::chrono::steady_clock::now() - Start, HangBound);
  EXPECT_CONTAINS(Msg, "cannot connect to the model server at 127.0.0.1:" +
                           std::to_string(Port) + " within 1000 ms");
}

TEST(GrpcModelRunner, ServerStartingLateIsReachedByBackoff) {
  int Port = unusedPort();
  ASSERT_GT(Port, 0);
  std::string Address = "127.0.0.1:" + std::to_string(Port);
  // The runner starts connecting first; the server comes up later.
  auto Runner = std::async(std::launch::async, [&] {
    return GrpcModelRunner::create(features(), advice(),
                                   clientOptions(Address));
  });
  std::this_thread::sleep_for(300ms);
  PythonServer S("affine", {"--address", Address});
  ASSERT_SERVING(S);
  ASSERT_EQ(Runner.wait_for(30s), std::future_status::ready);
  MLB_ASSERT_VALUE(R, Runner.get());
  MLB_ASSERT_OK(decide(*R, 1, {}));
  Expected<int64_t> Y = R->evaluate<int64_t>();
  ASSERT_TRUE(!!Y) << errorText(Y.takeError());
  EXPECT_EQ(*Y, 10);
}

TEST(GrpcModelRunner, ServerDyingMidRunIsAClearError) {
  PythonServer S("affine");
  ASSERT_SERVING(S);
  GrpcModelRunnerOptions O = clientOptions(S.Address);
  O.Timeout = 5s;
  MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(), O));
  MLB_ASSERT_OK(decide(*R, 2, {1.0f}));
  Expected<int64_t> First = R->evaluate<int64_t>();
  ASSERT_TRUE(!!First) << errorText(First.takeError());
  EXPECT_EQ(*First, 21);

  S.Proc.kill(SIGKILL);
  EXPECT_NE(S.Proc.wait(20), -100);
  auto Start = std::chrono::steady_clock::now();
  Expected<int64_t> Second = R->evaluate<int64_t>();
  ASSERT_FALSE(!!Second);
  std::string Msg = errorText(Second.takeError());
  EXPECT_LT(std::chrono::steady_clock::now() - Start, HangBound);
  EXPECT_CONTAINS(Msg, "gRPC ModelService/Evaluate to " + S.Address);
  EXPECT_CONTAINS(Msg, "UNAVAILABLE");
}

TEST(GrpcModelRunner, DeadlineExceededIsAClearError) {
  PythonServer S("sleepy");
  ASSERT_SERVING(S);
  GrpcModelRunnerOptions O = clientOptions(S.Address);
  O.Timeout = 300ms;
  MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(), O));
  auto Start = std::chrono::steady_clock::now();
  Expected<int64_t> Y = R->evaluate<int64_t>();
  ASSERT_FALSE(!!Y);
  std::string Msg = errorText(Y.takeError());
  EXPECT_LT(std::chrono::steady_clock::now() - Start, HangBound);
  EXPECT_CONTAINS(Msg, "gRPC ModelService/Evaluate to " + S.Address);
  EXPECT_CONTAINS(Msg, "DEADLINE_EXCEEDED");
  EXPECT_CONTAINS(Msg, "deadline 300 ms");
}

TEST(GrpcModelRunner, OversizeRequestIsRejectedByTheClientLimit) {
  PythonServer S("affine");
  ASSERT_SERVING(S);
  GrpcModelRunnerOptions O = clientOptions(S.Address);
  O.MaxMessageBytes = 1024;
  MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(), O));
  MLB_ASSERT_OK(decide(*R, 1, std::vector<float>(1000, 1.0f)));
  Expected<int64_t> Y = R->evaluate<int64_t>();
  ASSERT_FALSE(!!Y);
  std::string Msg = errorText(Y.takeError());
  EXPECT_CONTAINS(Msg, "RESOURCE_EXHAUSTED");
  EXPECT_CONTAINS(Msg, "message limit 1024 bytes");
  // Within the limit, the same runner still works.
  MLB_ASSERT_OK(decide(*R, 1, std::vector<float>(2, 1.0f)));
  Expected<int64_t> Small = R->evaluate<int64_t>();
  ASSERT_TRUE(!!Small) << errorText(Small.takeError());
  EXPECT_EQ(*Small, 12 + 1000);
}

TEST(GrpcModelRunner, OversizeRequestIsRejectedByTheServerLimit) {
  PythonServer S("affine", {"--max-message-bytes", "1024"});
  ASSERT_SERVING(S);
  MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(),
                                              clientOptions(S.Address)));
  MLB_ASSERT_OK(decide(*R, 1, std::vector<float>(1000, 1.0f)));
  Expected<int64_t> Y = R->evaluate<int64_t>();
  ASSERT_FALSE(!!Y);
  EXPECT_CONTAINS(errorText(Y.takeError()), "RESOURCE_EXHAUSTED");
}

TEST(GrpcModelRunner, PolicyErrorsAreInternalWithTheirMessage) {
  for (const char *Policy : {"raises", "wrong_type"}) {
    PythonServer S(Policy);
    ASSERT_SERVING(S);
    MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(),
                                                clientOptions(S.Address)));
    Expected<int64_t> Y = R->evaluate<int64_t>();
    ASSERT_FALSE(!!Y);
    std::string Msg = errorText(Y.takeError());
    EXPECT_CONTAINS(Msg, "INTERNAL");
    EXPECT_CONTAINS(Msg, std::string(Policy) == "raises"
                             ? "policy exploded on purpose"
                             : "does not fit the advice");
  }
}

/// A C++ model server that answers with a fixed, possibly wrong, reply.
class FixedReplyService final : public v1::ModelService::Service {
public:
  explicit FixedReplyService(
      std::function<void(const v1::Observation &, v1::TensorMessage &)> Reply)
      : Reply(std::move(Reply)) {}
  grpc::Status Evaluate(grpc::ServerContext *, const v1::Observation *Req,
                        v1::TensorMessage *Out) override {
    Reply(*Req, *Out);
    return grpc::Status::OK;
  }
  std::function<void(const v1::Observation &, v1::TensorMessage &)> Reply;
};

void goodReply(const v1::Observation &Req, v1::TensorMessage &Out) {
  Out.set_kind(v1::MESSAGE_KIND_ADVICE);
  Out.set_id(Req.features().id());
  v1::Tensor *T = Out.add_tensors();
  T->set_name("y");
  T->set_type(v1::ELEMENT_TYPE_INT64);
  T->add_shape(1);
  int64_t V = 5;
  T->set_data(&V, sizeof(V));
}

TEST(GrpcModelRunner, RepliesThatDoNotMatchTheAdviceAreErrors) {
  struct Case {
    const char *Expected;
    std::function<void(v1::TensorMessage &)> Break;
  };
  std::vector<Case> Cases = {
      {"of kind 'outcome', not advice",
       [](v1::TensorMessage &M) { M.set_kind(v1::MESSAGE_KIND_OUTCOME); }},
      {"the reply has id 99, the observation 0",
       [](v1::TensorMessage &M) { M.set_id(99); }},
      {"the reply has 0 tensors",
       [](v1::TensorMessage &M) { M.clear_tensors(); }},
      {"the reply's tensor is 'z', the advice is 'y'",
       [](v1::TensorMessage &M) { M.mutable_tensors(0)->set_name("z"); }},
      {"advice 'y' is int32_t in the reply, int64_t in the spec",
       [](v1::TensorMessage &M) {
         M.mutable_tensors(0)->set_type(v1::ELEMENT_TYPE_INT32);
         M.mutable_tensors(0)->set_data(std::string(4, '\0'));
       }},
      {"advice 'y' has shape [2] in the reply",
       [](v1::TensorMessage &M) {
         M.mutable_tensors(0)->set_shape(0, 2);
         M.mutable_tensors(0)->set_data(std::string(16, '\0'));
       }},
      {"needs 8 bytes for its shape, got 3", // a decode error
       [](v1::TensorMessage &M) { M.mutable_tensors(0)->set_data("abc"); }},
  };
  for (const Case &C : Cases) {
    FixedReplyService Service(
        [&](const v1::Observation &Req, v1::TensorMessage &Out) {
          goodReply(Req, Out);
          C.Break(Out);
        });
    grpc::ServerBuilder B;
    int Port = 0;
    B.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &Port);
    B.RegisterService(&Service);
    std::unique_ptr<grpc::Server> Server = B.BuildAndStart();
    ASSERT_TRUE(Server && Port > 0);
    std::string Address = "127.0.0.1:" + std::to_string(Port);
    {
      MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(),
                                                  clientOptions(Address)));
      Expected<int64_t> Y = R->evaluate<int64_t>();
      ASSERT_FALSE(!!Y) << C.Expected;
      std::string Msg = errorText(Y.takeError());
      EXPECT_CONTAINS(Msg, "gRPC ModelService/Evaluate to " + Address);
      EXPECT_CONTAINS(Msg, C.Expected);
    }
    Server->Shutdown(std::chrono::system_clock::now() + 1s);
    Server->Wait();
  }
}

/// A server whose every method answers with the same bytes, whatever they
/// are: here bytes that are no protobuf message at all.
class RawReplyService final : public grpc::CallbackGenericService {
public:
  explicit RawReplyService(std::string Bytes) : Bytes(std::move(Bytes)) {}
  grpc::ServerGenericBidiReactor *
  CreateReactor(grpc::GenericCallbackServerContext *) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
    public:
      explicit Reactor(const std::string &Bytes) : Bytes(Bytes) {
        StartRead(&Request);
      }
      void OnReadDone(bool Ok) override {
        if (!Ok) {
          Finish(grpc::Status(grpc::StatusCode::INTERNAL, "no request"));
          return;
        }
        grpc::Slice S(Bytes);
        Reply = grpc::ByteBuffer(&S, 1);
        StartWriteAndFinish(&Reply, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

    private:
      const std::string &Bytes;
      grpc::ByteBuffer Request, Reply;
    };
    return new Reactor(Bytes);
  }

private:
  std::string Bytes;
};

TEST(GrpcModelRunner, UnparseableReplyIsNamedAsSuch) {
  // Field 1 (length-delimited) claims 5 bytes, 2 follow.
  RawReplyService Service(std::string("\x0a\x05"
                                      "ab",
                                      4));
  grpc::ServerBuilder B;
  int Port = 0;
  B.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &Port);
  B.RegisterCallbackGenericService(&Service);
  std::unique_ptr<grpc::Server> Server = B.BuildAndStart();
  ASSERT_TRUE(Server && Port > 0);
  std::string Address = "127.0.0.1:" + std::to_string(Port);
  {
    MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(),
                                                clientOptions(Address)));
    MLB_ASSERT_OK(decide(*R, 1, {1.0f}));
    std::string Msg = errorText(R->evaluate<int64_t>().takeError());
    EXPECT_CONTAINS(Msg, "gRPC ModelService/Evaluate to " + Address +
                             ": observation 0: the reply (4 bytes) could not "
                             "be parsed as an mlbridge.v1.TensorMessage");
    EXPECT_EQ(Msg.find("UNIMPLEMENTED"), std::string::npos) << Msg;
  }
  Server->Shutdown(std::chrono::system_clock::now() + 1s);
  Server->Wait();
}

TEST(GrpcModelRunner, InvalidOptionsAreErrors) {
  GrpcModelRunnerOptions O;
  EXPECT_CONTAINS(errorText(GrpcModelRunner::create(features(), advice(), O)),
                  "no model server address");
  O.Address = "127.0.0.1:1";
  O.Timeout = 0ms;
  EXPECT_CONTAINS(errorText(GrpcModelRunner::create(features(), advice(), O)),
                  "timeouts must be positive");
}

// -- a user's own service (GrpcUserMethod) ----------------------------------

/// test/unit/grpc_user_service.py: a Python server of InlinerService
/// (test/unit/user_service.proto, generated with grpc_tools at run time).
class UserServiceServer {
public:
  UserServiceServer()
      : Proc(
            {MLBRIDGE_PYTHON,
             std::string(MLBRIDGE_SOURCE_DIR) +
                 "/test/unit/grpc_user_service.py",
             std::string(MLBRIDGE_SOURCE_DIR) + "/test/unit/user_service.proto",
             Dir.Path, Dir.file("ready")},
            Dir.file("serve.log")) {
    if (Proc.Started)
      Address =
          waitForLine(Dir.file("ready"), 60s, [&] { return Proc.alive(); });
  }
  std::string log() const {
    auto Buf = llvm::MemoryBuffer::getFile(Dir.file("serve.log"));
    return Buf ? (*Buf)->getBuffer().str() : std::string();
  }

  TempDir Dir;
  Child Proc;
  std::string Address;
};

constexpr const char *AdviseMethod = "/mlbridge.unittest.InlinerService/Advise";

GrpcModelRunnerOptions userOptions(const std::string &Address,
                                   const std::string &Method,
                                   const google::protobuf::Descriptor *Request,
                                   const google::protobuf::Descriptor *Reply) {
  GrpcModelRunnerOptions O = clientOptions(Address);
  O.UserMethod = GrpcUserMethod{Method, Request, Reply};
  return O;
}

GrpcModelRunnerOptions userOptions(const std::string &Address,
                                   const std::string &Method = AdviseMethod) {
  return userOptions(Address, Method,
                     mlbridge::unittest::InlinerRequest::descriptor(),
                     mlbridge::unittest::InlinerReply::descriptor());
}

TEST(GrpcUserService, DecisionsFromPythonServer) {
  UserServiceServer S;
  ASSERT_SERVING(S);
  MLB_ASSERT_VALUE(
      R, GrpcModelRunner::create(features(), advice(), userOptions(S.Address)));
  for (int64_t I = 0; I < 10; ++I) {
    std::vector<float> V(static_cast<size_t>(I % 5), 0.5f);
    MLB_ASSERT_OK(decide(*R, 7 * I, V));
    Expected<int64_t> Y = R->evaluate<int64_t>();
    ASSERT_TRUE(!!Y) << errorText(Y.takeError()) << "\n" << S.log();
    // Advise: 10 * x + len(v) + len(name), name = "f".
    EXPECT_EQ(*Y, 70 * I + I % 5 + 1) << "decision " << I;
  }
}

TEST(GrpcUserService, TypesFromADescriptorPool) {
  UserServiceServer S;
  ASSERT_SERVING(S);
  // The types as a tool would load them, without the generated classes.
  google::protobuf::FileDescriptorProto File;
  mlbridge::unittest::InlinerRequest::descriptor()->file()->CopyTo(&File);
  google::protobuf::DescriptorPool Pool;
  ASSERT_NE(Pool.BuildFile(File), nullptr);
  MLB_ASSERT_VALUE(
      R,
      GrpcModelRunner::create(
          features(), advice(),
          userOptions(
              S.Address, AdviseMethod,
              Pool.FindMessageTypeByName("mlbridge.unittest.InlinerRequest"),
              Pool.FindMessageTypeByName("mlbridge.unittest.InlinerReply"))));
  MLB_ASSERT_OK(decide(*R, 3, {1.0f, 2.0f}));
  Expected<int64_t> Y = R->evaluate<int64_t>();
  ASSERT_TRUE(!!Y) << errorText(Y.takeError()) << "\n" << S.log();
  EXPECT_EQ(*Y, 33);
}

TEST(GrpcUserService, WrongMethodNameIsUnimplemented) {
  UserServiceServer S;
  ASSERT_SERVING(S);
  std::string Method = "/mlbridge.unittest.InlinerService/Advice";
  MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(),
                                              userOptions(S.Address, Method)));
  MLB_ASSERT_OK(decide(*R, 1, {}));
  std::string Err = errorText(R->evaluate<int64_t>());
  EXPECT_CONTAINS(Err, "gRPC " + Method + " to " + S.Address + " failed");
  EXPECT_CONTAINS(Err, "UNIMPLEMENTED");
  EXPECT_CONTAINS(Err, "the server does not implement " + Method);
}

TEST(GrpcUserService, ReplyWithoutTheAdviceFieldIsAnError) {
  UserServiceServer S;
  ASSERT_SERVING(S);
  std::string Method = "/mlbridge.unittest.InlinerService/Forget";
  MLB_ASSERT_VALUE(R, GrpcModelRunner::create(features(), advice(),
                                              userOptions(S.Address, Method)));
  MLB_ASSERT_OK(decide(*R, 1, {}));
  std::string Err = errorText(R->evaluate<int64_t>());
  EXPECT_CONTAINS(Err, "gRPC " + Method + " to " + S.Address);
  EXPECT_CONTAINS(Err, "observation 0");
  EXPECT_CONTAINS(Err,
                  "has no advice: field 'mlbridge.unittest.InlinerReply.y' "
                  "is not set");
}

TEST(GrpcUserService, MismatchedMessageTypesAreErrorsInCreate) {
  // Checked before connecting: no server needed.
  std::string Address = "127.0.0.1:1";
  auto CreateErr = [&](std::vector<TensorSpec> F, TensorSpec A,
                       GrpcModelRunnerOptions O) {
    return errorText(GrpcModelRunner::create(std::move(F), std::move(A), O));
  };
  std::string Err;
  // A feature with no field.
  std::vector<TensorSpec> F = features();
  F.push_back(createSpec<int64_t>("callee_users", {1}));
  Err = CreateErr(F, advice(), userOptions(Address));
  EXPECT_CONTAINS(Err, AdviseMethod);
  EXPECT_CONTAINS(Err, "the request message mlbridge.unittest.InlinerRequest "
                       "has no field 'callee_users' for feature "
                       "'callee_users'");
  // A feature of another type.
  F = features();
  F[0] = createSpec<int32_t>("x", {1});
  Err = CreateErr(F, advice(), userOptions(Address));
  EXPECT_CONTAINS(Err, AdviseMethod);
  EXPECT_CONTAINS(Err, "field 'mlbridge.unittest.InlinerRequest.x' holds "
                       "int64_t, feature 'x' is int32_t");
  // A feature of a shape a singular field cannot hold.
  F = features();
  F[0] = createSpec<int64_t>("x", {2});
  Err = CreateErr(F, advice(), userOptions(Address));
  EXPECT_CONTAINS(Err, "field 'mlbridge.unittest.InlinerRequest.x' is "
                       "singular (shape [1]) and cannot hold feature 'x'");
  // A response type without the advice field.
  Err =
      CreateErr(features(), advice(),
                userOptions(Address, "/mlbridge.unittest.InlinerService/Status",
                            mlbridge::unittest::InlinerRequest::descriptor(),
                            mlbridge::unittest::StatusReply::descriptor()));
  EXPECT_CONTAINS(Err, "/mlbridge.unittest.InlinerService/Status");
  EXPECT_CONTAINS(Err, "the response message mlbridge.unittest.StatusReply has "
                       "no field 'y' for advice 'y'");
  // An advice of another type.
  Err =
      CreateErr(features(), createSpec<float>("y", {1}), userOptions(Address));
  EXPECT_CONTAINS(Err, "field 'mlbridge.unittest.InlinerReply.y' holds "
                       "int64_t, advice 'y' is float");
  // Malformed method names, missing types.
  for (const char *Bad :
       {"InlinerService/Advise", "/InlinerService", "/a/b/c", "//Advise"}) {
    Err = CreateErr(features(), advice(), userOptions(Address, Bad));
    EXPECT_CONTAINS(Err, "method name '" + std::string(Bad) +
                             "' is not /package.Service/Method");
  }
  Err = CreateErr(features(), advice(),
                  userOptions(Address, AdviseMethod,
                              mlbridge::unittest::InlinerRequest::descriptor(),
                              nullptr));
  EXPECT_CONTAINS(Err, "the response message type is not set");
}

// -- training ---------------------------------------------------------------

TEST(GrpcCompilerServer, PythonTrainerDrivesOneEpisode) {
  TempDir Dir;
  GrpcCompilerServerOptions O;
  O.ReadyFile = Dir.file("ready");
  O.Timeout = 30s;
  O.EndTimeout = 20s;
  MLB_ASSERT_VALUE(S, GrpcCompilerServer::create(features(), advice(), O));
  EXPECT_TRUE(StringRef(S->address()).starts_with("127.0.0.1:"));
  Child Trainer(
      {MLBRIDGE_PYTHON,
       std::string(MLBRIDGE_SOURCE_DIR) + "/test/unit/grpc_trainer.py",
       O.ReadyFile},
      Dir.file("trainer.log"));
  ASSERT_TRUE(Trainer.Started) << Trainer.StartError;
  for (int64_t I = 0; I < 12; ++I) {
    S->setContext("fn" + std::to_string(I));
    MLB_ASSERT_OK(decide(*S, 5 * I, std::vector<float>(I % 3, 1.0f)));
    Expected<int64_t> Y = S->evaluate<int64_t>();
    ASSERT_TRUE(!!Y) << errorText(Y.takeError());
    EXPECT_EQ(*Y, 15 * I + I) << "round " << I; // x * 3 + id
  }
  EXPECT_FALSE(llvm::errorToBool(S->finish()));
  EXPECT_EQ(Trainer.wait(30), 0);
  Expected<int64_t> After = S->evaluate<int64_t>();
  ASSERT_FALSE(!!After);
  EXPECT_CONTAINS(errorText(After.takeError()), "the episode is over");
}

TEST(GrpcCompilerServer, NoTrainerFailsWithinBound) {
  GrpcCompilerServerOptions O;
  O.Timeout = 500ms;
  O.EndTimeout = 100ms;
  MLB_ASSERT_VALUE(S, GrpcCompilerServer::create(features(), advice(), O));
  auto Start = std::chrono::steady_clock::now();
  Expected<int64_t> Y = S->evaluate<int64_t>();
  ASSERT_FALSE(!!Y);
  std::string Msg = errorText(Y.takeError());
  EXPECT_LT(std::chrono::steady_clock::now() - Start, HangBound);
  EXPECT_CONTAINS(Msg, "gRPC compiler server at " + S->address() +
                           ": no action (CompilerService/Act) for "
                           "observation 0 within 500 ms");
}

/// The ready file is written through a fresh temporary file: a link another
/// user planted at a predictable temporary name (or at the target) is never
/// written through.
TEST(GrpcCompilerServer, ReadyFileNeverFollowsAPlantedLink) {
  TempDir Dir;
  std::string Victim = Dir.file("victim");
  {
    std::ofstream(Victim) << "precious\n";
  }
  std::string Ready = Dir.file("ready");
  std::string Planted = Ready + ".tmp" + std::to_string(::getpid());
  ASSERT_EQ(::symlink(Victim.c_str(), Planted.c_str()), 0);
  GrpcCompilerServerOptions O;
  O.ReadyFile = Ready;
  MLB_ASSERT_VALUE(S, GrpcCompilerServer::create(features(), advice(), O));
  auto Text = llvm::MemoryBuffer::getFile(Victim);
  ASSERT_TRUE(!!Text);
  EXPECT_EQ((*Text)->getBuffer(), "precious\n");
  auto Written = llvm::MemoryBuffer::getFile(Ready);
  ASSERT_TRUE(!!Written);
  EXPECT_EQ((*Written)->getBuffer(), S->address() + "\n");
  ::unlink(Planted.c_str());
}

TEST(GrpcCompilerServer, AddressInUseIsAnError) {
  MLB_ASSERT_VALUE(First,
                   GrpcCompilerServer::create(features(), advice(),
                                              GrpcCompilerServerOptions()));
  GrpcCompilerServerOptions O;
  O.Address = First->address();
  Expected<std::unique_ptr<GrpcCompilerServer>> Second =
      GrpcCompilerServer::create(features(), advice(), O);
  ASSERT_FALSE(!!Second);
  EXPECT_CONTAINS(errorText(Second.takeError()),
                  "cannot listen on " + First->address());
  EXPECT_CONTAINS(errorText(GrpcCompilerServer::create(
                      features(), advice(),
                      GrpcCompilerServerOptions{"no-port", 1s, 1s,
                                                DefaultGrpcMaxMessageBytes, "",
                                                std::nullopt})),
                  "is not host:port");
}

// -- training with the user's own service (GrpcUserTrainingService) --------

namespace ut = mlbridge::unittest;

constexpr const char *EnvObserve = "/mlbridge.unittest.InlinerEnv/Observe";
constexpr const char *EnvAct = "/mlbridge.unittest.InlinerEnv/Act";
constexpr const char *EnvStep = "/mlbridge.unittest.InlinerEnv/Step";

GrpcUserTrainingService envService() {
  GrpcUserTrainingService U;
  U.ObserveMethod = EnvObserve;
  U.ActMethod = EnvAct;
  U.StepMethod = EnvStep;
  U.Observation = ut::InlinerObservation::descriptor();
  U.Action = ut::InlinerAction::descriptor();
  U.DoneField = "done";
  U.ContextField = "function";
  U.IdField = "step";
  return U;
}

GrpcCompilerServerOptions envOptions(GrpcUserTrainingService U) {
  GrpcCompilerServerOptions O;
  O.Timeout = 20s;
  O.EndTimeout = 20s;
  O.UserService = std::move(U);
  return O;
}

/// A trainer written against the user's proto alone: unary calls through
/// grpc::GenericStub with the generated messages, each with a deadline.
class EnvTrainer {
public:
  explicit EnvTrainer(const std::string &Address)
      : Channel(
            grpc::CreateChannel(Address, grpc::InsecureChannelCredentials())),
        Stub(Channel) {}

  /// Calls \p Method with \p Request's bytes; fills \p Reply if given.
  grpc::Status callBytes(const std::string &Method, const std::string &Request,
                         google::protobuf::Message *Reply,
                         std::chrono::milliseconds Deadline = 20s) {
    grpc::Slice Slice(Request);
    grpc::ByteBuffer Req(&Slice, 1), Rep;
    grpc::ClientContext Ctx;
    Ctx.set_deadline(std::chrono::system_clock::now() + Deadline);
    grpc::CompletionQueue CQ;
    auto Call = Stub.PrepareUnaryCall(&Ctx, Method, Req, &CQ);
    Call->StartCall();
    grpc::Status S;
    static char Tag;
    Call->Finish(&Rep, &S, &Tag);
    void *Got = nullptr;
    bool Ok = false;
    if (!CQ.Next(&Got, &Ok))
      S = grpc::Status(grpc::StatusCode::INTERNAL, "queue ended");
    CQ.Shutdown();
    while (CQ.Next(&Got, &Ok))
      ;
    if (S.ok() && Reply) {
      std::vector<grpc::Slice> Slices;
      std::string Bytes;
      if (Rep.Dump(&Slices).ok())
        for (const grpc::Slice &Sl : Slices)
          Bytes.append(reinterpret_cast<const char *>(Sl.begin()), Sl.size());
      if (!Reply->ParseFromString(Bytes))
        S = grpc::Status(grpc::StatusCode::DATA_LOSS, "unparsable reply");
    }
    return S;
  }
  grpc::Status call(const std::string &Method,
                    const google::protobuf::Message &Request,
                    google::protobuf::Message *Reply,
                    std::chrono::milliseconds Deadline = 20s) {
    return callBytes(Method, Request.SerializeAsString(), Reply, Deadline);
  }

  std::shared_ptr<grpc::Channel> Channel;
  grpc::GenericStub Stub;
};

ut::InlinerAction action(int64_t Y, int64_t Step) {
  ut::InlinerAction A;
  A.set_y(Y);
  A.set_step(Step);
  return A;
}

/// What a trainer saw of one observation.
struct Seen {
  int64_t Step, X;
  int V;
  std::string Function, Name;
  bool operator==(const Seen &O) const {
    return Step == O.Step && X == O.X && V == O.V && Function == O.Function &&
           Name == O.Name;
  }
};

/// The compiler side of an episode: \p Rounds decisions, each advice
/// checked against the trainers' rule x * 3 + step.
void runEpisode(GrpcCompilerServer &S, int64_t Rounds) {
  for (int64_t I = 0; I < Rounds; ++I) {
    S.setContext("fn" + std::to_string(I));
    MLB_ASSERT_OK(decide(S, 5 * I, std::vector<float>(I % 3, 1.0f)));
    Expected<int64_t> Y = S.evaluate<int64_t>();
    ASSERT_TRUE(!!Y) << errorText(Y.takeError());
    EXPECT_EQ(*Y, 15 * I + I) << "round " << I; // x * 3 + step
  }
  EXPECT_FALSE(llvm::errorToBool(S.finish()));
}

std::vector<Seen> expectedSeen(int64_t Rounds) {
  std::vector<Seen> Out;
  for (int64_t I = 0; I < Rounds; ++I)
    Out.push_back(
        {I, 5 * I, static_cast<int>(I % 3), "fn" + std::to_string(I), "f"});
  return Out;
}

Seen seen(const ut::InlinerObservation &O) {
  return {O.step(), O.x(), O.v_size(), O.function(), O.name()};
}

TEST(GrpcUserTraining, TrainerDrivesAnEpisodeWithObserveAndAct) {
  MLB_ASSERT_VALUE(S, GrpcCompilerServer::create(features(), advice(),
                                                 envOptions(envService())));
  auto Trainer = std::async(std::launch::async, [Address = S->address()] {
    EnvTrainer T(Address);
    std::vector<Seen> Got;
    while (true) {
      ut::InlinerObservation O;
      grpc::Status St = T.call(EnvObserve, ut::Empty(), &O);
      if (!St.ok() || O.done())
        break;
      // Observe again before acting: the same observation.
      ut::InlinerObservation Again;
      if (!T.call(EnvObserve, ut::Empty(), &Again).ok() ||
          Again.SerializeAsString() != O.SerializeAsString())
        break;
      Got.push_back(seen(O));
      if (!T.call(EnvAct, action(O.x() * 3 + O.step(), O.step()), nullptr).ok())
        break;
    }
    return Got;
  });
  runEpisode(*S, 12);
  ASSERT_EQ(Trainer.wait_for(60s), std::future_status::ready);
  EXPECT_EQ(Trainer.get(), expectedSeen(12));
}

TEST(GrpcUserTraining, StepOnlyWithoutDoneFieldEndsWithOutOfRange) {
  GrpcUserTrainingService U = envService();
  U.ObserveMethod.clear();
  U.ActMethod.clear();
  U.DoneField.clear();
  MLB_ASSERT_VALUE(
      S, GrpcCompilerServer::create(features(), advice(), envOptions(U)));
  auto Trainer = std::async(std::launch::async, [Address = S->address()] {
    EnvTrainer T(Address);
    std::vector<Seen> Got;
    ut::InlinerObservation O;
    // An action without y only observes: the start of the episode.
    grpc::Status St = T.call(EnvStep, ut::InlinerAction(), &O);
    while (St.ok()) {
      Got.push_back(seen(O));
      ut::InlinerObservation Next;
      St = T.call(EnvStep, action(O.x() * 3 + O.step(), O.step()), &Next);
      O = Next;
    }
    return std::make_pair(Got, St);
  });
  runEpisode(*S, 7);
  ASSERT_EQ(Trainer.wait_for(60s), std::future_status::ready);
  auto [Got, End] = Trainer.get();
  EXPECT_EQ(Got, expectedSeen(7));
  EXPECT_EQ(End.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_CONTAINS(End.error_message(), "the episode is over");
}

TEST(GrpcUserTraining, BadCallsAreRefusedWithTheirReason) {
  GrpcCompilerServerOptions O = envOptions(envService());
  O.EndTimeout = 100ms; // the trainer below does not wait for the end
  MLB_ASSERT_VALUE(S, GrpcCompilerServer::create(features(), advice(), O));
  EnvTrainer T(S->address());
  // Before any observation.
  grpc::Status St = T.call(EnvAct, action(1, 0), nullptr);
  EXPECT_EQ(St.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_CONTAINS(St.error_message(), std::string("no observation waits for "
                                                  "an action (call ") +
                                          EnvObserve + " first)");
  auto Trainer = std::async(std::launch::async, [&] {
    std::vector<grpc::Status> Out;
    ut::InlinerObservation O;
    Out.push_back(T.call(EnvObserve, ut::Empty(), &O));
    Out.push_back(
        T.call("/mlbridge.unittest.InlinerEnv/Observ", ut::Empty(), nullptr));
    Out.push_back(T.callBytes(EnvAct, "\xff\xff\xff", nullptr));
    ut::InlinerAction NoAdvice;
    NoAdvice.set_step(O.step());
    Out.push_back(T.call(EnvAct, NoAdvice, nullptr));
    Out.push_back(T.call(EnvAct, action(1, 7), nullptr));
    // Still pending: a proper answer goes through.
    Out.push_back(T.call(EnvAct, action(42, O.step()), nullptr));
    return Out;
  });
  MLB_ASSERT_OK(decide(*S, 1, {}));
  Expected<int64_t> Y = S->evaluate<int64_t>();
  ASSERT_TRUE(!!Y) << errorText(Y.takeError());
  EXPECT_EQ(*Y, 42);
  ASSERT_EQ(Trainer.wait_for(60s), std::future_status::ready);
  std::vector<grpc::Status> Out = Trainer.get();
  ASSERT_EQ(Out.size(), 6u);
  EXPECT_TRUE(Out[0].ok()) << Out[0].error_message();
  EXPECT_EQ(Out[1].error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_CONTAINS(Out[1].error_message(),
                  std::string("this compiler serves ") + EnvObserve + ", " +
                      EnvAct + ", " + EnvStep +
                      ", not /mlbridge.unittest.InlinerEnv/Observ");
  EXPECT_EQ(Out[2].error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_CONTAINS(Out[2].error_message(),
                  "the request is not a valid mlbridge.unittest.InlinerAction");
  EXPECT_EQ(Out[3].error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_CONTAINS(Out[3].error_message(),
                  "has no advice: field 'mlbridge.unittest.InlinerAction.y' "
                  "is not set");
  EXPECT_EQ(Out[4].error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_CONTAINS(Out[4].error_message(),
                  "the action is for observation 7 (field "
                  "'mlbridge.unittest.InlinerAction.step'), the pending "
                  "observation is 0");
  EXPECT_TRUE(Out[5].ok()) << Out[5].error_message();
}

TEST(GrpcUserTraining, NoTrainerFailsWithinBound) {
  GrpcCompilerServerOptions O = envOptions(envService());
  O.Timeout = 500ms;
  MLB_ASSERT_VALUE(S, GrpcCompilerServer::create(features(), advice(), O));
  auto Start = std::chrono::steady_clock::now();
  std::string Msg = errorText(S->evaluate<int64_t>());
  EXPECT_LT(std::chrono::steady_clock::now() - Start, HangBound);
  EXPECT_CONTAINS(Msg, "gRPC compiler server at " + S->address() +
                           ": no action (" + EnvAct + " or " + EnvStep +
                           ") for observation 0 within 500 ms; no trainer "
                           "has called this compiler");
}

TEST(GrpcUserTraining, TrainerGoneMidEpisodeFailsWithinBound) {
  GrpcCompilerServerOptions O = envOptions(envService());
  O.Timeout = 500ms;
  O.EndTimeout = 100ms;
  MLB_ASSERT_VALUE(S, GrpcCompilerServer::create(features(), advice(), O));
  auto Trainer = std::async(std::launch::async, [Address = S->address()] {
    // Takes the observation, then goes away without acting.
    EnvTrainer T(Address);
    ut::InlinerObservation Obs;
    return T.call(EnvObserve, ut::Empty(), &Obs);
  });
  MLB_ASSERT_OK(decide(*S, 1, {}));
  auto Start = std::chrono::steady_clock::now();
  std::string Msg = errorText(S->evaluate<int64_t>());
  EXPECT_LT(std::chrono::steady_clock::now() - Start, HangBound);
  ASSERT_EQ(Trainer.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(Trainer.get().ok());
  EXPECT_CONTAINS(Msg, "no action (" + std::string(EnvAct) + " or " + EnvStep +
                           ") for observation 0 within 500 ms; the trainer's "
                           "last call was " +
                           EnvObserve);
}

TEST(GrpcUserTraining, MismatchedServicesAreErrorsInCreate) {
  auto CreateErr = [&](GrpcUserTrainingService U,
                       TensorSpec A = createSpec<int64_t>("y", {1})) {
    return errorText(GrpcCompilerServer::create(features(), std::move(A),
                                                envOptions(std::move(U))));
  };
  GrpcUserTrainingService U = envService();
  U.ActMethod = "Act";
  EXPECT_CONTAINS(CreateErr(U),
                  "method name 'Act' is not /package.Service/Method");
  U = envService();
  U.ObserveMethod.clear();
  U.StepMethod.clear();
  EXPECT_CONTAINS(CreateErr(U), "needs an Observe or a Step method");
  U = envService();
  U.Action = nullptr;
  EXPECT_CONTAINS(CreateErr(U), "the user's action message type is not set");
  U = envService();
  U.Observation = ut::InlinerRequest::descriptor();
  U.DoneField.clear();
  U.ContextField.clear();
  U.IdField.clear();
  U.DoneField = "unused";
  EXPECT_CONTAINS(CreateErr(U),
                  "DoneField 'unused': the observation message "
                  "mlbridge.unittest.InlinerRequest has no singular bool "
                  "field of that name");
  U = envService();
  U.Observation = ut::InlinerAction::descriptor();
  U.DoneField.clear();
  U.ContextField.clear();
  EXPECT_CONTAINS(CreateErr(U), "the observation message "
                                "mlbridge.unittest.InlinerAction has no "
                                "field 'x' for feature 'x'");
  U = envService();
  EXPECT_CONTAINS(CreateErr(U, createSpec<float>("y", {1})),
                  "field 'mlbridge.unittest.InlinerAction.y' holds int64_t, "
                  "advice 'y' is float");
  // Step alone must tell "observe only" from an action: 'x' is plain int64.
  U = envService();
  U.ObserveMethod.clear();
  U.Action = ut::InlinerObservation::descriptor();
  U.IdField.clear();
  EXPECT_CONTAINS(CreateErr(U, createSpec<int64_t>("x", {1})),
                  "cannot be told unset from 0: declare it 'optional', or "
                  "serve an Observe method");
}

} // namespace
