//===- ModelRegistry.h - Finding a model by name or path --------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The C++ side of the model registry that `mlbridge models register` fills
/// (docs/models.md): a plugin option names a model, findModel() says which
/// file it is, which runner loads it and which tensors it reads and writes.
///
/// The registry is a folder with one subfolder per model name, each holding
/// the model file and a `model.json`. findModel() only reads; the Python side
/// writes each model atomically, so a reader never sees half of one.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_MODELREGISTRY_H
#define MLBRIDGE_MODELREGISTRY_H

#include "mlbridge/TensorSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlbridge {

/// What a registered file is: a model for an in-process runner, or data a
/// pass reads.
enum class ModelKind {
  Onnx,  ///< An ONNX model file, for OnnxModelRunner.
  TFAOT, ///< A TF AOT shared object from `mlbridge aot`, for TFAOTModelRunner.
  /// A shared object `mlbridge compile` built from an ONNX model through MLIR
  /// (docs/native.md): the same C ABI, loaded by TFAOTModelRunner.
  Native,
  /// An IR2Vec vocabulary (LLVM's JSON) from `mlbridge ir2vec vocab
  /// --register`, read by mlbridge-phase-order; not a model a runner loads.
  IR2VecVocab,
};

/// The kinds a model runner loads (findModel()'s default).
inline constexpr ModelKind RunnableModelKinds[] = {
    ModelKind::Onnx, ModelKind::TFAOT, ModelKind::Native};

/// "onnx", "tfaot", "native" or "ir2vec-vocab", as in model.json.
llvm::StringRef modelKindName(ModelKind Kind);

/// A model found by findModel().
struct RegisteredModel {
  /// The registered name, or the path as given when found by path.
  std::string Name;
  ModelKind Kind;
  /// The model file.
  std::string Path;
  /// The model's inputs (the features it reads); empty when unknown.
  std::vector<TensorSpec> Inputs;
  /// The model's outputs (its advice); empty when unknown.
  std::vector<TensorSpec> Outputs;
  /// What the model is for: the pass family it answers ("inliner",
  /// "phase-order", "regalloc-priority", "mlir-loop-unroll", ...), as
  /// model.json's "task" records it; empty when unknown (a model given by
  /// path, or registered before tasks were recorded).
  std::string Task;
};

/// The environment variable naming the registry folder.
inline constexpr const char *ModelRegistryEnv = "MLBRIDGE_MODEL_REGISTRY";

/// The registry folder: $MLBRIDGE_MODEL_REGISTRY if set, else
/// $XDG_DATA_HOME/mlbridge/models if XDG_DATA_HOME is absolute, else
/// ~/.local/share/mlbridge/models (the same rule as Python's
/// mlbridge.models.default_registry_dir()).
std::string defaultModelRegistryDir();

/// Checks that \p Name can name a registered model: one or more of
/// `A-Za-z0-9_.-`, not starting with '.'. The error says what is allowed.
llvm::Error checkModelName(llvm::StringRef Name);

/// Reads the model registered as the folder \p ModelDir (its `model.json`).
/// Errors name the file and what is wrong with it.
llvm::Expected<RegisteredModel> readRegisteredModel(llvm::StringRef ModelDir);

/// The names registered in \p RegistryDir, sorted; empty if the folder does
/// not exist.
std::vector<std::string> listRegisteredModels(llvm::StringRef RegistryDir);

/// Checks that the file at \p Path may be loaded into this process (as code
/// by dlopen(), or as a model or vocabulary that decides what the compiler
/// does), as ssh checks its keys: after following links it is a regular file
/// that belongs to this process's effective user or to root and that neither
/// its group nor others may write, and so is every folder above it (a folder
/// writable by others is accepted only with the sticky bit, as /tmp, where
/// others cannot replace a file they do not own). \p What names the file in
/// errors ("TF AOT model"), which say who owns what and the fix. Returns the
/// resolved path: load that one, so that a link changed after the check
/// cannot point elsewhere.
llvm::Expected<std::string> checkTrustedFile(llvm::StringRef Path,
                                             llvm::StringRef What);

/// The user name of \p Uid for messages: "name (uid N)", or "uid N".
std::string describeUser(unsigned Uid);

/// Finds a model by registered name or by path.
///
/// \p NameOrPath with a '/' is a path (`./model.onnx` for one in the working
/// folder); the file must pass checkTrustedFile(). Otherwise it is a name
/// looked up in \p RegistryDir (default: defaultModelRegistryDir()), and
/// nothing else: a file of that name in the working folder is never loaded
/// implicitly (the error says to write `./NAME` if that is meant). A model
/// given by path gets its kind from the extension: `.onnx` (Inputs/Outputs
/// empty: the runner reads them from the model), or `.so` (a shared object; its
/// specs come from the `<stem>.specs.json` sidecar `mlbridge aot` writes, or
/// are left empty for the runner to read from the model's ABI).
///
/// A path ending in `.json` is an IR2Vec vocabulary.
///
/// \p Kinds are the kinds the caller can use (default: the runnable ones); a
/// model of another kind is an error naming its kind and the ones expected.
/// A registered `ir2vec-vocab` has no tensor specs (Inputs/Outputs empty).
///
/// Errors name the registry folder searched and list the names it has.
llvm::Expected<RegisteredModel>
findModel(llvm::StringRef NameOrPath, llvm::StringRef RegistryDir = "",
          llvm::ArrayRef<ModelKind> Kinds = RunnableModelKinds);

} // namespace mlbridge

#endif // MLBRIDGE_MODELREGISTRY_H
