//===- ModelGuidedPass.h - Runner options and runners of MLIR passes -*- C++
//-*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// What every ML-guided MLIR pass shares: the runner options in MLIR syntax
/// (runner, channel, address, model, serdes, timeout-ms, on-model-failure),
/// and a pool that gives each pass thread its own model runner. Which runner
/// is behind the options is the plugin's business (RunnerProvider): passes
/// only ever see an MLModelRunner.
///
/// Threads: mlir-opt runs a func.func pass on several functions at once, one
/// clone of the pass per thread. The clones share one RunnerPool. A runner is
/// lent to one thread at a time; in-process and gRPC runners are made per
/// thread as needed; a single-session runner (the pipe runner: one model
/// process, one conversation) is shared, and a thread holds it for a whole
/// function, so other threads wait for it.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_SUPPORT_MODELGUIDEDPASS_H
#define MLBRIDGE_PASSES_SUPPORT_MODELGUIDEDPASS_H

#include "mlbridge/MLModelRunner.h"

#include "mlir/Pass/Pass.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mlbridge::passes {

/// The runner options of a pass, as the user wrote them.
struct RunnerOptionValues {
  std::string Runner;
  std::string Channel;
  std::string Address;
  std::string Model;
  std::string SerDes;
  unsigned TimeoutMs = 60000;
};

/// How a plugin turns runner options into runners.
struct RunnerProvider {
  /// Checks the options before any IR is seen; the error names the option.
  std::function<llvm::Error(const RunnerOptionValues &)> Check;
  /// Whether the options name one session that every thread must share, one
  /// at a time (the pipe runner).
  std::function<bool(const RunnerOptionValues &)> IsSingleSession;
  /// Makes a runner. \p Builtin is the pass's own policy (callback runner).
  std::function<llvm::Expected<std::unique_ptr<MLModelRunner>>(
      const RunnerOptionValues &, std::vector<TensorSpec> Features,
      TensorSpec Advice, CallbackModelRunner::Callback Builtin)>
      Create;
  /// A short description for diagnostics ("pipe runner on '/tmp/ch'").
  std::function<std::string(const RunnerOptionValues &)> Describe;
};

/// Runners shared by the clones of one pass (see the file comment).
class RunnerPool {
public:
  explicit RunnerPool(std::shared_ptr<const RunnerProvider> Provider)
      : Provider(std::move(Provider)) {}

  /// A runner lent to one thread, given back when the lease ends.
  class Lease {
  public:
    Lease(Lease &&) = default;
    Lease &operator=(Lease &&) = delete;
    ~Lease();
    MLModelRunner &runner() { return *Runner; }
    /// Drops the runner instead of giving it back (after a failure: this
    /// ends a pipe session).
    void discard() { Runner.reset(); }

  private:
    friend class RunnerPool;
    Lease(RunnerPool &Pool, std::unique_ptr<MLModelRunner> Runner,
          std::unique_lock<std::mutex> Session)
        : Pool(&Pool), Runner(std::move(Runner)), Session(std::move(Session)) {}
    RunnerPool *Pool;
    std::unique_ptr<MLModelRunner> Runner;
    std::unique_lock<std::mutex> Session;
  };

  /// Lends a free runner, or makes one; std::nullopt once markFailed() was
  /// called. With a single-session runner this waits for the thread that
  /// holds it (whose every wait is bounded).
  llvm::Expected<std::optional<Lease>>
  acquire(const RunnerOptionValues &Options, std::vector<TensorSpec> Features,
          TensorSpec Advice, CallbackModelRunner::Callback Builtin);

  /// Switches the pool to the built-in policy for good; true for the first
  /// caller only (who reports the one warning).
  bool markFailed();
  /// Whether markFailed() was called.
  bool failed();

  const RunnerProvider &provider() const { return *Provider; }

private:
  std::shared_ptr<const RunnerProvider> Provider;
  std::mutex Mutex; // guards Free and Failed
  std::vector<std::unique_ptr<MLModelRunner>> Free;
  bool Failed = false;
  std::mutex SessionMutex; // held by the user of a single-session runner
};

/// The runner options, the failure policy and the pool of an ML-guided pass
/// on operations of type \p OpT. \p Derived is the pass (PassWrapper's CRTP).
template <typename Derived, typename OpT>
class ModelGuidedPass
    : public mlir::PassWrapper<Derived, mlir::OperationPass<OpT>> {
  using Base = mlir::PassWrapper<Derived, mlir::OperationPass<OpT>>;

public:
  enum class OnFailure { Fail, Fallback };

protected:
  explicit ModelGuidedPass(std::shared_ptr<const RunnerProvider> Provider)
      : Pool(std::make_shared<RunnerPool>(std::move(Provider))) {}
  // Clones (one per thread) share the pool.
  ModelGuidedPass(const ModelGuidedPass &Other)
      : Base(Other), Pool(Other.Pool) {}

  RunnerOptionValues runnerOptions() const {
    RunnerOptionValues V;
    V.Runner = Runner;
    V.Channel = Channel;
    V.Address = Address;
    V.Model = Model;
    V.SerDes = SerDes;
    V.TimeoutMs = TimeoutMs;
    return V;
  }

  /// Checks the runner options and on-model-failure; for initialize().
  mlir::LogicalResult checkRunnerOptions(mlir::MLIRContext *Ctx) {
    std::string Name = this->getArgument().str();
    if (OnModelFailure != "fail" && OnModelFailure != "fallback")
      return mlir::emitError(mlir::UnknownLoc::get(Ctx))
             << Name << ": on-model-failure must be fail or fallback, got '"
             << OnModelFailure << "'";
    if (TimeoutMs == 0)
      return mlir::emitError(mlir::UnknownLoc::get(Ctx))
             << Name << ": timeout-ms must be at least 1";
    if (llvm::Error E = Pool->provider().Check(runnerOptions()))
      return mlir::emitError(mlir::UnknownLoc::get(Ctx))
             << Name << ": " << llvm::toString(std::move(E));
    return mlir::success();
  }

  OnFailure onFailure() const {
    return OnModelFailure == "fallback" ? OnFailure::Fallback : OnFailure::Fail;
  }
  std::string describeRunner() const {
    return Pool->provider().Describe(runnerOptions());
  }

  std::shared_ptr<RunnerPool> Pool;

  mlir::Pass::Option<std::string> Runner{
      *this, "runner",
      llvm::cl::desc("Where decisions come from: callback (the built-in "
                     "heuristic in-process), pipe, grpc, onnx, tfaot; "
                     "default: callback, or the kind of 'model'"),
      llvm::cl::init("")};
  mlir::Pass::Option<std::string> Channel{
      *this, "channel",
      llvm::cl::desc("pipe: the channel base (<base>.in, <base>.out)"),
      llvm::cl::init("")};
  mlir::Pass::Option<std::string> Address{
      *this, "address", llvm::cl::desc("grpc: the model server, host:port"),
      llvm::cl::init("")};
  mlir::Pass::Option<std::string> Model{
      *this, "model",
      llvm::cl::desc("onnx, tfaot: a registered model's name or a path"),
      llvm::cl::init("")};
  mlir::Pass::Option<std::string> SerDes{
      *this, "serdes",
      llvm::cl::desc("pipe: bitstream (default), json or protobuf; grpc: "
                     "protobuf"),
      llvm::cl::init("")};
  mlir::Pass::Option<unsigned> TimeoutMs{
      *this, "timeout-ms",
      llvm::cl::desc("Bound of every wait for the model, in ms"),
      llvm::cl::init(60000)};
  mlir::Pass::Option<std::string> OnModelFailure{
      *this, "on-model-failure",
      llvm::cl::desc("fail: an error; fallback: one warning, then the "
                     "built-in heuristic"),
      llvm::cl::init("fail")};
};

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_SUPPORT_MODELGUIDEDPASS_H
