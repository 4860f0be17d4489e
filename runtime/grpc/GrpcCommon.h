//===- GrpcCommon.h - What the gRPC runners share ---------------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Internal to MLBridge::Grpc: the helpers that the inference client
// (GrpcModelRunner.cpp), the compiler server (GrpcCompilerServer.cpp) and the
// user's training service (GrpcUserTraining.cpp) share, and the episode state
// that the compiler server shares with its gRPC handlers.
//
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_RUNTIME_GRPC_GRPCCOMMON_H
#define MLBRIDGE_RUNTIME_GRPC_GRPCCOMMON_H

#include "ProtoTensors.h"

#include "mlbridge/v1/model_service.pb.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace google::protobuf {
class Descriptor;
class FieldDescriptor;
} // namespace google::protobuf

namespace mlbridge::grpc_internal {

/// \p V as a gRPC size or count, saturated at INT_MAX.
int clampToInt(uint64_t V);

/// The decoder limits of messages of at most \p MaxMessageBytes.
DecoderLimits limitsFor(uint64_t MaxMessageBytes);

/// Builds the Observation of one decision.
llvm::Error makeObservation(llvm::StringRef Context, const TensorSpec &Advice,
                            int64_t Id, llvm::ArrayRef<TensorRef> Features,
                            v1::Observation &Out);

/// Checks that \p M is the advice for observation \p Id under \p Advice and
/// returns its tensor; errors say what differs, for the caller to prefix.
llvm::Expected<TensorValue> takeAdvice(Message M, int64_t Id,
                                       const TensorSpec &Advice);

/// Checks that \p Name is `/package.Service/Method`.
llvm::Error checkMethodName(llvm::StringRef Name);

/// Checks that tensors of \p Spec fit the field of \p Type named like the
/// spec (\p Role: the message's role in the method, \p What: the tensor's,
/// for errors): the field exists, its type is the spec's and its kind
/// (singular: shape [1], repeated: rank 1) fits the spec's shape.
llvm::Expected<const google::protobuf::FieldDescriptor *>
checkUserField(const google::protobuf::Descriptor &Type, llvm::StringRef Role,
               llvm::StringRef What, const TensorSpec &Spec);

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

} // namespace mlbridge::grpc_internal

#endif // MLBRIDGE_RUNTIME_GRPC_GRPCCOMMON_H
