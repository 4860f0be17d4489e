//===- InProcessRoundTrip.cpp - Round trip through the in-process runners -===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The in-process half of the round-trip benchmark
/// (bench/inprocess_roundtrip.py drives it; a measurement, not a test). Query Q
/// sends L floats (feature `x`, float [1, L]) to a one-layer model and checks
/// the answer (`y`, float [1, 1]) against its own computation
/// (RoundTripCommon.h). One model file per size L in --models: `dense<L>.onnx`
/// and `dense<L>.so` (`mlbridge aot`). Modes:
///
///   onnx         mlbridge::OnnxModelRunner;
///   onnx-floor   the same model through ONNX Runtime's C++ API directly:
///                one Ort::Session with the runner's options, an input tensor
///                over a buffer made once, Session::Run;
///   tfaot        mlbridge::TFAOTModelRunner::load;
///   tfaot-floor  the same shared object's C ABI directly (arg_data, run,
///                result_data: each a one-line call into the generated class).
///
/// With --paired-with=FLOOR the sweep is the paired one: --reps pairs of one
/// sweep of --mode and one of FLOOR over the same objects in this process,
/// the order alternating (ABBA), so that both halves of a pair see the same
/// machine state. The ratio of a pair is then a far tighter measurement than
/// the ratio of separate runs, whose totals drift by tens of percent. The
/// floor reads its floats from the mode's buffers (set_arg_data): two copies
/// of 10 MB of inputs land on different physical pages, and which pages
/// shared the caches with the weights moved a process's ratio by up to 5%
/// either way (1.01x-1.10x), more than the runner's own cost.
///
/// Every mode writes each query's floats into the buffer it evaluates from
/// (a pass computes its features there), so that copy is in every figure.
/// With --threads T the same work (--work-reps sweeps over the sizes) is split
/// over T threads, each with its own runner (ONNX: over one shared session).
/// One JSON object on stdout; errors on stderr and a non-zero exit status.
///
//===----------------------------------------------------------------------===//

#include "RoundTripCommon.h"

#include "mlbridge/OnnxModelRunner.h"
#include "mlbridge/TFAOTModelRunner.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace llvm;
using namespace mlbridge;
using namespace mlbridge::bench;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string Mode;
  std::string Models;
  std::vector<uint32_t> Sizes;
  std::string PairedWith; // non-empty: the paired sweep against this mode
  unsigned Reps = 5;
  unsigned Warmup = 3;
  unsigned Threads = 0; // 0: the sweep; T > 0: the thread-scaling run
  unsigned WorkReps = 20;
  uint64_t MemoryQueries = 0; // > 0: the memory run over Sizes[0]
};

Error makeError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message);
}

/// Answers queries of one size; every mode is one of these.
class Query {
public:
  virtual ~Query() = default;
  /// Where the query's floats go before evaluate().
  virtual float *input() = 0;
  virtual Expected<float> evaluate() = 0;
  /// Makes the query read its floats from \p Buffer (64-byte aligned, as
  /// large as input()'s) instead of its own; false if it cannot.
  virtual bool readFrom(float *Buffer) {
    (void)Buffer;
    return false;
  }
};

class RunnerQuery final : public Query {
public:
  explicit RunnerQuery(std::unique_ptr<MLModelRunner> R) : R(std::move(R)) {}
  float *input() override { return R->getTensor<float>(0); }
  Expected<float> evaluate() override { return R->evaluate<float>(); }

private:
  std::unique_ptr<MLModelRunner> R;
};

std::vector<TensorSpec> featureSpecs(uint32_t L) {
  return {createSpec<float>("x", {1, static_cast<int64_t>(L)})};
}
TensorSpec adviceSpec() { return createSpec<float>("y", {1, 1}); }

std::string modelPath(const Options &O, uint32_t L, StringRef Ext) {
  return (O.Models + "/dense" + Twine(L) + Ext).str();
}

/// The direct ONNX Runtime call: the floor of the onnx mode.
class OrtQuery final : public Query {
public:
  static Expected<std::unique_ptr<Query>>
  create(Ort::Env &Env, const std::string &Path, uint32_t L) {
    auto Q = std::make_unique<OrtQuery>();
    try {
      // The options OnnxModelRunner uses by default.
      Ort::SessionOptions SO;
      SO.SetIntraOpNumThreads(1);
      SO.SetInterOpNumThreads(1);
      SO.SetExecutionMode(ExecutionMode::ORT_SEQUENTIAL);
      Q->S = Ort::Session(Env, Path.c_str(), SO);
      Q->X.assign(L, 0.0f);
      Q->Shape = {1, static_cast<int64_t>(L)};
      Ort::MemoryInfo Cpu =
          Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
      Q->In = Ort::Value::CreateTensor<float>(Cpu, Q->X.data(), Q->X.size(),
                                              Q->Shape.data(), 2);
    } catch (const Ort::Exception &E) {
      return makeError("ONNX Runtime: " + Path + ": " + E.what());
    }
    return std::unique_ptr<Query>(std::move(Q));
  }
  float *input() override { return X.data(); }
  Expected<float> evaluate() override {
    static const char *InName = "x";
    static const char *OutName = "y";
    try {
      std::vector<Ort::Value> Out =
          S.Run(Ort::RunOptions{nullptr}, &InName, &In, 1, &OutName, 1);
      return Out.front().GetTensorData<float>()[0];
    } catch (const Ort::Exception &E) {
      return makeError(Twine("ONNX Runtime: ") + E.what());
    }
  }

private:
  Ort::Session S{nullptr};
  std::vector<float> X;
  std::vector<int64_t> Shape;
  Ort::Value In{nullptr};
};

/// The direct call into an `mlbridge aot` shared object: the floor of the
/// tfaot mode.
class AotQuery final : public Query {
public:
  static Expected<std::unique_ptr<Query>> create(const std::string &Path) {
    auto Q = std::make_unique<AotQuery>();
    Q->Handle = dlopen(Path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!Q->Handle)
      return makeError(Twine("cannot open ") + Path + ": " + dlerror());
    auto Sym = [&](const char *Name) { return dlsym(Q->Handle, Name); };
    using CreateFn = mlbridge_aot_instance *(*)();
    using DataFn = void *(*)(mlbridge_aot_instance *, int32_t);
    using ResultFn = const void *(*)(mlbridge_aot_instance *, int32_t);
    auto Create = reinterpret_cast<CreateFn>(Sym("mlbridge_aot_create"));
    auto ArgData = reinterpret_cast<DataFn>(Sym("mlbridge_aot_arg_data"));
    Q->SetArgData = reinterpret_cast<int32_t (*)(mlbridge_aot_instance *,
                                                 int32_t, const void *)>(
        Sym("mlbridge_aot_set_arg_data"));
    Q->Result = reinterpret_cast<ResultFn>(Sym("mlbridge_aot_result_data"));
    Q->Run = reinterpret_cast<int32_t (*)(mlbridge_aot_instance *)>(
        Sym("mlbridge_aot_run"));
    Q->Destroy = reinterpret_cast<void (*)(mlbridge_aot_instance *)>(
        Sym("mlbridge_aot_destroy"));
    if (!Create || !ArgData || !Q->Result || !Q->Run || !Q->Destroy)
      return makeError(Path + " is not an mlbridge AOT model");
    Q->Instance = Create();
    if (!Q->Instance)
      return makeError(Path + ": mlbridge_aot_create failed");
    // One argument and one result: indices 0.
    Q->X = static_cast<float *>(ArgData(Q->Instance, 0));
    return std::unique_ptr<Query>(std::move(Q));
  }
  ~AotQuery() override {
    if (Instance)
      Destroy(Instance);
    if (Handle)
      dlclose(Handle);
  }
  float *input() override { return X; }
  bool readFrom(float *Buffer) override {
    if (!SetArgData || SetArgData(Instance, 0, Buffer) != 0)
      return false;
    X = Buffer;
    return true;
  }
  Expected<float> evaluate() override {
    if (Run(Instance) != 0)
      return makeError("mlbridge_aot_run failed");
    return static_cast<const float *>(Result(Instance, 0))[0];
  }

private:
  void *Handle = nullptr;
  mlbridge_aot_instance *Instance = nullptr;
  float *X = nullptr;
  const void *(*Result)(mlbridge_aot_instance *, int32_t) = nullptr;
  int32_t (*Run)(mlbridge_aot_instance *) = nullptr;
  void (*Destroy)(mlbridge_aot_instance *) = nullptr;
  int32_t (*SetArgData)(mlbridge_aot_instance *, int32_t,
                        const void *) = nullptr;
};

/// Builds the queries of one thread, one per size. ONNX sessions are made once
/// per size and shared by the threads' runners, as a compiler would share them.
class QueryFactory {
public:
  explicit QueryFactory(const Options &O) : O(O) {}

  Error prepare() {
    if (O.Mode == "onnx") {
      for (uint32_t L : O.Sizes) {
        auto M = OnnxModel::load(modelPath(O, L, ".onnx"));
        if (!M)
          return M.takeError();
        Models.push_back(std::move(*M));
      }
    } else if (O.Mode == "onnx-floor") {
      try {
        Env.emplace(ORT_LOGGING_LEVEL_WARNING, "mlbridge-bench");
        Env->DisableTelemetryEvents();
      } catch (const Ort::Exception &E) {
        return makeError(Twine("ONNX Runtime: ") + E.what());
      }
    } else if (O.Mode != "tfaot" && O.Mode != "tfaot-floor") {
      return makeError("unknown mode '" + O.Mode + "'");
    }
    return Error::success();
  }

  Expected<std::vector<std::unique_ptr<Query>>> make() {
    std::vector<std::unique_ptr<Query>> Qs;
    for (size_t I = 0; I < O.Sizes.size(); ++I) {
      uint32_t L = O.Sizes[I];
      Expected<std::unique_ptr<Query>> Q = makeOne(I, L);
      if (!Q)
        return Q.takeError();
      Qs.push_back(std::move(*Q));
    }
    return Qs;
  }

private:
  Expected<std::unique_ptr<Query>> makeOne(size_t I, uint32_t L) {
    if (O.Mode == "onnx") {
      auto R =
          OnnxModelRunner::create(Models[I], featureSpecs(L), adviceSpec());
      if (!R)
        return R.takeError();
      return std::make_unique<RunnerQuery>(std::move(*R));
    }
    if (O.Mode == "onnx-floor")
      return OrtQuery::create(*Env, modelPath(O, L, ".onnx"), L);
    if (O.Mode == "tfaot") {
      auto R = TFAOTModelRunner::load(modelPath(O, L, ".so"), featureSpecs(L),
                                      adviceSpec());
      if (!R)
        return R.takeError();
      return std::make_unique<RunnerQuery>(std::move(*R));
    }
    return AotQuery::create(modelPath(O, L, ".so"));
  }

  const Options &O;
  std::vector<std::shared_ptr<const OnnxModel>> Models;
  std::optional<Ort::Env> Env;
};

/// Writes query \p Q's floats into its buffer and evaluates it.
Expected<float> ask(Query &Q, ArrayRef<float> X) {
  std::memcpy(Q.input(), X.data(), X.size() * sizeof(float));
  return Q.evaluate();
}

double seconds(Clock::duration D) {
  return std::chrono::duration<double>(D).count();
}

std::string jsonList(ArrayRef<double> Values) {
  std::string S = "[";
  for (size_t I = 0; I < Values.size(); ++I)
    S += formatv("{0}{1:e6}", I ? "," : "", Values[I]).str();
  return S + "]";
}

/// The sweep: --reps passes over the sizes, each query timed on its own.
Error runSweep(const Options &O, raw_ostream &OS) {
  QueryFactory F(O);
  if (Error E = F.prepare())
    return E;
  auto Qs = F.make();
  if (!Qs)
    return Qs.takeError();
  std::vector<std::vector<float>> Inputs = makeInputs(O.Sizes);
  AnswerChecker Checker(*std::max_element(O.Sizes.begin(), O.Sizes.end()));
  for (unsigned W = 0; W < O.Warmup; ++W)
    for (size_t I = 0; I < Inputs.size(); ++I) {
      Expected<float> Y = ask(*(*Qs)[I], Inputs[I]);
      if (!Y)
        return Y.takeError();
      Checker.check(Inputs[I], *Y);
    }
  std::vector<double> Totals;
  std::vector<std::vector<double>> PerSize(O.Sizes.size());
  double Cpu0 = cpuSeconds();
  for (unsigned R = 0; R < O.Reps; ++R) {
    double Total = 0;
    for (size_t I = 0; I < Inputs.size(); ++I) {
      Clock::time_point T0 = Clock::now();
      Expected<float> Y = ask(*(*Qs)[I], Inputs[I]);
      double S = seconds(Clock::now() - T0);
      if (!Y)
        return Y.takeError();
      Total += S;
      PerSize[I].push_back(S);
      Checker.check(Inputs[I], *Y);
    }
    Totals.push_back(Total);
  }
  double Cpu = (cpuSeconds() - Cpu0) / O.Reps;
  std::vector<double> PerSizeMedian;
  for (std::vector<double> &V : PerSize) {
    std::sort(V.begin(), V.end());
    PerSizeMedian.push_back(V[V.size() / 2]);
  }
  OS << "{\"mode\":\"" << O.Mode << "\",\"checked\":" << Checker.checked()
     << ",\"mismatches\":" << Checker.mismatches() << ",\"first_mismatch\":\""
     << Checker.firstMismatch() << "\",\"total_seconds\":" << jsonList(Totals)
     << ",\"cpu_seconds_per_rep\":" << formatv("{0:e6}", Cpu)
     << ",\"per_size_seconds\":" << jsonList(PerSizeMedian)
     << ",\"peak_rss_kib\":" << peakRssKiB() << "}\n";
  if (Checker.mismatches())
    return makeError("wrong answers: " + Checker.firstMismatch());
  return Error::success();
}

/// One sweep over the sizes: its total time (the queries' own clocks).
Expected<double> timeSweep(std::vector<std::unique_ptr<Query>> &Qs,
                           ArrayRef<std::vector<float>> Inputs,
                           AnswerChecker &Checker) {
  double Total = 0;
  for (size_t I = 0; I < Inputs.size(); ++I) {
    Clock::time_point T0 = Clock::now();
    Expected<float> Y = ask(*Qs[I], Inputs[I]);
    Total += seconds(Clock::now() - T0);
    if (!Y)
      return Y.takeError();
    Checker.check(Inputs[I], *Y);
  }
  return Total;
}

/// The paired sweep: --reps pairs (mode, floor), in ABBA order.
Error runPaired(const Options &O, raw_ostream &OS) {
  Options FloorOptions = O;
  FloorOptions.Mode = O.PairedWith;
  QueryFactory F(O), FloorF(FloorOptions);
  if (Error E = F.prepare())
    return E;
  if (Error E = FloorF.prepare())
    return E;
  auto Qs = F.make();
  if (!Qs)
    return Qs.takeError();
  auto FloorQs = FloorF.make();
  if (!FloorQs)
    return FloorQs.takeError();
  // Both sides read the same input memory, so that what differs is the call
  // path, not where the kernel placed two copies of the inputs.
  for (size_t I = 0; I < Qs->size(); ++I)
    if (!(*FloorQs)[I]->readFrom((*Qs)[I]->input()))
      return makeError("the direct call cannot read the runner's buffer");
  std::vector<std::vector<float>> Inputs = makeInputs(O.Sizes);
  AnswerChecker Checker(*std::max_element(O.Sizes.begin(), O.Sizes.end()));
  for (unsigned W = 0; W < O.Warmup; ++W)
    for (auto *Side : {&*Qs, &*FloorQs})
      if (Expected<double> T = timeSweep(*Side, Inputs, Checker); !T)
        return T.takeError();
  std::vector<double> Mode, Floor;
  for (unsigned R = 0; R < O.Reps; ++R) {
    // ABBA: the mode goes first in even pairs, second in odd ones.
    bool ModeFirst = R % 2 == 0;
    for (bool IsMode : {ModeFirst, !ModeFirst}) {
      Expected<double> T = timeSweep(IsMode ? *Qs : *FloorQs, Inputs, Checker);
      if (!T)
        return T.takeError();
      (IsMode ? Mode : Floor).push_back(*T);
    }
  }
  OS << "{\"mode\":\"" << O.Mode << "\",\"paired_with\":\"" << O.PairedWith
     << "\",\"checked\":" << Checker.checked()
     << ",\"mismatches\":" << Checker.mismatches()
     << ",\"mode_seconds\":" << jsonList(Mode)
     << ",\"floor_seconds\":" << jsonList(Floor) << "}\n";
  if (Checker.mismatches())
    return makeError("wrong answers: " + Checker.firstMismatch());
  return Error::success();
}

/// Thread scaling: --work-reps sweeps split over --threads threads.
Error runThreads(const Options &O, raw_ostream &OS) {
  QueryFactory F(O);
  if (Error E = F.prepare())
    return E;
  std::vector<std::vector<std::unique_ptr<Query>>> PerThread;
  for (unsigned T = 0; T < O.Threads; ++T) {
    auto Qs = F.make();
    if (!Qs)
      return Qs.takeError();
    PerThread.push_back(std::move(*Qs));
  }
  std::vector<std::vector<float>> Inputs = makeInputs(O.Sizes);
  uint32_t MaxL = *std::max_element(O.Sizes.begin(), O.Sizes.end());
  std::vector<AnswerChecker> Checkers(O.Threads, AnswerChecker(MaxL));
  std::vector<std::string> Failures(O.Threads);
  // Warm every thread's queries up before the clock starts.
  for (unsigned T = 0; T < O.Threads; ++T)
    for (size_t I = 0; I < Inputs.size(); ++I)
      if (Expected<float> Y = ask(*PerThread[T][I], Inputs[I]))
        Checkers[T].check(Inputs[I], *Y);
      else
        return Y.takeError();
  auto Work = [&](unsigned T) {
    // Sweep S goes to thread S mod T: the same total work for every T.
    for (unsigned S = T; S < O.WorkReps; S += O.Threads)
      for (size_t I = 0; I < Inputs.size(); ++I) {
        Expected<float> Y = ask(*PerThread[T][I], Inputs[I]);
        if (!Y) {
          Failures[T] = toString(Y.takeError());
          return;
        }
        Checkers[T].check(Inputs[I], *Y);
      }
  };
  Clock::time_point T0 = Clock::now();
  std::vector<std::thread> Workers;
  for (unsigned T = 0; T < O.Threads; ++T)
    Workers.emplace_back(Work, T);
  for (std::thread &W : Workers)
    W.join();
  double Wall = seconds(Clock::now() - T0);
  uint64_t Checked = 0, Mismatches = 0;
  for (unsigned T = 0; T < O.Threads; ++T) {
    if (!Failures[T].empty())
      return makeError("thread " + Twine(T) + ": " + Failures[T]);
    Checked += Checkers[T].checked();
    Mismatches += Checkers[T].mismatches();
  }
  OS << "{\"mode\":\"" << O.Mode << "\",\"threads\":" << O.Threads
     << ",\"work_reps\":" << O.WorkReps << ",\"checked\":" << Checked
     << ",\"mismatches\":" << Mismatches
     << ",\"wall_seconds\":" << formatv("{0:e6}", Wall) << "}\n";
  if (Mismatches)
    return makeError("wrong answers in the threaded run");
  return Error::success();
}

/// Memory: many queries of the first size; RSS after a tenth against the end.
Error runMemory(const Options &O, raw_ostream &OS) {
  QueryFactory F(O);
  if (Error E = F.prepare())
    return E;
  auto Qs = F.make();
  if (!Qs)
    return Qs.takeError();
  std::vector<std::vector<float>> Inputs = makeInputs(O.Sizes);
  AnswerChecker Checker(O.Sizes[0]);
  long RssWarm = -1;
  Clock::time_point T0 = Clock::now();
  for (uint64_t N = 0; N < O.MemoryQueries; ++N) {
    if (N == O.MemoryQueries / 10)
      RssWarm = rssKiB();
    Expected<float> Y = ask(*(*Qs)[0], Inputs[0]);
    if (!Y)
      return Y.takeError();
    Checker.check(Inputs[0], *Y);
  }
  double Wall = seconds(Clock::now() - T0);
  long RssEnd = rssKiB();
  OS << "{\"mode\":\"" << O.Mode << "\",\"queries\":" << O.MemoryQueries
     << ",\"size\":" << O.Sizes[0] << ",\"checked\":" << Checker.checked()
     << ",\"mismatches\":" << Checker.mismatches()
     << ",\"rss_kib_after_warmup\":" << RssWarm << ",\"rss_kib_end\":" << RssEnd
     << ",\"peak_rss_kib\":" << peakRssKiB()
     << ",\"wall_seconds\":" << formatv("{0:e6}", Wall) << "}\n";
  if (Checker.mismatches())
    return makeError("wrong answers: " + Checker.firstMismatch());
  return Error::success();
}

std::optional<Options> parseArgs(int Argc, char **Argv) {
  Options O;
  for (int I = 1; I < Argc; ++I) {
    StringRef A(Argv[I]);
    auto [Key, Val] = A.split('=');
    auto Unsigned = [&, Val = Val](unsigned &Out) {
      return !Val.getAsInteger(10, Out);
    };
    if (Key == "--mode")
      O.Mode = Val.str();
    else if (Key == "--paired-with")
      O.PairedWith = Val.str();
    else if (Key == "--models")
      O.Models = Val.str();
    else if (Key == "--sizes") {
      SmallVector<StringRef, 128> Parts;
      Val.split(Parts, ',', -1, false);
      for (StringRef P : Parts) {
        uint32_t L;
        if (P.getAsInteger(10, L) || L == 0)
          return std::nullopt;
        O.Sizes.push_back(L);
      }
    } else if (Key == "--reps") {
      if (!Unsigned(O.Reps) || O.Reps == 0)
        return std::nullopt;
    } else if (Key == "--warmup") {
      if (!Unsigned(O.Warmup))
        return std::nullopt;
    } else if (Key == "--threads") {
      if (!Unsigned(O.Threads) || O.Threads == 0)
        return std::nullopt;
    } else if (Key == "--work-reps") {
      if (!Unsigned(O.WorkReps) || O.WorkReps == 0)
        return std::nullopt;
    } else if (Key == "--memory-queries") {
      if (Val.getAsInteger(10, O.MemoryQueries) || O.MemoryQueries == 0)
        return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (O.Mode.empty() || O.Models.empty() || O.Sizes.empty())
    return std::nullopt;
  // The paired sweep is a sweep: not with the thread or the memory run.
  if (!O.PairedWith.empty() && (O.Threads || O.MemoryQueries))
    return std::nullopt;
  return O;
}

} // namespace

int main(int Argc, char **Argv) {
  std::optional<Options> O = parseArgs(Argc, Argv);
  if (!O) {
    errs() << "usage: " << Argv[0]
           << " --mode=onnx|onnx-floor|tfaot|tfaot-floor --models=DIR "
              "--sizes=L1,L2,... [--reps=N] [--warmup=N] "
              "[--paired-with=FLOORMODE | --threads=T [--work-reps=N] | "
              "--memory-queries=N]\n"
              "DIR holds dense<L>.onnx and dense<L>.so for every L "
              "(bench/inprocess_roundtrip.py makes them).\n";
    return 2;
  }
  std::string Out;
  raw_string_ostream OS(Out);
  Error E = O->MemoryQueries         ? runMemory(*O, OS)
            : O->Threads             ? runThreads(*O, OS)
            : !O->PairedWith.empty() ? runPaired(*O, OS)
                                     : runSweep(*O, OS);
  if (E) {
    errs() << "inprocess-roundtrip: " << O->Mode << ": "
           << toString(std::move(E)) << "\n";
    return 1;
  }
  outs() << Out;
  return 0;
}
