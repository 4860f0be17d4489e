//===- GrpcModelRunner.cpp - A model over gRPC ----------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// GrpcModelRunner (ModelService client) and GrpcCompilerServer
// (CompilerService server). docs/grpc.md defines the services.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/GrpcModelRunner.h"

#include "ProtoTensors.h"

#include "mlbridge/SerDes/UserProtoSerDes.h"
#include "mlbridge/v1/model_service.grpc.pb.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <unistd.h>
#include <utility>
#include <vector>

using namespace llvm;
using Clock = std::chrono::steady_clock;

namespace mlbridge {

static StringRef statusCodeName(grpc::StatusCode Code) {
  switch (Code) {
  case grpc::StatusCode::OK:
    return "OK";
  case grpc::StatusCode::CANCELLED:
    return "CANCELLED";
  case grpc::StatusCode::UNKNOWN:
    return "UNKNOWN";
  case grpc::StatusCode::INVALID_ARGUMENT:
    return "INVALID_ARGUMENT";
  case grpc::StatusCode::DEADLINE_EXCEEDED:
    return "DEADLINE_EXCEEDED";
  case grpc::StatusCode::NOT_FOUND:
    return "NOT_FOUND";
  case grpc::StatusCode::ALREADY_EXISTS:
    return "ALREADY_EXISTS";
  case grpc::StatusCode::PERMISSION_DENIED:
    return "PERMISSION_DENIED";
  case grpc::StatusCode::RESOURCE_EXHAUSTED:
    return "RESOURCE_EXHAUSTED";
  case grpc::StatusCode::FAILED_PRECONDITION:
    return "FAILED_PRECONDITION";
  case grpc::StatusCode::ABORTED:
    return "ABORTED";
  case grpc::StatusCode::OUT_OF_RANGE:
    return "OUT_OF_RANGE";
  case grpc::StatusCode::UNIMPLEMENTED:
    return "UNIMPLEMENTED";
  case grpc::StatusCode::INTERNAL:
    return "INTERNAL";
  case grpc::StatusCode::UNAVAILABLE:
    return "UNAVAILABLE";
  case grpc::StatusCode::DATA_LOSS:
    return "DATA_LOSS";
  case grpc::StatusCode::UNAUTHENTICATED:
    return "UNAUTHENTICATED";
  default:
    return "status";
  }
}

static StringRef channelStateName(grpc_connectivity_state State) {
  switch (State) {
  case GRPC_CHANNEL_IDLE:
    return "IDLE";
  case GRPC_CHANNEL_CONNECTING:
    return "CONNECTING";
  case GRPC_CHANNEL_READY:
    return "READY";
  case GRPC_CHANNEL_TRANSIENT_FAILURE:
    return "TRANSIENT_FAILURE";
  case GRPC_CHANNEL_SHUTDOWN:
    return "SHUTDOWN";
  }
  return "unknown";
}

static int clampToInt(uint64_t V) {
  return V > static_cast<uint64_t>(INT_MAX) ? INT_MAX : static_cast<int>(V);
}

static DecoderLimits limitsFor(uint64_t MaxMessageBytes) {
  DecoderLimits L;
  L.MaxMessageBytes = MaxMessageBytes;
  return L;
}

/// Builds the Observation of one decision.
static Error makeObservation(StringRef Context, const TensorSpec &Advice,
                             int64_t Id, ArrayRef<TensorRef> Features,
                             v1::Observation &Out) {
  Out.set_context(Context.str());
  specToProto(Advice, *Out.mutable_advice());
  return messageToProto(MessageKind::Observation, Id, Features,
                        *Out.mutable_features());
}

/// Checks that \p M is the advice for observation \p Id under \p Advice and
/// returns its tensor; errors say what differs, for \p Who to prefix.
static Expected<TensorValue> takeAdvice(Message M, int64_t Id,
                                        const TensorSpec &Advice) {
  if (M.Kind != MessageKind::Advice)
    return createStringError(inconvertibleErrorCode(),
                             "the reply is a message of kind '%s', not advice",
                             messageKindName(M.Kind).data());
  if (M.Id != Id)
    return createStringError(
        inconvertibleErrorCode(), "the reply has id %lld, the observation %lld",
        static_cast<long long>(M.Id), static_cast<long long>(Id));
  if (M.Tensors.size() != 1)
    return createStringError(
        inconvertibleErrorCode(),
        "the reply has %zu tensors, advice needs exactly 1 "
        "('%s')",
        M.Tensors.size(), Advice.name().c_str());
  TensorValue &T = M.Tensors.front();
  if (T.name() != Advice.name())
    return createStringError(inconvertibleErrorCode(),
                             "the reply's tensor is '%s', the advice is '%s'",
                             T.name().c_str(), Advice.name().c_str());
  if (T.type() != Advice.type())
    return createStringError(inconvertibleErrorCode(),
                             "advice '%s' is %s in the reply, %s in the spec",
                             Advice.name().c_str(),
                             elementTypeName(T.type()).data(),
                             elementTypeName(Advice.type()).data());
  if (!Advice.matchesConcreteShape(T.shape())) {
    std::string Shape;
    writeShapeJSON(T.shape(), Shape);
    return createStringError(inconvertibleErrorCode(),
                             "advice '%s' has shape %s in the reply, spec %s",
                             Advice.name().c_str(), Shape.c_str(),
                             Advice.toJSON().c_str());
  }
  return std::move(T);
}

//===----------------------------------------------------------------------===//
// GrpcModelRunner over a user's own method (GrpcUserMethod)
//===----------------------------------------------------------------------===//

namespace {

/// The state of the calls to a user's own unary method.
struct UserMethodCall {
  std::string Method;
  UserProtoSerDes Request;
  UserProtoSerDes Response;
  /// The response field holding the advice.
  const google::protobuf::FieldDescriptor *AdviceField = nullptr;
  std::unique_ptr<grpc::GenericStub> Stub;

  UserMethodCall(const GrpcUserMethod &M)
      : Method(M.Method), Request(*M.Request), Response(*M.Response) {}
};

} // namespace

/// Checks that tensors of \p Spec fit field \p Name of \p Type (the \p Role
/// message of the method): the field exists, its type is the spec's and its
/// kind (singular: shape [1], repeated: rank 1) fits the spec's shape.
static Expected<const google::protobuf::FieldDescriptor *>
checkUserField(const google::protobuf::Descriptor &Type, StringRef Role,
               StringRef What, const TensorSpec &Spec) {
  const google::protobuf::FieldDescriptor *F =
      Type.FindFieldByName(Spec.name());
  if (!F)
    return createStringError(inconvertibleErrorCode(),
                             "the %s message %s has no field '%s' for %s '%s'",
                             Role.data(), Type.full_name().c_str(),
                             Spec.name().c_str(), What.data(),
                             Spec.name().c_str());
  Expected<ElementType> ET = UserProtoSerDes::elementTypeFor(*F);
  if (!ET)
    return createStringError(inconvertibleErrorCode(), "%s '%s': %s",
                             What.data(), Spec.name().c_str(),
                             toString(ET.takeError()).c_str());
  if (*ET != Spec.type())
    return createStringError(
        inconvertibleErrorCode(), "field '%s' holds %s, %s '%s' is %s",
        F->full_name().c_str(), elementTypeName(*ET).data(), What.data(),
        Spec.name().c_str(), elementTypeName(Spec.type()).data());
  ArrayRef<int64_t> Shape = Spec.shape();
  bool Fits =
      F->is_repeated() ? Shape.size() == 1 : Shape.size() == 1 && Shape[0] == 1;
  if (!Fits)
    return createStringError(
        inconvertibleErrorCode(),
        "field '%s' is %s and cannot hold %s '%s' of spec %s",
        F->full_name().c_str(),
        F->is_repeated() ? "repeated (shape [n])" : "singular (shape [1])",
        What.data(), Spec.name().c_str(), Spec.toJSON().c_str());
  return F;
}

/// Checks that \p Name is `/package.Service/Method`.
static Error checkMethodName(StringRef Name) {
  auto [Service, Method] = Name.drop_front().split('/');
  if (!Name.starts_with("/") || Service.empty() || Method.empty() ||
      Method.contains('/'))
    return createStringError(inconvertibleErrorCode(),
                             "method name '%s' is not /package.Service/Method",
                             Name.str().c_str());
  return Error::success();
}

/// Checks \p M against the specs; on success returns the call state.
static Expected<std::unique_ptr<UserMethodCall>>
makeUserMethodCall(const GrpcUserMethod &M, ArrayRef<TensorSpec> Features,
                   const TensorSpec &Advice) {
  if (Error E = checkMethodName(M.Method))
    return E;
  if (!M.Request || !M.Response)
    return createStringError(
        inconvertibleErrorCode(), "%s: the %s message type is not set",
        M.Method.c_str(), M.Request ? "response" : "request");
  auto C = std::make_unique<UserMethodCall>(M);
  for (const TensorSpec &F : Features)
    if (Expected<const google::protobuf::FieldDescriptor *> Field =
            checkUserField(*M.Request, "request", "feature", F);
        !Field)
      return createStringError(inconvertibleErrorCode(), "%s: %s",
                               M.Method.c_str(),
                               toString(Field.takeError()).c_str());
  Expected<const google::protobuf::FieldDescriptor *> AdviceField =
      checkUserField(*M.Response, "response", "advice", Advice);
  if (!AdviceField)
    return createStringError(inconvertibleErrorCode(), "%s: %s",
                             M.Method.c_str(),
                             toString(AdviceField.takeError()).c_str());
  C->AdviceField = *AdviceField;
  return C;
}

//===----------------------------------------------------------------------===//
// GrpcModelRunner
//===----------------------------------------------------------------------===//

/// One unary call of \p Method on \p Stub with the serialized \p Request,
/// bounded by \p Timeout: the reply's bytes in \p ReplyBytes. Raw bytes, so
/// that the caller parses the reply itself and can say that it could not be
/// parsed (gRPC's typed stubs report that as "UNIMPLEMENTED: No message
/// returned for unary request").
static grpc::Status rawUnaryCall(grpc::GenericStub &Stub,
                                 const std::string &Method,
                                 const std::string &Request,
                                 std::chrono::milliseconds Timeout,
                                 std::string &ReplyBytes) {
  grpc::Slice Slice(Request);
  grpc::ByteBuffer RequestBuffer(&Slice, 1);
  grpc::ByteBuffer Reply;
  grpc::ClientContext Ctx;
  Ctx.set_deadline(std::chrono::system_clock::now() + Timeout);
  grpc::Status S;
  {
    // A private queue, so that the call completes on this thread; the
    // deadline bounds the wait.
    grpc::CompletionQueue CQ;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> Call =
        Stub.PrepareUnaryCall(&Ctx, Method, RequestBuffer, &CQ);
    if (!Call)
      return grpc::Status(grpc::StatusCode::INTERNAL, "cannot start the call");
    Call->StartCall();
    static char Tag;
    Call->Finish(&Reply, &S, &Tag);
    void *Got = nullptr;
    bool Ok = false;
    if (!CQ.Next(&Got, &Ok) || Got != &Tag)
      S = grpc::Status(grpc::StatusCode::INTERNAL,
                       "the completion queue ended before the call");
    CQ.Shutdown();
    while (CQ.Next(&Got, &Ok))
      ;
  }
  if (!S.ok())
    return S;
  std::vector<grpc::Slice> Slices;
  if (!Reply.Dump(&Slices).ok())
    return grpc::Status(grpc::StatusCode::INTERNAL, "cannot read the reply");
  ReplyBytes.clear();
  for (const grpc::Slice &Sl : Slices)
    ReplyBytes.append(reinterpret_cast<const char *>(Sl.begin()), Sl.size());
  return S;
}

/// The full method name of ModelService/Evaluate.
static constexpr const char *EvaluateMethod =
    "/mlbridge.v1.ModelService/Evaluate";

struct GrpcModelRunner::Impl {
  GrpcModelRunnerOptions Options;
  std::shared_ptr<grpc::Channel> Channel;
  std::unique_ptr<v1::ModelService::Stub> Stub;
  /// Evaluate's calls: raw bytes, parsed here (see rawUnaryCall()).
  std::unique_ptr<grpc::GenericStub> Raw;
  /// Set with Options.UserMethod: the user's method replaces Evaluate.
  std::unique_ptr<UserMethodCall> User;
  std::string Context;
  int64_t NextId = 0;

  /// One call of the user's method for observation \p Id.
  Expected<TensorValue> callUser(int64_t Id, ArrayRef<TensorRef> Features,
                                 const TensorSpec &Advice);

  Error rpcError(const grpc::Status &S) const {
    return createStringError(
        inconvertibleErrorCode(),
        "gRPC ModelService/Evaluate to %s failed: %s: %s (deadline %lld ms, "
        "message limit %llu bytes)",
        Options.Address.c_str(), statusCodeName(S.error_code()).data(),
        S.error_message().c_str(),
        static_cast<long long>(Options.Timeout.count()),
        static_cast<unsigned long long>(Options.MaxMessageBytes));
  }
};

GrpcModelRunner::GrpcModelRunner(PrivateTag, std::vector<TensorSpec> Features,
                                 TensorSpec Advice, std::unique_ptr<Impl> I)
    : MLModelRunner(std::move(Features), std::move(Advice)), I(std::move(I)) {}

GrpcModelRunner::~GrpcModelRunner() = default;

void GrpcModelRunner::setContext(StringRef Name) { I->Context = Name.str(); }

Error GrpcModelRunner::switchContext(StringRef Name) {
  setContext(Name);
  return Error::success();
}

const std::string &GrpcModelRunner::address() const {
  return I->Options.Address;
}

Expected<std::unique_ptr<GrpcModelRunner>>
GrpcModelRunner::create(std::vector<TensorSpec> FeatureSpecs,
                        TensorSpec AdviceSpec, GrpcModelRunnerOptions Options) {
  if (Error E = checkSpecs(FeatureSpecs, AdviceSpec))
    return E;
  if (Options.Address.empty())
    return createStringError(inconvertibleErrorCode(),
                             "gRPC runner: no model server address");
  if (Options.Timeout.count() <= 0 || Options.ConnectTimeout.count() <= 0 ||
      Options.InitialBackoff.count() <= 0 ||
      Options.MaxBackoff < Options.InitialBackoff)
    return createStringError(
        inconvertibleErrorCode(),
        "gRPC runner for %s: timeouts must be positive and MaxBackoff at least "
        "InitialBackoff",
        Options.Address.c_str());
  if (Options.MaxMessageBytes == 0)
    return createStringError(inconvertibleErrorCode(),
                             "gRPC runner for %s: MaxMessageBytes is 0",
                             Options.Address.c_str());

  auto I = std::make_unique<Impl>();
  if (Options.UserMethod) {
    Expected<std::unique_ptr<UserMethodCall>> C =
        makeUserMethodCall(*Options.UserMethod, FeatureSpecs, AdviceSpec);
    if (!C)
      return createStringError(
          inconvertibleErrorCode(), "gRPC runner for %s: %s",
          Options.Address.c_str(), toString(C.takeError()).c_str());
    I->User = std::move(*C);
  }
  I->Options = std::move(Options);
  const GrpcModelRunnerOptions &O = I->Options;
  grpc::ChannelArguments Args;
  Args.SetMaxSendMessageSize(clampToInt(O.MaxMessageBytes));
  Args.SetMaxReceiveMessageSize(clampToInt(O.MaxMessageBytes));
  Args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              clampToInt(O.InitialBackoff.count()));
  Args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              clampToInt(O.InitialBackoff.count()));
  Args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              clampToInt(O.MaxBackoff.count()));
  // Each runner its own connection: runners of one process stay independent.
  Args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  I->Channel = grpc::CreateCustomChannel(
      O.Address, grpc::InsecureChannelCredentials(), Args);
  auto Deadline = std::chrono::system_clock::now() + O.ConnectTimeout;
  if (!I->Channel->WaitForConnected(Deadline))
    return createStringError(
        inconvertibleErrorCode(),
        "gRPC runner: cannot connect to the model server at %s within %lld ms "
        "(channel state %s)",
        O.Address.c_str(), static_cast<long long>(O.ConnectTimeout.count()),
        channelStateName(I->Channel->GetState(false)).data());
  I->Stub = v1::ModelService::NewStub(I->Channel);
  I->Raw = std::make_unique<grpc::GenericStub>(I->Channel);
  if (I->User)
    I->User->Stub = std::make_unique<grpc::GenericStub>(I->Channel);
  return std::make_unique<GrpcModelRunner>(PrivateTag(),
                                           std::move(FeatureSpecs),
                                           std::move(AdviceSpec), std::move(I));
}

Expected<TensorValue>
GrpcModelRunner::evaluateUntyped(ArrayRef<TensorRef> Features) {
  int64_t Id = I->NextId++;
  if (I->User)
    return I->callUser(Id, Features, adviceSpec());
  v1::Observation Request;
  if (Error E =
          makeObservation(I->Context, adviceSpec(), Id, Features, Request))
    return createStringError(inconvertibleErrorCode(), "gRPC runner for %s: %s",
                             I->Options.Address.c_str(),
                             toString(std::move(E)).c_str());
  std::string RequestBytes, ReplyBytes;
  if (!Request.SerializeToString(&RequestBytes))
    return createStringError(inconvertibleErrorCode(),
                             "gRPC runner for %s: cannot serialize "
                             "observation %lld",
                             I->Options.Address.c_str(),
                             static_cast<long long>(Id));
  grpc::Status S = rawUnaryCall(*I->Raw, EvaluateMethod, RequestBytes,
                                I->Options.Timeout, ReplyBytes);
  if (!S.ok())
    return I->rpcError(S);
  v1::TensorMessage Reply;
  if (ReplyBytes.size() > static_cast<size_t>(INT_MAX) ||
      !Reply.ParseFromArray(ReplyBytes.data(),
                            static_cast<int>(ReplyBytes.size())))
    return createStringError(
        inconvertibleErrorCode(),
        "gRPC ModelService/Evaluate to %s: observation %lld: the reply "
        "(%zu bytes) could not be parsed as an mlbridge.v1.TensorMessage: the "
        "server answered, but not with a valid protobuf message of that type "
        "(is it an mlbridge model server of the same proto version?)",
        I->Options.Address.c_str(), static_cast<long long>(Id),
        ReplyBytes.size());
  Expected<Message> M =
      messageFromProto(Reply, limitsFor(I->Options.MaxMessageBytes), "reply");
  if (!M)
    return createStringError(
        inconvertibleErrorCode(), "gRPC ModelService/Evaluate to %s: %s",
        I->Options.Address.c_str(), toString(M.takeError()).c_str());
  Expected<TensorValue> T = takeAdvice(std::move(*M), Id, adviceSpec());
  if (!T)
    return createStringError(
        inconvertibleErrorCode(),
        "gRPC ModelService/Evaluate to %s: observation %lld: %s",
        I->Options.Address.c_str(), static_cast<long long>(Id),
        toString(T.takeError()).c_str());
  return T;
}

Expected<TensorValue>
GrpcModelRunner::Impl::callUser(int64_t Id, ArrayRef<TensorRef> Features,
                                const TensorSpec &Advice) {
  auto Fail = [&](const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(),
                             "gRPC %s to %s: observation %lld: %s",
                             User->Method.c_str(), Options.Address.c_str(),
                             static_cast<long long>(Id), Msg.str().c_str());
  };
  Expected<std::string> Bytes = User->Request.serialize(Features);
  if (!Bytes)
    return Fail(toString(Bytes.takeError()));
  std::string ReplyBytes;
  grpc::Status S = rawUnaryCall(*User->Stub, User->Method, *Bytes,
                                Options.Timeout, ReplyBytes);
  if (!S.ok()) {
    std::string Hint;
    if (S.error_code() == grpc::StatusCode::UNIMPLEMENTED)
      Hint = " (the server does not implement " + User->Method +
             "; check the method name and the server's services)";
    return createStringError(
        inconvertibleErrorCode(),
        "gRPC %s to %s failed: %s: %s%s (deadline %lld ms, message limit %llu "
        "bytes)",
        User->Method.c_str(), Options.Address.c_str(),
        statusCodeName(S.error_code()).data(), S.error_message().c_str(),
        Hint.c_str(), static_cast<long long>(Options.Timeout.count()),
        static_cast<unsigned long long>(Options.MaxMessageBytes));
  }
  const google::protobuf::Descriptor &Type = User->Response.messageType();
  std::unique_ptr<google::protobuf::Message> Msg = User->Response.newMessage();
  if (ReplyBytes.size() > static_cast<size_t>(INT_MAX) ||
      !Msg->ParseFromArray(ReplyBytes.data(),
                           static_cast<int>(ReplyBytes.size())))
    return Fail("the reply is not a valid " + Type.full_name());
  const google::protobuf::FieldDescriptor &F = *User->AdviceField;
  if (F.has_presence() &&
      !Msg->GetReflection()->HasField(*Msg, User->AdviceField))
    return Fail("the reply (" + Type.full_name() + ") has no advice: field '" +
                F.full_name() + "' is not set");
  Expected<TensorValue> T = User->Response.extractField(*Msg, F);
  if (!T)
    return Fail(toString(T.takeError()));
  if (!Advice.matchesConcreteShape(T->shape())) {
    std::string Shape;
    writeShapeJSON(T->shape(), Shape);
    return Fail("advice '" + Advice.name() + "' (field '" + F.full_name() +
                "') has shape " + Shape + " in the reply, spec " +
                Advice.toJSON());
  }
  return T;
}

//===----------------------------------------------------------------------===//
// GrpcCompilerServer
//===----------------------------------------------------------------------===//

namespace {

/// What the compiler thread and the gRPC handlers share.
struct Episode {
  TensorSpec Advice;
  DecoderLimits Limits;

  std::mutex M;
  std::condition_variable CV;
  /// The observation waiting for an action, if any.
  std::optional<v1::Observation> Pending;
  int64_t PendingId = -1;
  /// The accepted action for the pending observation.
  std::optional<TensorValue> Action;
  /// The episode is over: Observe returns done.
  bool Done = false;
  /// A trainer has called Observe.
  bool TrainerSeen = false;
  /// The trainer has seen Done.
  bool DoneSeen = false;
  /// The server is stopping: handlers return at once.
  bool Stopping = false;
  /// With a user's service: the pending observation as the user's message.
  std::optional<std::string> PendingUser;
  /// With a user's service: what the trainer did last, for the compiler's
  /// timeout error.
  std::string LastCall;

  bool hasPending() const { return Pending || PendingUser; }

  Episode(TensorSpec Advice, DecoderLimits Limits)
      : Advice(std::move(Advice)), Limits(Limits) {}
};

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

//===----------------------------------------------------------------------===//
// GrpcCompilerServer over a user's own service (GrpcUserTrainingService)
//===----------------------------------------------------------------------===//

static std::string bufferBytes(const grpc::ByteBuffer &B) {
  std::vector<grpc::Slice> Slices;
  std::string Bytes;
  if (!B.Dump(&Slices).ok())
    return Bytes;
  for (const grpc::Slice &Sl : Slices)
    Bytes.append(reinterpret_cast<const char *>(Sl.begin()), Sl.size());
  return Bytes;
}

static bool isIntegerField(const google::protobuf::FieldDescriptor &F) {
  using FD = google::protobuf::FieldDescriptor;
  switch (F.cpp_type()) {
  case FD::CPPTYPE_INT32:
  case FD::CPPTYPE_INT64:
  case FD::CPPTYPE_UINT32:
  case FD::CPPTYPE_UINT64:
    return true;
  default:
    return false;
  }
}

static void setIntegerField(google::protobuf::Message &Msg,
                            const google::protobuf::FieldDescriptor &F,
                            int64_t V) {
  using FD = google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection &R = *Msg.GetReflection();
  switch (F.cpp_type()) {
  case FD::CPPTYPE_INT32:
    R.SetInt32(&Msg, &F, static_cast<int32_t>(V));
    break;
  case FD::CPPTYPE_INT64:
    R.SetInt64(&Msg, &F, V);
    break;
  case FD::CPPTYPE_UINT32:
    R.SetUInt32(&Msg, &F, static_cast<uint32_t>(V));
    break;
  default:
    R.SetUInt64(&Msg, &F, static_cast<uint64_t>(V));
    break;
  }
}

static int64_t getIntegerField(const google::protobuf::Message &Msg,
                               const google::protobuf::FieldDescriptor &F) {
  using FD = google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection &R = *Msg.GetReflection();
  switch (F.cpp_type()) {
  case FD::CPPTYPE_INT32:
    return R.GetInt32(Msg, &F);
  case FD::CPPTYPE_INT64:
    return R.GetInt64(Msg, &F);
  case FD::CPPTYPE_UINT32:
    return R.GetUInt32(Msg, &F);
  default:
    return static_cast<int64_t>(R.GetUInt64(Msg, &F));
  }
}

namespace {

/// The messages of a user's training service, checked against the specs.
struct UserTraining {
  GrpcUserTrainingService Spec;
  UserProtoSerDes Observation;
  UserProtoSerDes Action;
  const google::protobuf::FieldDescriptor *AdviceField = nullptr;
  const google::protobuf::FieldDescriptor *DoneField = nullptr;
  const google::protobuf::FieldDescriptor *ContextField = nullptr;
  const google::protobuf::FieldDescriptor *IdField = nullptr;
  /// The Action's field named like IdField, if any.
  const google::protobuf::FieldDescriptor *ActionIdField = nullptr;
  /// The observation that says the episode is over (DoneField set).
  std::string DoneBytes;

  explicit UserTraining(const GrpcUserTrainingService &S)
      : Spec(S), Observation(*S.Observation), Action(*S.Action) {}

  /// The methods served, for errors.
  std::string methods() const {
    std::string Out;
    for (const std::string *M :
         {&Spec.ObserveMethod, &Spec.ActMethod, &Spec.StepMethod})
      if (!M->empty())
        Out += (Out.empty() ? "" : ", ") + *M;
    return Out;
  }
  /// The methods that answer an observation, for errors.
  std::string actMethods() const {
    if (!Spec.ActMethod.empty() && !Spec.StepMethod.empty())
      return Spec.ActMethod + " or " + Spec.StepMethod;
    return Spec.ActMethod.empty() ? Spec.StepMethod : Spec.ActMethod;
  }

  /// Serializes one observation.
  Expected<std::string> observation(ArrayRef<TensorRef> Features,
                                    StringRef Context, int64_t Id) const {
    std::unique_ptr<google::protobuf::Message> Msg = Observation.newMessage();
    if (Error E = Observation.fill(Features, *Msg))
      return E;
    if (ContextField)
      Msg->GetReflection()->SetString(Msg.get(), ContextField, Context.str());
    if (IdField)
      setIntegerField(*Msg, *IdField, Id);
    return Msg->SerializeAsString();
  }
};

/// Finds the optional field \p Name of \p Type, which must be singular and
/// satisfy \p Fits (described by \p Kind).
Expected<const google::protobuf::FieldDescriptor *>
optionalField(const google::protobuf::Descriptor &Type, StringRef Option,
              const std::string &Name, StringRef Kind,
              bool (*Fits)(const google::protobuf::FieldDescriptor &)) {
  if (Name.empty())
    return nullptr;
  const google::protobuf::FieldDescriptor *F = Type.FindFieldByName(Name);
  if (!F || F->is_repeated() || !Fits(*F))
    return createStringError(
        inconvertibleErrorCode(),
        "%s '%s': the observation message %s has no singular %s field of "
        "that name",
        Option.data(), Name.c_str(), Type.full_name().c_str(), Kind.data());
  return F;
}

Expected<std::unique_ptr<UserTraining>>
makeUserTraining(const GrpcUserTrainingService &S,
                 ArrayRef<TensorSpec> Features, const TensorSpec &Advice) {
  using FD = google::protobuf::FieldDescriptor;
  for (const std::string *M : {&S.ObserveMethod, &S.ActMethod, &S.StepMethod})
    if (!M->empty())
      if (Error E = checkMethodName(*M))
        return E;
  if (S.ObserveMethod.empty() && S.StepMethod.empty())
    return createStringError(inconvertibleErrorCode(),
                             "the user's service needs an Observe or a Step "
                             "method to send observations");
  if (S.ActMethod.empty() && S.StepMethod.empty())
    return createStringError(inconvertibleErrorCode(),
                             "the user's service needs an Act or a Step "
                             "method to receive actions");
  if (!S.Observation || !S.Action)
    return createStringError(inconvertibleErrorCode(),
                             "the user's %s message type is not set",
                             S.Observation ? "action" : "observation");
  auto U = std::make_unique<UserTraining>(S);
  const google::protobuf::Descriptor &Obs = *S.Observation;
  Expected<const FD *> Done =
      optionalField(Obs, "DoneField", S.DoneField, "bool", [](const FD &F) {
        return F.cpp_type() == FD::CPPTYPE_BOOL;
      });
  if (!Done)
    return Done.takeError();
  Expected<const FD *> Context = optionalField(
      Obs, "ContextField", S.ContextField, "string",
      [](const FD &F) { return F.cpp_type() == FD::CPPTYPE_STRING; });
  if (!Context)
    return Context.takeError();
  Expected<const FD *> Id =
      optionalField(Obs, "IdField", S.IdField, "integer", isIntegerField);
  if (!Id)
    return Id.takeError();
  U->DoneField = *Done;
  U->ContextField = *Context;
  U->IdField = *Id;
  for (const TensorSpec &F : Features) {
    for (const std::string *Own : {&S.DoneField, &S.ContextField, &S.IdField})
      if (*Own == F.name())
        return createStringError(inconvertibleErrorCode(),
                                 "field '%s' of %s is both a feature and the "
                                 "done, context or id field",
                                 Own->c_str(), Obs.full_name().c_str());
    if (Expected<const FD *> Field =
            checkUserField(Obs, "observation", "feature", F);
        !Field)
      return Field.takeError();
  }
  Expected<const FD *> AdviceField =
      checkUserField(*S.Action, "action", "advice", Advice);
  if (!AdviceField)
    return AdviceField.takeError();
  U->AdviceField = *AdviceField;
  if (S.ObserveMethod.empty() && !U->AdviceField->has_presence() &&
      !U->AdviceField->is_repeated())
    return createStringError(
        inconvertibleErrorCode(),
        "%s is the only way to observe, so an action without advice must "
        "mean 'observe only', but field '%s' cannot be told unset from 0: "
        "declare it 'optional', or serve an Observe method",
        S.StepMethod.c_str(), U->AdviceField->full_name().c_str());
  if (U->IdField) {
    const FD *AF = S.Action->FindFieldByName(S.IdField);
    if (AF && (AF->is_repeated() || !isIntegerField(*AF)))
      return createStringError(inconvertibleErrorCode(),
                               "IdField '%s': field '%s' of the action is not "
                               "a singular integer",
                               S.IdField.c_str(), AF->full_name().c_str());
    U->ActionIdField = AF;
  }
  if (U->DoneField) {
    std::unique_ptr<google::protobuf::Message> M = U->Observation.newMessage();
    M->GetReflection()->SetBool(M.get(), U->DoneField, true);
    U->DoneBytes = M->SerializeAsString();
  }
  return U;
}

class UserCallReactor;

/// A reply to a call: the status and, if OK, the message's bytes.
struct Outcome {
  grpc::Status Status;
  std::string Bytes;
};

/// Serves the user's methods with gRPC's callback generic service: calls
/// that wait for an observation are parked in Waiting and answered by the
/// compiler's thread (wake()), so no gRPC thread blocks.
class UserTrainingService final : public grpc::CallbackGenericService {
public:
  UserTrainingService(Episode &E, const UserTraining &U) : E(E), U(U) {}

  grpc::ServerGenericBidiReactor *
  CreateReactor(grpc::GenericCallbackServerContext *Ctx) override;

  /// A call's request has arrived (\p Ok: the client sent one).
  void handle(UserCallReactor &R, bool Ok);
  /// A call was cancelled (deadline or disconnection).
  void cancelled(UserCallReactor &R);
  /// A call is over (its reactor is about to be deleted).
  void done(UserCallReactor &R);
  /// Answers the parked calls that can be answered now.
  void wake();

private:
  /// What a call waiting for an observation gets now, if anything. Needs
  /// E.M held.
  std::optional<Outcome> observeOutcome();
  /// Takes the action in \p Bytes for the pending observation. Needs E.M
  /// held. \p Step: an action without advice only observes (returns
  /// std::nullopt then, and on success).
  std::optional<grpc::Status> act(const std::string &Bytes, bool Step);
  /// Marks \p R answered; false if someone else did. Needs E.M held.
  bool claim(UserCallReactor &R);

  Episode &E;
  const UserTraining &U;
  /// Calls waiting for an observation; guarded by E.M.
  std::vector<UserCallReactor *> Waiting;
  /// The number of calls handled; the last one's is what LastCall tells.
  uint64_t Calls = 0;
};

/// One call of a user's unary method, seen as a bidi stream by the generic
/// service: one request read, one reply written.
class UserCallReactor final : public grpc::ServerGenericBidiReactor {
public:
  UserCallReactor(UserTrainingService &S,
                  grpc::GenericCallbackServerContext &Ctx)
      : S(S), Ctx(Ctx), Method(Ctx.method()) {
    StartRead(&Request);
  }
  void OnReadDone(bool Ok) override { S.handle(*this, Ok); }
  void OnCancel() override { S.cancelled(*this); }
  // gRPC's callback contract: the reactor owns itself until OnDone.
  void OnDone() override {
    S.done(*this);
    delete this;
  }

  void reply(Outcome O) {
    if (!O.Status.ok()) {
      Finish(O.Status);
      return;
    }
    grpc::Slice Slice(O.Bytes);
    Reply = grpc::ByteBuffer(&Slice, 1);
    StartWriteAndFinish(&Reply, grpc::WriteOptions(), grpc::Status::OK);
  }

  UserTrainingService &S;
  grpc::GenericCallbackServerContext &Ctx;
  const std::string Method;
  /// This call's number (UserTrainingService::Calls), 0 before handle().
  uint64_t Seq = 0;
  grpc::ByteBuffer Request, Reply;
  /// Answered (or being answered); guarded by the episode's mutex.
  bool Claimed = false;
};

grpc::ServerGenericBidiReactor *
UserTrainingService::CreateReactor(grpc::GenericCallbackServerContext *Ctx) {
  // Deleted by itself in OnDone (gRPC's ownership model for reactors).
  return std::make_unique<UserCallReactor>(*this, *Ctx).release();
}

bool UserTrainingService::claim(UserCallReactor &R) {
  if (R.Claimed)
    return false;
  R.Claimed = true;
  Waiting.erase(std::remove(Waiting.begin(), Waiting.end(), &R), Waiting.end());
  return true;
}

std::optional<Outcome> UserTrainingService::observeOutcome() {
  if (E.PendingUser && !E.Action)
    return Outcome{grpc::Status::OK, *E.PendingUser};
  if (E.Done) {
    E.DoneSeen = true;
    E.CV.notify_all();
    if (U.DoneField)
      return Outcome{grpc::Status::OK, U.DoneBytes};
    return Outcome{grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                                "the episode is over (the compile finished)"),
                   ""};
  }
  if (E.Stopping)
    return Outcome{grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the compiler is shutting down"),
                   ""};
  return std::nullopt;
}

std::optional<grpc::Status> UserTrainingService::act(const std::string &Bytes,
                                                     bool Step) {
  const std::string &TypeName = U.Action.messageType().full_name();
  std::unique_ptr<google::protobuf::Message> Msg = U.Action.newMessage();
  if (Bytes.size() > static_cast<size_t>(INT_MAX) ||
      !Msg->ParseFromArray(Bytes.data(), static_cast<int>(Bytes.size())))
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the request is not a valid " + TypeName);
  const google::protobuf::FieldDescriptor &F = *U.AdviceField;
  const google::protobuf::Reflection &R = *Msg->GetReflection();
  bool HasAdvice = F.is_repeated()    ? R.FieldSize(*Msg, &F) > 0
                   : F.has_presence() ? R.HasField(*Msg, &F)
                                      : true;
  if (!HasAdvice) {
    if (Step)
      return std::nullopt;
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the action (" + TypeName + ") has no advice: field '" +
                            F.full_name() + "' is not set");
  }
  if (!E.PendingUser || E.Action)
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        E.Done ? "the episode is over: no observation waits for an action"
               : "no observation waits for an action (call " +
                     (U.Spec.ObserveMethod.empty() ? U.Spec.StepMethod
                                                   : U.Spec.ObserveMethod) +
                     " first)");
  if (U.ActionIdField) {
    int64_t Id = getIntegerField(*Msg, *U.ActionIdField);
    if (Id != E.PendingId)
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          "the action is for observation " + std::to_string(Id) + " (field '" +
              U.ActionIdField->full_name() + "'), the pending observation is " +
              std::to_string(E.PendingId));
  }
  Expected<TensorValue> T = U.Action.extractField(*Msg, F);
  if (!T)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        toString(T.takeError()));
  if (!E.Advice.matchesConcreteShape(T->shape())) {
    std::string Shape;
    writeShapeJSON(T->shape(), Shape);
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "advice '" + E.Advice.name() + "' (field '" +
                            F.full_name() + "') has shape " + Shape +
                            ", spec " + E.Advice.toJSON());
  }
  E.Action = std::move(*T);
  E.CV.notify_all();
  return std::nullopt;
}

void UserTrainingService::handle(UserCallReactor &R, bool Ok) {
  std::optional<Outcome> Now;
  {
    std::lock_guard<std::mutex> Lock(E.M);
    if (R.Claimed)
      return;
    E.TrainerSeen = true;
    const std::string &M = R.Method;
    bool IsObserve = M == U.Spec.ObserveMethod;
    bool IsAct = M == U.Spec.ActMethod;
    bool IsStep = M == U.Spec.StepMethod;
    if (!Ok)
      Now = Outcome{grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "the call carries no request message"),
                    ""};
    else if (!IsObserve && !IsAct && !IsStep)
      Now = Outcome{
          grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                       "this compiler serves " + U.methods() + ", not " + M),
          ""};
    else if (IsAct || IsStep) {
      if (std::optional<grpc::Status> Err =
              act(bufferBytes(R.Request), /*Step=*/IsStep))
        Now = Outcome{std::move(*Err), ""};
      else if (IsAct)
        Now = Outcome{grpc::Status::OK, ""};
    }
    R.Seq = ++Calls;
    E.LastCall = "the trainer's last call was " + M;
    if (!Now)
      Now = observeOutcome();
    if (!Now) {
      Waiting.push_back(&R);
      return;
    }
    claim(R);
  }
  R.reply(std::move(*Now));
}

void UserTrainingService::cancelled(UserCallReactor &R) {
  {
    std::lock_guard<std::mutex> Lock(E.M);
    if (!claim(R))
      return;
  }
  R.reply(Outcome{grpc::Status(grpc::StatusCode::CANCELLED,
                               R.Method + " cancelled while waiting for the "
                                          "compiler's next observation"),
                  ""});
}

void UserTrainingService::done(UserCallReactor &R) {
  // A reply may have raced with the cancellation: only now is it known
  // whether the trainer got it.
  std::lock_guard<std::mutex> Lock(E.M);
  if (R.Seq != 0 && R.Seq == Calls && R.Ctx.IsCancelled())
    E.LastCall = "the trainer's last call, " + R.Method +
                 ", was cancelled (it disconnected or its deadline passed)";
}

void UserTrainingService::wake() {
  std::vector<std::pair<UserCallReactor *, Outcome>> Ready;
  {
    std::lock_guard<std::mutex> Lock(E.M);
    if (Waiting.empty())
      return;
    std::optional<Outcome> O = observeOutcome();
    if (!O)
      return;
    for (UserCallReactor *R : Waiting) {
      R->Claimed = true;
      Ready.emplace_back(R, *O);
    }
    Waiting.clear();
  }
  // Outside the lock: a reply may run reactions inline.
  for (auto &[R, O] : Ready)
    R->reply(std::move(O));
}

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
