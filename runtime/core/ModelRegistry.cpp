//===- ModelRegistry.cpp - Finding a model by name or path ----------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/ModelRegistry.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace llvm;

namespace mlbridge {

namespace {

/// The model.json layout version this reader understands.
constexpr int64_t ModelJSONFormat = 1;
constexpr StringLiteral ModelJSONName = "model.json";
constexpr StringLiteral SidecarSuffix = ".specs.json";
/// How often a reader retries while a writer replaces the model it reads.
constexpr int ReadAttempts = 10;

Error makeError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message);
}

std::optional<ModelKind> parseModelKind(StringRef Name) {
  if (Name == "onnx")
    return ModelKind::Onnx;
  if (Name == "tfaot")
    return ModelKind::TFAOT;
  if (Name == "native")
    return ModelKind::Native;
  if (Name == "ir2vec-vocab")
    return ModelKind::IR2VecVocab;
  return std::nullopt;
}

Expected<json::Value> readJSONFile(StringRef Path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
      MemoryBuffer::getFile(Path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!Buffer)
    return makeError("cannot read " + Path + ": " +
                     Buffer.getError().message());
  Expected<json::Value> Value = json::parse((*Buffer)->getBuffer());
  if (!Value)
    return makeError(Path +
                     " is not valid JSON: " + toString(Value.takeError()));
  return Value;
}

/// Reads the spec list \p Key of \p O; a single spec object is accepted as a
/// list of one (as Python's read_specs_file does).
Expected<std::vector<TensorSpec>> readSpecList(const json::Object &O,
                                               StringRef Key, StringRef Where) {
  const json::Value *V = O.get(Key);
  if (!V)
    return makeError(Where + " has no '" + Key + "' list of tensor specs");
  std::vector<TensorSpec> Specs;
  if (V->getAsObject()) {
    Expected<TensorSpec> Spec = TensorSpec::fromJSON(*V);
    if (!Spec)
      return makeError(Where + ": " + Key + ": " + toString(Spec.takeError()));
    Specs.push_back(std::move(*Spec));
    return Specs;
  }
  const json::Array *A = V->getAsArray();
  if (!A)
    return makeError(Where + ": '" + Key + "' must be a list of tensor specs");
  for (size_t I = 0; I < A->size(); ++I) {
    Expected<TensorSpec> Spec = TensorSpec::fromJSON((*A)[I]);
    if (!Spec)
      return makeError(Where + ": " + Key + "[" + Twine(I) +
                       "]: " + toString(Spec.takeError()));
    Specs.push_back(std::move(*Spec));
  }
  return Specs;
}

/// Checks that \p Path is an ELF shared object (what `mlbridge aot` builds).
Error checkSharedObject(StringRef Path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
      MemoryBuffer::getFileSlice(Path, /*MapSize=*/18, /*Offset=*/0);
  if (!Buffer)
    return makeError("cannot read " + Path + ": " +
                     Buffer.getError().message());
  StringRef Head = (*Buffer)->getBuffer();
  if (Head.size() < 18 || !Head.starts_with("\x7f"
                                            "ELF"))
    return makeError(Path + " is not a TF AOT model: it is not an ELF shared "
                            "object (build one with `mlbridge aot`)");
  // e_type (ET_DYN = 3) is at offset 16 in the byte order of EI_DATA.
  bool Little = Head[5] == 1;
  unsigned Type = Little ? (uint8_t(Head[16]) | uint8_t(Head[17]) << 8)
                         : (uint8_t(Head[16]) << 8 | uint8_t(Head[17]));
  if (Type != 3)
    return makeError(Path + " is not a TF AOT model: it is an ELF file but "
                            "not a shared object (build one with `mlbridge "
                            "aot`)");
  return Error::success();
}

/// `dir/NAME.so` -> `dir/NAME.specs.json`.
std::string sidecarPath(StringRef SharedObject) {
  SmallString<256> Path(SharedObject);
  sys::path::replace_extension(Path, "");
  Path += SidecarSuffix;
  return std::string(Path);
}

Expected<RegisteredModel> modelAtPath(StringRef Path) {
  if (!sys::fs::is_regular_file(Path))
    return makeError("no model file " + Path +
                     " (it does not exist or is not a file)");
  if (Expected<std::string> Trusted = checkTrustedFile(Path, "model file");
      !Trusted)
    return Trusted.takeError();
  RegisteredModel Model;
  Model.Name = Path.str();
  SmallString<256> Absolute(Path);
  if (std::error_code EC = sys::fs::make_absolute(Absolute))
    return makeError("cannot make " + Path + " absolute: " + EC.message());
  Model.Path = std::string(Absolute);
  StringRef Ext = sys::path::extension(Path);
  if (Ext == ".onnx") {
    Model.Kind = ModelKind::Onnx;
    return Model;
  }
  if (Ext == ".json") {
    Model.Kind = ModelKind::IR2VecVocab;
    return Model;
  }
  if (Ext != ".so")
    return makeError("cannot tell which runner loads " + Path +
                     ": expected an ONNX model (.onnx), a TF AOT shared "
                     "object (.so, built by `mlbridge aot`) or an IR2Vec "
                     "vocabulary (.json)");
  Model.Kind = ModelKind::TFAOT;
  if (Error E = checkSharedObject(Path))
    return E;
  std::string Sidecar = sidecarPath(Model.Path);
  if (!sys::fs::exists(Sidecar))
    return Model; // The runner reads the specs from the model's ABI.
  Expected<json::Value> Value = readJSONFile(Sidecar);
  if (!Value)
    return Value.takeError();
  std::string Where = "the specs file " + Sidecar;
  const json::Object *O = Value->getAsObject();
  if (!O)
    return makeError(Where + " is not a JSON object");
  // `mlbridge compile` writes kind native: the same ABI, another compiler.
  if (std::optional<StringRef> Kind = O->getString("kind")) {
    if (*Kind == "native")
      Model.Kind = ModelKind::Native;
    else if (*Kind != "tfaot")
      return makeError(Where + " is for a model of kind '" + *Kind +
                       "', not 'tfaot' or 'native'");
  }
  Expected<std::vector<TensorSpec>> Inputs =
      readSpecList(*O, "features", Where);
  if (!Inputs)
    return Inputs.takeError();
  Expected<std::vector<TensorSpec>> Outputs = readSpecList(*O, "advice", Where);
  if (!Outputs)
    return Outputs.takeError();
  Model.Inputs = std::move(*Inputs);
  Model.Outputs = std::move(*Outputs);
  return Model;
}

std::string namesText(ArrayRef<std::string> Names) {
  if (Names.empty())
    return "it is empty";
  return "it has: " + join(Names, ", ");
}

} // namespace

StringRef modelKindName(ModelKind Kind) {
  switch (Kind) {
  case ModelKind::Onnx:
    return "onnx";
  case ModelKind::TFAOT:
    return "tfaot";
  case ModelKind::Native:
    return "native";
  case ModelKind::IR2VecVocab:
    return "ir2vec-vocab";
  }
  llvm_unreachable("unknown ModelKind");
}

std::string defaultModelRegistryDir() {
  if (const char *Env = std::getenv(ModelRegistryEnv); Env && *Env)
    return Env;
  SmallString<256> Dir;
  if (const char *Xdg = std::getenv("XDG_DATA_HOME");
      Xdg && sys::path::is_absolute(Xdg)) {
    Dir = Xdg;
  } else {
    if (!sys::path::home_directory(Dir))
      return "";
    sys::path::append(Dir, ".local", "share");
  }
  sys::path::append(Dir, "mlbridge", "models");
  return std::string(Dir);
}

Error checkModelName(StringRef Name) {
  bool Valid =
      !Name.empty() && !Name.starts_with(".") && llvm::all_of(Name, [](char C) {
        return isAlnum(C) || C == '_' || C == '.' || C == '-';
      });
  if (Valid)
    return Error::success();
  return makeError("invalid model name '" + Name +
                   "': use letters, digits, '_', '.' and '-' (not starting "
                   "with '.'), e.g. 'inliner-v2'");
}

/// Reads model.json's text \p Text; the model file's size is left to the
/// caller (in \p RecordedSize, -1 when not recorded).
static Expected<RegisteredModel> parseModelJSON(StringRef Text,
                                                StringRef ModelDir,
                                                StringRef Where,
                                                int64_t &RecordedSize) {
  Expected<json::Value> Value = json::parse(Text);
  if (!Value)
    return makeError(Where +
                     " is not valid JSON: " + toString(Value.takeError()));
  const json::Object *O = Value->getAsObject();
  if (!O)
    return makeError(Where + " is not a JSON object");
  auto Missing = [&](StringRef Key, StringRef What) {
    return makeError(Where + ": '" + Key + "' is missing or not a " + What);
  };

  if (const json::Value *Format = O->get("format")) {
    std::optional<int64_t> N = Format->getAsInteger();
    if (!N)
      return Missing("format", "integer");
    if (*N > ModelJSONFormat)
      return makeError(Where + " has format " + Twine(*N) +
                       ", newer than this mlbridge reads (" +
                       Twine(ModelJSONFormat) + "); upgrade mlbridge");
  }
  RegisteredModel Model;
  std::optional<StringRef> Name = O->getString("name");
  if (!Name)
    return Missing("name", "string");
  StringRef DirName = sys::path::filename(ModelDir.rtrim('/'));
  if (*Name != DirName)
    return makeError(Where + " names the model '" + *Name + "', not '" +
                     DirName + "'");
  Model.Name = Name->str();

  std::optional<StringRef> KindName = O->getString("kind");
  if (!KindName)
    return Missing("kind", "string");
  std::optional<ModelKind> Kind = parseModelKind(*KindName);
  if (!Kind)
    return makeError(Where + ": unknown kind '" + *KindName +
                     "' (expected onnx, tfaot or native); an IR2Vec "
                     "vocabulary is kind ir2vec-vocab");
  Model.Kind = *Kind;

  if (const json::Value *Task = O->get("task")) {
    // null: registered without a task (a model the registry could not place).
    if (Task->kind() != json::Value::Null) {
      std::optional<StringRef> TaskName = Task->getAsString();
      if (!TaskName)
        return Missing("task", "string or null");
      Model.Task = TaskName->str();
    }
  }

  std::optional<StringRef> File = O->getString("file");
  if (!File)
    return Missing("file", "string");
  // The file must stay inside the model's folder.
  if (File->empty() || File->contains('/') || *File == "." || *File == "..")
    return makeError(Where + ": 'file' must be a file name inside " + ModelDir);
  SmallString<256> FilePath(ModelDir);
  sys::path::append(FilePath, *File);
  if (std::error_code EC = sys::fs::make_absolute(FilePath))
    return makeError("cannot make " + FilePath + " absolute: " + EC.message());
  Model.Path = std::string(FilePath);

  // A vocabulary has no tensors; Python writes it without spec lists.
  if (Model.Kind != ModelKind::IR2VecVocab || O->get("features") ||
      O->get("advice")) {
    Expected<std::vector<TensorSpec>> Inputs =
        readSpecList(*O, "features", Where);
    if (!Inputs)
      return Inputs.takeError();
    Expected<std::vector<TensorSpec>> Outputs =
        readSpecList(*O, "advice", Where);
    if (!Outputs)
      return Outputs.takeError();
    Model.Inputs = std::move(*Inputs);
    Model.Outputs = std::move(*Outputs);
  }

  RecordedSize = -1;
  if (const json::Value *Recorded = O->get("size")) {
    std::optional<int64_t> N = Recorded->getAsInteger();
    if (!N || *N < 0)
      return Missing("size", "non-negative integer");
    RecordedSize = *N;
  }
  return Model;
}

Expected<RegisteredModel> readRegisteredModel(StringRef ModelDir) {
  SmallString<256> JSONPath(ModelDir);
  sys::path::append(JSONPath, ModelJSONName);
  auto ReadText = [&]() -> Expected<std::string> {
    ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
        MemoryBuffer::getFile(JSONPath, /*IsText=*/false,
                              /*RequiresNullTerminator=*/false);
    if (!Buffer)
      return makeError("cannot read " + JSONPath + ": " +
                       Buffer.getError().message());
    return (*Buffer)->getBuffer().str();
  };
  // `mlbridge models register --force` may swap the model's folder between
  // reading model.json and looking at the file: read model.json again and
  // retry (a bounded number of times) until both agree.
  std::string Problem;
  for (int Attempt = 0; Attempt < ReadAttempts; ++Attempt) {
    Expected<std::string> Text = ReadText();
    if (!Text)
      return Text.takeError();
    int64_t RecordedSize = -1;
    Expected<RegisteredModel> Model =
        parseModelJSON(*Text, ModelDir, JSONPath, RecordedSize);
    if (!Model)
      return Model.takeError();
    uint64_t Size = 0;
    std::error_code SizeEC = sys::fs::file_size(Model->Path, Size);
    Expected<std::string> Again = ReadText();
    if (!Again)
      return Again.takeError();
    if (*Again != *Text) {
      Problem = (ModelDir + " kept changing while it was read").str();
      continue;
    }
    if (SizeEC) {
      Problem = "the model file " + Model->Path + " of '" + Model->Name +
                "' is missing (" + SizeEC.message() +
                "); register it again with --force";
      continue;
    }
    if (RecordedSize >= 0 && static_cast<uint64_t>(RecordedSize) != Size) {
      Problem =
          "the model file " + Model->Path + " of '" + Model->Name + "' has " +
          std::to_string(Size) + " bytes but was registered with " +
          std::to_string(RecordedSize) + "; register it again with --force";
      continue;
    }
    return Model;
  }
  return makeError(Problem);
}

std::string describeUser(unsigned Uid) {
  struct passwd Pw;
  struct passwd *Found = nullptr;
  char Buf[4096];
  if (::getpwuid_r(static_cast<uid_t>(Uid), &Pw, Buf, sizeof(Buf), &Found) ==
          0 &&
      Found)
    return "'" + std::string(Found->pw_name) + "' (uid " + std::to_string(Uid) +
           ")";
  return "uid " + std::to_string(Uid);
}

Expected<std::string> checkTrustedFile(StringRef Path, StringRef What) {
  std::string Given = Path.str();
  char *Resolved = ::realpath(Given.c_str(), nullptr);
  if (!Resolved)
    return makeError("cannot use " + What + " " + Path + ": " +
                     std::strerror(errno));
  std::string Real(Resolved);
  std::free(Resolved);
  uid_t Me = ::geteuid();
  std::string Named = What.str() + " " + Given;
  if (Real != Given)
    Named += " (" + Real + ")";
  struct stat St;
  if (::stat(Real.c_str(), &St) != 0)
    return makeError("cannot use " + Named + ": " + std::strerror(errno));
  if (!S_ISREG(St.st_mode))
    return makeError(Named + " is not a regular file");
  auto Mode = [](mode_t M) {
    char Buf[16];
    std::snprintf(Buf, sizeof(Buf), "%04o", static_cast<unsigned>(M & 07777));
    return std::string(Buf);
  };
  if (St.st_uid != Me && St.st_uid != 0)
    return makeError(
        "refusing to load " + Named + ": it belongs to user " +
        describeUser(St.st_uid) + ", not to " + describeUser(Me) +
        " who runs this or to root, so its owner would decide what runs here; "
        "copy it into a folder of yours (or chown it) and pass that path");
  if (St.st_mode & (S_IWGRP | S_IWOTH))
    return makeError("refusing to load " + Named +
                     ": its group or others may "
                     "write it (mode " +
                     Mode(St.st_mode) + "); fix: chmod go-w " + Real);
  // Every folder above it: whoever may write one may replace the file.
  StringRef Dir = sys::path::parent_path(Real);
  while (!Dir.empty()) {
    std::string D = Dir.str();
    if (::stat(D.c_str(), &St) != 0)
      return makeError("cannot use " + Named + ": cannot read its folder " + D +
                       ": " + std::strerror(errno));
    if (St.st_uid != Me && St.st_uid != 0)
      return makeError("refusing to load " + Named + ": its folder " + D +
                       " belongs to user " + describeUser(St.st_uid) +
                       ", who could replace the file; move it into a folder "
                       "of yours or root's");
    if ((St.st_mode & (S_IWGRP | S_IWOTH)) && !(St.st_mode & S_ISVTX))
      return makeError("refusing to load " + Named + ": its folder " + D +
                       " may be written by its group or others (mode " +
                       Mode(St.st_mode) +
                       "), who could replace the file; "
                       "fix: chmod go-w " +
                       D + ", or move the file");
    if (D == "/")
      break;
    Dir = sys::path::parent_path(Dir);
  }
  return Real;
}

std::vector<std::string> listRegisteredModels(StringRef RegistryDir) {
  std::vector<std::string> Names;
  std::error_code EC;
  for (sys::fs::directory_iterator It(RegistryDir, EC), End; It != End && !EC;
       It.increment(EC)) {
    StringRef Name = sys::path::filename(It->path());
    if (Name.starts_with("."))
      continue; // Staging and removed folders, the lock file.
    SmallString<256> JSONPath(It->path());
    sys::path::append(JSONPath, ModelJSONName);
    if (sys::fs::is_regular_file(JSONPath))
      Names.push_back(Name.str());
  }
  llvm::sort(Names);
  return Names;
}

static Expected<RegisteredModel> findAnyModel(StringRef NameOrPath,
                                              StringRef RegistryDir) {
  if (NameOrPath.empty())
    return makeError("no model given: pass a registered model name or the "
                     "path of a .onnx or .so file");
  if (NameOrPath.contains('/'))
    return modelAtPath(NameOrPath);

  std::string Registry =
      RegistryDir.empty() ? defaultModelRegistryDir() : RegistryDir.str();
  // A name is only ever a registered name: a file of that name in the
  // working folder is not loaded implicitly (whoever can write there could
  // plant one), the error says how to name it.
  auto InWorkingFolder = [&]() -> std::string {
    if (!sys::fs::is_regular_file(NameOrPath))
      return "";
    return " (a file '" + NameOrPath.str() +
           "' is in the working folder: a name without '/' is never taken "
           "as a file; pass ./" +
           NameOrPath.str() + " to use it)";
  };
  if (Error NameErr = checkModelName(NameOrPath))
    return makeError("'" + NameOrPath + "' is not a registered model name: " +
                     toString(std::move(NameErr)) + InWorkingFolder());
  if (Registry.empty())
    return makeError("cannot find the model registry (no home folder); set " +
                     Twine(ModelRegistryEnv) + " to the registry folder");

  SmallString<256> ModelDir(Registry);
  sys::path::append(ModelDir, NameOrPath);
  SmallString<256> JSONPath(ModelDir);
  sys::path::append(JSONPath, ModelJSONName);
  if (sys::fs::exists(JSONPath))
    return readRegisteredModel(ModelDir);
  return makeError("no model named '" + NameOrPath + "' in the registry " +
                   Registry + " (" + namesText(listRegisteredModels(Registry)) +
                   "); register one with `mlbridge models register NAME "
                   "FILE`, or pass the path of a .onnx or .so file" +
                   InWorkingFolder());
}

Expected<RegisteredModel> findModel(StringRef NameOrPath, StringRef RegistryDir,
                                    ArrayRef<ModelKind> Kinds) {
  Expected<RegisteredModel> Model = findAnyModel(NameOrPath, RegistryDir);
  if (!Model || llvm::is_contained(Kinds, Model->Kind))
    return Model;
  std::string Expected;
  for (ModelKind K : Kinds)
    Expected += (Expected.empty() ? "" : " or ") + modelKindName(K).str();
  std::string Hint = Model->Kind == ModelKind::IR2VecVocab
                         ? " (an IR2Vec vocabulary is read by "
                           "mlbridge-phase-order's -ir2vec-vocab option, not "
                           "run as a model)"
                         : "";
  return makeError("'" + NameOrPath + "' is of kind '" +
                   modelKindName(Model->Kind) + "', not " + Expected + Hint);
}

} // namespace mlbridge
