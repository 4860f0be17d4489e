//===- FunctionFeatures.h - Per-function features and advice ---*- C++ -*-===//
//
// Part of mlbridge. Computes a fixed vector of per-function features with
// LLVM's analyses, asks an advisor for a per-function decision and records it
// in the IR as the string attribute "mlbridge-advice"="<decision>".
//
// Nothing here knows about plugins or how an advisor reaches its model: the
// pass talks to the `FunctionAdvisor` interface only.
//
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_FUNCTION_FEATURES_FUNCTIONFEATURES_H
#define MLBRIDGE_PASSES_FUNCTION_FEATURES_FUNCTIONFEATURES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace llvm {
class Function;
class LLVMContext;
class LoopInfo;
class raw_ostream;
} // namespace llvm

namespace mlbridge::passes {

/// The features of one function, in a fixed order (see `featureNames()`).
/// Every feature is an int64 scalar so that the vector maps 1:1 onto
/// TensorSpecs of shape [1] for a model runner.
struct FunctionFeatures {
  int64_t InstructionCount = 0;
  int64_t BasicBlockCount = 0;
  int64_t CallCount = 0;    ///< calls and invokes, intrinsics excluded
  int64_t LoopCount = 0;    ///< all loops, nested ones included
  int64_t MaxLoopDepth = 0; ///< 0 when the function has no loop
  int64_t ArgumentCount = 0;
  int64_t LoadCount = 0;
  int64_t StoreCount = 0;
  int64_t ConditionalBranchCount = 0;

  static constexpr size_t NumFeatures = 9;
  /// Feature names, in the order of `asArray()`. Stable: they are tensor names.
  static llvm::ArrayRef<llvm::StringRef> featureNames();
  std::array<int64_t, NumFeatures> asArray() const;
};

/// Computes the features of a function that has a body.
FunctionFeatures computeFunctionFeatures(const llvm::Function &F,
                                         const llvm::LoopInfo &LI);

/// The decisions an advisor can return, as the int64 class index a model
/// produces. `adviceName()` gives the string stored in the IR.
enum class FunctionAdvice : int64_t {
  None = 0,   ///< leave the function alone
  Inline = 1, ///< small and loop-free: a good inlining candidate
  Size = 2,   ///< large and loop-free: optimize for size
  Speed = 3,  ///< has loops: optimize for speed
};
constexpr int64_t NumFunctionAdvice = 4;
llvm::StringRef adviceName(FunctionAdvice A);

/// Parameters of the trivial built-in policy (`builtinFunctionPolicy`).
struct BuiltinPolicyParams {
  /// Loop-free functions with at most this many instructions get `Inline`.
  int64_t SmallFunctionThreshold = 20;
};

/// The trivial built-in policy: loops -> Speed; else small -> Inline;
/// else Size. Deterministic, so tests can say what must happen.
FunctionAdvice builtinFunctionPolicy(const FunctionFeatures &Features,
                                     const BuiltinPolicyParams &Params);

/// Where the pass gets its decisions from. Implementations may call a model
/// runner (in-process, pipe, gRPC...); the pass does not care which.
class FunctionAdvisor {
public:
  virtual ~FunctionAdvisor();
  virtual llvm::Expected<FunctionAdvice>
  advise(llvm::StringRef FunctionName, const FunctionFeatures &Features) = 0;
  /// A warning for the user that the last advise() call produced (e.g. the
  /// model failed and the advisor now uses the built-in policy), returned
  /// once; the caller reports it as a compiler warning. None by default.
  virtual std::optional<std::string> takeWarning() { return std::nullopt; }
};

/// Reports \p Advisor's pending warning, if any, as a warning diagnostic.
void reportAdvisorWarning(FunctionAdvisor &Advisor, llvm::LLVMContext &Ctx);

/// An advisor that calls `builtinFunctionPolicy` directly.
class BuiltinFunctionAdvisor final : public FunctionAdvisor {
public:
  explicit BuiltinFunctionAdvisor(BuiltinPolicyParams Params)
      : Params(Params) {}
  llvm::Expected<FunctionAdvice>
  advise(llvm::StringRef FunctionName,
         const FunctionFeatures &Features) override;

private:
  BuiltinPolicyParams Params;
};

/// Writes one JSON object (single line, no newline) with the function name,
/// its features and the advice.
void printFeaturesJSON(llvm::raw_ostream &OS, llvm::StringRef FunctionName,
                       const FunctionFeatures &Features, FunctionAdvice Advice);

/// Options of `FunctionFeaturesPass`.
struct FunctionFeaturesOptions {
  /// Print one JSON line per function to stderr.
  bool PrintJSON = false;
  /// Also turn the advice into standard attributes (inlinehint / optsize).
  bool ApplyAdvice = false;
};

/// Name of the string attribute that records the decision.
constexpr llvm::StringLiteral AdviceAttributeName = "mlbridge-advice";

/// `mlbridge-function-features`: computes features, asks the advisor, records
/// the decision as "mlbridge-advice"="<inline|size|speed|none>".
class FunctionFeaturesPass : public llvm::PassInfoMixin<FunctionFeaturesPass> {
public:
  FunctionFeaturesPass(std::shared_ptr<FunctionAdvisor> Advisor,
                       FunctionFeaturesOptions Options)
      : Advisor(std::move(Advisor)), Options(Options) {}

  llvm::PreservedAnalyses run(llvm::Function &F,
                              llvm::FunctionAnalysisManager &FAM);
  static bool isRequired() { return true; }

private:
  std::shared_ptr<FunctionAdvisor> Advisor;
  FunctionFeaturesOptions Options;
};

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_FUNCTION_FEATURES_FUNCTIONFEATURES_H
