//===- OnnxModelRunner.cpp - Ask an ONNX model, in process ----------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// This is the only file that includes ONNX Runtime's C++ header. It is
// included with ORT_API_MANUAL_INIT so that nothing calls into the library
// before its C API version has been checked: with the automatic
// initialization, a library older than the headers leaves a null API pointer
// that crashes on first use.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/OnnxModelRunner.h"

#include "mlbridge/ModelRegistry.h"
#include "mlbridge/ModelSpecs.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#define ORT_API_MANUAL_INIT
#include "onnxruntime_cxx_api.h"
#undef ORT_API_MANUAL_INIT

#include <cstdio>
#include <cstdlib>

using namespace llvm;

namespace mlbridge {

static Error makeError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message.str());
}

std::string getOnnxRuntimeVersion() {
  return OrtGetApiBase()->GetVersionString();
}

unsigned getOnnxRuntimeHeaderApiVersion() { return ORT_API_VERSION; }

Error checkOnnxRuntimeVersion(unsigned NeededApiVersion) {
  if (NeededApiVersion == 0)
    NeededApiVersion = ORT_API_VERSION;
  if (OrtGetApiBase()->GetApi(NeededApiVersion))
    return Error::success();
  // The C API version is the library's minor version ("1.N.M").
  return makeError("ONNX Runtime " + getOnnxRuntimeVersion() +
                   " is too old: mlbridge needs its C API version " +
                   Twine(NeededApiVersion) + " (ONNX Runtime 1." +
                   Twine(NeededApiVersion) +
                   " or newer); install a newer onnxruntime (`make setup` "
                   "links the wheel's library into .deps/onnxruntime/lib)");
}

/// Checks the API version once and then hands it to the C++ API.
static Error initOrtApi() {
  static const OrtApi *Api = [] {
    const OrtApi *A = OrtGetApiBase()->GetApi(ORT_API_VERSION);
    if (A)
      Ort::InitApi(A);
    return A;
  }();
  if (Api)
    return Error::success();
  return checkOnnxRuntimeVersion(ORT_API_VERSION);
}

/// The process-wide ONNX Runtime environment. Ort::Env must exist once per
/// process and outlive every session: each model keeps a reference.
static Expected<std::shared_ptr<Ort::Env>> getProcessEnv() {
  struct Holder {
    std::shared_ptr<Ort::Env> Env;
    std::string Error;
  };
  static const Holder H = [] {
    Holder H;
    // The PyPI builds of ONNX Runtime (1.29 and later) collect telemetry by
    // default: a device id and an offline event store under ~/.cache, and an
    // upload. A compiler must not do that on every run (nor pay for it: a
    // few ms per process), so it is off unless the user set the variable.
    // ONNX Runtime reads it once, when the first environment is created.
    setenv("ORT_DISABLE_TELEMETRY", "1", /*overwrite=*/0);
    try {
      // Only errors: library code must stay quiet; failures reach the
      // caller as exceptions turned into llvm::Error.
      H.Env = std::make_shared<Ort::Env>(ORT_LOGGING_LEVEL_ERROR, "mlbridge");
      H.Env->DisableTelemetryEvents();
    } catch (const Ort::Exception &E) {
      H.Error = E.what();
    }
    return H;
  }();
  if (!H.Env)
    return makeError("cannot create the ONNX Runtime environment: " + H.Error);
  return H.Env;
}

/// ONNX element types that mlbridge has, and back.
static std::optional<ElementType> fromOrtType(ONNXTensorElementDataType T) {
  switch (T) {
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    return ElementType::Int8;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    return ElementType::UInt8;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    return ElementType::Int16;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
    return ElementType::UInt16;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    return ElementType::Int32;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
    return ElementType::UInt32;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
    return ElementType::Int64;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64:
    return ElementType::UInt64;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    return ElementType::Float;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
    return ElementType::Double;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
    return ElementType::Bool;
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING:
    return ElementType::String;
  default:
    return std::nullopt;
  }
}

static ONNXTensorElementDataType toOrtType(ElementType T) {
  switch (T) {
  case ElementType::Int8:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
  case ElementType::UInt8:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
  case ElementType::Int16:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16;
  case ElementType::UInt16:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16;
  case ElementType::Int32:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
  case ElementType::UInt32:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32;
  case ElementType::Int64:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  case ElementType::UInt64:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64;
  case ElementType::Float:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  case ElementType::Double:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
  case ElementType::Bool:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL;
  case ElementType::String:
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING;
  }
  llvm_unreachable("unknown element type");
}

/// Names ONNX element types mlbridge does not have, for error messages.
static std::string ortTypeName(ONNXTensorElementDataType T) {
  switch (T) {
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    return "float16";
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
    return "bfloat16";
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64:
    return "complex64";
  case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128:
    return "complex128";
  default:
    if (std::optional<ElementType> E = fromOrtType(T))
      return elementTypeName(*E).str();
    return "ONNX element type " + std::to_string(static_cast<int>(T));
  }
}

struct OnnxModel::Session {
  /// First member, so that it is released after the session.
  std::shared_ptr<Ort::Env> Env;
  /// Run() is documented as safe to call from several threads at once on one
  /// session; the C++ wrapper just does not mark it const.
  mutable Ort::Session S{nullptr};
  Ort::MemoryInfo Cpu{nullptr};
};

OnnxModel::OnnxModel(PrivateTag, std::string Path, OnnxRunnerOptions Options)
    : Path(std::move(Path)), Options(std::move(Options)),
      Sess(std::make_unique<Session>()) {}

OnnxModel::~OnnxModel() = default;

/// Describes input or output \p Index of \p S as a TensorSpec, or adds why it
/// cannot be one to \p Problems.
template <typename GetName, typename GetType>
static std::optional<TensorSpec>
describeValue(StringRef Kind, size_t Index, GetName Name, GetType Type,
              std::vector<std::string> &Problems) {
  Ort::AllocatorWithDefaultOptions Alloc;
  std::string N = Name(Index, Alloc).get();
  Ort::TypeInfo Info = Type(Index);
  if (Info.GetONNXType() != ONNX_TYPE_TENSOR) {
    Problems.push_back(Kind.str() + " '" + N +
                       "' is not a tensor (sequences, maps and optionals are "
                       "not supported)");
    return std::nullopt;
  }
  auto TI = Info.GetTensorTypeAndShapeInfo();
  ONNXTensorElementDataType OrtT = TI.GetElementType();
  std::optional<ElementType> T = fromOrtType(OrtT);
  if (!T) {
    Problems.push_back(Kind.str() + " '" + N + "' has element type " +
                       ortTypeName(OrtT) + ", which mlbridge does not support");
    return std::nullopt;
  }
  std::vector<int64_t> Shape = TI.GetShape();
  // Symbolic ("batch") and unknown dimensions come back as -1.
  for (int64_t &D : Shape)
    if (D < 0)
      D = DynamicDim;
  Expected<TensorSpec> Spec = TensorSpec::create(N, *T, Shape);
  if (!Spec) {
    Problems.push_back(Kind.str() + " '" + N +
                       "': " + toString(Spec.takeError()));
    return std::nullopt;
  }
  return std::move(*Spec);
}

std::string ortFormatCopyPath(StringRef OnnxPath) {
  SmallString<256> Copy(OnnxPath);
  if (sys::path::extension(Copy) == ".onnx")
    sys::path::replace_extension(Copy, "");
  Copy += ".onnxruntime-" + getOnnxRuntimeVersion() + ".ort";
  return std::string(Copy);
}

/// The file to give ONNX Runtime for the model at \p Path: its ORT-format
/// copy (ortFormatCopyPath, named for this library's version) when that is
/// not older than the model file, else the model itself. The copy holds the
/// graph already checked and optimized, so the session loads in about 60% of
/// the time (9 ms instead of 16 for the register allocator's agents), on
/// every compiler process.
static std::string fileToLoad(StringRef Path) {
  std::string Copy = ortFormatCopyPath(Path);
  sys::fs::file_status Model, Optimized;
  if (Copy == Path || sys::fs::status(Path, Model) ||
      sys::fs::status(Copy, Optimized) ||
      !sys::fs::is_regular_file(Optimized) ||
      Optimized.getLastModificationTime() < Model.getLastModificationTime())
    return Path.str();
  return Copy;
}

Expected<std::shared_ptr<const OnnxModel>>
OnnxModel::load(StringRef Path, const OnnxRunnerOptions &Options) {
  if (Error E = initOrtApi())
    return E;
  if (Options.IntraOpThreads < 1 || Options.InterOpThreads < 1)
    return makeError("ONNX model '" + Path +
                     "': IntraOpThreads and InterOpThreads must be at least 1");
  // ONNX Runtime's own message for a missing file is vague about which file.
  if (std::error_code EC = sys::fs::access(Path, sys::fs::AccessMode::Exist))
    return makeError("cannot open ONNX model '" + Path + "': " + EC.message());
  if (sys::fs::is_directory(Path))
    return makeError("cannot open ONNX model '" + Path +
                     "': it is a directory, not an .onnx file");
  // Only a file no other user controls decides what the compiler does.
  const std::string File = fileToLoad(Path);
  Expected<std::string> Trusted = checkTrustedFile(
      File, File == Path ? "ONNX model" : "ORT-format copy of an ONNX model");
  if (!Trusted)
    return Trusted.takeError();
  Expected<std::shared_ptr<Ort::Env>> Env = getProcessEnv();
  if (!Env)
    return Env.takeError();

  auto Model = std::make_shared<OnnxModel>(PrivateTag(), Path.str(), Options);
  Model->SessionFile = File;
  std::vector<std::string> Problems;
  try {
    Ort::SessionOptions SO;
    SO.SetIntraOpNumThreads(Options.IntraOpThreads);
    SO.SetInterOpNumThreads(Options.InterOpThreads);
    if (Options.InterOpThreads == 1)
      SO.SetExecutionMode(ExecutionMode::ORT_SEQUENTIAL);
    Model->Sess->Env = *Env;
    Model->Sess->S = Ort::Session(**Env, Trusted->c_str(), SO);
    Model->Sess->Cpu =
        Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    Ort::Session &S = Model->Sess->S;
    for (size_t I = 0, N = S.GetInputCount(); I < N; ++I)
      if (std::optional<TensorSpec> Spec = describeValue(
              "input", I,
              [&](size_t J, OrtAllocator *A) {
                return S.GetInputNameAllocated(J, A);
              },
              [&](size_t J) { return S.GetInputTypeInfo(J); }, Problems))
        Model->Inputs.push_back(std::move(*Spec));
    for (size_t I = 0, N = S.GetOutputCount(); I < N; ++I)
      if (std::optional<TensorSpec> Spec = describeValue(
              "output", I,
              [&](size_t J, OrtAllocator *A) {
                return S.GetOutputNameAllocated(J, A);
              },
              [&](size_t J) { return S.GetOutputTypeInfo(J); }, Problems))
        Model->Outputs.push_back(std::move(*Spec));
    Ort::AllocatorWithDefaultOptions Allocator;
    Ort::ModelMetadata Meta = S.GetModelMetadata();
    for (const Ort::AllocatedStringPtr &Key :
         Meta.GetCustomMetadataMapKeysAllocated(Allocator))
      Model->Metadata[Key.get()] =
          Meta.LookupCustomMetadataMapAllocated(Key.get(), Allocator).get();
  } catch (const Ort::Exception &E) {
    if (File != Path)
      return makeError("cannot load ONNX model '" + Path +
                       "' from its ORT-format copy '" + Model->SessionFile +
                       "': " + E.what() +
                       " (remove the copy to load the model itself, or "
                       "register the model again to write it anew)");
    return makeError("cannot load ONNX model '" + Path + "': " + E.what() +
                     " (is it an ONNX model file?)");
  }
  if (!Problems.empty()) {
    std::string Message = "ONNX model '" + Path.str() + "' cannot be used:";
    for (const std::string &P : Problems)
      Message += "\n  - " + P;
    return makeError(Message);
  }
  if (Model->Outputs.empty())
    return makeError("ONNX model '" + Path + "' has no outputs");
  return std::shared_ptr<const OnnxModel>(std::move(Model));
}

std::optional<std::string> OnnxModel::metadata(StringRef Key) const {
  auto It = Metadata.find(Key);
  if (It == Metadata.end())
    return std::nullopt;
  return It->second;
}

struct OnnxModelRunner::Bindings {
  /// For each model input, the feature that feeds it.
  std::vector<size_t> FeatureOfInput;
  /// The model's input names, in model order (views of its specs).
  std::vector<const char *> InputNames;
  /// The input tensors, over the runner's feature buffers.
  std::vector<Ort::Value> InputValues;
  /// What each input value was made over, to see when a buffer moved.
  std::vector<const void *> BoundData;
  std::vector<std::vector<int64_t>> BoundShapes;
  /// The advice output's name.
  const char *OutputName = nullptr;
};

OnnxModelRunner::OnnxModelRunner(PrivateTag,
                                 std::shared_ptr<const OnnxModel> Model,
                                 std::vector<TensorSpec> Features,
                                 TensorSpec Advice,
                                 std::unique_ptr<Bindings> Bound)
    : MLModelRunner(std::move(Features), std::move(Advice)),
      Model(std::move(Model)), Bound(std::move(Bound)) {}

OnnxModelRunner::~OnnxModelRunner() = default;

Expected<std::unique_ptr<OnnxModelRunner>>
OnnxModelRunner::create(StringRef ModelPath, std::vector<TensorSpec> Features,
                        TensorSpec Advice, OnnxRunnerOptions Options) {
  Expected<std::shared_ptr<const OnnxModel>> Model =
      OnnxModel::load(ModelPath, Options);
  if (!Model)
    return Model.takeError();
  return create(std::move(*Model), std::move(Features), std::move(Advice));
}

Expected<std::unique_ptr<OnnxModelRunner>>
OnnxModelRunner::create(std::shared_ptr<const OnnxModel> Model,
                        std::vector<TensorSpec> Features, TensorSpec Advice) {
  if (!Model)
    return makeError("OnnxModelRunner::create: no model (null pointer)");
  if (Error E = checkSpecs(Features, Advice))
    return E;
  Expected<std::vector<size_t>> Binding =
      bindModelInputs(Features, Model->inputs(), Model->path());
  if (!Binding)
    return Binding.takeError();

  // The advice output: named by the options, else like the advice, else the
  // only one.
  ArrayRef<TensorSpec> Outputs = Model->outputs();
  StringRef Wanted = Model->options().OutputName;
  const TensorSpec *Out = nullptr;
  auto ByName = [&](StringRef Name) {
    const TensorSpec *It = llvm::find_if(
        Outputs, [&](const TensorSpec &O) { return O.name() == Name; });
    return It == Outputs.end() ? nullptr : It;
  };
  if (!Wanted.empty())
    Out = ByName(Wanted);
  else if (!(Out = ByName(Advice.name())) && Outputs.size() == 1)
    Out = &Outputs.front();
  if (!Out) {
    std::string Names;
    for (const TensorSpec &O : Outputs)
      Names += (Names.empty() ? "'" : ", '") + O.name() + "'";
    return makeError("ONNX model '" + Model->path() +
                     "' has no output named '" +
                     (Wanted.empty() ? StringRef(Advice.name()) : Wanted) +
                     "' (its outputs: " + Names +
                     "); name the advice like one of them or set "
                     "OnnxRunnerOptions::OutputName");
  }
  if (Error E = checkModelOutput(Advice, *Out, Model->path()))
    return E;

  auto Bound = std::make_unique<Bindings>();
  Bound->FeatureOfInput = std::move(*Binding);
  for (const TensorSpec &In : Model->inputs()) {
    Bound->InputNames.push_back(In.name().c_str());
    Bound->InputValues.emplace_back(nullptr);
  }
  Bound->BoundData.assign(Bound->InputNames.size(), nullptr);
  Bound->BoundShapes.resize(Bound->InputNames.size());
  Bound->OutputName = Out->name().c_str();
  return std::make_unique<OnnxModelRunner>(PrivateTag(), std::move(Model),
                                           std::move(Features),
                                           std::move(Advice), std::move(Bound));
}

/// The shape a feature is fed as: the model's own when it is static (the
/// compiler may send the same elements as, say, [1] for a model's [] or
/// [1,33] for its [33]), else the feature's concrete shape.
static Expected<ArrayRef<int64_t>> feedShape(const TensorSpec &Input,
                                             const TensorRef &Feature,
                                             StringRef ModelPath) {
  if (Input.isDynamic())
    return Feature.shape();
  uint64_t Want = *Input.getElementCount();
  if (Feature.getElementCount() != Want) {
    std::string Shape;
    writeShapeJSON(Feature.shape(), Shape);
    return makeError(
        "ONNX model '" + ModelPath + "': feature '" + Feature.name() +
        "' has shape " + Shape + " (" + Twine(Feature.getElementCount()) +
        " elements) but input '" + Input.name() + "' needs " + Twine(Want));
  }
  return Input.shape();
}

/// Copies the advice out of ONNX Runtime's output, in the advice's shape
/// when that is static (the model's may differ but has the same elements).
static Expected<TensorValue>
readAdvice(const Ort::Value &V, const TensorSpec &Advice, StringRef ModelPath) {
  if (!V.IsTensor())
    return makeError("ONNX model '" + ModelPath + "': advice output '" +
                     Advice.name() + "' is not a tensor");
  auto Info = V.GetTensorTypeAndShapeInfo();
  std::optional<ElementType> T = fromOrtType(Info.GetElementType());
  if (!T || *T != Advice.type())
    return makeError("ONNX model '" + ModelPath + "' answered " +
                     ortTypeName(Info.GetElementType()) + " for advice '" +
                     Advice.name() + "', which is " +
                     elementTypeName(Advice.type()));
  std::vector<int64_t> Shape = Info.GetShape();
  size_t Count = Info.GetElementCount();
  if (!Advice.isDynamic()) {
    if (*Advice.getElementCount() != Count)
      return makeError("ONNX model '" + ModelPath + "' answered " +
                       Twine(Count) + " elements for advice '" + Advice.name() +
                       "', which has " + Twine(*Advice.getElementCount()));
    Shape.assign(Advice.shape().begin(), Advice.shape().end());
  }
  if (*T == ElementType::String) {
    std::vector<std::string> Strings;
    Strings.reserve(Count);
    for (size_t I = 0; I < Count; ++I)
      Strings.push_back(V.GetStringTensorElement(I));
    return TensorValue::fromStrings(Advice.name(), Shape, std::move(Strings));
  }
  const char *Data = static_cast<const char *>(V.GetTensorRawData());
  return TensorValue::fromBytes(Advice.name(), *T, Shape,
                                ArrayRef<char>(Data, Count * elementSize(*T)));
}

Expected<TensorValue>
OnnxModelRunner::evaluateUntyped(ArrayRef<TensorRef> Features) {
  const OnnxModel::Session &Sess = Model->session();
  ArrayRef<TensorSpec> Inputs = Model->inputs();
  try {
    for (size_t I = 0; I < Inputs.size(); ++I) {
      const TensorRef &F = Features[Bound->FeatureOfInput[I]];
      Expected<ArrayRef<int64_t>> Shape =
          feedShape(Inputs[I], F, Model->path());
      if (!Shape)
        return Shape.takeError();
      Ort::Value &V = Bound->InputValues[I];
      if (F.type() == ElementType::String) {
        // ONNX Runtime keeps its own std::string copies: no zero-copy here.
        Ort::AllocatorWithDefaultOptions Alloc;
        V = Ort::Value::CreateTensor(Alloc, Shape->data(), Shape->size(),
                                     ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING);
        std::vector<const char *> Ptrs;
        Ptrs.reserve(F.strings().size());
        for (const std::string &S : F.strings())
          Ptrs.push_back(S.c_str());
        V.FillStringTensor(Ptrs.data(), Ptrs.size());
        continue;
      }
      // Zero-copy: the tensor views the feature buffer, which stays put
      // unless a dynamic feature is resized, so it is rebuilt only then.
      static char EmptyTensorData[8];
      const char *Data = F.bytes().empty() ? EmptyTensorData : F.bytes().data();
      if (V && Bound->BoundData[I] == Data &&
          ArrayRef<int64_t>(Bound->BoundShapes[I]) == *Shape)
        continue;
      // ONNX Runtime never writes to input tensors.
      V = Ort::Value::CreateTensor(Sess.Cpu, const_cast<char *>(Data),
                                   F.bytes().size(), Shape->data(),
                                   Shape->size(), toOrtType(F.type()));
      Bound->BoundData[I] = Data;
      Bound->BoundShapes[I].assign(Shape->begin(), Shape->end());
    }
    std::vector<Ort::Value> Out =
        Sess.S.Run(Ort::RunOptions{nullptr}, Bound->InputNames.data(),
                   Bound->InputValues.data(), Bound->InputValues.size(),
                   &Bound->OutputName, 1);
    return readAdvice(Out.front(), adviceSpec(), Model->path());
  } catch (const Ort::Exception &E) {
    return makeError("ONNX model '" + Model->path() +
                     "' failed to run: " + E.what());
  }
}

} // namespace mlbridge
