//===- CAPI.cpp - C API of the mlbridge runtime ---------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Handles own C++ objects through std::unique_ptr; they are released to C
// on creation and re-wrapped on destruction. Errors never cross the boundary
// as exceptions or llvm::Error: they become a status and a thread-local
// message.
//
//===----------------------------------------------------------------------===//

#include "mlbridge-c/mlbridge.h"

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/ModelRegistry.h"
#include "mlbridge/PipeModelRunner.h"
#ifdef MLBRIDGE_HAVE_GRPC
#include "mlbridge/GrpcModelRunner.h"
#endif
#ifdef MLBRIDGE_HAVE_ONNX
#include "mlbridge/OnnxModelRunner.h"
#endif
#ifdef MLBRIDGE_HAVE_TF_AOT
#include "mlbridge/TFAOTModelRunner.h"
#endif
#include "mlbridge/SerDes/SerDes.h"

#include <algorithm>
#include <cstring>

using namespace llvm;
using namespace mlbridge;

struct mlbridge_runner {
  std::unique_ptr<MLModelRunner> Runner;
  /// Runner, when it is a pipe runner.
  PipeModelRunner *Pipe = nullptr;
};

struct mlbridge_serdes {
  std::unique_ptr<SerDes> Impl;
};

struct mlbridge_message {
  Message Msg;
  /// Per tensor, the pointers and lengths that string views point at.
  std::vector<std::vector<const char *>> StringPtrs;
  std::vector<std::vector<size_t>> StringLens;
};

struct mlbridge_reply {
  std::optional<TensorValue> Value;
  std::string Error;
  /// Set when a reply function itself failed (bad arguments).
  mlbridge_status Status = MLBRIDGE_OK;
};

static thread_local std::string LastError;

static mlbridge_status fail(mlbridge_status Status, const Twine &Msg) {
  LastError = Msg.str();
  return Status;
}

static mlbridge_status fail(mlbridge_status Status, Error E) {
  return fail(Status, toString(std::move(E)));
}

static bool validType(int T) {
  return T >= 0 && T < static_cast<int>(NumElementTypes);
}

static Expected<TensorSpec> toSpec(const mlbridge_tensor_spec *S) {
  if (!S || !S->name || (S->rank && !S->shape) || !validType(S->type))
    return createStringError(inconvertibleErrorCode(),
                             "invalid tensor spec (null name or shape, or "
                             "unknown type)");
  return TensorSpec::create(S->name, static_cast<ElementType>(S->type),
                            ArrayRef<int64_t>(S->shape, S->rank));
}

/// The specs of \p Count C feature specs, or the first one's error.
static Expected<std::vector<TensorSpec>>
toSpecs(const mlbridge_tensor_spec *Features, size_t Count) {
  std::vector<TensorSpec> Specs;
  Specs.reserve(Count);
  for (size_t I = 0; I < Count; ++I) {
    Expected<TensorSpec> S = toSpec(&Features[I]);
    if (!S)
      return S.takeError();
    Specs.push_back(std::move(*S));
  }
  return Specs;
}

/// Views of \p Refs as C structs; the string arrays live in \p Ptrs/\p Lens.
static std::vector<mlbridge_tensor>
toCViews(ArrayRef<TensorRef> Refs, std::vector<std::string> &Names,
         std::vector<std::vector<const char *>> &Ptrs,
         std::vector<std::vector<size_t>> &Lens) {
  Names.resize(Refs.size());
  Ptrs.resize(Refs.size());
  Lens.resize(Refs.size());
  std::vector<mlbridge_tensor> Views(Refs.size());
  for (size_t I = 0; I < Refs.size(); ++I) {
    const TensorRef &R = Refs[I];
    Names[I] = R.name().str();
    mlbridge_tensor &V = Views[I];
    V.name = Names[I].c_str();
    V.type = static_cast<mlbridge_element_type>(R.type());
    V.shape = R.shape().data();
    V.rank = R.shape().size();
    V.num_elements = R.getElementCount();
    V.data = nullptr;
    V.strings = nullptr;
    V.string_lengths = nullptr;
    if (R.type() == ElementType::String) {
      Ptrs[I].clear();
      Lens[I].clear();
      for (const std::string &S : R.strings()) {
        Ptrs[I].push_back(S.data());
        Lens[I].push_back(S.size());
      }
      V.strings = Ptrs[I].data();
      V.string_lengths = Lens[I].data();
    } else {
      V.data = R.bytes().data();
    }
  }
  return Views;
}

static Expected<std::vector<std::string>>
toStrings(const char *const *Strings, const size_t *Lengths, size_t Count) {
  if (Count && (!Strings || !Lengths))
    return createStringError(inconvertibleErrorCode(),
                             "null strings or lengths");
  std::vector<std::string> Out;
  Out.reserve(Count);
  for (size_t I = 0; I < Count; ++I) {
    if (!Strings[I] && Lengths[I])
      return createStringError(inconvertibleErrorCode(), "string %zu is null",
                               I);
    Out.emplace_back(Lengths[I] ? Strings[I] : "", Lengths[I]);
  }
  return Out;
}

extern "C" {

const char *mlbridge_last_error(void) { return LastError.c_str(); }

const char *mlbridge_element_type_name(mlbridge_element_type Type) {
  if (!validType(Type))
    return nullptr;
  return elementTypeName(static_cast<ElementType>(Type)).data();
}

size_t mlbridge_element_size(mlbridge_element_type Type) {
  return validType(Type) ? elementSize(static_cast<ElementType>(Type)) : 0;
}

mlbridge_status mlbridge_runner_create_callback(
    const mlbridge_tensor_spec *Features, size_t NumFeatures,
    const mlbridge_tensor_spec *Advice, mlbridge_callback Callback,
    void *UserData, mlbridge_runner **Out) {
  if (!Out || !Callback || !Advice || (NumFeatures && !Features))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "mlbridge_runner_create_callback: null argument");
  *Out = nullptr;
  Expected<std::vector<TensorSpec>> Specs = toSpecs(Features, NumFeatures);
  if (!Specs)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Specs.takeError());
  Expected<TensorSpec> AdviceSpec = toSpec(Advice);
  if (!AdviceSpec)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, AdviceSpec.takeError());
  auto Policy = [Callback,
                 UserData](ArrayRef<TensorRef> Refs) -> Expected<TensorValue> {
    std::vector<std::string> Names;
    std::vector<std::vector<const char *>> Ptrs;
    std::vector<std::vector<size_t>> Lens;
    std::vector<mlbridge_tensor> Views = toCViews(Refs, Names, Ptrs, Lens);
    mlbridge_reply Reply;
    int RC = Callback(UserData, Views.data(), Views.size(), &Reply);
    if (RC != 0)
      return createStringError(
          inconvertibleErrorCode(), "callback failed (returned %d)%s%s", RC,
          Reply.Error.empty() ? "" : ": ", Reply.Error.c_str());
    if (Reply.Status != MLBRIDGE_OK)
      return createStringError(inconvertibleErrorCode(),
                               "callback set an invalid reply: %s",
                               Reply.Error.c_str());
    if (!Reply.Value)
      return createStringError(inconvertibleErrorCode(),
                               "callback returned 0 without setting a reply");
    return std::move(*Reply.Value);
  };
  Expected<std::unique_ptr<CallbackModelRunner>> R =
      CallbackModelRunner::create(std::move(*Specs), std::move(*AdviceSpec),
                                  std::move(Policy));
  if (!R)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, R.takeError());
  auto Handle = std::make_unique<mlbridge_runner>();
  Handle->Runner = std::move(*R);
  *Out = Handle.release();
  return MLBRIDGE_OK;
}

/// The two pipe constructors; \p Score may be null (no outcomes).
static mlbridge_status
createPipe(const char *Fn, const mlbridge_tensor_spec *Features,
           size_t NumFeatures, const mlbridge_tensor_spec *Advice,
           const mlbridge_tensor_spec *Score, const char *Base,
           const char *SerDes, int64_t TimeoutMs, mlbridge_runner **Out) {
  if (!Out || !Advice || !Base || !SerDes || (NumFeatures && !Features))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null argument");
  *Out = nullptr;
  if (TimeoutMs <= 0)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                Twine(Fn) + ": the timeout must be positive, got " +
                    Twine(TimeoutMs) + " ms");
  Expected<std::vector<TensorSpec>> Specs = toSpecs(Features, NumFeatures);
  if (!Specs)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Specs.takeError());
  Expected<TensorSpec> AdviceSpec = toSpec(Advice);
  if (!AdviceSpec)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, AdviceSpec.takeError());
  Expected<SerDesKind> Kind = parseSerDesKind(SerDes);
  if (!Kind)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Kind.takeError());
  PipeModelRunnerOptions O;
  if (Score) {
    Expected<TensorSpec> ScoreSpec = toSpec(Score);
    if (!ScoreSpec)
      return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                  "score: " + toString(ScoreSpec.takeError()));
    O.Score = std::move(*ScoreSpec);
  }
  O.ChannelBase = Base;
  O.Kind = *Kind;
  O.ConnectTimeout = O.Timeout = std::chrono::milliseconds(TimeoutMs);
  O.CreateFifos = true;
  Expected<std::unique_ptr<PipeModelRunner>> R = PipeModelRunner::create(
      std::move(*Specs), std::move(*AdviceSpec), std::move(O));
  if (!R)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, R.takeError());
  auto Handle = std::make_unique<mlbridge_runner>();
  Handle->Pipe = R->get();
  Handle->Runner = std::move(*R);
  *Out = Handle.release();
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_create_pipe(
    const mlbridge_tensor_spec *Features, size_t NumFeatures,
    const mlbridge_tensor_spec *Advice, const char *Base, const char *SerDes,
    int64_t TimeoutMs, mlbridge_runner **Out) {
  return createPipe("mlbridge_runner_create_pipe", Features, NumFeatures,
                    Advice, nullptr, Base, SerDes, TimeoutMs, Out);
}

mlbridge_status mlbridge_runner_create_pipe_with_score(
    const mlbridge_tensor_spec *Features, size_t NumFeatures,
    const mlbridge_tensor_spec *Advice, const mlbridge_tensor_spec *Score,
    const char *Base, const char *SerDes, int64_t TimeoutMs,
    mlbridge_runner **Out) {
  if (!Score) {
    if (Out)
      *Out = nullptr;
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "mlbridge_runner_create_pipe_with_score: null score spec "
                "(use mlbridge_runner_create_pipe for no outcomes)");
  }
  return createPipe("mlbridge_runner_create_pipe_with_score", Features,
                    NumFeatures, Advice, Score, Base, SerDes, TimeoutMs, Out);
}

/// The pipe runner behind \p Runner, or a failure naming \p Fn.
static mlbridge_status pipeOf(mlbridge_runner *Runner, const char *Fn,
                              PipeModelRunner *&Pipe) {
  if (!Runner)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null runner");
  if (!Runner->Pipe)
    return fail(MLBRIDGE_ERROR_UNSUPPORTED,
                Twine(Fn) + ": only a pipe runner (mlbridge_runner_create_pipe"
                            "*) has this");
  Pipe = Runner->Pipe;
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_send_outcome(mlbridge_runner *Runner,
                                             int64_t ObservationId,
                                             mlbridge_element_type Type,
                                             const void *Data, size_t Count) {
  static const char Fn[] = "mlbridge_runner_send_outcome";
  PipeModelRunner *Pipe = nullptr;
  if (mlbridge_status S = pipeOf(Runner, Fn, Pipe))
    return S;
  const std::optional<TensorSpec> &Spec = Pipe->options().Score;
  if (!Spec)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                Twine(Fn) + ": the runner has no score spec (create it with "
                            "mlbridge_runner_create_pipe_with_score)");
  if (!validType(Type) || static_cast<int>(Spec->type()) != Type)
    return fail(MLBRIDGE_ERROR_TYPE_MISMATCH,
                Twine(Fn) + ": score '" + Spec->name() + "' is " +
                    elementTypeName(Spec->type()) + ", given " +
                    (validType(Type)
                         ? elementTypeName(static_cast<ElementType>(Type))
                         : StringRef("an unknown type")));
  if (Type == MLBRIDGE_STRING)
    return fail(MLBRIDGE_ERROR_TYPE_MISMATCH,
                Twine(Fn) + ": string scores are not supported in C");
  if (Count && !Data)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null data");
  // The concrete shape: a static spec's own, or its one dynamic dimension
  // filled by the count.
  std::vector<int64_t> Shape(Spec->shape().begin(), Spec->shape().end());
  uint64_t Static = 1;
  size_t NumDynamic = 0;
  for (int64_t D : Shape)
    D == DynamicDim ? ++NumDynamic : Static *= static_cast<uint64_t>(D);
  bool Fits = NumDynamic == 0
                  ? Count == Static
                  : NumDynamic == 1 && Static != 0 && Count % Static == 0;
  if (!Fits)
    return fail(MLBRIDGE_ERROR_SHAPE_MISMATCH,
                Twine(Fn) + ": " + Twine(Count) +
                    " elements do not fit score '" + Spec->name() + "'");
  for (int64_t &D : Shape)
    if (D == DynamicDim)
      D = static_cast<int64_t>(Count / Static);
  size_t Size = elementSize(static_cast<ElementType>(Type));
  Expected<TensorValue> V = TensorValue::fromBytes(
      Spec->name(), Spec->type(), Shape,
      ArrayRef<char>(static_cast<const char *>(Data), Count * Size));
  if (!V)
    return fail(MLBRIDGE_ERROR_SHAPE_MISMATCH, V.takeError());
  bool Usable = !Pipe->finished() && !Pipe->failed();
  if (Error E = Pipe->sendOutcome(ObservationId, *V))
    // A usable runner that refuses without failing refused the arguments
    // (the id); anything that broke the channel is the model's side.
    return fail(Usable && !Pipe->failed() ? MLBRIDGE_ERROR_INVALID_ARGUMENT
                                          : MLBRIDGE_ERROR_MODEL,
                std::move(E));
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_change_specs(
    mlbridge_runner *Runner, const mlbridge_tensor_spec *Features,
    size_t NumFeatures, const mlbridge_tensor_spec *Advice) {
  static const char Fn[] = "mlbridge_runner_change_specs";
  PipeModelRunner *Pipe = nullptr;
  if (mlbridge_status S = pipeOf(Runner, Fn, Pipe))
    return S;
  if (!Advice || (NumFeatures && !Features))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null argument");
  Expected<std::vector<TensorSpec>> Specs = toSpecs(Features, NumFeatures);
  if (!Specs)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Specs.takeError());
  Expected<TensorSpec> AdviceSpec = toSpec(Advice);
  if (!AdviceSpec)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, AdviceSpec.takeError());
  if (Error E = Pipe->changeSpecs(std::move(*Specs), std::move(*AdviceSpec)))
    return fail(Pipe->finished() || Pipe->failed()
                    ? MLBRIDGE_ERROR_MODEL
                    : MLBRIDGE_ERROR_INVALID_ARGUMENT,
                std::move(E));
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_create_grpc(
    const mlbridge_tensor_spec *Features, size_t NumFeatures,
    const mlbridge_tensor_spec *Advice, const char *Address, int64_t TimeoutMs,
    mlbridge_runner **Out) {
  if (!Out || !Advice || !Address || (NumFeatures && !Features))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "mlbridge_runner_create_grpc: null argument");
  *Out = nullptr;
#ifndef MLBRIDGE_HAVE_GRPC
  (void)TimeoutMs;
  return fail(MLBRIDGE_ERROR_UNSUPPORTED,
              "mlbridge_runner_create_grpc: mlbridge was built without gRPC "
              "(configure with -DMLBRIDGE_ENABLE_GRPC=ON)");
#else
  if (TimeoutMs <= 0)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "mlbridge_runner_create_grpc: the timeout must be positive, "
                "got " +
                    Twine(TimeoutMs) + " ms");
  if (!*Address)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "mlbridge_runner_create_grpc: empty address");
  Expected<std::vector<TensorSpec>> Specs = toSpecs(Features, NumFeatures);
  if (!Specs)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Specs.takeError());
  Expected<TensorSpec> AdviceSpec = toSpec(Advice);
  if (!AdviceSpec)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, AdviceSpec.takeError());
  GrpcModelRunnerOptions O;
  O.Address = Address;
  O.Timeout = O.ConnectTimeout = std::chrono::milliseconds(TimeoutMs);
  O.InitialBackoff = std::min(O.InitialBackoff, O.Timeout);
  O.MaxBackoff =
      std::clamp(O.Timeout, O.InitialBackoff, std::chrono::milliseconds(1000));
  Expected<std::unique_ptr<GrpcModelRunner>> R = GrpcModelRunner::create(
      std::move(*Specs), std::move(*AdviceSpec), std::move(O));
  if (!R)
    return fail(MLBRIDGE_ERROR_MODEL, R.takeError());
  auto Handle = std::make_unique<mlbridge_runner>();
  Handle->Runner = std::move(*R);
  *Out = Handle.release();
  return MLBRIDGE_OK;
#endif
}

/// The specs of an in-process runner's constructor \p Fn, after the checks
/// every constructor makes; \p Path is the model argument.
static mlbridge_status
inProcessSpecs(const char *Fn, const mlbridge_tensor_spec *Features,
               size_t NumFeatures, const mlbridge_tensor_spec *Advice,
               const char *Path, std::vector<TensorSpec> &FeatureSpecs,
               std::optional<TensorSpec> &AdviceSpec) {
  if (!Advice || !Path || (NumFeatures && !Features))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null argument");
  if (!*Path)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                Twine(Fn) + ": empty model path");
  Expected<std::vector<TensorSpec>> Specs = toSpecs(Features, NumFeatures);
  if (!Specs)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Specs.takeError());
  Expected<TensorSpec> A = toSpec(Advice);
  if (!A)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, A.takeError());
  FeatureSpecs = std::move(*Specs);
  AdviceSpec = std::move(*A);
  return MLBRIDGE_OK;
}

/// Hands \p R to C in \p Out, or fails with MLBRIDGE_ERROR_MODEL: the specs
/// were checked before, so what remains is the model's (file, format, fit).
static mlbridge_status
giveInProcessRunner(Expected<std::unique_ptr<MLModelRunner>> R,
                    mlbridge_runner **Out) {
  if (!R)
    return fail(MLBRIDGE_ERROR_MODEL, R.takeError());
  auto Handle = std::make_unique<mlbridge_runner>();
  Handle->Runner = std::move(*R);
  *Out = Handle.release();
  return MLBRIDGE_OK;
}

static mlbridge_status createOnnx([[maybe_unused]] const char *Fn,
                                  std::vector<TensorSpec> Features,
                                  TensorSpec Advice, const char *ModelPath,
                                  int32_t IntraOpThreads,
                                  mlbridge_runner **Out) {
#ifndef MLBRIDGE_HAVE_ONNX
  (void)Features;
  (void)Advice;
  (void)ModelPath;
  (void)IntraOpThreads;
  (void)Out;
  return fail(MLBRIDGE_ERROR_UNSUPPORTED,
              Twine(Fn) + ": mlbridge was built without ONNX Runtime "
                          "(configure with -DMLBRIDGE_ENABLE_ONNX=ON)");
#else
  OnnxRunnerOptions O;
  if (IntraOpThreads)
    O.IntraOpThreads = IntraOpThreads;
  Expected<std::unique_ptr<OnnxModelRunner>> R = OnnxModelRunner::create(
      ModelPath, std::move(Features), std::move(Advice), std::move(O));
  if (!R)
    return giveInProcessRunner(R.takeError(), Out);
  return giveInProcessRunner(std::unique_ptr<MLModelRunner>(std::move(*R)),
                             Out);
#endif
}

static mlbridge_status createTFAOT([[maybe_unused]] const char *Fn,
                                   std::vector<TensorSpec> Features,
                                   TensorSpec Advice,
                                   const char *SharedObjectPath,
                                   mlbridge_runner **Out) {
#ifndef MLBRIDGE_HAVE_TF_AOT
  (void)Features;
  (void)Advice;
  (void)SharedObjectPath;
  (void)Out;
  return fail(MLBRIDGE_ERROR_UNSUPPORTED,
              Twine(Fn) + ": mlbridge was built without TF AOT support "
                          "(configure with -DMLBRIDGE_ENABLE_TF_AOT=ON)");
#else
  return giveInProcessRunner(TFAOTModelRunner::load(SharedObjectPath,
                                                    std::move(Features),
                                                    std::move(Advice)),
                             Out);
#endif
}

mlbridge_status mlbridge_runner_create_onnx(
    const mlbridge_tensor_spec *Features, size_t NumFeatures,
    const mlbridge_tensor_spec *Advice, const char *ModelPath,
    int32_t IntraOpThreads, mlbridge_runner **Out) {
  static const char Fn[] = "mlbridge_runner_create_onnx";
  if (!Out)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null argument");
  *Out = nullptr;
  std::vector<TensorSpec> Specs;
  std::optional<TensorSpec> AdviceSpec;
  if (mlbridge_status S = inProcessSpecs(Fn, Features, NumFeatures, Advice,
                                         ModelPath, Specs, AdviceSpec))
    return S;
  if (IntraOpThreads < 0)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                Twine(Fn) +
                    ": intra_op_threads must be 0 (the default) or "
                    "positive, got " +
                    Twine(IntraOpThreads));
  return createOnnx(Fn, std::move(Specs), std::move(*AdviceSpec), ModelPath,
                    IntraOpThreads, Out);
}

mlbridge_status mlbridge_runner_create_tfaot(
    const mlbridge_tensor_spec *Features, size_t NumFeatures,
    const mlbridge_tensor_spec *Advice, const char *SharedObjectPath,
    mlbridge_runner **Out) {
  static const char Fn[] = "mlbridge_runner_create_tfaot";
  if (!Out)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null argument");
  *Out = nullptr;
  std::vector<TensorSpec> Specs;
  std::optional<TensorSpec> AdviceSpec;
  if (mlbridge_status S = inProcessSpecs(Fn, Features, NumFeatures, Advice,
                                         SharedObjectPath, Specs, AdviceSpec))
    return S;
  return createTFAOT(Fn, std::move(Specs), std::move(*AdviceSpec),
                     SharedObjectPath, Out);
}

mlbridge_status mlbridge_runner_create_model(
    const mlbridge_tensor_spec *Features, size_t NumFeatures,
    const mlbridge_tensor_spec *Advice, const char *NameOrPath,
    const char *RegistryDir, mlbridge_runner **Out) {
  static const char Fn[] = "mlbridge_runner_create_model";
  if (!Out)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null argument");
  *Out = nullptr;
  std::vector<TensorSpec> Specs;
  std::optional<TensorSpec> AdviceSpec;
  if (mlbridge_status S = inProcessSpecs(Fn, Features, NumFeatures, Advice,
                                         NameOrPath, Specs, AdviceSpec))
    return S;
  Expected<RegisteredModel> Model =
      findModel(NameOrPath, RegistryDir ? RegistryDir : "");
  if (!Model)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Model.takeError());
  switch (Model->Kind) {
  case ModelKind::Onnx:
    return createOnnx(Fn, std::move(Specs), std::move(*AdviceSpec),
                      Model->Path.c_str(), 0, Out);
  case ModelKind::TFAOT:
  case ModelKind::Native: // the same C ABI (docs/native.md)
    return createTFAOT(Fn, std::move(Specs), std::move(*AdviceSpec),
                       Model->Path.c_str(), Out);
  case ModelKind::IR2VecVocab: // findModel() accepts runnable kinds only
    break;
  }
  return fail(MLBRIDGE_ERROR_MODEL,
              Twine(Fn) + ": model '" + NameOrPath + "' has an unknown kind");
}

mlbridge_status mlbridge_runner_switch_context(mlbridge_runner *Runner,
                                               const char *Name) {
  if (!Runner || !Name)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null runner or name");
  if (Error E = Runner->Runner->switchContext(Name))
    return fail(MLBRIDGE_ERROR_MODEL, std::move(E));
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_finish(mlbridge_runner *Runner) {
  if (!Runner)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null runner");
  // Every runner can finish (MLModelRunner::finish); the pipe runner's ends
  // the session.
  if (Error E = Runner->Runner->finish())
    return fail(MLBRIDGE_ERROR_MODEL, std::move(E));
  return MLBRIDGE_OK;
}

void mlbridge_runner_destroy(mlbridge_runner *Runner) {
  std::unique_ptr<mlbridge_runner> Owned(Runner);
}

/// Checks name and type before calling into C++, so that the status says
/// which kind of mistake it was.
static mlbridge_status checkFeature(mlbridge_runner *Runner, const char *Name,
                                    int Type) {
  if (!Runner || !Name)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null runner or name");
  if (!validType(Type))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "unknown element type " + Twine(Type));
  std::optional<size_t> I = Runner->Runner->getFeatureIndex(Name);
  if (!I)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "unknown feature '" + Twine(Name) + "'");
  const TensorSpec &Spec = Runner->Runner->featureSpecs()[*I];
  if (static_cast<int>(Spec.type()) != Type)
    return fail(MLBRIDGE_ERROR_TYPE_MISMATCH,
                "feature '" + Twine(Name) + "' is " +
                    elementTypeName(Spec.type()) + ", given " +
                    elementTypeName(static_cast<ElementType>(Type)));
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_set_feature(mlbridge_runner *Runner,
                                            const char *Name,
                                            mlbridge_element_type Type,
                                            const void *Data, size_t Count) {
  if (mlbridge_status S = checkFeature(Runner, Name, Type))
    return S;
  if (Type == MLBRIDGE_STRING)
    return fail(MLBRIDGE_ERROR_TYPE_MISMATCH,
                "feature '" + Twine(Name) +
                    "' is a string: use mlbridge_runner_set_feature_strings");
  if (Count && !Data)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null data");
  size_t Size = elementSize(static_cast<ElementType>(Type));
  ArrayRef<char> Bytes(static_cast<const char *>(Data), Count * Size);
  if (Error E = Runner->Runner->setFeatureRaw(
          Name, static_cast<ElementType>(Type), Bytes))
    return fail(MLBRIDGE_ERROR_SHAPE_MISMATCH, std::move(E));
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_set_feature_strings(mlbridge_runner *Runner,
                                                    const char *Name,
                                                    const char *const *Strings,
                                                    const size_t *Lengths,
                                                    size_t Count) {
  if (mlbridge_status S = checkFeature(Runner, Name, MLBRIDGE_STRING))
    return S;
  Expected<std::vector<std::string>> Strs = toStrings(Strings, Lengths, Count);
  if (!Strs)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Strs.takeError());
  if (Error E = Runner->Runner->setFeatureStrings(Name, *Strs))
    return fail(MLBRIDGE_ERROR_SHAPE_MISMATCH, std::move(E));
  return MLBRIDGE_OK;
}

/// Runs the model and checks the requested numeric type.
static mlbridge_status evaluate(mlbridge_runner *Runner, int Type,
                                std::optional<TensorValue> &Out) {
  if (!Runner)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null runner");
  if (!validType(Type) || Type == MLBRIDGE_STRING)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "evaluate needs a numeric or bool element type");
  const TensorSpec &Advice = Runner->Runner->adviceSpec();
  if (static_cast<int>(Advice.type()) != Type)
    return fail(MLBRIDGE_ERROR_TYPE_MISMATCH,
                "advice '" + Twine(Advice.name()) + "' is " +
                    elementTypeName(Advice.type()) + ", asked for " +
                    elementTypeName(static_cast<ElementType>(Type)));
  Expected<TensorValue> R = Runner->Runner->evaluateChecked();
  if (!R)
    return fail(MLBRIDGE_ERROR_MODEL, R.takeError());
  Out = std::move(*R);
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_evaluate_scalar(mlbridge_runner *Runner,
                                                mlbridge_element_type Type,
                                                void *Out) {
  if (!Out)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null output");
  std::optional<TensorValue> V;
  if (mlbridge_status S = evaluate(Runner, Type, V))
    return S;
  if (V->getElementCount() != 1)
    return fail(MLBRIDGE_ERROR_SHAPE_MISMATCH,
                "advice has " + Twine(V->getElementCount()) +
                    " elements, a scalar needs 1");
  std::memcpy(Out, V->bytes().data(), V->bytes().size());
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_evaluate_vector(mlbridge_runner *Runner,
                                                mlbridge_element_type Type,
                                                void *Out, size_t Capacity,
                                                size_t *OutCount) {
  if (!OutCount || (Capacity && !Out))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null output");
  std::optional<TensorValue> V;
  if (mlbridge_status S = evaluate(Runner, Type, V))
    return S;
  *OutCount = V->getElementCount();
  if (V->getElementCount() > Capacity)
    return fail(MLBRIDGE_ERROR_BUFFER_TOO_SMALL,
                "advice has " + Twine(V->getElementCount()) +
                    " elements, the buffer holds " + Twine(Capacity));
  if (!V->bytes().empty())
    std::memcpy(Out, V->bytes().data(), V->bytes().size());
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_reply_set(mlbridge_reply *Reply,
                                   mlbridge_element_type Type,
                                   const int64_t *Shape, size_t Rank,
                                   const void *Data, size_t Count) {
  if (!Reply)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null reply");
  auto Bad = [&](mlbridge_status S, const Twine &Msg) {
    Reply->Status = S;
    Reply->Error = Msg.str();
    return fail(S, Msg);
  };
  if (!validType(Type) || Type == MLBRIDGE_STRING)
    return Bad(MLBRIDGE_ERROR_INVALID_ARGUMENT,
               "mlbridge_reply_set needs a numeric or bool type");
  if ((Count && !Data) || (Rank && !Shape))
    return Bad(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null data or shape");
  int64_t N = static_cast<int64_t>(Count);
  ArrayRef<int64_t> S =
      Rank ? ArrayRef<int64_t>(Shape, Rank) : ArrayRef<int64_t>(N);
  size_t Size = elementSize(static_cast<ElementType>(Type));
  Expected<TensorValue> V = TensorValue::fromBytes(
      "advice", static_cast<ElementType>(Type), S,
      ArrayRef<char>(static_cast<const char *>(Data), Count * Size));
  if (!V)
    return Bad(MLBRIDGE_ERROR_SHAPE_MISMATCH, toString(V.takeError()));
  Reply->Value = std::move(*V);
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_reply_set_strings(mlbridge_reply *Reply,
                                           const char *const *Strings,
                                           const size_t *Lengths,
                                           size_t Count) {
  if (!Reply)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null reply");
  Expected<std::vector<std::string>> Strs = toStrings(Strings, Lengths, Count);
  if (!Strs) {
    Reply->Status = MLBRIDGE_ERROR_INVALID_ARGUMENT;
    Reply->Error = toString(Strs.takeError());
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Reply->Error);
  }
  Reply->Value = cantFail(TensorValue::fromStrings(
      "advice", {static_cast<int64_t>(Count)}, std::move(*Strs)));
  return MLBRIDGE_OK;
}

void mlbridge_reply_set_error(mlbridge_reply *Reply, const char *Message) {
  if (Reply && Message)
    Reply->Error = Message;
}

mlbridge_status mlbridge_serdes_create(const char *Kind,
                                       mlbridge_serdes **Out) {
  if (!Kind || !Out)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  *Out = nullptr;
  Expected<SerDesKind> K = parseSerDesKind(Kind);
  if (!K)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, K.takeError());
  Expected<std::unique_ptr<SerDes>> S = createSerDes(*K);
  if (!S)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, S.takeError());
  auto Handle = std::make_unique<mlbridge_serdes>();
  Handle->Impl = std::move(*S);
  *Out = Handle.release();
  return MLBRIDGE_OK;
}

void mlbridge_serdes_destroy(mlbridge_serdes *S) {
  std::unique_ptr<mlbridge_serdes> Owned(S);
}

/// Copies \p Bytes into a buffer that mlbridge_free() releases.
static mlbridge_status giveBuffer(const std::string &Bytes, char **OutData,
                                  size_t *OutSize) {
  auto Buf = std::make_unique<char[]>(Bytes.size() + 1);
  std::memcpy(Buf.get(), Bytes.data(), Bytes.size());
  *OutSize = Bytes.size();
  *OutData = Buf.release();
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_serdes_encode_header(
    mlbridge_serdes *S, const mlbridge_tensor_spec *Features,
    size_t NumFeatures, const mlbridge_tensor_spec *Advice,
    const mlbridge_tensor_spec *Score, char **OutData, size_t *OutSize) {
  if (!S || !OutData || !OutSize || (NumFeatures && !Features))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  Header H;
  for (size_t I = 0; I < NumFeatures; ++I) {
    Expected<TensorSpec> Spec = toSpec(&Features[I]);
    if (!Spec)
      return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Spec.takeError());
    H.Features.push_back(std::move(*Spec));
  }
  for (auto [In, Slot] :
       {std::pair(Advice, &H.Advice), std::pair(Score, &H.Score)}) {
    if (!In)
      continue;
    Expected<TensorSpec> Spec = toSpec(In);
    if (!Spec)
      return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Spec.takeError());
    *Slot = std::move(*Spec);
  }
  std::string Out;
  if (Error E = S->Impl->encodeHeader(H, Out))
    return fail(MLBRIDGE_ERROR_SERDES, std::move(E));
  return giveBuffer(Out, OutData, OutSize);
}

mlbridge_status mlbridge_serdes_encode_context(mlbridge_serdes *S,
                                               const char *Context,
                                               char **OutData,
                                               size_t *OutSize) {
  if (!S || !Context || !OutData || !OutSize)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  std::string Out;
  if (Error E = S->Impl->encodeContext(Context, Out))
    return fail(MLBRIDGE_ERROR_SERDES, std::move(E));
  return giveBuffer(Out, OutData, OutSize);
}

mlbridge_status
mlbridge_serdes_encode_message(mlbridge_serdes *S, mlbridge_message_kind Kind,
                               int64_t Id, const mlbridge_tensor *Tensors,
                               size_t NumTensors, char **OutData,
                               size_t *OutSize) {
  if (!S || !OutData || !OutSize || (NumTensors && !Tensors))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  if (Kind < MLBRIDGE_OBSERVATION || Kind > MLBRIDGE_ADVICE)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "unknown message kind " + Twine(static_cast<int>(Kind)));
  // Strings must be copied to std::string for TensorRef; numeric data is
  // viewed in place.
  std::vector<std::vector<std::string>> StringStore(NumTensors);
  std::vector<TensorRef> Refs;
  Refs.reserve(NumTensors);
  for (size_t I = 0; I < NumTensors; ++I) {
    const mlbridge_tensor &T = Tensors[I];
    if (!T.name || (T.rank && !T.shape) || !validType(T.type))
      return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                  "tensor " + Twine(I) +
                      " has a null name or shape, or an "
                      "unknown type");
    ArrayRef<int64_t> Shape(T.shape, T.rank);
    if (T.type == MLBRIDGE_STRING) {
      Expected<std::vector<std::string>> Strs =
          toStrings(T.strings, T.string_lengths, T.num_elements);
      if (!Strs)
        return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Strs.takeError());
      StringStore[I] = std::move(*Strs);
      Refs.emplace_back(T.name, Shape, StringStore[I]);
      continue;
    }
    if (T.num_elements && !T.data)
      return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                  "tensor '" + Twine(T.name) + "' has null data");
    size_t Size = elementSize(static_cast<ElementType>(T.type));
    Refs.emplace_back(T.name, static_cast<ElementType>(T.type), Shape,
                      ArrayRef<char>(static_cast<const char *>(T.data),
                                     T.num_elements * Size));
  }
  std::string Out;
  if (Error E =
          S->Impl->encodeMessage(static_cast<MessageKind>(Kind), Id, Refs, Out))
    return fail(MLBRIDGE_ERROR_SERDES, std::move(E));
  return giveBuffer(Out, OutData, OutSize);
}

mlbridge_status mlbridge_serdes_encode_end(mlbridge_serdes *S, char **OutData,
                                           size_t *OutSize) {
  if (!S || !OutData || !OutSize)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  std::string Out;
  if (Error E = S->Impl->encodeEnd(Out))
    return fail(MLBRIDGE_ERROR_SERDES, std::move(E));
  return giveBuffer(Out, OutData, OutSize);
}

void mlbridge_free(char *Data) { std::unique_ptr<char[]> Owned(Data); }

mlbridge_status mlbridge_serdes_decode_message(mlbridge_serdes *S,
                                               const char *Data, size_t Size,
                                               size_t *Consumed,
                                               mlbridge_message **Out) {
  if (!S || !Consumed || !Out || (Size && !Data))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  *Out = nullptr;
  *Consumed = 0;
  MemoryByteReader Reader(StringRef(Data, Size));
  while (true) {
    Expected<std::optional<Record>> R = S->Impl->decode(Reader);
    if (!R)
      return fail(MLBRIDGE_ERROR_SERDES, R.takeError());
    *Consumed = Reader.offset();
    if (!*R || std::holds_alternative<End>(**R))
      return fail(MLBRIDGE_END_OF_STREAM, "end of stream");
    if (auto *M = std::get_if<Message>(&**R)) {
      auto Handle = std::make_unique<mlbridge_message>();
      Handle->Msg = std::move(*M);
      for (const TensorValue &T : Handle->Msg.Tensors) {
        Handle->StringPtrs.emplace_back();
        Handle->StringLens.emplace_back();
        for (const std::string &Str : T.strings()) {
          Handle->StringPtrs.back().push_back(Str.data());
          Handle->StringLens.back().push_back(Str.size());
        }
      }
      *Out = Handle.release();
      return MLBRIDGE_OK;
    }
  }
}

void mlbridge_message_destroy(mlbridge_message *M) {
  std::unique_ptr<mlbridge_message> Owned(M);
}

mlbridge_message_kind mlbridge_message_get_kind(const mlbridge_message *M) {
  return static_cast<mlbridge_message_kind>(M->Msg.Kind);
}

int64_t mlbridge_message_get_id(const mlbridge_message *M) { return M->Msg.Id; }

size_t mlbridge_message_num_tensors(const mlbridge_message *M) {
  return M->Msg.Tensors.size();
}

mlbridge_status mlbridge_message_get_tensor(const mlbridge_message *M,
                                            size_t Index,
                                            mlbridge_tensor *Out) {
  if (!M || !Out)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, "null argument");
  if (Index >= M->Msg.Tensors.size())
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "tensor index " + Twine(Index) + " out of range (" +
                    Twine(M->Msg.Tensors.size()) + " tensors)");
  const TensorValue &T = M->Msg.Tensors[Index];
  Out->name = T.name().c_str();
  Out->type = static_cast<mlbridge_element_type>(T.type());
  Out->shape = T.shape().data();
  Out->rank = T.shape().size();
  Out->num_elements = T.getElementCount();
  bool IsString = T.type() == ElementType::String;
  Out->data = IsString ? nullptr : T.bytes().data();
  Out->strings = IsString ? M->StringPtrs[Index].data() : nullptr;
  Out->string_lengths = IsString ? M->StringLens[Index].data() : nullptr;
  return MLBRIDGE_OK;
}

} // extern "C"
