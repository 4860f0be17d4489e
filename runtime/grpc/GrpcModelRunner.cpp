//===- GrpcModelRunner.cpp - A model over gRPC ----------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// GrpcModelRunner, inference: the ModelService client, or the client of a
// user's own unary method (GrpcUserMethod). docs/grpc.md defines the
// services.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/GrpcModelRunner.h"

#include "GrpcCommon.h"

#include "mlbridge/SerDes/UserProtoSerDes.h"
#include "mlbridge/v1/model_service.grpc.pb.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <climits>
#include <utility>
#include <vector>

using namespace llvm;
using namespace mlbridge::grpc_internal;

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

} // namespace mlbridge
