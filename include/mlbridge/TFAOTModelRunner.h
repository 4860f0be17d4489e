//===- TFAOTModelRunner.h - TensorFlow AOT-compiled models -----*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// A runner over a TensorFlow model compiled ahead of time by `mlbridge aot`
/// (docs/tfaot.md): the model runs in-process with no TensorFlow library.
///
/// `mlbridge aot` wraps the class XLA generates in a small C ABI
/// (TFAOTFunctions). The runner reaches it two ways:
///  - load(): a shared object `<name>.so` opened by path at run time, so a
///    compiled model can be swapped without rebuilding the compiler;
///  - create(): a model linked in at build time (`lib<name>_aot.a`, CMake
///    target `mlbridge_aot_<name>`), whose functions `<name>_mlbridge.h`
///    returns as `mlbridge_aot::<name>_functions()`.
///
/// Either way, model inputs are bound to the compiler's features by name
/// (XLA's `feed_<name>`/`fetch_<name>`, never by position) with MLGO's
/// versioning rule (see ModelSpecs.h): features the model does not know are
/// not fed; a model input with no matching feature is an error.
///
/// A model `mlbridge compile` built with a dynamic batch gives its leading
/// dimension as -1 and exports `set_batch`: the runner takes the rows from
/// the features bound to the batched inputs at each evaluation, and answers
/// with that many rows. A model that exports `set_arg_rows` instead (its
/// inputs each have rows of their own, as the register allocator's graph
/// does) gets each such input's rows from its feature, and reads the
/// feature's buffer in place.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_TFAOTMODELRUNNER_H
#define MLBRIDGE_TFAOTMODELRUNNER_H

#include "mlbridge/MLModelRunner.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Compiler.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

/// One instance of a compiled model (its buffers); opaque.
struct mlbridge_aot_instance;

namespace mlbridge {

/// The version of the C ABI this runner reads (`mlbridge_aot_abi_version()`).
inline constexpr uint32_t TFAOTAbiVersion = 1;

/// The C ABI of a compiled model, version TFAOTAbiVersion. In a shared object
/// each function is the symbol `mlbridge_aot_<suffix>`; linked in, it is
/// `mlbridge_aot_<model>_<suffix>`. Indices are the model's own order of
/// inputs and outputs; types are ElementType values; shapes are static, but
/// for a leading -1 (DynamicDim): the batch of a model with SetBatch.
struct TFAOTFunctions {
  uint32_t (*AbiVersion)() = nullptr;                           // abi_version
  const char *(*ModelName)() = nullptr;                         // model_name
  int32_t (*NumArgs)() = nullptr;                               // num_args
  const char *(*ArgName)(int32_t) = nullptr;                    // arg_name
  int32_t (*ArgType)(int32_t) = nullptr;                        // arg_type
  int32_t (*ArgRank)(int32_t) = nullptr;                        // arg_rank
  const int64_t *(*ArgShape)(int32_t) = nullptr;                // arg_shape
  int32_t (*NumResults)() = nullptr;                            // num_results
  const char *(*ResultName)(int32_t) = nullptr;                 // result_name
  int32_t (*ResultType)(int32_t) = nullptr;                     // result_type
  int32_t (*ResultRank)(int32_t) = nullptr;                     // result_rank
  const int64_t *(*ResultShape)(int32_t) = nullptr;             // result_shape
  mlbridge_aot_instance *(*Create)() = nullptr;                 // create
  void (*Destroy)(mlbridge_aot_instance *) = nullptr;           // destroy
  void *(*ArgData)(mlbridge_aot_instance *, int32_t) = nullptr; // arg_data
  const void *(*ResultData)(mlbridge_aot_instance *,
                            int32_t) = nullptr;      // result_data
  int32_t (*Run)(mlbridge_aot_instance *) = nullptr; // run: 0 on success
  /// Optional (models built before it lack it): input I reads the caller's
  /// 64-byte-aligned buffer, so the runner passes features without a copy.
  int32_t (*SetArgData)(mlbridge_aot_instance *, int32_t,
                        const void *) = nullptr; // set_arg_data
  /// Only in models with a dynamic batch (a leading -1 in their shape
  /// tables): the rows of the batched inputs and outputs for the following
  /// runs (a new instance has 1); the instance's own buffers move. 0 on
  /// success.
  int32_t (*SetBatch)(mlbridge_aot_instance *, int64_t) = nullptr; // set_batch
  /// Only in models whose inputs each take their own number of rows (a
  /// leading -1, without SetBatch; mlbridge.regalloc.native's agents): the
  /// rows of input I for the following runs. Such an input reads the feature
  /// buffer itself (SetArgData, which the model must have). 0 on success.
  int32_t (*SetArgRows)(mlbridge_aot_instance *, int32_t,
                        int64_t) = nullptr; // set_arg_rows
  /// Optional: why the last run failed (a run returning nonzero).
  const char *(*ErrorMessage)(mlbridge_aot_instance *) = nullptr;
};

/// Runs a TensorFlow AOT-compiled model in-process. Each runner owns one
/// model instance; runners are independent, so threads may each use their own.
class TFAOTModelRunner final : public MLModelRunner {
public:
  /// Opens the shared object `mlbridge aot` built (dlopen, RTLD_LOCAL) and
  /// binds its inputs to \p Features and its output named like \p Advice to
  /// the advice. Runners loading the same file share one copy of it, which is
  /// closed when the last of them is destroyed. Fails with a message naming
  /// the file if it cannot be opened, is not an mlbridge AOT model, has
  /// another ABI version, or does not fit the features (every difference).
  static llvm::Expected<std::unique_ptr<MLModelRunner>>
  load(llvm::StringRef SharedObjectPath, std::vector<TensorSpec> Features,
       TensorSpec Advice);

  /// Like load(), over a model linked into this binary: pass
  /// `mlbridge_aot::<name>_functions()` from `<name>_mlbridge.h`.
  static llvm::Expected<std::unique_ptr<MLModelRunner>>
  create(const TFAOTFunctions &Model, std::vector<TensorSpec> Features,
         TensorSpec Advice);

  ~TFAOTModelRunner() override;

  /// The model's name (what `mlbridge aot --name` was given).
  const std::string &modelName() const { return Name; }
  /// The model's inputs, in the model's order.
  llvm::ArrayRef<TensorSpec> modelInputs() const { return Inputs; }

protected:
  llvm::Expected<TensorValue>
  evaluateUntyped(llvm::ArrayRef<TensorRef> Features) override;
  llvm::Expected<bool>
  evaluateScalarInto(llvm::MutableArrayRef<char> Out) override;

private:
  class Library;
  struct InstanceDeleter {
    void (*Destroy)(mlbridge_aot_instance *);
    void operator()(mlbridge_aot_instance *I) const { Destroy(I); }
  };
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

  /// Sets the instance's batch to the rows of the features bound to its
  /// batched inputs.
  llvm::Error setBatchFrom(llvm::ArrayRef<TensorRef> Features);
  /// Hands \p Features to the instance: bound in place, or copied (then
  /// again before every run).
  llvm::Error bind(llvm::ArrayRef<TensorRef> Features);
  /// Hands input \p I, one with rows of its own (SetArgRows), feature \p F.
  llvm::Error bindRows(size_t I, const TensorRef &F);
  /// The errors of a run, out of the per-decision path.
  LLVM_ATTRIBUTE_NOINLINE llvm::Error runFailed() const;
  LLVM_ATTRIBUTE_NOINLINE llvm::Error noResult() const;

  static llvm::Expected<std::unique_ptr<MLModelRunner>>
  createImpl(std::shared_ptr<Library> Lib, const TFAOTFunctions &Model,
             std::vector<TensorSpec> Features, TensorSpec Advice,
             llvm::StringRef Where);

public:
  /// Use load() or create().
  TFAOTModelRunner(PrivateTag, std::vector<TensorSpec> Features,
                   TensorSpec Advice);

private:
  // Destroyed last: the instance and functions live in the library.
  std::shared_ptr<Library> Lib;
  // What every evaluation reads, in one cache line: a sweep over many
  // runners finds it cold, and each line costs more than a small model's call.
  alignas(64) std::unique_ptr<mlbridge_aot_instance, InstanceDeleter> Instance;
  int32_t (*Run)(mlbridge_aot_instance *) = nullptr;
  const void *(*ResultData)(mlbridge_aot_instance *, int32_t) = nullptr;
  /// The bufferEpoch() at which every input was last handed to the instance
  /// by address (SetArgData): while it holds, an evaluation just runs. 0
  /// when some input is copied or the batch is dynamic.
  uint64_t BoundEpoch = 0;
  /// The advice output's bytes; one row's if it is batched.
  size_t ResultBytes = 0;
  int32_t ResultIndex = -1;
  bool ResultBatched = false;
  /// Whether the model has a dynamic batch (SetBatch).
  bool HasBatch = false;
  /// Whether its inputs with a leading -1 each take their own rows
  /// (SetArgRows).
  bool HasArgRows = false;
  /// One model input, as binding reads it.
  struct Arg {
    /// The feature index that feeds it.
    size_t Feature = 0;
    /// Its bytes; one row's for a batched input.
    size_t Bytes = 0;
    /// The instance's own buffer.
    char *Buffer = nullptr;
    /// The feature buffer it reads through SetArgData, or null when the
    /// feature is copied into Buffer.
    const char *Bound = nullptr;
    /// Whether its leading dimension is the dynamic batch (with SetArgRows:
    /// its own rows).
    bool Batched = false;
    /// With SetArgRows: the rows the instance is set to for it.
    int64_t Rows = 0;
  };
  llvm::SmallVector<Arg, 2> Args;
  int32_t (*SetArgData)(mlbridge_aot_instance *, int32_t,
                        const void *) = nullptr;
  /// The rows the instance is set to (SetBatch); 1 when it is created.
  int64_t Batch = 1;
  // The rest: loading, errors, batches.
  TFAOTFunctions Fns;
  std::string Name;
  std::vector<TensorSpec> Inputs;
  TensorSpec ResultSpec;
};

} // namespace mlbridge

#endif // MLBRIDGE_TFAOTMODELRUNNER_H
