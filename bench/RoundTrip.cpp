//===- RoundTrip.cpp - Compiler side of the round-trip benchmark ----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The compiler side of bench/roundtrip.py (a measurement, not a test). It
/// sends float vectors to a model in another process and checks each answer
/// (one fully-connected layer: dot(x, w[:L]) + bias) against its own
/// computation. Modes:
///
///   bitstream, json  through mlbridge::PipeModelRunner (feature `x`, float
///                    [-1]; advice `y`, float [1]);
///   fifo             the floor: the same floats written raw to `<base>.out`
///                    (a uint32 length, then L floats), 4 raw bytes back on
///                    `<base>.in`, no SerDes;
///   grpc             through mlbridge::GrpcModelRunner (ModelService/Evaluate
///                    to the Python server at `--address`), same specs;
///   grpc-floor       the gRPC floor: the same Evaluate call, but the floats
///                    go straight into the `data` bytes of the one tensor (no
///                    spec, no name, no mlbridge SerDes) and the reply's first
///                    tensor holds 4 raw bytes.
///
/// The weights are a hash of the index, computed identically by the Python
/// side. Only the queries are timed (after connecting and a short warm-up).
/// One JSON object on stdout; errors on stderr and a non-zero exit status.
///
//===----------------------------------------------------------------------===//

#include "RoundTripCommon.h"

#include "mlbridge/PipeModelRunner.h"
#ifdef MLBRIDGE_HAVE_GRPC
#include "mlbridge/GrpcModelRunner.h"
#include "mlbridge/v1/model_service.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#endif

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/resource.h>
#include <sys/uio.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace llvm;
using namespace mlbridge;
using Clock = std::chrono::steady_clock;
using namespace mlbridge::bench;

namespace {

struct Options {
  std::string Mode;
  std::string Base;
  std::string Address; // grpc, grpc-floor: the model server, host:port
  std::vector<uint32_t> Sizes;
  uint64_t Repeat = 1; // queries per size (the memory run: many small ones)
  uint64_t Warmup = 3;
  int TimeoutMs = 120000;
};

/// Answers a query; errors are fatal for the benchmark.
class Channel {
public:
  virtual ~Channel() = default;
  virtual Error connect() = 0;
  virtual Expected<float> query(ArrayRef<float> X) = 0;
};

class RunnerChannel final : public Channel {
public:
  explicit RunnerChannel(std::unique_ptr<PipeModelRunner> R)
      : R(std::move(R)) {}
  Error connect() override { return R->switchContext("roundtrip"); }
  Expected<float> query(ArrayRef<float> X) override {
    if (Error E = R->setFeature("x", X))
      return E;
    return R->evaluate<float>();
  }

private:
  std::unique_ptr<PipeModelRunner> R;
};

/// The floor: raw bytes on the same FIFO pair, no SerDes.
class RawFifoChannel final : public Channel {
public:
  RawFifoChannel(std::string Base, int TimeoutMs)
      : InPath(Base + ".in"), OutPath(Base + ".out"), TimeoutMs(TimeoutMs) {}
  ~RawFifoChannel() override {
    if (OutFD >= 0)
      ::close(OutFD);
    if (InFD >= 0)
      ::close(InFD);
  }

  Error connect() override {
    // LLVM's order: <base>.in for reading, then <base>.out for writing (the
    // latter fails with ENXIO until the model has opened it).
    InFD = ::open(InPath.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (InFD < 0)
      return errorf("cannot open " + InPath);
    Clock::time_point Deadline =
        Clock::now() + std::chrono::milliseconds(TimeoutMs);
    while ((OutFD = ::open(OutPath.c_str(),
                           O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
      if (errno != ENXIO || Clock::now() >= Deadline)
        return errorf("cannot open " + OutPath);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
#ifdef F_SETPIPE_SZ
    // The same pipe buffer as PipeModelRunner asks for: only the SerDes
    // differs between the floor and the runner.
    (void)::fcntl(OutFD, F_SETPIPE_SZ, 1 << 20);
#endif
    return Error::success();
  }

  Expected<float> query(ArrayRef<float> X) override {
    uint32_t N = static_cast<uint32_t>(X.size());
    struct iovec V[2] = {{&N, sizeof(N)},
                         {const_cast<float *>(X.data()), X.size() * 4}};
    size_t Left = V[0].iov_len + V[1].iov_len;
    struct iovec *Cur = V;
    int Count = 2;
    while (Left > 0) {
      ssize_t W = ::writev(OutFD, Cur, Count);
      if (W < 0) {
        if (errno != EAGAIN && errno != EINTR)
          return errorf("writing " + OutPath);
        if (Error E = waitFor(OutFD, POLLOUT, OutPath))
          return E;
        continue;
      }
      Left -= static_cast<size_t>(W);
      while (Count > 0 && static_cast<size_t>(W) >= Cur->iov_len) {
        W -= static_cast<ssize_t>(Cur->iov_len);
        ++Cur;
        --Count;
      }
      if (Count > 0) {
        Cur->iov_base = static_cast<char *>(Cur->iov_base) + W;
        Cur->iov_len -= static_cast<size_t>(W);
      }
    }
    float Y;
    char *P = reinterpret_cast<char *>(&Y);
    size_t Got = 0;
    while (Got < sizeof(Y)) {
      ssize_t R = ::read(InFD, P + Got, sizeof(Y) - Got);
      if (R > 0) {
        Got += static_cast<size_t>(R);
        continue;
      }
      if (R == 0 && Got == 0 && Polled) // ready, but no writer: closed
        return createStringError(inconvertibleErrorCode(),
                                 "the model closed " + InPath);
      if (R < 0 && errno != EAGAIN && errno != EINTR)
        return errorf("reading " + InPath);
      if (Error E = waitFor(InFD, POLLIN, InPath))
        return E;
    }
    Polled = false;
    return Y;
  }

private:
  Error errorf(const std::string &What) {
    return createStringError(inconvertibleErrorCode(),
                             What + ": " + std::strerror(errno));
  }
  Error waitFor(int FD, short Events, const std::string &Path) {
    struct pollfd P = {FD, Events, 0};
    int R;
    while ((R = ::poll(&P, 1, TimeoutMs)) < 0 && errno == EINTR) {
    }
    if (R == 0)
      return createStringError(inconvertibleErrorCode(),
                               "timed out waiting on " + Path);
    if (R < 0)
      return errorf("poll on " + Path);
    Polled = true;
    return Error::success();
  }

  std::string InPath, OutPath;
  int TimeoutMs;
  int InFD = -1, OutFD = -1;
  bool Polled = false;
};

#ifdef MLBRIDGE_HAVE_GRPC
class GrpcRunnerChannel final : public Channel {
public:
  explicit GrpcRunnerChannel(GrpcModelRunnerOptions RO) : RO(std::move(RO)) {}
  Error connect() override {
    auto Created =
        GrpcModelRunner::create({createSpec<float>("x", {DynamicDim})},
                                createSpec<float>("y", {1}), RO);
    if (!Created)
      return Created.takeError();
    R = std::move(*Created);
    R->setContext("roundtrip");
    return Error::success();
  }
  Expected<float> query(ArrayRef<float> X) override {
    if (Error E = R->setFeature("x", X))
      return E;
    return R->evaluate<float>();
  }

private:
  GrpcModelRunnerOptions RO;
  std::unique_ptr<GrpcModelRunner> R;
};

/// The gRPC floor: one Evaluate call per query with the floats copied once
/// into the tensor's `data` bytes, no mlbridge SerDes on either side.
class RawGrpcChannel final : public Channel {
public:
  RawGrpcChannel(std::string Address, int TimeoutMs)
      : Address(std::move(Address)), TimeoutMs(TimeoutMs) {}

  Error connect() override {
    // The runner's channel arguments, so that only the SerDes differs.
    grpc::ChannelArguments Args;
    Args.SetMaxSendMessageSize(static_cast<int>(DefaultGrpcMaxMessageBytes));
    Args.SetMaxReceiveMessageSize(static_cast<int>(DefaultGrpcMaxMessageBytes));
    Args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    Ch = grpc::CreateCustomChannel(Address, grpc::InsecureChannelCredentials(),
                                   Args);
    if (!Ch->WaitForConnected(std::chrono::system_clock::now() +
                              std::chrono::milliseconds(TimeoutMs)))
      return createStringError(inconvertibleErrorCode(),
                               "cannot connect to " + Address);
    Stub = v1::ModelService::NewStub(Ch);
    return Error::success();
  }

  Expected<float> query(ArrayRef<float> X) override {
    v1::Observation Req;
    Req.mutable_features()->add_tensors()->set_data(X.data(), X.size() * 4);
    grpc::ClientContext Ctx;
    Ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(TimeoutMs));
    v1::TensorMessage Reply;
    grpc::Status S = Stub->Evaluate(&Ctx, Req, &Reply);
    if (!S.ok())
      return createStringError(inconvertibleErrorCode(),
                               "Evaluate to " + Address +
                                   " failed: " + S.error_message());
    float Y;
    if (Reply.tensors_size() != 1 || Reply.tensors(0).data().size() != 4)
      return createStringError(inconvertibleErrorCode(),
                               "the reply is not one tensor of 4 bytes");
    std::memcpy(&Y, Reply.tensors(0).data().data(), sizeof(Y));
    return Y;
  }

private:
  std::string Address;
  int TimeoutMs;
  std::shared_ptr<grpc::Channel> Ch;
  std::unique_ptr<v1::ModelService::Stub> Stub;
};
#endif

Expected<std::unique_ptr<Channel>> makeChannel(const Options &O) {
  if (O.Mode == "fifo")
    return std::make_unique<RawFifoChannel>(O.Base, O.TimeoutMs);
  if (O.Mode == "grpc" || O.Mode == "grpc-floor") {
#ifdef MLBRIDGE_HAVE_GRPC
    if (O.Address.empty())
      return createStringError(inconvertibleErrorCode(),
                               "mode " + O.Mode + " needs --address");
    if (O.Mode == "grpc-floor")
      return std::make_unique<RawGrpcChannel>(O.Address, O.TimeoutMs);
    GrpcModelRunnerOptions RO;
    RO.Address = O.Address;
    RO.Timeout = std::chrono::milliseconds(O.TimeoutMs);
    RO.ConnectTimeout = std::chrono::milliseconds(O.TimeoutMs);
    return std::make_unique<GrpcRunnerChannel>(std::move(RO));
#else
    return createStringError(inconvertibleErrorCode(),
                             "mode " + O.Mode +
                                 ": mlbridge was built without gRPC "
                                 "(MLBRIDGE_ENABLE_GRPC=OFF)");
#endif
  }
  PipeModelRunnerOptions PO;
  PO.ChannelBase = O.Base;
  PO.Timeout = std::chrono::milliseconds(O.TimeoutMs);
  PO.ConnectTimeout = std::chrono::milliseconds(O.TimeoutMs);
  if (O.Mode == "bitstream")
    PO.Kind = SerDesKind::Bitstream;
  else if (O.Mode == "json")
    PO.Kind = SerDesKind::JSON;
  else if (O.Mode == "protobuf")
    PO.Kind = SerDesKind::Protobuf;
  else
    return createStringError(
        inconvertibleErrorCode(),
        "unknown mode '" + O.Mode +
            "' (bitstream, json, protobuf, fifo, grpc, grpc-floor)");
  auto R = PipeModelRunner::create({createSpec<float>("x", {DynamicDim})},
                                   createSpec<float>("y", {1}), PO);
  if (!R)
    return R.takeError();
  return std::make_unique<RunnerChannel>(std::move(*R));
}

std::optional<Options> parseArgs(int Argc, char **Argv) {
  Options O;
  for (int I = 1; I < Argc; ++I) {
    StringRef A = Argv[I];
    auto Value = [&](StringRef Flag) -> std::optional<StringRef> {
      if (!A.consume_front(Flag))
        return std::nullopt;
      if (A.consume_front("="))
        return A;
      return std::nullopt;
    };
    if (auto V = Value("--mode")) {
      O.Mode = V->str();
    } else if (auto V = Value("--base")) {
      O.Base = V->str();
    } else if (auto V = Value("--address")) {
      O.Address = V->str();
    } else if (auto V = Value("--sizes")) {
      SmallVector<StringRef, 128> Parts;
      V->split(Parts, ',', -1, false);
      for (StringRef P : Parts) {
        uint32_t N;
        if (P.getAsInteger(10, N) || N == 0)
          return std::nullopt;
        O.Sizes.push_back(N);
      }
    } else if (auto V = Value("--repeat")) {
      if (V->getAsInteger(10, O.Repeat) || O.Repeat == 0)
        return std::nullopt;
    } else if (auto V = Value("--warmup")) {
      if (V->getAsInteger(10, O.Warmup))
        return std::nullopt;
    } else if (auto V = Value("--timeout-ms")) {
      if (V->getAsInteger(10, O.TimeoutMs) || O.TimeoutMs <= 0)
        return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (O.Mode.empty() || (O.Base.empty() && O.Address.empty()) ||
      O.Sizes.empty())
    return std::nullopt;
  return O;
}

int run(const Options &O) {
  uint32_t MaxL = 0;
  for (uint32_t L : O.Sizes)
    MaxL = std::max(MaxL, L);
  std::vector<std::vector<float>> Inputs = makeInputs(O.Sizes);

  Expected<std::unique_ptr<Channel>> C = makeChannel(O);
  if (!C) {
    errs() << "roundtrip: " << toString(C.takeError()) << "\n";
    return 2;
  }
  if (Error E = (*C)->connect()) {
    errs() << "roundtrip: " << toString(std::move(E)) << "\n";
    return 2;
  }

  AnswerChecker Checker(MaxL);
  auto Check = [&](ArrayRef<float> X, float Y) { Checker.check(X, Y); };
  auto Query = [&](ArrayRef<float> X) -> bool {
    Expected<float> Y = (*C)->query(X);
    if (!Y) {
      errs() << "roundtrip: query of " << X.size()
             << " floats failed: " << toString(Y.takeError()) << "\n";
      return false;
    }
    Check(X, *Y);
    return true;
  };

  for (uint64_t I = 0; I < O.Warmup; ++I)
    if (!Query(Inputs[I % Inputs.size()]))
      return 1;
  long RssAfterWarmup = rssKiB();

  std::vector<double> PerSize(O.Sizes.size(), 0.0);
  Clock::duration Total{0};
  double Cpu0 = cpuSeconds();
  for (size_t Q = 0; Q < Inputs.size(); ++Q) {
    for (uint64_t R = 0; R < O.Repeat; ++R) {
      Clock::time_point T0 = Clock::now();
      Expected<float> Y = (*C)->query(Inputs[Q]);
      Clock::duration D = Clock::now() - T0;
      if (!Y) {
        errs() << "roundtrip: query of " << Inputs[Q].size()
               << " floats failed: " << toString(Y.takeError()) << "\n";
        return 1;
      }
      Total += D;
      PerSize[Q] += std::chrono::duration<double>(D).count();
      Check(Inputs[Q], *Y);
    }
  }
  double Cpu = cpuSeconds() - Cpu0;
  long RssEnd = rssKiB();

  std::string Out;
  raw_string_ostream OS(Out);
  OS << "{\"mode\":\"" << O.Mode
     << "\",\"queries\":" << Checker.checked() - O.Warmup
     << ",\"checked\":" << Checker.checked()
     << ",\"mismatches\":" << Checker.mismatches() << ",\"first_mismatch\":\""
     << Checker.firstMismatch() << "\""
     << ",\"total_seconds\":"
     << formatv("{0:e9}", std::chrono::duration<double>(Total).count())
     << ",\"cpu_seconds\":" << formatv("{0:e6}", Cpu)
     << ",\"rss_kib_after_warmup\":" << RssAfterWarmup
     << ",\"rss_kib_end\":" << RssEnd << ",\"peak_rss_kib\":" << peakRssKiB()
     << ",\"per_size_seconds\":[";
  for (size_t I = 0; I < PerSize.size(); ++I)
    OS << (I ? "," : "") << formatv("{0:e6}", PerSize[I]);
  OS << "]}\n";
  outs() << OS.str();
  outs().flush();
  return Checker.mismatches() == 0 ? 0 : 1;
}

} // namespace

int main(int Argc, char **Argv) {
  std::optional<Options> O = parseArgs(Argc, Argv);
  if (!O) {
    errs() << "usage: " << Argv[0]
           << " --mode=bitstream|json|protobuf|fifo --base=PATH | "
              "--mode=grpc|grpc-floor --address=HOST:PORT "
              "--sizes=L1,L2,... [--repeat=N] [--warmup=N] "
              "[--timeout-ms=MS]\n";
    return 2;
  }
  return run(*O);
}
