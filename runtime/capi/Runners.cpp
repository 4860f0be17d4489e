//===- Runners.cpp - C API: model runners and replies ---------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Every runner comes from createModelRunner (mlbridge/RunnerFactory.h), the
// factory the plugins use too; what only some runners can do (outcomes,
// spec changes) is asked of the runner's capabilities().
//
//===----------------------------------------------------------------------===//
#include "CAPIInternal.h"

#include "mlbridge/ModelRegistry.h"
#include "mlbridge/RunnerFactory.h"

#include <algorithm>
#include <cstring>

using namespace llvm;
using namespace mlbridge;
using namespace mlbridge::capi;

extern "C" {

/// The feature and advice specs of C, checked (every constructor and
/// mlbridge_runner_change_specs take them the same way).
static mlbridge_status takeSpecs(const mlbridge_tensor_spec *Features,
                                 size_t NumFeatures,
                                 const mlbridge_tensor_spec *Advice,
                                 std::vector<TensorSpec> &FeatureSpecs,
                                 std::optional<TensorSpec> &AdviceSpec) {
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

/// Refuses a timeout that is not positive, naming \p Fn.
static mlbridge_status checkTimeout(const char *Fn, int64_t TimeoutMs) {
  if (TimeoutMs <= 0)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                Twine(Fn) + ": the timeout must be positive, got " +
                    Twine(TimeoutMs) + " ms");
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_create_callback(
    const mlbridge_tensor_spec *Features, size_t NumFeatures,
    const mlbridge_tensor_spec *Advice, mlbridge_callback Callback,
    void *UserData, mlbridge_runner **Out) {
  if (!Out || !Callback || !Advice || (NumFeatures && !Features))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "mlbridge_runner_create_callback: null argument");
  *Out = nullptr;
  std::vector<TensorSpec> Specs;
  std::optional<TensorSpec> AdviceSpec;
  if (mlbridge_status S =
          takeSpecs(Features, NumFeatures, Advice, Specs, AdviceSpec))
    return S;
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
      CallbackModelRunner::create(std::move(Specs), std::move(*AdviceSpec),
                                  std::move(Policy));
  if (!R)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, R.takeError());
  auto Handle = std::make_unique<mlbridge_runner>();
  Handle->Runner = std::move(*R);
  *Out = Handle.release();
  return MLBRIDGE_OK;
}

/// Fails with \p Default, or MLBRIDGE_ERROR_UNSUPPORTED when \p E says the
/// runner or SerDes it needed is not built in (std::errc::not_supported).
static mlbridge_status failFrom(mlbridge_status Default, Error E) {
  mlbridge_status Status = Default;
  std::string Message;
  handleAllErrors(std::move(E), [&](const ErrorInfoBase &Info) {
    if (Info.convertToErrorCode() == std::errc::not_supported)
      Status = MLBRIDGE_ERROR_UNSUPPORTED;
    Message += (Message.empty() ? "" : "; ") + Info.message();
  });
  return fail(Status, Message);
}

/// Builds the runner \p Config names (createModelRunner, the one factory
/// every mlbridge program uses) and hands it to C in \p Out. A failure is
/// \p OnError, or MLBRIDGE_ERROR_UNSUPPORTED for a runner not built in.
static mlbridge_status createRunner(const RunnerConfig &Config,
                                    std::vector<TensorSpec> Features,
                                    TensorSpec Advice, mlbridge_status OnError,
                                    mlbridge_runner **Out) {
  Expected<std::unique_ptr<MLModelRunner>> R =
      createModelRunner(Config, std::move(Features), std::move(Advice));
  if (!R)
    return failFrom(OnError, R.takeError());
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
  if (mlbridge_status S = checkTimeout(Fn, TimeoutMs))
    return S;
  std::vector<TensorSpec> Specs;
  std::optional<TensorSpec> AdviceSpec;
  if (mlbridge_status S =
          takeSpecs(Features, NumFeatures, Advice, Specs, AdviceSpec))
    return S;
  Expected<SerDesKind> Kind = parseSerDesKind(SerDes);
  if (!Kind)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Kind.takeError());
  RunnerConfig C;
  if (Score) {
    Expected<TensorSpec> ScoreSpec = toSpec(Score);
    if (!ScoreSpec)
      return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                  "score: " + toString(ScoreSpec.takeError()));
    C.Score = std::move(*ScoreSpec);
  }
  C.Kind = RunnerKind::Pipe;
  C.KindGiven = true;
  C.Channel = Base;
  C.CreateChannel = true;
  C.SerDes = *Kind;
  C.SerDesGiven = true;
  C.Timeout = std::chrono::milliseconds(TimeoutMs);
  return createRunner(C, std::move(Specs), std::move(*AdviceSpec),
                      MLBRIDGE_ERROR_INVALID_ARGUMENT, Out);
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

/// Checks that \p Runner can do what \p Fn asks (\p Can), or fails naming
/// \p Fn.
static mlbridge_status checkCapable(mlbridge_runner *Runner, const char *Fn,
                                    bool MLModelRunner::Capabilities::*Can) {
  if (!Runner)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null runner");
  if (!(Runner->Runner->capabilities().*Can))
    return fail(MLBRIDGE_ERROR_UNSUPPORTED,
                Twine(Fn) + ": only a pipe runner (mlbridge_runner_create_pipe"
                            "*) has this");
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_send_outcome(mlbridge_runner *Runner,
                                             int64_t ObservationId,
                                             mlbridge_element_type Type,
                                             const void *Data, size_t Count) {
  static const char Fn[] = "mlbridge_runner_send_outcome";
  if (mlbridge_status S =
          checkCapable(Runner, Fn, &MLModelRunner::Capabilities::Outcomes))
    return S;
  MLModelRunner &R = *Runner->Runner;
  const std::optional<TensorSpec> Spec = R.scoreSpec();
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
  bool WasUsable = R.usable();
  if (Error E = R.sendOutcome(ObservationId, *V))
    // A usable runner that refuses and stays usable refused the arguments
    // (the id); anything that broke the channel is the model's side.
    return fail(WasUsable && R.usable() ? MLBRIDGE_ERROR_INVALID_ARGUMENT
                                        : MLBRIDGE_ERROR_MODEL,
                std::move(E));
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_change_specs(
    mlbridge_runner *Runner, const mlbridge_tensor_spec *Features,
    size_t NumFeatures, const mlbridge_tensor_spec *Advice) {
  static const char Fn[] = "mlbridge_runner_change_specs";
  if (mlbridge_status S =
          checkCapable(Runner, Fn, &MLModelRunner::Capabilities::SpecChanges))
    return S;
  if (!Advice || (NumFeatures && !Features))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null argument");
  std::vector<TensorSpec> Specs;
  std::optional<TensorSpec> AdviceSpec;
  if (mlbridge_status S =
          takeSpecs(Features, NumFeatures, Advice, Specs, AdviceSpec))
    return S;
  MLModelRunner &R = *Runner->Runner;
  if (Error E = R.changeSpecs(std::move(Specs), std::move(*AdviceSpec)))
    return fail(R.usable() ? MLBRIDGE_ERROR_INVALID_ARGUMENT
                           : MLBRIDGE_ERROR_MODEL,
                std::move(E));
  return MLBRIDGE_OK;
}

mlbridge_status mlbridge_runner_create_grpc(
    const mlbridge_tensor_spec *Features, size_t NumFeatures,
    const mlbridge_tensor_spec *Advice, const char *Address, int64_t TimeoutMs,
    mlbridge_runner **Out) {
  static const char Fn[] = "mlbridge_runner_create_grpc";
  if (!Out || !Advice || !Address || (NumFeatures && !Features))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": null argument");
  *Out = nullptr;
  if (mlbridge_status S = checkTimeout(Fn, TimeoutMs))
    return S;
  if (!*Address)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Twine(Fn) + ": empty address");
  std::vector<TensorSpec> Specs;
  std::optional<TensorSpec> AdviceSpec;
  if (mlbridge_status S =
          takeSpecs(Features, NumFeatures, Advice, Specs, AdviceSpec))
    return S;
  RunnerConfig C;
  C.Kind = RunnerKind::Grpc;
  C.KindGiven = true;
  C.Address = Address;
  C.Timeout = std::chrono::milliseconds(TimeoutMs);
  return createRunner(C, std::move(Specs), std::move(*AdviceSpec),
                      MLBRIDGE_ERROR_MODEL, Out);
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
  return takeSpecs(Features, NumFeatures, Advice, FeatureSpecs, AdviceSpec);
}

/// The in-process runner \p Kind over the model file \p Path. The specs were
/// checked before, so a failure is the model's (file, format, fit):
/// MLBRIDGE_ERROR_MODEL.
static mlbridge_status createInProcess(RunnerKind Kind, const char *Path,
                                       int32_t IntraOpThreads,
                                       std::vector<TensorSpec> Features,
                                       TensorSpec Advice,
                                       mlbridge_runner **Out) {
  RunnerConfig C;
  C.Kind = Kind;
  C.KindGiven = true;
  C.Model = Path;
  C.ModelIsFile = true;
  C.IntraOpThreads = IntraOpThreads;
  return createRunner(C, std::move(Features), std::move(Advice),
                      MLBRIDGE_ERROR_MODEL, Out);
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
  return createInProcess(RunnerKind::Onnx, ModelPath, IntraOpThreads,
                         std::move(Specs), std::move(*AdviceSpec), Out);
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
  return createInProcess(RunnerKind::TFAOT, SharedObjectPath, 0,
                         std::move(Specs), std::move(*AdviceSpec), Out);
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
  // Found first, so that a name or path that is wrong is the caller's
  // mistake (invalid argument) and what the model does is the model's.
  Expected<RegisteredModel> Model =
      findModel(NameOrPath, RegistryDir ? RegistryDir : "");
  if (!Model)
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT, Model.takeError());
  RunnerConfig C;
  C.Model = NameOrPath;
  C.RegistryDir = RegistryDir ? RegistryDir : "";
  return createRunner(C, std::move(Specs), std::move(*AdviceSpec),
                      MLBRIDGE_ERROR_MODEL, Out);
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

mlbridge_status mlbridge_runner_model_metadata(const mlbridge_runner *Runner,
                                               const char *Key, char *Out,
                                               size_t Capacity,
                                               size_t *OutLength, int *Found) {
  if (!Runner || !Key || !OutLength || !Found || (Capacity && !Out))
    return fail(MLBRIDGE_ERROR_INVALID_ARGUMENT,
                "null runner, key, output, length or found flag");
  std::optional<std::string> Value = Runner->Runner->modelMetadata(Key);
  *Found = Value.has_value();
  *OutLength = Value ? Value->size() : 0;
  if (*OutLength + 1 > Capacity)
    return fail(MLBRIDGE_ERROR_BUFFER_TOO_SMALL,
                "the value of '" + Twine(Key) + "' has " + Twine(*OutLength) +
                    " bytes and a NUL, the buffer holds " + Twine(Capacity));
  if (Value)
    std::memcpy(Out, Value->data(), Value->size());
  Out[*OutLength] = '\0';
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

} // extern "C"
