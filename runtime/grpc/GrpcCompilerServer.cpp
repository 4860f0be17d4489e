//===- GrpcCompilerServer.cpp - A compiler served to a trainer over gRPC --===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// GrpcCompilerServer, training: the compiler serves CompilerService, or the
// user's own service (GrpcUserTraining.h), and a trainer drives it.
// docs/grpc.md defines the services.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/GrpcModelRunner.h"

#include "GrpcCommon.h"
#include "GrpcUserTraining.h"

#include "mlbridge/v1/model_service.grpc.pb.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <grpcpp/grpcpp.h>

#include <optional>
#include <utility>

using namespace llvm;
using namespace mlbridge::grpc_internal;
using Clock = std::chrono::steady_clock;

namespace mlbridge {

namespace {

/// CompilerService over the episode: Observe waits for the compiler's next
/// observation, Act answers it.
class CompilerServiceImpl final : public v1::CompilerService::Service {
public:
  explicit CompilerServiceImpl(Episode &E) : E(E) {}

  grpc::Status Observe(grpc::ServerContext *Ctx, const v1::ObserveRequest *,
                       v1::Observation *Reply) override {
    std::unique_lock<std::mutex> Lock(E.M);
    E.TrainerSeen = true;
    while (true) {
      if (E.Pending && !E.Action) {
        *Reply = *E.Pending;
        return grpc::Status::OK;
      }
      if (E.Done) {
        Reply->set_done(true);
        E.DoneSeen = true;
        E.CV.notify_all();
        return grpc::Status::OK;
      }
      if (E.Stopping)
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the compiler is shutting down");
      // The client's deadline or disconnection cancels the call.
      if (Ctx->IsCancelled())
        return grpc::Status(
            grpc::StatusCode::CANCELLED,
            "Observe cancelled while waiting for the compiler's "
            "next observation");
      E.CV.wait_for(Lock, std::chrono::milliseconds(50));
    }
  }

  grpc::Status Act(grpc::ServerContext *, const v1::TensorMessage *Request,
                   v1::ActReply *) override {
    Expected<Message> M = messageFromProto(*Request, E.Limits, "action");
    if (!M)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          toString(M.takeError()));
    std::lock_guard<std::mutex> Lock(E.M);
    if (!E.hasPending() || E.Action)
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          E.Done ? "the episode is over: no observation waits for an action"
                 : "no observation waits for an action (call Observe first)");
    if (M->Id != E.PendingId)
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          "the action is for observation " + std::to_string(M->Id) +
              ", the pending observation is " + std::to_string(E.PendingId));
    Expected<TensorValue> T = takeAdvice(std::move(*M), E.PendingId, E.Advice);
    if (!T)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          toString(T.takeError()));
    E.Action = std::move(*T);
    E.CV.notify_all();
    return grpc::Status::OK;
  }

private:
  Episode &E;
};

} // namespace

struct GrpcCompilerServer::Impl {
  GrpcCompilerServerOptions Options;
  std::string BoundAddress;
  std::string Context;
  int64_t NextId = 0;
  bool Finished = false;
  std::unique_ptr<Episode> E;
  std::unique_ptr<CompilerServiceImpl> Service;
  /// Set with Options.UserService: the user's service replaces
  /// CompilerService.
  std::unique_ptr<UserTraining> User;
  std::unique_ptr<UserTrainingService> UserService;
  std::unique_ptr<grpc::Server> Server;

  /// Answers the user's calls waiting for an observation, if any.
  void wake() {
    if (UserService)
      UserService->wake();
  }
};

GrpcCompilerServer::GrpcCompilerServer(PrivateTag,
                                       std::vector<TensorSpec> Features,
                                       TensorSpec Advice,
                                       std::unique_ptr<Impl> I)
    : MLModelRunner(std::move(Features), std::move(Advice)), I(std::move(I)) {}

GrpcCompilerServer::~GrpcCompilerServer() { consumeError(finish()); }

const std::string &GrpcCompilerServer::address() const {
  return I->BoundAddress;
}

void GrpcCompilerServer::setContext(StringRef Name) { I->Context = Name.str(); }

Error GrpcCompilerServer::switchContext(StringRef Name) {
  setContext(Name);
  return Error::success();
}

static Error writeReadyFile(StringRef Path, StringRef Address) {
  // A fresh file of a random name beside the target, created exclusively
  // (O_CREAT | O_EXCL never follows a link planted there), then renamed over
  // the target (which replaces a link there instead of writing through it).
  int FD = -1;
  SmallString<256> TmpPath;
  if (std::error_code EC = sys::fs::createUniqueFile(
          Path + ".tmp-%%%%%%%%", FD, TmpPath, sys::fs::OF_None, 0644))
    return createStringError(EC, "cannot create a temporary file beside %s: %s",
                             Path.str().c_str(), EC.message().c_str());
  std::string Tmp(TmpPath);
  {
    raw_fd_ostream OS(FD, /*shouldClose=*/true);
    OS << Address << '\n';
    OS.close();
    if (OS.has_error()) {
      std::error_code WEC = OS.error();
      OS.clear_error();
      sys::fs::remove(Tmp);
      return createStringError(WEC, "cannot write %s: %s", Tmp.c_str(),
                               WEC.message().c_str());
    }
  }
  if (std::error_code EC = sys::fs::rename(Tmp, Path)) {
    sys::fs::remove(Tmp);
    return createStringError(EC, "cannot rename %s to %s: %s", Tmp.c_str(),
                             Path.str().c_str(), EC.message().c_str());
  }
  return Error::success();
}

Expected<std::unique_ptr<GrpcCompilerServer>>
GrpcCompilerServer::create(std::vector<TensorSpec> FeatureSpecs,
                           TensorSpec AdviceSpec,
                           GrpcCompilerServerOptions Options) {
  if (Error E = checkSpecs(FeatureSpecs, AdviceSpec))
    return E;
  if (Options.Timeout.count() <= 0 || Options.EndTimeout.count() < 0 ||
      Options.MaxMessageBytes == 0)
    return createStringError(inconvertibleErrorCode(),
                             "gRPC compiler server at %s: Timeout and "
                             "MaxMessageBytes must be positive",
                             Options.Address.c_str());
  std::string Host = StringRef(Options.Address).rsplit(':').first.str();
  if (Host.empty() || !StringRef(Options.Address).contains(':'))
    return createStringError(inconvertibleErrorCode(),
                             "gRPC compiler server: address '%s' is not "
                             "host:port",
                             Options.Address.c_str());

  auto I = std::make_unique<Impl>();
  if (Options.UserService) {
    Expected<std::unique_ptr<UserTraining>> U =
        makeUserTraining(*Options.UserService, FeatureSpecs, AdviceSpec);
    if (!U)
      return createStringError(
          inconvertibleErrorCode(), "gRPC compiler server at %s: %s",
          Options.Address.c_str(), toString(U.takeError()).c_str());
    I->User = std::move(*U);
  }
  I->Options = std::move(Options);
  I->E = std::make_unique<Episode>(AdviceSpec,
                                   limitsFor(I->Options.MaxMessageBytes));
  grpc::ServerBuilder Builder;
  int Port = 0;
  Builder.AddListeningPort(I->Options.Address,
                           grpc::InsecureServerCredentials(), &Port);
  Builder.SetMaxReceiveMessageSize(clampToInt(I->Options.MaxMessageBytes));
  Builder.SetMaxSendMessageSize(clampToInt(I->Options.MaxMessageBytes));
  // One listener per address: never share a port with another process.
  Builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (I->User) {
    // Every method goes to the generic service, which serves the user's.
    I->UserService = std::make_unique<UserTrainingService>(*I->E, *I->User);
    Builder.RegisterCallbackGenericService(I->UserService.get());
  } else {
    I->Service = std::make_unique<CompilerServiceImpl>(*I->E);
    Builder.RegisterService(I->Service.get());
  }
  I->Server = Builder.BuildAndStart();
  if (!I->Server || Port == 0)
    return createStringError(
        inconvertibleErrorCode(),
        "gRPC compiler server: cannot listen on %s (address "
        "in use or invalid)",
        I->Options.Address.c_str());
  I->BoundAddress = (Host + ":" + Twine(Port)).str();
  if (!I->Options.ReadyFile.empty())
    if (Error E = writeReadyFile(I->Options.ReadyFile, I->BoundAddress)) {
      I->E->Stopping = true;
      I->Server->Shutdown(std::chrono::system_clock::now());
      I->Server->Wait();
      return createStringError(inconvertibleErrorCode(),
                               "gRPC compiler server at %s: ready file: %s",
                               I->BoundAddress.c_str(),
                               toString(std::move(E)).c_str());
    }
  return std::make_unique<GrpcCompilerServer>(
      PrivateTag(), std::move(FeatureSpecs), std::move(AdviceSpec),
      std::move(I));
}

Expected<TensorValue>
GrpcCompilerServer::evaluateUntyped(ArrayRef<TensorRef> Features) {
  if (I->Finished)
    return createStringError(inconvertibleErrorCode(),
                             "gRPC compiler server at %s: the episode is over "
                             "(finish() was called)",
                             I->BoundAddress.c_str());
  int64_t Id = I->NextId++;
  v1::Observation Obs;
  std::string UserObs;
  Error Built =
      I->User ? I->User->observation(Features, I->Context, Id).moveInto(UserObs)
              : makeObservation(I->Context, adviceSpec(), Id, Features, Obs);
  if (Built)
    return createStringError(
        inconvertibleErrorCode(), "gRPC compiler server at %s: %s",
        I->BoundAddress.c_str(), toString(std::move(Built)).c_str());
  size_t Size = I->User ? UserObs.size() : Obs.ByteSizeLong();
  if (Size > I->Options.MaxMessageBytes)
    return createStringError(
        inconvertibleErrorCode(),
        "gRPC compiler server at %s: observation %lld needs %zu bytes, above "
        "the limit of %llu bytes (MaxMessageBytes)",
        I->BoundAddress.c_str(), static_cast<long long>(Id), Size,
        static_cast<unsigned long long>(I->Options.MaxMessageBytes));
  Episode &E = *I->E;
  {
    std::lock_guard<std::mutex> Lock(E.M);
    if (I->User)
      E.PendingUser = std::move(UserObs);
    else
      E.Pending = std::move(Obs);
    E.PendingId = Id;
    E.Action.reset();
    E.CV.notify_all();
  }
  I->wake();
  std::unique_lock<std::mutex> Lock(E.M);
  bool Answered = E.CV.wait_until(Lock, Clock::now() + I->Options.Timeout,
                                  [&] { return E.Action.has_value(); });
  E.Pending.reset();
  E.PendingUser.reset();
  if (!Answered && I->User)
    return createStringError(
        inconvertibleErrorCode(),
        "gRPC compiler server at %s: no action (%s) for observation %lld "
        "within %lld ms; %s",
        I->BoundAddress.c_str(), I->User->actMethods().c_str(),
        static_cast<long long>(Id),
        static_cast<long long>(I->Options.Timeout.count()),
        E.LastCall.empty() ? "no trainer has called this compiler"
                           : E.LastCall.c_str());
  if (!Answered)
    return createStringError(
        inconvertibleErrorCode(),
        "gRPC compiler server at %s: no action (CompilerService/Act) for "
        "observation %lld within %lld ms",
        I->BoundAddress.c_str(), static_cast<long long>(Id),
        static_cast<long long>(I->Options.Timeout.count()));
  TensorValue Result = std::move(*E.Action);
  E.Action.reset();
  return Result;
}

Error GrpcCompilerServer::finish() {
  if (I->Finished)
    return Error::success();
  I->Finished = true;
  Episode &E = *I->E;
  {
    std::lock_guard<std::mutex> Lock(E.M);
    E.Done = true;
    E.Pending.reset();
    E.PendingUser.reset();
    E.CV.notify_all();
  }
  I->wake();
  {
    std::unique_lock<std::mutex> Lock(E.M);
    // Without a trainer there is nobody to tell.
    if (E.TrainerSeen)
      E.CV.wait_until(Lock, Clock::now() + I->Options.EndTimeout,
                      [&] { return E.DoneSeen; });
    E.Stopping = true;
    E.CV.notify_all();
  }
  I->wake();
  // Handlers return at once now; the deadline cancels anything else.
  I->Server->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(500));
  I->Server->Wait();
  return Error::success();
}

} // namespace mlbridge
