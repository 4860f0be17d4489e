//===- TFAOTModelRunner.cpp - TensorFlow AOT-compiled models --------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/TFAOTModelRunner.h"

#include "mlbridge/ModelRegistry.h"
#include "mlbridge/ModelSpecs.h"

#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <dlfcn.h>

using namespace llvm;

namespace mlbridge {

namespace {
/// The symbol suffixes of TFAOTFunctions' members, in order.
constexpr const char *SymbolSuffixes[] = {
    "abi_version", "model_name",   "num_args",    "arg_name",    "arg_type",
    "arg_rank",    "arg_shape",    "num_results", "result_name", "result_type",
    "result_rank", "result_shape", "create",      "destroy",     "arg_data",
    "result_data", "run"};
} // namespace

/// One dlopen() of a model's shared object. dlopen() counts references, so
/// runners loading the same file share one copy of it, unloaded when the
/// last Library closes.
class TFAOTModelRunner::Library {
public:
  explicit Library(void *Handle) : Handle(Handle) {}
  ~Library() { dlclose(Handle); }
  Library(const Library &) = delete;
  Library &operator=(const Library &) = delete;

  void *symbol(const std::string &Name) const {
    return dlsym(Handle, Name.c_str());
  }

private:
  void *Handle;
};

static Error aotError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message);
}

/// Reads input or output \p I from the model's tables (\p Role names which).
static Expected<TensorSpec> readSpec(const char *Name, int32_t Type,
                                     int32_t Rank, const int64_t *Shape,
                                     StringRef Role, int32_t I,
                                     StringRef Where) {
  if (!Name || Rank < 0 || (Rank > 0 && !Shape))
    return aotError(Where + ": the model's table of " + Role + " " + Twine(I) +
                    " is incomplete; rebuild it with `mlbridge aot`");
  if (Type < 0 || Type >= static_cast<int32_t>(ElementType::String))
    return aotError(Where + ": " + Role + " '" + Name +
                    "' has an unknown element type number " + Twine(Type));
  Expected<TensorSpec> S =
      TensorSpec::create(Name, static_cast<ElementType>(Type),
                         ArrayRef<int64_t>(Shape, static_cast<size_t>(Rank)));
  if (!S)
    return aotError(Where + ": " + Role + " '" + Name +
                    "': " + toString(S.takeError()));
  // Only the leading dimension may be dynamic: the batch (set_batch).
  for (size_t D = 1; D < S->rank(); ++D)
    if (S->shape()[D] == DynamicDim)
      return aotError(Where + ": " + Role + " '" + Name +
                      "' has a dynamic dimension " + Twine(D) +
                      "; only the leading one (the batch) may be");
  return S;
}

/// True if \p S's leading dimension is the dynamic batch.
static bool isBatched(const TensorSpec &S) {
  return S.rank() > 0 && S.shape()[0] == DynamicDim;
}

/// The bytes of one row of \p S if it is batched, else of all of it.
static size_t rowBytes(const TensorSpec &S) {
  ArrayRef<int64_t> Shape = S.shape();
  if (isBatched(S))
    Shape = Shape.drop_front();
  return static_cast<size_t>(*shapeElementCount(Shape)) * elementSize(S.type());
}

TFAOTModelRunner::TFAOTModelRunner(PrivateTag, std::vector<TensorSpec> Features,
                                   TensorSpec Advice)
    : MLModelRunner(std::move(Features), Advice),
      ResultSpec(std::move(Advice)) {}

TFAOTModelRunner::~TFAOTModelRunner() = default;

Expected<std::unique_ptr<MLModelRunner>>
TFAOTModelRunner::load(StringRef SharedObjectPath,
                       std::vector<TensorSpec> Features, TensorSpec Advice) {
  std::string Path = SharedObjectPath.str();
  std::string Where = "TF AOT model " + Path;
  // dlopen() runs the object's constructors: check who controls the file
  // first, and load the path checked (absolute, so never a library-path
  // search), not one a changed link could redirect.
  Expected<std::string> Trusted = checkTrustedFile(Path, "TF AOT model");
  if (!Trusted)
    return aotError(toString(Trusted.takeError()));
  // RTLD_LOCAL: two models export the same symbol names.
  void *Handle = dlopen(Trusted->c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!Handle) {
    const char *Msg = dlerror();
    return aotError("cannot load " + Where + ": " +
                    (Msg ? Msg : "unknown dlopen error"));
  }
  auto Lib = std::make_shared<Library>(Handle);
  TFAOTFunctions Fns;
  void **Slots = reinterpret_cast<void **>(&Fns);
  // The required functions, then the optional SetArgData, SetBatch,
  // SetArgRows and ErrorMessage.
  static_assert(sizeof(TFAOTFunctions) ==
                    (sizeof(SymbolSuffixes) / sizeof(SymbolSuffixes[0]) + 4) *
                        sizeof(void *),
                "TFAOTFunctions and SymbolSuffixes disagree");
  // The version comes first: a library of another version may lack the rest.
  void *Version = Lib->symbol("mlbridge_aot_abi_version");
  if (!Version)
    return aotError(Where +
                    " is not an mlbridge AOT model: it has no "
                    "mlbridge_aot_abi_version symbol (build models with "
                    "`mlbridge aot SAVED_MODEL --name NAME`)");
  uint32_t Got = reinterpret_cast<uint32_t (*)()>(Version)();
  if (Got != TFAOTAbiVersion)
    return aotError(Where + " has mlbridge AOT ABI version " + Twine(Got) +
                    " but this mlbridge reads version " +
                    Twine(TFAOTAbiVersion) +
                    "; rebuild the model with this mlbridge's `mlbridge aot`");
  std::string Missing;
  for (size_t I = 0; I < std::size(SymbolSuffixes); ++I) {
    std::string Symbol = std::string("mlbridge_aot_") + SymbolSuffixes[I];
    // POSIX guarantees that object and function pointers convert.
    void *Address = Lib->symbol(Symbol);
    if (!Address)
      Missing += (Missing.empty() ? "" : ", ") + Symbol;
    std::memcpy(&Slots[I], &Address, sizeof(void *));
  }
  if (!Missing.empty())
    return aotError(Where + " lacks the mlbridge AOT symbols " + Missing +
                    "; rebuild it with `mlbridge aot`");
  void *SetArgData = Lib->symbol("mlbridge_aot_set_arg_data");
  std::memcpy(&Fns.SetArgData, &SetArgData, sizeof(void *));
  void *SetBatch = Lib->symbol("mlbridge_aot_set_batch");
  std::memcpy(&Fns.SetBatch, &SetBatch, sizeof(void *));
  void *SetArgRows = Lib->symbol("mlbridge_aot_set_arg_rows");
  std::memcpy(&Fns.SetArgRows, &SetArgRows, sizeof(void *));
  void *ErrorMessage = Lib->symbol("mlbridge_aot_error_message");
  std::memcpy(&Fns.ErrorMessage, &ErrorMessage, sizeof(void *));
  return createImpl(std::move(Lib), Fns, std::move(Features), std::move(Advice),
                    Where);
}

Expected<std::unique_ptr<MLModelRunner>>
TFAOTModelRunner::create(const TFAOTFunctions &Model,
                         std::vector<TensorSpec> Features, TensorSpec Advice) {
  const void *const *Slots = reinterpret_cast<const void *const *>(&Model);
  for (size_t I = 0; I < std::size(SymbolSuffixes); ++I)
    if (!Slots[I])
      return aotError(Twine("linked TF AOT model: function ") +
                      SymbolSuffixes[I] + " is not set");
  std::string Where =
      std::string("linked TF AOT model '") + Model.ModelName() + "'";
  if (Model.AbiVersion() != TFAOTAbiVersion)
    return aotError(Where + " has mlbridge AOT ABI version " +
                    Twine(Model.AbiVersion()) + " but this mlbridge reads " +
                    Twine(TFAOTAbiVersion) +
                    "; rebuild it with `mlbridge aot`");
  return createImpl(nullptr, Model, std::move(Features), std::move(Advice),
                    Where);
}

/// A model with a dynamic batch has set_batch and the batch in an input; a
/// dynamic feature needs a batched input, since the rows are all a model can
/// take at run time.
static Error checkBatch(const TFAOTFunctions &Fns,
                        ArrayRef<TensorSpec> Features,
                        ArrayRef<TensorSpec> Inputs, ArrayRef<size_t> Binding,
                        const TensorSpec &Output, StringRef Where) {
  bool AnyBatched = llvm::any_of(Inputs, isBatched);
  if (Fns.SetArgRows) {
    // Inputs with rows of their own: read in place, one answer.
    if (Fns.SetBatch || !Fns.SetArgData || isBatched(Output))
      return aotError(Where + ": it has set_arg_rows but also set_batch, or "
                              "no set_arg_data, or an output with rows; "
                              "rebuild it");
  } else if ((AnyBatched || isBatched(Output)) && !Fns.SetBatch) {
    return aotError(Where +
                    ": its tables give a dynamic batch (a leading -1) but it "
                    "has no set_batch; rebuild it with `mlbridge compile`");
  }
  if (isBatched(Output) && !AnyBatched)
    return aotError(Where + ": output '" + Output.name() +
                    "' has a dynamic batch but no input has");
  std::string Problems;
  for (size_t I = 0; I < Inputs.size(); ++I) {
    const TensorSpec &F = Features[Binding[I]];
    if (!F.isDynamic() || isBatched(Inputs[I]))
      continue;
    std::string Shape, FeatureShape;
    writeShapeJSON(Inputs[I].shape(), Shape);
    writeShapeJSON(F.shape(), FeatureShape);
    Problems += "\n  - feature '" + F.name() + "' has the dynamic shape " +
                FeatureShape + " but model input '" + Inputs[I].name() +
                "' has the static shape " + Shape;
  }
  if (Problems.empty())
    return Error::success();
  return aotError(
      Where + " cannot take dynamic features:" + Problems + "\n  " +
      (Fns.SetBatch
           ? "only its batched inputs (a leading -1) take any number of rows"
           : "it has no dynamic batch (no set_batch): compile the ONNX model "
             "with a symbolic leading dimension and without --dim for one"));
}

Expected<std::unique_ptr<MLModelRunner>> TFAOTModelRunner::createImpl(
    std::shared_ptr<Library> Lib, const TFAOTFunctions &Fns,
    std::vector<TensorSpec> Features, TensorSpec Advice, StringRef Where) {
  if (Error E = checkSpecs(Features, Advice))
    return E;
  const char *ModelName = Fns.ModelName();
  std::string Name = ModelName ? ModelName : "?";

  std::vector<TensorSpec> Inputs;
  for (int32_t I = 0, N = Fns.NumArgs(); I < N; ++I) {
    Expected<TensorSpec> S =
        readSpec(Fns.ArgName(I), Fns.ArgType(I), Fns.ArgRank(I),
                 Fns.ArgShape(I), "input", I, Where);
    if (!S)
      return S.takeError();
    Inputs.push_back(std::move(*S));
  }
  Expected<std::vector<size_t>> Binding =
      bindModelInputs(Features, Inputs, Name);
  if (!Binding)
    return Binding.takeError();

  // The advice is the model output of the same name (fetch_<name>).
  int32_t ResultIndex = -1;
  std::optional<TensorSpec> Output;
  std::string OutputNames;
  for (int32_t I = 0, N = Fns.NumResults(); I < N; ++I) {
    Expected<TensorSpec> S =
        readSpec(Fns.ResultName(I), Fns.ResultType(I), Fns.ResultRank(I),
                 Fns.ResultShape(I), "output", I, Where);
    if (!S)
      return S.takeError();
    OutputNames += (OutputNames.empty() ? "" : ", ") + S->name();
    if (S->name() == Advice.name()) {
      ResultIndex = I;
      Output = std::move(*S);
    }
  }
  if (!Output)
    return aotError(Where + " has no output named '" + Advice.name() +
                    "' for the advice (its outputs: " + OutputNames + ")");
  if (Error E = checkModelOutput(Advice, *Output, Name))
    return E;
  if (Error E = checkBatch(Fns, Features, Inputs, *Binding, *Output, Where))
    return E;

  auto R = std::make_unique<TFAOTModelRunner>(PrivateTag(), std::move(Features),
                                              std::move(Advice));
  R->Instance = std::unique_ptr<mlbridge_aot_instance, InstanceDeleter>(
      Fns.Create(), InstanceDeleter{Fns.Destroy});
  if (!R->Instance)
    return aotError(Where + ": creating an instance failed (out of memory, "
                            "or its tables name a tensor its XLA class "
                            "lacks; rebuild it with `mlbridge aot`)");
  for (size_t I = 0; I < Inputs.size(); ++I) {
    Arg A;
    A.Feature = (*Binding)[I];
    A.Bytes = rowBytes(Inputs[I]);
    A.Batched = isBatched(Inputs[I]);
    A.Buffer = static_cast<char *>(
        Fns.ArgData(R->Instance.get(), static_cast<int32_t>(I)));
    // An input with rows of its own has no buffer of the instance's.
    if (!A.Buffer && !(Fns.SetArgRows && A.Batched))
      return aotError(Where + ": input '" + Inputs[I].name() +
                      "' has no buffer");
    R->Args.push_back(A);
  }
  R->Lib = std::move(Lib);
  R->Fns = Fns;
  R->Run = Fns.Run;
  R->ResultData = Fns.ResultData;
  R->SetArgData = Fns.SetArgData;
  R->HasBatch = Fns.SetBatch != nullptr;
  R->HasArgRows = Fns.SetArgRows != nullptr;
  R->Name = std::move(Name);
  R->Inputs = std::move(Inputs);
  R->ResultIndex = ResultIndex;
  R->ResultBytes = rowBytes(*Output);
  R->ResultBatched = isBatched(*Output);
  R->ResultSpec = std::move(*Output);
  return std::unique_ptr<MLModelRunner>(std::move(R));
}

Error TFAOTModelRunner::setBatchFrom(ArrayRef<TensorRef> Features) {
  // The rows are the leading dimension of every feature bound to a batched
  // input; they must agree.
  std::optional<size_t> First;
  int64_t Rows = 0;
  for (size_t I = 0; I < Inputs.size(); ++I) {
    if (!Args[I].Batched)
      continue;
    const TensorRef &F = Features[Args[I].Feature];
    if (F.shape().size() != Inputs[I].rank())
      return aotError("model '" + Name + "' input '" + Inputs[I].name() +
                      "' has rank " + Twine(Inputs[I].rank()) + ", feature '" +
                      F.name() + "' has rank " + Twine(F.shape().size()));
    if (!First) {
      First = I;
      Rows = F.shape()[0];
    } else if (F.shape()[0] != Rows) {
      return aotError("model '" + Name +
                      "': the batched inputs disagree on "
                      "the rows: feature '" +
                      Features[Args[*First].Feature].name() + "' has " +
                      Twine(Rows) + ", feature '" + F.name() + "' has " +
                      Twine(F.shape()[0]));
    }
  }
  if (!First || Rows == Batch)
    return Error::success();
  if (Fns.SetBatch(Instance.get(), Rows) != 0)
    return aotError("model '" + Name + "' cannot take a batch of " +
                    Twine(Rows) + " rows (out of memory)");
  Batch = Rows;
  // The instance's own buffers of the batched inputs moved.
  for (size_t I = 0; I < Inputs.size(); ++I)
    if (Args[I].Batched)
      Args[I].Buffer = static_cast<char *>(
          Fns.ArgData(Instance.get(), static_cast<int32_t>(I)));
  return Error::success();
}

Error TFAOTModelRunner::bind(ArrayRef<TensorRef> Features) {
  BoundEpoch = 0;
  bool AllBound = !HasBatch;
  if (HasBatch)
    if (Error E = setBatchFrom(Features))
      return E;
  for (size_t I = 0, N = Args.size(); I < N; ++I) {
    Arg &A = Args[I];
    const TensorRef &F = Features[A.Feature];
    if (HasArgRows && A.Batched) {
      if (Error E = bindRows(I, F))
        return E;
      continue;
    }
    size_t Bytes = A.Batched ? A.Bytes * static_cast<size_t>(Batch) : A.Bytes;
    if (F.bytes().size() != Bytes)
      return aotError("model '" + Name + "' input '" + Inputs[I].name() +
                      "' takes " + Twine(Bytes) + " bytes, feature '" +
                      F.name() + "' has " + Twine(F.bytes().size()));
    if (!Bytes)
      continue;
    const char *Data = F.bytes().data();
    // Zero-copy, as MLGO's release mode: the model reads the feature buffer
    // itself (TensorValue storage is 64-byte aligned). Checked again
    // whenever a buffer may have moved (bufferEpoch()).
    if (SetArgData) {
      if (Data == A.Bound)
        continue;
      if (SetArgData(Instance.get(), static_cast<int32_t>(I), Data) == 0) {
        A.Bound = Data;
        continue;
      }
      if (A.Bound) // back to the instance's own buffer
        SetArgData(Instance.get(), static_cast<int32_t>(I), nullptr);
      A.Bound = nullptr;
    }
    // Models built before set_arg_data: copy the features in (a few
    // microseconds even for 200 KB).
    std::memcpy(A.Buffer, Data, Bytes);
    AllBound = false;
  }
  // The instance reads the feature buffers themselves until one moves.
  if (AllBound)
    BoundEpoch = bufferEpoch();
  return Error::success();
}

Error TFAOTModelRunner::bindRows(size_t I, const TensorRef &F) {
  Arg &A = Args[I];
  int64_t Rows = F.shape().empty() ? 0 : F.shape()[0];
  if (F.shape().size() != Inputs[I].rank() ||
      F.bytes().size() != A.Bytes * static_cast<size_t>(Rows))
    return aotError("model '" + Name + "' input '" + Inputs[I].name() +
                    "' takes rows of " + Twine(A.Bytes) + " bytes, feature '" +
                    F.name() + "' has " + Twine(F.bytes().size()) +
                    " bytes in " + Twine(Rows) + " rows");
  const int32_t Index = static_cast<int32_t>(I);
  if (Rows != A.Rows) {
    if (Fns.SetArgRows(Instance.get(), Index, Rows) != 0)
      return aotError("model '" + Name + "' cannot take " + Twine(Rows) +
                      " rows for input '" + Inputs[I].name() + "'");
    A.Rows = Rows;
  }
  const char *Data = Rows ? F.bytes().data() : nullptr;
  if (Data != A.Bound) {
    if (SetArgData(Instance.get(), Index, Data) != 0)
      return aotError("model '" + Name + "' cannot read feature '" + F.name() +
                      "' in place (misaligned)");
    A.Bound = Data;
  }
  return Error::success();
}

Error TFAOTModelRunner::runFailed() const {
  if (Fns.ErrorMessage)
    if (const char *Why = Fns.ErrorMessage(Instance.get()))
      return aotError("model '" + Name + "' failed to run: " + Why);
  return aotError("model '" + Name + "' failed to run");
}

Error TFAOTModelRunner::noResult() const {
  return aotError("model '" + Name + "' returned no buffer for output '" +
                  ResultSpec.name() + "'");
}

Expected<bool> TFAOTModelRunner::evaluateScalarInto(MutableArrayRef<char> Out) {
  // The output's type is the advice's (checked at load); one unbatched
  // element of it is the whole answer. The per-decision path: what it reads
  // sits in a line or two, and it calls nothing but the model.
  if (ResultBatched || ResultBytes != Out.size())
    return false;
  if (BoundEpoch != bufferEpoch())
    if (Error E = bind(featureRefs()))
      return E;
  if (Run(Instance.get()) != 0)
    return runFailed();
  const void *Data = ResultData(Instance.get(), ResultIndex);
  if (!Data)
    return noResult();
  std::memcpy(Out.data(), Data, Out.size());
  return true;
}

Expected<TensorValue>
TFAOTModelRunner::evaluateUntyped(ArrayRef<TensorRef> Features) {
  if (BoundEpoch != bufferEpoch())
    if (Error E = bind(Features))
      return E;
  if (Run(Instance.get()) != 0)
    return runFailed();
  const void *Data = ResultData(Instance.get(), ResultIndex);
  if (!Data)
    return noResult();
  const TensorSpec &Advice = adviceSpec();
  std::vector<int64_t> Shape(ResultSpec.shape().begin(),
                             ResultSpec.shape().end());
  size_t Bytes = ResultBytes;
  if (ResultBatched) {
    Shape[0] = Batch;
    Bytes *= static_cast<size_t>(Batch);
  }
  // Compatible static shapes have the same element count: answer in the
  // advice's. Otherwise in the model's, which evaluate() checks against it.
  if (!Advice.isDynamic() &&
      shapeElementCount(Shape) == Advice.getElementCount())
    Shape.assign(Advice.shape().begin(), Advice.shape().end());
  return TensorValue::fromBytes(
      Advice.name(), Advice.type(), Shape,
      ArrayRef<char>(static_cast<const char *>(Data), Bytes));
}

} // namespace mlbridge
