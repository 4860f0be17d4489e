//===- GrpcUserTraining.cpp - A trainer over the user's service -----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// GrpcCompilerServer over a user's own service (GrpcUserTrainingService):
// the user's observation and action messages (UserProtoSerDes) and the
// callback generic service that answers the user's Observe, Act and Step
// methods from the episode.
//
//===----------------------------------------------------------------------===//

#include "GrpcUserTraining.h"

#include <algorithm>
#include <climits>
#include <utility>

using namespace llvm;

namespace mlbridge::grpc_internal {

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

std::string UserTraining::methods() const {
  std::string Out;
  for (const std::string *M :
       {&Spec.ObserveMethod, &Spec.ActMethod, &Spec.StepMethod})
    if (!M->empty())
      Out += (Out.empty() ? "" : ", ") + *M;
  return Out;
}

std::string UserTraining::actMethods() const {
  if (!Spec.ActMethod.empty() && !Spec.StepMethod.empty())
    return Spec.ActMethod + " or " + Spec.StepMethod;
  return Spec.ActMethod.empty() ? Spec.StepMethod : Spec.ActMethod;
}

Expected<std::string> UserTraining::observation(ArrayRef<TensorRef> Features,
                                                StringRef Context,
                                                int64_t Id) const {
  std::unique_ptr<google::protobuf::Message> Msg = Observation.newMessage();
  if (Error E = Observation.fill(Features, *Msg))
    return E;
  if (ContextField)
    Msg->GetReflection()->SetString(Msg.get(), ContextField, Context.str());
  if (IdField)
    setIntegerField(*Msg, *IdField, Id);
  return Msg->SerializeAsString();
}

/// Finds the optional field \p Name of \p Type, which must be singular and
/// satisfy \p Fits (described by \p Kind).
static Expected<const google::protobuf::FieldDescriptor *>
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

} // namespace mlbridge::grpc_internal
