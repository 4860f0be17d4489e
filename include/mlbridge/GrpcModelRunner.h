//===- GrpcModelRunner.h - A model over gRPC --------------------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The gRPC runners, over the generic services of
/// proto/mlbridge/v1/model_service.proto (docs/grpc.md):
///
/// - GrpcModelRunner, inference: the compiler is the client of a model
///   server (ModelService); one Evaluate call per decision.
/// - GrpcCompilerServer, training: the compiler is the server
///   (CompilerService) and a trainer drives it; one compile is one episode,
///   one Observe/Act round per decision; or, with
///   GrpcCompilerServerOptions::UserService, the user's own service.
///
/// Every wait is bounded and every error names the address, the RPC and the
/// gRPC status. gRPC's headers stay out of this one.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_GRPCMODELRUNNER_H
#define MLBRIDGE_GRPCMODELRUNNER_H

#ifndef MLBRIDGE_HAVE_GRPC
#error "GrpcModelRunner.h needs mlbridge built with MLBRIDGE_ENABLE_GRPC"
#endif

#include "mlbridge/MLModelRunner.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace google::protobuf {
class Descriptor;
} // namespace google::protobuf

namespace mlbridge {

/// The default bound on one gRPC message, both ways (64 MiB).
inline constexpr uint64_t DefaultGrpcMaxMessageBytes = uint64_t(64) << 20;

/// A user's own unary RPC, called by GrpcModelRunner instead of
/// ModelService.Evaluate (docs/grpc.md, "Your own service"). The request is
/// filled from the features by UserProtoSerDes (field name = feature name);
/// the advice is the response field named like the advice spec.
struct GrpcUserMethod {
  /// The full method name, `/package.Service/Method`.
  std::string Method;
  /// The request and response message types, from the user's generated code
  /// (`Request::descriptor()`) or a DescriptorPool; they must outlive the
  /// runner.
  const google::protobuf::Descriptor *Request = nullptr;
  const google::protobuf::Descriptor *Response = nullptr;
};

/// How a GrpcModelRunner connects and calls.
struct GrpcModelRunnerOptions {
  /// The model server, `host:port` (e.g. `127.0.0.1:50051`).
  std::string Address;
  /// Deadline of each Evaluate call.
  std::chrono::milliseconds Timeout{30000};
  /// Bound of the wait for the connection in create(), across every retry.
  std::chrono::milliseconds ConnectTimeout{5000};
  /// Back-off between connection attempts: starts at InitialBackoff,
  /// doubles after each failed attempt, never exceeds MaxBackoff.
  std::chrono::milliseconds InitialBackoff{50};
  std::chrono::milliseconds MaxBackoff{1000};
  /// Largest message sent or received, in bytes; a larger one is an error
  /// (RESOURCE_EXHAUSTED).
  uint64_t MaxMessageBytes = DefaultGrpcMaxMessageBytes;
  /// If set, each evaluate() calls this method of the user's own service
  /// (through grpc::GenericStub) instead of ModelService.Evaluate; create()
  /// checks the features and the advice against its message types. The
  /// context (setContext) is not sent.
  std::optional<GrpcUserMethod> UserMethod;
};

/// Inference over gRPC: each evaluate() is one ModelService.Evaluate call
/// with the features as a TensorMessage; the reply is checked against the
/// advice spec. Used by one thread at a time.
class GrpcModelRunner final : public MLModelRunner {
public:
  /// Connects to the model server at Options.Address, waiting at most
  /// Options.ConnectTimeout; the error names the address and the bound.
  static llvm::Expected<std::unique_ptr<GrpcModelRunner>>
  create(std::vector<TensorSpec> FeatureSpecs, TensorSpec AdviceSpec,
         GrpcModelRunnerOptions Options);
  ~GrpcModelRunner() override;

  /// Sets the context sent with the following observations (the function or
  /// module being compiled).
  void setContext(llvm::StringRef Name);
  /// As setContext(): what passes call, not knowing the runner. Never fails.
  llvm::Error switchContext(llvm::StringRef Name) override;
  /// The model server's address.
  const std::string &address() const;

protected:
  llvm::Expected<TensorValue>
  evaluateUntyped(llvm::ArrayRef<TensorRef> Features) override;

private:
  struct Impl;
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

public:
  /// Use create().
  GrpcModelRunner(PrivateTag, std::vector<TensorSpec> FeatureSpecs,
                  TensorSpec AdviceSpec, std::unique_ptr<Impl> I);

private:
  std::unique_ptr<Impl> I;
};

/// A user's own service through which a trainer drives GrpcCompilerServer
/// (docs/grpc.md, "Training with your own service"): the compiler serves the
/// user's unary methods (`/package.Service/Method`) with gRPC's generic
/// service, so only the message types are needed, no generated C++ stub.
/// Features become fields of the Observation message and the advice is read
/// from the Action message (UserProtoSerDes: field name = tensor name).
/// Serve Observe and Act, or Step, or all three.
struct GrpcUserTrainingService {
  /// Returns the pending observation, waiting for the compiler's next one;
  /// its request message is ignored. Empty: not served.
  std::string ObserveMethod;
  /// Answers the pending observation with an Action; replies with an empty
  /// message (valid for any reply type). Empty: not served.
  std::string ActMethod;
  /// Act, then Observe, in one call: takes an Action and returns the next
  /// observation. An Action whose advice field is unset (`optional` in
  /// proto3 and not set, or an empty repeated field) only observes, which
  /// starts the episode. Empty: not served.
  std::string StepMethod;
  /// The observation and action message types, from generated code or a
  /// DescriptorPool; they must outlive the server.
  const google::protobuf::Descriptor *Observation = nullptr;
  const google::protobuf::Descriptor *Action = nullptr;
  /// Optional fields of the Observation message. DoneField: a bool set
  /// (alone) once the episode is over; without one, a call after the end
  /// fails with OUT_OF_RANGE. ContextField: a string, the context
  /// (setContext). IdField: an integer, the decision's index; if the Action
  /// type has a field of that name too, it must equal the pending id.
  std::string DoneField;
  std::string ContextField;
  std::string IdField;
};

/// How a GrpcCompilerServer listens and waits.
struct GrpcCompilerServerOptions {
  /// Where to listen, `host:port`; port 0 picks a free port (see address()).
  std::string Address = "127.0.0.1:0";
  /// Bound of each wait for the trainer's action (Act) on an observation,
  /// including the first, which waits for the trainer to connect.
  std::chrono::milliseconds Timeout{60000};
  /// Bound of the wait, in finish(), for the trainer to see the end of the
  /// episode (an Observe that returns done); no wait if no trainer ever
  /// called Observe.
  std::chrono::milliseconds EndTimeout{5000};
  /// Largest message sent or received, in bytes.
  uint64_t MaxMessageBytes = DefaultGrpcMaxMessageBytes;
  /// If set, the bound address (`host:port` and a newline) is written to
  /// this file once the server listens (atomically: written to a temporary
  /// file, then renamed), for the trainer to find.
  std::string ReadyFile;
  /// If set, the trainer calls these methods of the user's own service
  /// instead of CompilerService; create() checks the features and the
  /// advice against the message types.
  std::optional<GrpcUserTrainingService> UserService;
};

/// Training over gRPC: the compiler serves CompilerService. Each evaluate()
/// publishes an observation and blocks, at most Options.Timeout, until the
/// trainer answers it with Act. One runner is one episode: finish() (or the
/// destructor) ends it. Used by one thread at a time; the gRPC handlers run
/// on gRPC's threads.
class GrpcCompilerServer final : public MLModelRunner {
public:
  /// Starts listening at Options.Address.
  static llvm::Expected<std::unique_ptr<GrpcCompilerServer>>
  create(std::vector<TensorSpec> FeatureSpecs, TensorSpec AdviceSpec,
         GrpcCompilerServerOptions Options);
  /// Calls finish().
  ~GrpcCompilerServer() override;

  /// The address the server listens on, `host:port` with the actual port.
  const std::string &address() const;
  /// Sets the context sent with the following observations.
  void setContext(llvm::StringRef Name);
  /// As setContext(): what passes call, not knowing the runner. Never fails.
  llvm::Error switchContext(llvm::StringRef Name) override;
  /// Ends the episode: Observe returns done from now on. Waits at most
  /// Options.EndTimeout for the trainer to see it, then stops the server.
  /// Idempotent; evaluate() fails afterwards. Never fails (the
  /// MLModelRunner::finish interface returns an llvm::Error).
  llvm::Error finish() override;

protected:
  llvm::Expected<TensorValue>
  evaluateUntyped(llvm::ArrayRef<TensorRef> Features) override;

private:
  struct Impl;
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

public:
  /// Use create().
  GrpcCompilerServer(PrivateTag, std::vector<TensorSpec> FeatureSpecs,
                     TensorSpec AdviceSpec, std::unique_ptr<Impl> I);

private:
  std::unique_ptr<Impl> I;
};

} // namespace mlbridge

#endif // MLBRIDGE_GRPCMODELRUNNER_H
