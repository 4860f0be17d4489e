//===- MLInlineAdvisor.h - LLVM's ML inliner over any model runner -*- C++
//-*-===//
//
// Part of mlbridge. An InlineAdvisor for the stock inliner (installed by the
// opt plugin through PluginInlineAdvisorAnalysis) that asks any
// `mlbridge::MLModelRunner` for each inlining decision that is a matter of
// profit. The model interface is LLVM 22's own ML inliner's, so that a model
// trained against stock `opt -enable-ml-inliner=release` (interactive mode)
// works here and vice versa:
//   features: every int64 [1] tensor of llvm::MLInlineAdvisor's feature map,
//             in its order (the InlineCost features, then the caller, callee,
//             call-site and module features; the IR2Vec embeddings when LLVM
//             has a vocabulary), then `inlining_default` (int64 [1], the
//             default heuristic's decision) unless turned off;
//   advice:   int64 [1] `inlining_decision`, nonzero means inline.
// docs/inliner.md lists the features.
//
// The features, the legality rules (mandatory, never, recursion, unreachable
// call sites, illegal call sites) and the module-size stop come from
// llvm::MLInlineAdvisor itself: this advisor derives from it and replaces only
// the model evaluation. Nothing here knows which runner is behind it.
//
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_INLINER_MLINLINEADVISOR_H
#define MLBRIDGE_PASSES_INLINER_MLINLINEADVISOR_H

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/TensorSpec.h"

#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/Analysis/InlineCost.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mlbridge::passes {

/// The name of the remarks this advisor emits (-pass-remarks=mlbridge-inline).
constexpr llvm::StringLiteral InlineRemarkName = "mlbridge-inline";
/// The extra feature holding the default heuristic's decision.
constexpr llvm::StringLiteral InliningDefaultName = "inlining_default";
/// The advice tensor's name.
constexpr llvm::StringLiteral InliningDecisionName = "inlining_decision";

/// The advice spec: int64 `inlining_decision`, shape [1].
TensorSpec inlineAdviceSpec();

/// The feature specs the advisor sends for \p M: llvm::MLInlineAdvisor's
/// initial feature map, plus `inlining_default` if \p IncludeDefault. (The
/// advisor itself also adds the IR2Vec embeddings when LLVM has a vocabulary.)
std::vector<TensorSpec> inlineFeatureSpecs(bool IncludeDefault);

/// Builds the runner for the given feature specs and advice spec.
using InlineRunnerFactory =
    std::function<llvm::Expected<std::unique_ptr<MLModelRunner>>(
        std::vector<TensorSpec> Features, TensorSpec Advice)>;

/// An in-process policy for a CallbackModelRunner: answers with the
/// `inlining_default` feature, i.e. LLVM's default heuristic (fails if the
/// feature is not sent).
CallbackModelRunner::Callback inliningDefaultPolicy();

/// Options of the advisor.
struct MLInlineAdvisorOptions {
  /// Send `inlining_default` (the default heuristic's decision).
  bool IncludeDefault = true;
  /// On a model failure: false, a compiler error naming the cause; true, one
  /// warning naming the cause. Either way the model is not asked again and
  /// LLVM's default advisor decides for the rest of the compilation.
  bool FallBackOnFailure = false;
  /// The runner, for diagnostics ("pipe runner on '/tmp/ch'").
  std::string RunnerDescription = "model runner";
};

/// LLVM's default heuristic decision for \p CB, computed as the stock
/// InlineAdvisorAnalysis computes `inlining_default` (getInlineCost with
/// \p Params, then shouldInline).
bool defaultInliningDecision(llvm::CallBase &CB,
                             llvm::FunctionAnalysisManager &FAM,
                             const llvm::InlineParams &Params);

/// Creates the advisor. \p MAM must be the analysis manager whose function
/// proxy is \p M's FunctionAnalysisManager. The runner is built and connected
/// here (a pipe session starts with LLVM's header and an empty context, as
/// stock interactive mode's does); a failure is handled as
/// MLInlineAdvisorOptions::FallBackOnFailure says. Never null.
std::unique_ptr<llvm::InlineAdvisor>
createMLInlineAdvisor(llvm::Module &M, llvm::ModuleAnalysisManager &MAM,
                      llvm::InlineParams Params, llvm::InlineContext IC,
                      MLInlineAdvisorOptions Options,
                      const InlineRunnerFactory &Factory);

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_INLINER_MLINLINEADVISOR_H
