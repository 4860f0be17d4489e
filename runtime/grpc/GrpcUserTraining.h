//===- GrpcUserTraining.h - A trainer over the user's service ---*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Internal to MLBridge::Grpc: GrpcCompilerServer with a user's own training
// service (GrpcUserTrainingService): the user's messages, checked against
// the specs, and the gRPC generic service that serves the user's methods.
//
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_RUNTIME_GRPC_GRPCUSERTRAINING_H
#define MLBRIDGE_RUNTIME_GRPC_GRPCUSERTRAINING_H

#include "GrpcCommon.h"

#include "mlbridge/GrpcModelRunner.h"
#include "mlbridge/SerDes/UserProtoSerDes.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlbridge::grpc_internal {

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
  std::string methods() const;
  /// The methods that answer an observation, for errors.
  std::string actMethods() const;
  /// Serializes one observation.
  llvm::Expected<std::string> observation(llvm::ArrayRef<TensorRef> Features,
                                          llvm::StringRef Context,
                                          int64_t Id) const;
};

/// Checks the user's service \p S against the specs; on success returns its
/// messages.
llvm::Expected<std::unique_ptr<UserTraining>>
makeUserTraining(const GrpcUserTrainingService &S,
                 llvm::ArrayRef<TensorSpec> Features, const TensorSpec &Advice);

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

} // namespace mlbridge::grpc_internal

#endif // MLBRIDGE_RUNTIME_GRPC_GRPCUSERTRAINING_H
