//===- OnnxModelRunner.h - Ask an ONNX model, in process --------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// An MLModelRunner over ONNX Runtime: the model runs inside the compiler,
/// without Python or IPC.
///
/// Binding rule (MLGO's versioning rule, see ModelSpecs.h): every model input
/// is fed by the compiler feature of the same name, whatever the order of
/// either list; features the model does not know are not fed. A model input
/// without a feature of its name, or with another element type or shape, is
/// refused when the runner is created, with one error listing every
/// difference. The advice is the model output named like the advice spec, or
/// the only output of a single-output model.
///
/// Thread safety: an OnnxModel (one ONNX Runtime session) is immutable after
/// loading and serves any number of threads at once; each thread uses its own
/// OnnxModelRunner (its own feature buffers) made from the shared model.
///
/// This header does not include ONNX Runtime's: code that uses the runner
/// needs no ONNX Runtime include path.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_ONNXMODELRUNNER_H
#define MLBRIDGE_ONNXMODELRUNNER_H

#include "mlbridge/MLModelRunner.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlbridge {

/// How an ONNX model is loaded and run.
struct OnnxRunnerOptions {
  /// Threads ONNX Runtime may use inside one evaluation. 1 (the default)
  /// creates no thread pool, which suits a compiler that is itself
  /// multithreaded or asks for small decisions.
  int IntraOpThreads = 1;
  /// Threads for running independent graph nodes in parallel (1: sequential).
  int InterOpThreads = 1;
  /// The model output that answers as advice; empty means the output named
  /// like the advice spec, or the only output of a single-output model.
  std::string OutputName;
};

/// The version of the ONNX Runtime library loaded in this process ("1.21.0").
std::string getOnnxRuntimeVersion();

/// Where OnnxModel::load() looks for an ORT-format copy of the model at
/// \p OnnxPath: beside it, `<stem>.onnxruntime-<version>.ort` for this
/// process's ONNX Runtime version (`mlbridge models register` writes one for
/// every ONNX model it registers). load() reads the copy instead of the
/// model when it exists and is not older than the model; a copy for another
/// ONNX Runtime version is never read.
std::string ortFormatCopyPath(llvm::StringRef OnnxPath);

/// The C API version of the ONNX Runtime headers mlbridge was built with.
unsigned getOnnxRuntimeHeaderApiVersion();

/// Checks that the loaded ONNX Runtime provides C API version
/// \p NeededApiVersion (by default the version of the headers mlbridge was
/// built with); the error names the found and the needed version.
llvm::Error checkOnnxRuntimeVersion(unsigned NeededApiVersion = 0);

/// A loaded ONNX model: one ONNX Runtime session and the specs of its inputs
/// and outputs. Immutable after load(); share it between threads with the
/// shared_ptr that load() returns.
class OnnxModel {
public:
  /// Loads the model at \p Path. The error names the file and says what is
  /// wrong (missing, not an ONNX model, an element type mlbridge does not
  /// support, too old an ONNX Runtime).
  static llvm::Expected<std::shared_ptr<const OnnxModel>>
  load(llvm::StringRef Path, const OnnxRunnerOptions &Options = {});

  ~OnnxModel();
  OnnxModel(const OnnxModel &) = delete;
  OnnxModel &operator=(const OnnxModel &) = delete;

  /// The file the model was loaded from.
  const std::string &path() const { return Path; }
  /// The file ONNX Runtime read: path(), or its ORT-format copy.
  const std::string &sessionFile() const { return SessionFile; }
  /// The model's inputs, in the model's order; ONNX symbolic and unknown
  /// dimensions are DynamicDim.
  llvm::ArrayRef<TensorSpec> inputs() const { return Inputs; }
  /// The model's outputs, in the model's order.
  llvm::ArrayRef<TensorSpec> outputs() const { return Outputs; }
  /// The options the model was loaded with.
  const OnnxRunnerOptions &options() const { return Options; }
  /// The value of \p Key in the model's metadata_props, if it has one.
  std::optional<std::string> metadata(llvm::StringRef Key) const;

  /// ONNX Runtime's own objects; defined in OnnxModelRunner.cpp only.
  struct Session;
  /// The session; for OnnxModelRunner.
  const Session &session() const { return *Sess; }

private:
  /// Keeps the constructor to load() while allowing std::make_shared.
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

public:
  /// Use load().
  OnnxModel(PrivateTag, std::string Path, OnnxRunnerOptions Options);

private:
  std::string Path;
  std::string SessionFile;
  OnnxRunnerOptions Options;
  std::vector<TensorSpec> Inputs;
  std::vector<TensorSpec> Outputs;
  llvm::StringMap<std::string> Metadata;
  std::unique_ptr<Session> Sess;
};

/// Asks an ONNX model for advice. One runner per thread; many runners may
/// share one OnnxModel.
class OnnxModelRunner final : public MLModelRunner {
public:
  /// Loads the model at \p ModelPath and creates a runner over it (see
  /// OnnxModel::load() and the other create()).
  static llvm::Expected<std::unique_ptr<OnnxModelRunner>>
  create(llvm::StringRef ModelPath, std::vector<TensorSpec> Features,
         TensorSpec Advice, OnnxRunnerOptions Options = {});

  /// Creates a runner over the already loaded \p Model: cheap, so that each
  /// thread can have its own. Binds every model input to the feature of the
  /// same name and picks the output that answers as \p Advice; the error
  /// lists every difference between the model and the specs.
  static llvm::Expected<std::unique_ptr<OnnxModelRunner>>
  create(std::shared_ptr<const OnnxModel> Model,
         std::vector<TensorSpec> Features, TensorSpec Advice);

  ~OnnxModelRunner() override;

  /// The model behind this runner.
  const std::shared_ptr<const OnnxModel> &model() const { return Model; }

  /// The model's metadata_props entry \p Key.
  std::optional<std::string> modelMetadata(llvm::StringRef Key) const override {
    return Model->metadata(Key);
  }

  /// Per-runner ONNX Runtime values; defined in OnnxModelRunner.cpp only.
  struct Bindings;

protected:
  llvm::Expected<TensorValue>
  evaluateUntyped(llvm::ArrayRef<TensorRef> Features) override;

private:
  /// Keeps the constructor to create() while allowing std::make_unique.
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

public:
  /// Use create().
  OnnxModelRunner(PrivateTag, std::shared_ptr<const OnnxModel> Model,
                  std::vector<TensorSpec> Features, TensorSpec Advice,
                  std::unique_ptr<Bindings> Bound);

private:
  std::shared_ptr<const OnnxModel> Model;
  std::unique_ptr<Bindings> Bound;
};

} // namespace mlbridge

#endif // MLBRIDGE_ONNXMODELRUNNER_H
