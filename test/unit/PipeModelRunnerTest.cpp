//===- PipeModelRunnerTest.cpp - The named-pipe runner
//---------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The model side is either a real Python process (mlbridge.compiler.pipe,
// test/unit/pipe_model.py) or a thread written only against LLVM's protocol
// with raw fds (open <base>.in for writing, then <base>.out for reading;
// read the header line and each observation; write raw advice bytes).
// Every wait in the model threads is bounded too.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/PipeModelRunner.h"

#include "llvm/Support/Program.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <future>
#include <mutex>
#include <poll.h>
#include <pwd.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace mlbridge;
using namespace mlbridge::test;
using namespace std::chrono_literals;
using llvm::ArrayRef;
using llvm::Expected;
using llvm::StringRef;

namespace {

constexpr auto Bound = 20s; // never reached when green

/// A private folder (0700) for one test's FIFOs; the test checks it is empty
/// (no FIFO left) before removing it.
class PipeRunnerTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string Tmpl = "/tmp/mlbridge-pipe-test-XXXXXX";
    ASSERT_NE(::mkdtemp(Tmpl.data()), nullptr) << std::strerror(errno);
    Dir = Tmpl;
    Base = Dir + "/channel";
  }
  void TearDown() override {
    // Only an empty folder can be removed: a leftover FIFO fails the test.
    EXPECT_EQ(::rmdir(Dir.c_str()), 0)
        << Dir << " is not empty (leftover FIFO?): " << std::strerror(errno);
  }

  PipeModelRunnerOptions options(SerDesKind Kind = SerDesKind::Bitstream) {
    PipeModelRunnerOptions O;
    O.ChannelBase = Base;
    O.Kind = Kind;
    O.ConnectTimeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(Bound);
    O.Timeout = std::chrono::duration_cast<std::chrono::milliseconds>(Bound);
    O.CreateFifos = true;
    return O;
  }

  std::string Dir, Base;
};

std::vector<TensorSpec> specs() {
  return {createSpec<int64_t>("x", {1}), createSpec<float>("v", {1, 3})};
}

/// The model side of LLVM's protocol on raw fds, run by a thread.
class RawModel {
public:
  explicit RawModel(std::string Base) : Base(std::move(Base)) {}
  ~RawModel() { close(); }

  /// Opens <base>.in for writing (retrying until the compiler reads it),
  /// then <base>.out for reading, as LLVM's own Python host does.
  bool open() {
    auto Deadline = std::chrono::steady_clock::now() + Bound;
    while ((InFD = ::open((Base + ".in").c_str(), O_WRONLY | O_NONBLOCK)) < 0) {
      if (errno != ENXIO && errno != ENOENT)
        return false;
      if (std::chrono::steady_clock::now() > Deadline)
        return false;
      std::this_thread::sleep_for(2ms);
    }
    OutFD = ::open((Base + ".out").c_str(), O_RDONLY | O_NONBLOCK);
    return OutFD >= 0;
  }
  void close() {
    if (InFD >= 0)
      ::close(InFD);
    if (OutFD >= 0)
      ::close(OutFD);
    InFD = OutFD = -1;
  }
  /// Reads exactly \p N bytes (bounded); fewer if the compiler closes.
  std::string read(size_t N) {
    std::string S;
    while (S.size() < N) {
      struct pollfd P = {OutFD, POLLIN, 0};
      if (::poll(&P, 1, 20000) <= 0)
        break;
      char Buf[4096];
      ssize_t R = ::read(OutFD, Buf, std::min(sizeof(Buf), N - S.size()));
      if (R <= 0)
        break;
      S.append(Buf, R);
    }
    return S;
  }
  std::string readLine() {
    std::string S;
    while (S.empty() || S.back() != '\n') {
      std::string C = read(1);
      if (C.empty())
        break;
      S += C;
    }
    return S;
  }
  void write(StringRef Data) {
    ASSERT_EQ(::write(InFD, Data.data(), Data.size()),
              static_cast<ssize_t>(Data.size()));
  }

  std::string Base;
  int InFD = -1, OutFD = -1;
};

template <typename T> std::string rawBytes(T V) {
  return std::string(reinterpret_cast<const char *>(&V), sizeof(T));
}

/// The contents of file \p Path.
std::string readFile(const std::string &Path, bool &Found) {
  auto Buf = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  Found = static_cast<bool>(Buf);
  return Found ? (*Buf)->getBuffer().str() : std::string();
}

/// Runs \p Body on a thread and joins it on destruction.
class ModelThread {
public:
  template <typename F> explicit ModelThread(F Body) : T(std::move(Body)) {}
  ~ModelThread() { T.join(); }

private:
  std::thread T;
};

// -- against LLVM's protocol, byte for byte ----------------------------------

TEST_F(PipeRunnerTest, SpeaksLLVMsProtocolByteForByte) {
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                          specs(), createSpec<int64_t>("d", {1}), options()));
  std::string Header, Ctx, Obs0, Obs1;
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      Header = Model.readLine();
      Ctx = Model.readLine();
      Obs0 =
          Model.read(std::string("{\"observation\":0}\n").size() + 8 + 12 + 1);
      Model.write(rawBytes<int64_t>(42));
      Obs1 =
          Model.read(std::string("{\"observation\":1}\n").size() + 8 + 12 + 1);
      Model.write(rawBytes<int64_t>(-7));
    });
    MLB_ASSERT_OK(R->switchContext("f"));
    MLB_ASSERT_OK(R->populateFeatures(
        std::make_pair("x", int64_t(5)),
        std::make_pair("v", std::vector<float>{1.0f, 2.0f, 3.0f})));
    Expected<int64_t> A = R->evaluate<int64_t>();
    ASSERT_TRUE(static_cast<bool>(A)) << errorText(A.takeError());
    EXPECT_EQ(*A, 42);
    MLB_ASSERT_OK(R->setFeature("x", int64_t(6)));
    Expected<int64_t> B = R->evaluate<int64_t>();
    ASSERT_TRUE(static_cast<bool>(B)) << errorText(B.takeError());
    EXPECT_EQ(*B, -7);
  }
  EXPECT_EQ(Header,
            "{\"features\":[{\"name\":\"x\",\"type\":\"int64_t\",\"port\":0,"
            "\"shape\":[1]},{\"name\":\"v\",\"type\":\"float\",\"port\":0,"
            "\"shape\":[1,3]}],\"advice\":{\"name\":\"d\",\"type\":\"int64_t\","
            "\"port\":0,\"shape\":[1]}}\n");
  EXPECT_EQ(Ctx, "{\"context\":\"f\"}\n");
  float V[3] = {1.0f, 2.0f, 3.0f};
  EXPECT_EQ(Obs0, "{\"observation\":0}\n" + rawBytes<int64_t>(5) +
                      std::string(reinterpret_cast<char *>(V), 12) + "\n");
  EXPECT_EQ(Obs1.substr(0, 18), "{\"observation\":1}\n");
  EXPECT_EQ(Obs1.substr(18, 8), rawBytes<int64_t>(6));
}

// -- with the Python model side
// -------------------------------------------------

/// Runs test/unit/pipe_model.py with the venv's Python; returns its exit code.
class PythonModel {
public:
  PythonModel(StringRef Base, StringRef SerDes, StringRef Policy,
              StringRef Report = "") {
    std::string Python = MLBRIDGE_PYTHON;
    Script = std::string(MLBRIDGE_SOURCE_DIR) + "/test/unit/pipe_model.py";
    Args = {Python, Script, Base.str(), SerDes.str(), Policy.str()};
    if (!Report.empty())
      Args.push_back(Report.str());
    std::vector<StringRef> Argv(Args.begin(), Args.end());
    std::string Err;
    bool Failed = false;
    PI = llvm::sys::ExecuteNoWait(Python, Argv, std::nullopt, {}, 0, &Err,
                                  &Failed);
    Started = !Failed;
    StartError = Err;
  }
  /// Waits (bounded) for the process; kills it on timeout.
  int wait() {
    std::string Err;
    llvm::sys::ProcessInfo R = llvm::sys::Wait(PI, 60u, &Err);
    return R.ReturnCode;
  }

  bool Started = false;
  std::string StartError, Script;
  std::vector<std::string> Args;
  llvm::sys::ProcessInfo PI;
};

TEST_F(PipeRunnerTest, PythonModelSideBitstream) {
  PythonModel Py(Base, "bitstream", "sum");
  ASSERT_TRUE(Py.Started) << Py.StartError;
  {
    MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                            specs(), createSpec<int64_t>("d", {1}), options()));
    for (int64_t I = 0; I < 5; ++I) {
      MLB_ASSERT_OK(R->populateFeatures(
          std::make_pair("x", I),
          std::make_pair("v", std::vector<float>{0.5f, 1.5f, float(I)})));
      Expected<int64_t> A = R->evaluate<int64_t>();
      ASSERT_TRUE(static_cast<bool>(A)) << errorText(A.takeError());
      EXPECT_EQ(*A, I + 2 + I);
    }
    // mlbridge's model side announces typed-reply: its frames are what the
    // runner read and checked above.
    EXPECT_TRUE(R->typedReplies());
  } // the runner closes the FIFOs: the model sees the end and exits
  EXPECT_EQ(Py.wait(), 0);
}

TEST_F(PipeRunnerTest, PythonModelSideJSONWithContexts) {
  PythonModel Py(Base, "json", "context");
  ASSERT_TRUE(Py.Started) << Py.StartError;
  {
    MLB_ASSERT_VALUE(R, PipeModelRunner::create(specs(),
                                                createSpec<double>("len", {1}),
                                                options(SerDesKind::JSON)));
    for (StringRef Name : {"a", "main", "function_three"}) {
      MLB_ASSERT_OK(R->switchContext(Name));
      Expected<double> A = R->evaluate<double>();
      ASSERT_TRUE(static_cast<bool>(A)) << errorText(A.takeError());
      EXPECT_EQ(*A, double(Name.size()));
    }
  }
  EXPECT_EQ(Py.wait(), 0);
}

// -- bounded waits and peer death
// -----------------------------------------------

TEST_F(PipeRunnerTest, NoModelTimesOutNamingTheFifo) {
  PipeModelRunnerOptions O = options();
  O.ConnectTimeout = 100ms;
  MLB_ASSERT_VALUE(
      R, PipeModelRunner::create(specs(), createSpec<int64_t>("d", {1}), O));
  Expected<int64_t> A = R->evaluate<int64_t>();
  ASSERT_FALSE(static_cast<bool>(A));
  std::string Msg = errorText(A.takeError());
  EXPECT_CONTAINS(Msg,
                  "no model opened " + Base + ".out for reading within 100 ms");
  // A failed runner stays failed, with the first error.
  std::string Again = errorText(R->evaluate<int64_t>().takeError());
  EXPECT_CONTAINS(Again, "failed earlier");
  EXPECT_CONTAINS(Again, "100 ms");
}

TEST_F(PipeRunnerTest, ModelThatNeverRepliesTimesOut) {
  PipeModelRunnerOptions O = options();
  O.Timeout = 100ms;
  MLB_ASSERT_VALUE(
      R, PipeModelRunner::create(specs(), createSpec<int64_t>("d", {1}), O));
  std::mutex Mu;
  std::condition_variable CV;
  bool Done = false;
  std::string Msg;
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      std::unique_lock<std::mutex> L(Mu);
      CV.wait_for(L, Bound, [&] { return Done; });
    });
    Msg = errorText(R->evaluate<int64_t>().takeError());
    {
      std::lock_guard<std::mutex> L(Mu);
      Done = true;
    }
    CV.notify_all();
  }
  EXPECT_CONTAINS(Msg, Base + ".in: nothing from the model within 100 ms");
  EXPECT_CONTAINS(Msg, "tensor 'd'");
}

TEST_F(PipeRunnerTest, ModelDyingBeforeTheReplyIsAnError) {
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                          specs(), createSpec<int64_t>("d", {1}), options()));
  std::string Msg;
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      Model.readLine(); // header
      Model.readLine(); // observation line; then exit without a reply
    });
    Msg = errorText(R->evaluate<int64_t>().takeError());
  }
  EXPECT_CONTAINS(Msg, "the model closed " + Base +
                           ".in before sending the advice for observation 0");
}

TEST_F(PipeRunnerTest, ShortReplyIsAnError) {
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                          specs(), createSpec<int64_t>("d", {1}), options()));
  std::string Msg;
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      Model.readLine();
      Model.readLine();
      Model.write("abc"); // 3 of 8 bytes, then exit
    });
    Msg = errorText(R->evaluate<int64_t>().takeError());
  }
  EXPECT_CONTAINS(Msg, "the model closed the pipe after 3 of 8 bytes");
  EXPECT_CONTAINS(Msg, Base + ".in");
}

TEST_F(PipeRunnerTest, ModelGoneBeforeTheWriteIsAnErrorNotASignal) {
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                          specs(), createSpec<int64_t>("d", {1}), options()));
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (Model.open())
        Model.readLine(); // the header; then close both ends
    });
    MLB_ASSERT_OK(R->connect()); // the header fits in the pipe buffer
  }
  // The reader of <base>.out is gone: the write fails with EPIPE; SIGPIPE
  // (which would kill this process) is blocked and discarded.
  std::string Msg = errorText(R->evaluate<int64_t>().takeError());
  EXPECT_CONTAINS(Msg, "the model closed " + Base +
                           ".out while observation 0 was being written");
}

TEST_F(PipeRunnerTest, GarbledJSONReplyIsAnError) {
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(specs(),
                                              createSpec<int64_t>("d", {1}),
                                              options(SerDesKind::JSON)));
  std::string Msg, Msg2;
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      Model.readLine();
      Model.readLine();
      Model.write("{\"advice\":0,\"tensors\":[{\"name\":\"d\",\"type\":"
                  "\"int64_t\",\"shape\":[1],\"data\":[2.5]}]}\n");
    });
    Msg = errorText(R->evaluate<int64_t>().takeError());
  }
  EXPECT_CONTAINS(Msg, "'2.5' has a fraction or exponent");
  EXPECT_CONTAINS(Msg, Base);
}

TEST_F(PipeRunnerTest, JSONReplyForAnotherObservationIsAnError) {
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(specs(),
                                              createSpec<int64_t>("d", {1}),
                                              options(SerDesKind::JSON)));
  std::string Msg;
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      Model.readLine();
      Model.readLine();
      Model.write("{\"advice\":9,\"tensors\":[{\"name\":\"d\",\"type\":"
                  "\"int64_t\",\"shape\":[1],\"data\":[2]}]}\n");
    });
    Msg = errorText(R->evaluate<int64_t>().takeError());
  }
  EXPECT_CONTAINS(Msg, "expected the advice for observation 0, got the advice "
                       "for observation 9");
}

// -- set-up errors
// ---------------------------------------------------------------

TEST_F(PipeRunnerTest, RegularFileIsNotReplaced) {
  std::string In = Base + ".in";
  int FD = ::open(In.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(FD, 0);
  ::close(FD);
  std::string Msg = errorText(
      PipeModelRunner::create(specs(), createSpec<int64_t>("d", {1}), options())
          .takeError());
  EXPECT_CONTAINS(Msg, In + " exists and is not a FIFO");
  ::unlink(In.c_str());
}

TEST_F(PipeRunnerTest, StaleFifosAreReusedAndFifosAreMode0600) {
  ASSERT_EQ(::mkfifo((Base + ".out").c_str(), 0644), 0); // a crashed run's
  {
    MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                            specs(), createSpec<int64_t>("d", {1}), options()));
    EXPECT_EQ(R->inboundPath(), Base + ".in");
    struct stat St;
    ASSERT_EQ(::stat((Base + ".in").c_str(), &St), 0);
    EXPECT_TRUE(S_ISFIFO(St.st_mode));
    EXPECT_EQ(St.st_mode & 0777, 0600u);
  }
  // The runner removes the FIFO it created, not the one it found.
  EXPECT_NE(::access((Base + ".in").c_str(), F_OK), 0);
  EXPECT_EQ(::unlink((Base + ".out").c_str()), 0);
}

TEST_F(PipeRunnerTest, DynamicAdviceNeedsARecordSerDes) {
  std::string Msg =
      errorText(PipeModelRunner::create(specs(), createSpec<int64_t>("d", {-1}),
                                        options())
                    .takeError());
  EXPECT_CONTAINS(Msg, "dynamic shape");
}

// -- mlbridge's extensions: end of session, outcomes, per-request specs ------

/// Writes \p Words to `<base>.ext`, as a model side that understands
/// mlbridge's extensions does before opening the FIFOs.
void announce(const std::string &Base, StringRef Words) {
  std::string Path = Base + ".ext";
  int FD = ::open(Path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  ASSERT_GE(FD, 0) << Path << ": " << std::strerror(errno);
  ASSERT_EQ(::write(FD, Words.data(), Words.size()),
            static_cast<ssize_t>(Words.size()));
  ::close(FD);
}

TEST_F(PipeRunnerTest, FinishSendsAnEndRecordAndClosesTheFifos) {
  announce(Base, "end\n");
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                          specs(), createSpec<int64_t>("d", {1}), options()));
  std::string Header, Obs, End, After = "unset";
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      Header = Model.readLine();
      Obs =
          Model.read(std::string("{\"observation\":0}\n").size() + 8 + 12 + 1);
      Model.write(rawBytes<int64_t>(1));
      End = Model.readLine();
      After = Model.read(1); // end of file: the runner closed <base>.out
    });
    Expected<int64_t> A = R->evaluate<int64_t>();
    ASSERT_TRUE(static_cast<bool>(A)) << errorText(A.takeError());
    MLB_ASSERT_OK(R->finish());
    MLB_ASSERT_OK(R->finish()); // idempotent
  }
  EXPECT_EQ(End, "{\"end\":true}\n");
  EXPECT_EQ(After, "");
  EXPECT_CONTAINS(errorText(R->evaluate<int64_t>().takeError()),
                  "the session was finished");
  ::unlink((Base + ".ext").c_str());
}

/// A host written for stock LLVM (no `<base>.ext`) gets nothing but LLVM's
/// protocol; the end record goes to a model side that announced it, or when
/// the user opts in, and never when turned off.
TEST_F(PipeRunnerTest, EndRecordOnlyWhenAnnouncedOrAskedFor) {
  struct Case {
    PipeEndRecord Mode;
    const char *Announced; // nullptr: no <base>.ext
    bool Sent;
  };
  for (Case C : {Case{PipeEndRecord::Negotiated, nullptr, false},
                 Case{PipeEndRecord::Negotiated, "other-extension\n", false},
                 Case{PipeEndRecord::Negotiated, "framed end\n", true},
                 Case{PipeEndRecord::Always, nullptr, true},
                 Case{PipeEndRecord::Never, "end", false}}) {
    if (C.Announced)
      announce(Base, C.Announced);
    PipeModelRunnerOptions O = options();
    O.SendEnd = C.Mode;
    std::string Rest = "unset";
    {
      MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                              specs(), createSpec<int64_t>("d", {1}), O));
      ModelThread M([&] {
        RawModel Model(Base);
        if (!Model.open())
          return;
        Model.readLine();       // header
        Model.readLine();       // context
        Rest = Model.read(100); // until the end of file
      });
      MLB_ASSERT_OK(R->switchContext("f"));
      EXPECT_EQ(R->sendsEnd(), C.Sent);
      R.reset(); // ends the session while the model waits
    }
    EXPECT_EQ(Rest, C.Sent ? "{\"end\":true}\n" : "")
        << static_cast<int>(C.Mode) << " " << (C.Announced ? C.Announced : "");
    ::unlink((Base + ".ext").c_str());
  }
}

TEST_F(PipeRunnerTest, RecordSerDesEndsTheSessionWithoutAnnouncement) {
  for (bool SendEnd : {true, false}) {
    PipeModelRunnerOptions O = options(SerDesKind::JSON);
    O.SendEnd = SendEnd ? PipeEndRecord::Negotiated : PipeEndRecord::Never;
    std::string Rest = "unset";
    {
      MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                              specs(), createSpec<int64_t>("d", {1}), O));
      ModelThread M([&] {
        RawModel Model(Base);
        if (!Model.open())
          return;
        Model.readLine();       // header
        Model.readLine();       // context
        Rest = Model.read(100); // until the end of file
      });
      MLB_ASSERT_OK(R->switchContext("f"));
      R.reset(); // ends the session while the model waits
    }
    EXPECT_EQ(Rest, SendEnd ? "{\"end\":true}\n" : "") << SendEnd;
  }
}

// -- trust: nothing another user controls
// ----------------------------------------

/// The uid and gid of user nobody (the tests run as root, which may chown).
std::pair<uid_t, gid_t> nobody() {
  struct passwd *P = ::getpwnam("nobody");
  return P ? std::pair(P->pw_uid, P->pw_gid)
           : std::pair(uid_t(65534), gid_t(65534));
}

/// The error of connecting a runner (no FIFO creation) to \p Base.
std::string connectError(const std::string &Base) {
  PipeModelRunnerOptions O;
  O.ChannelBase = Base;
  O.ConnectTimeout = 200ms;
  O.Timeout = 200ms;
  Expected<std::unique_ptr<PipeModelRunner>> R =
      PipeModelRunner::create(specs(), createSpec<int64_t>("d", {1}), O);
  if (!R)
    return errorText(R.takeError());
  return errorText((*R)->connect());
}

TEST_F(PipeRunnerTest, RefusesFifosOfAnotherUser) {
  ASSERT_EQ(::geteuid(), 0u) << "chown needs root";
  auto [Uid, Gid] = nobody();
  for (const char *Which : {".in", ".out"}) {
    for (const char *Ext : {".in", ".out"})
      ASSERT_EQ(::mkfifo((Base + Ext).c_str(), 0600), 0);
    ASSERT_EQ(::chown((Base + Which).c_str(), Uid, Gid), 0);
    // A model of user nobody waits at the other end: the runner must refuse
    // before it would talk to it.
    int Keep = ::open((Base + ".in").c_str(), O_RDWR | O_NONBLOCK);
    int Keep2 = ::open((Base + ".out").c_str(), O_RDWR | O_NONBLOCK);
    std::string Msg = connectError(Base);
    EXPECT_CONTAINS(Msg, "refusing " + Base + Which);
    EXPECT_CONTAINS(Msg, "belongs to user 'nobody' (uid " +
                             std::to_string(Uid) + ")");
    EXPECT_CONTAINS(Msg, "private folder");
    ::close(Keep);
    ::close(Keep2);
    for (const char *Ext : {".in", ".out"})
      ::unlink((Base + Ext).c_str());
  }
}

TEST_F(PipeRunnerTest, RefusesFifosOthersMayWrite) {
  for (const char *Ext : {".in", ".out"}) {
    ASSERT_EQ(::mkfifo((Base + Ext).c_str(), 0600), 0);
  }
  ASSERT_EQ(::chmod((Base + ".in").c_str(), 0622), 0);
  std::string Msg = connectError(Base);
  EXPECT_CONTAINS(Msg, "refusing " + Base +
                           ".in: its group or others may "
                           "write it (mode 0622)");
  for (const char *Ext : {".in", ".out"})
    ::unlink((Base + Ext).c_str());
}

TEST_F(PipeRunnerTest, RefusesAChannelFolderOthersMayWriteOrOwn) {
  ASSERT_EQ(::chmod(Dir.c_str(), 01777), 0); // as /tmp
  std::string Msg = connectError(Base);
  EXPECT_CONTAINS(Msg, "its folder " + Dir +
                           " may be written by its group or others "
                           "(mode 1777)");
  ASSERT_EQ(::chmod(Dir.c_str(), 0700), 0);
  auto [Uid, Gid] = nobody();
  ASSERT_EQ(::chown(Dir.c_str(), Uid, Gid), 0);
  Msg = connectError(Base);
  EXPECT_CONTAINS(Msg, "its folder " + Dir + " belongs to user 'nobody'");
  ASSERT_EQ(::chown(Dir.c_str(), ::geteuid(), ::getegid()), 0);
}

TEST_F(PipeRunnerTest, RefusesAnExtensionsFileOfAnotherUser) {
  announce(Base, "end");
  auto [Uid, Gid] = nobody();
  ASSERT_EQ(::chown((Base + ".ext").c_str(), Uid, Gid), 0);
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                          specs(), createSpec<int64_t>("d", {1}), options()));
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (Model.open())
        Model.read(1);
    });
    std::string Msg = errorText(R->connect());
    EXPECT_CONTAINS(Msg, "refusing " + Base +
                             ".ext: it belongs to user "
                             "'nobody'");
  }
  R.reset();
  ::unlink((Base + ".ext").c_str());
}

TEST_F(PipeRunnerTest, OutcomesAreCheckedBeforeSending) {
  PipeModelRunnerOptions O = options();
  MLB_ASSERT_VALUE(NoScore, PipeModelRunner::create(
                                specs(), createSpec<int64_t>("d", {1}), O));
  EXPECT_CONTAINS(
      errorText(NoScore->sendOutcome(0, TensorValue::scalar<float>("r", 1.0f))),
      "needs a score spec");
  O.Score = createSpec<float>("reward", {1});
  MLB_ASSERT_VALUE(
      R, PipeModelRunner::create(specs(), createSpec<int64_t>("d", {1}), O));
  EXPECT_CONTAINS(
      errorText(R->sendOutcome(0, TensorValue::scalar<double>("reward", 1.0))),
      "does not match the score spec 'reward' (float)");
  EXPECT_CONTAINS(
      errorText(R->sendOutcome(0, TensorValue::scalar<float>("reward", 1.0f))),
      "no observation 0 in this context");
}

TEST_F(PipeRunnerTest, OutcomeAndNewHeaderBytesForLLVMsLayout) {
  PipeModelRunnerOptions O = options();
  O.Score = createSpec<float>("reward", {1});
  O.SendEnd = PipeEndRecord::Always; // the user opts in
  MLB_ASSERT_VALUE(
      R, PipeModelRunner::create(specs(), createSpec<int64_t>("d", {1}), O));
  std::string Header, Outcome, Header2, Obs2, End;
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      Header = Model.readLine();
      Model.read(std::string("{\"observation\":0}\n").size() + 8 + 12 + 1);
      Model.write(rawBytes<int64_t>(1));
      Outcome = Model.read(std::string("{\"outcome\":0}\n").size() + 4 + 1);
      Header2 = Model.readLine();
      Obs2 = Model.read(std::string("{\"observation\":1}\n").size() + 4 + 1);
      Model.write(rawBytes<int64_t>(2));
      // Stay until finish() has written the end record: closing earlier
      // would make that write fail with a broken pipe.
      End = Model.readLine();
    });
    Expected<int64_t> A = R->evaluate<int64_t>();
    ASSERT_TRUE(static_cast<bool>(A)) << errorText(A.takeError());
    MLB_ASSERT_OK(
        R->sendOutcome(0, TensorValue::scalar<float>("reward", 0.5f)));
    MLB_ASSERT_OK(R->changeSpecs({createSpec<int32_t>("y", {1})},
                                 createSpec<int64_t>("d", {1})));
    MLB_ASSERT_OK(R->setFeature("y", int32_t(9)));
    Expected<int64_t> B = R->evaluate<int64_t>();
    ASSERT_TRUE(static_cast<bool>(B)) << errorText(B.takeError());
    EXPECT_EQ(*B, 2);
    MLB_ASSERT_OK(R->finish());
  }
  // LLVM's training-log layout: the score spec before the advice spec.
  EXPECT_CONTAINS(Header, "],\"score\":{\"name\":\"reward\",\"type\":"
                          "\"float\",\"port\":0,\"shape\":[1]},\"advice\":");
  EXPECT_EQ(Outcome, "{\"outcome\":0}\n" + rawBytes<float>(0.5f) + "\n");
  EXPECT_EQ(Header2, "{\"features\":[{\"name\":\"y\",\"type\":\"int32_t\","
                     "\"port\":0,\"shape\":[1]}],\"score\":{\"name\":"
                     "\"reward\",\"type\":\"float\",\"port\":0,\"shape\":[1]},"
                     "\"advice\":{\"name\":\"d\",\"type\":\"int64_t\","
                     "\"port\":0,\"shape\":[1]}}\n");
  EXPECT_EQ(Obs2, "{\"observation\":1}\n" + rawBytes<int32_t>(9) + "\n");
  EXPECT_EQ(End, "{\"end\":true}\n");
}

/// The extensions across processes: C++ runner, Python model side.
TEST_F(PipeRunnerTest, PythonModelSideGetsOutcomesNewSpecsAndTheEnd) {
  for (auto [Kind, Name] : {std::pair(SerDesKind::Bitstream, "bitstream"),
                            std::pair(SerDesKind::JSON, "json")}) {
    std::string Report = Dir + "/report.txt";
    PythonModel Py(Base, Name, "sum", Report);
    ASSERT_TRUE(Py.Started) << Py.StartError;
    {
      PipeModelRunnerOptions O = options(Kind);
      O.Score = createSpec<float>("reward", {1});
      MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                              specs(), createSpec<int64_t>("d", {1}), O));
      MLB_ASSERT_OK(R->switchContext("f"));
      for (int64_t I = 0; I < 2; ++I) {
        MLB_ASSERT_OK(R->populateFeatures(
            std::make_pair("x", I),
            std::make_pair("v", std::vector<float>{1.0f, 2.0f, 3.0f})));
        Expected<int64_t> A = R->evaluate<int64_t>();
        ASSERT_TRUE(static_cast<bool>(A)) << errorText(A.takeError());
        EXPECT_EQ(*A, I + 6);
      }
      // Rewards once known, in any order.
      MLB_ASSERT_OK(
          R->sendOutcome(1, TensorValue::scalar<float>("reward", 0.5f)));
      MLB_ASSERT_OK(
          R->sendOutcome(0, TensorValue::scalar<float>("reward", -1.0f)));
      MLB_ASSERT_OK(R->switchContext("g"));
      MLB_ASSERT_OK(R->changeSpecs({createSpec<int32_t>("y", {2})},
                                   createSpec<int64_t>("d", {1})));
      MLB_ASSERT_OK(R->setFeature("y", std::vector<int32_t>{3, 4}));
      Expected<int64_t> B = R->evaluate<int64_t>();
      ASSERT_TRUE(static_cast<bool>(B)) << errorText(B.takeError());
      EXPECT_EQ(*B, 7);
      MLB_ASSERT_OK(
          R->sendOutcome(0, TensorValue::scalar<float>("reward", 2.0f)));
    } // destruction sends the end record
    EXPECT_EQ(Py.wait(), 0) << Name;
    bool Found = false;
    std::string Text = readFile(Report, Found);
    ASSERT_TRUE(Found) << Report;
    EXPECT_EQ(Text, "f 0 x,v -1\n"
                    "f 1 x,v 0.5\n"
                    "g 0 y 2\n"
                    "ended\n")
        << Name;
    ::unlink(Report.c_str());
  }
}

// -- reply checks (hardening issue #19) --------------------------------------

/// The typed-reply frame of \p Payload for observation \p Id, its spec given
/// as JSON.
std::string typedFrame(int64_t Id, StringRef SpecJSON, StringRef Payload) {
  return "{\"advice\":" + std::to_string(Id) + ",\"spec\":" + SpecJSON.str() +
         "}\n" + Payload.str() + "\n";
}

constexpr const char *SpecD =
    "{\"name\":\"d\",\"type\":\"int64_t\",\"port\":0,\"shape\":[1]}";

TEST_F(PipeRunnerTest, RawReplyWithLeftoverBytesIsAnError) {
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                          specs(), createSpec<int64_t>("d", {1}), options()));
  std::string Msg;
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      Model.readLine(); // header
      Model.read(18 + 8 + 12 + 1);
      Model.write(rawBytes<int64_t>(1) + rawBytes<int64_t>(1)); // two for one
      Model.read(100); // until the runner closes
    });
    Msg = errorText(R->evaluate<int64_t>().takeError());
  }
  EXPECT_CONTAINS(Msg, "the model sent 8 bytes after the advice for "
                       "observation 0 ('d' is 8 bytes)");
  EXPECT_CONTAINS(Msg, "a raw reply has no framing");
  EXPECT_TRUE(R->failed());
}

TEST_F(PipeRunnerTest, LeftoverBytesAfterTheLastReplyFailTheEnd) {
  // Sent after the runner has read the reply: found by finish().
  announce(Base, "end\n");
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                          specs(), createSpec<int64_t>("d", {1}), options()));
  std::promise<void> Evaluated, Sent;
  std::string Rest = "unset";
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      Model.readLine();
      Model.read(18 + 8 + 12 + 1);
      Model.write(rawBytes<int64_t>(3));
      Evaluated.get_future().wait_for(Bound);
      Model.write("xyz");
      Sent.set_value();
      Rest = Model.read(100); // no end record: the session failed
    });
    Expected<int64_t> A = R->evaluate<int64_t>();
    Evaluated.set_value();
    ASSERT_TRUE(static_cast<bool>(A)) << errorText(A.takeError());
    EXPECT_EQ(*A, 3);
    Sent.get_future().wait_for(Bound);
    std::string Msg = errorText(R->finish());
    EXPECT_CONTAINS(
        Msg, "the model sent 3 bytes after the advice for observation 0");
  }
  EXPECT_EQ(Rest, "");
  ::unlink((Base + ".ext").c_str());
}

TEST_F(PipeRunnerTest, TypedReplyIsAcknowledgedAndChecked) {
  announce(Base, "end typed-reply\n");
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(
                          specs(), createSpec<int64_t>("d", {1}), options()));
  std::string Ack, Header;
  std::string Msg;
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      Ack = Model.readLine();
      Header = Model.readLine();
      Model.read(18 + 8 + 12 + 1);
      Model.write(typedFrame(0, SpecD, rawBytes<int64_t>(42)));
      Model.read(18 + 8 + 12 + 1);
      std::string Double = SpecD;
      Double.replace(Double.find("int64_t"), 7, "double");
      Model.write(typedFrame(1, Double, rawBytes<double>(1.0)));
      Model.read(100);
    });
    Expected<int64_t> A = R->evaluate<int64_t>();
    ASSERT_TRUE(static_cast<bool>(A)) << errorText(A.takeError());
    EXPECT_EQ(*A, 42);
    EXPECT_TRUE(R->typedReplies());
    Msg = errorText(R->evaluate<int64_t>().takeError());
  }
  EXPECT_EQ(Ack, "{\"extensions\":[\"end\",\"typed-reply\"]}\n");
  EXPECT_EQ(Header.substr(0, 13), "{\"features\":[");
  EXPECT_CONTAINS(Msg, "the advice for observation 1 does not match the "
                       "advice spec 'd': expected int64_t [1] 'd', got "
                       "double [1] 'd'");
  ::unlink((Base + ".ext").c_str());
}

TEST_F(PipeRunnerTest, TypedReplyRefusesWhatItsFrameDoesNotSay) {
  std::string Shape2 = SpecD;
  Shape2.replace(Shape2.find("[1]"), 3, "[2]");
  struct Case {
    std::string Reply;
    const char *Expected;
  };
  for (const Case &C : {
           Case{rawBytes<int64_t>(5), "is not a typed reply (byte offset 0): "
                                      "byte 0 is 0x05, expected '{'"},
           Case{typedFrame(0, Shape2,
                           rawBytes<int64_t>(1) + rawBytes<int64_t>(1)),
                "expected int64_t [1] 'd', got int64_t [2] 'd'"},
           Case{typedFrame(0, SpecD, rawBytes<int64_t>(1) + "x"),
                "('d' is 8 bytes) is not followed by the frame's final "
                "newline (byte 0x78"},
           Case{typedFrame(3, SpecD, rawBytes<int64_t>(1)),
                "expected the advice for observation 0, got the advice for "
                "observation 3"},
           Case{"{\"advice\":0}\n" + rawBytes<int64_t>(1) + "\n",
                "must be an object with exactly the keys"},
       }) {
    announce(Base, "typed-reply");
    std::string Msg;
    {
      MLB_ASSERT_VALUE(R, PipeModelRunner::create(specs(),
                                                  createSpec<int64_t>("d", {1}),
                                                  options()));
      ModelThread M([&] {
        RawModel Model(Base);
        if (!Model.open())
          return;
        EXPECT_EQ(Model.readLine(), "{\"extensions\":[\"typed-reply\"]}\n");
        Model.readLine();
        Model.read(18 + 8 + 12 + 1);
        Model.write(C.Reply);
        Model.read(100);
      });
      Msg = errorText(R->evaluate<int64_t>().takeError());
    }
    EXPECT_CONTAINS(Msg, C.Expected);
    ::unlink((Base + ".ext").c_str());
  }
}

TEST_F(PipeRunnerTest, TypedReplyIsNotUsedWithRecordSerDes) {
  // JSON replies are records already: no acknowledgement, no frames.
  announce(Base, "end typed-reply\n");
  MLB_ASSERT_VALUE(R, PipeModelRunner::create(specs(),
                                              createSpec<int64_t>("d", {1}),
                                              options(SerDesKind::JSON)));
  std::string First;
  {
    ModelThread M([&] {
      RawModel Model(Base);
      if (!Model.open())
        return;
      First = Model.readLine();
      Model.read(200);
    });
    MLB_ASSERT_OK(R->connect());
    EXPECT_FALSE(R->typedReplies());
    R.reset();
  }
  EXPECT_EQ(First.substr(0, 13), "{\"features\":[");
  ::unlink((Base + ".ext").c_str());
}

} // namespace
