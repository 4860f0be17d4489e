//===- MLPriorityAdvisor.h - Greedy priority advice, any runner -*- C++ -*-===//
//
// Part of mlbridge. A register-allocation priority advisor for LLVM's greedy
// register allocator (legacy pass manager, as llc runs it) that asks any
// `mlbridge::MLModelRunner` for the priority of every live range greedy
// enqueues. It is installed as an immutable pass with the pass ID of
// llvm::RegAllocPriorityAdvisorAnalysisLegacy: added to the legacy
// PassManager before the target's codegen passes, it is the analysis greedy
// finds (docs/regalloc.md).
//
// The model interface (one request per enqueued live range; the context is
// the machine function's name):
//   features (all shape [1], in this order):
//     li_size           int64  LiveInterval::getSize() (slot-index units)
//     weight            float  LiveInterval::weight() (the spill weight)
//     default_priority  int64  what LLVM's DefaultPriorityAdvisor answers
//     in_one_block      int64  1 if the range lies in one basic block
//     has_preference    int64  1 if VirtRegMap knows a physical-register
//                              preference (hint) for it
//     class_priority    int64  its register class's AllocationPriority
//     allocatable_regs  int64  allocatable registers in that class
//   advice: `priority`, shape [1], float64 (default), float32 or int64.
// LLVM's own ML advisor also sends `stage` (the range's LiveRangeStage);
// that lives in RAGreedy's private state (lib/CodeGen/RegAllocGreedy.h, not
// installed), so it is absent here (docs/regalloc.md says why and what of it
// default_priority carries).
//
// Advice to priority (greedy takes an unsigned): NaN is a model failure; any
// other value is clamped to [0, 2^32 - 1] and truncated toward zero. float64
// and int64 hold every default_priority exactly, so "priority =
// default_priority" reproduces LLVM's allocation; float32 does not (24-bit
// mantissa).
//
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_REGALLOC_PRIORITY_MLPRIORITYADVISOR_H
#define MLBRIDGE_PASSES_REGALLOC_PRIORITY_MLPRIORITYADVISOR_H

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/TensorSpec.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Pass;
} // namespace llvm

namespace mlbridge::passes {

/// The feature holding LLVM's default priority.
constexpr llvm::StringLiteral DefaultPriorityName = "default_priority";
/// The advice tensor's name (as LLVM's ML priority advisor's).
constexpr llvm::StringLiteral PriorityAdviceName = "priority";

/// The element type of the advice `priority`.
enum class PriorityAdviceType { Double, Float, Int64 };

/// The feature specs of the model interface above, in order.
std::vector<TensorSpec> priorityFeatureSpecs();
/// The advice spec: `priority`, shape [1], of \p Type.
TensorSpec priorityAdviceSpec(PriorityAdviceType Type);

/// Turns one advice value into greedy's unsigned priority by the rule above;
/// an error for NaN.
llvm::Expected<unsigned> priorityFromAdvice(double Advice);

/// An in-process policy for a CallbackModelRunner: answers
/// `default_priority` as \p Type, i.e. LLVM's default priority.
CallbackModelRunner::Callback defaultPriorityPolicy(PriorityAdviceType Type);

/// Builds the runner for the given feature specs and advice spec.
using PriorityRunnerFactory =
    std::function<llvm::Expected<std::unique_ptr<MLModelRunner>>(
        std::vector<TensorSpec> Features, TensorSpec Advice)>;

/// Options of the advisor.
struct MLPriorityAdvisorOptions {
  PriorityAdviceType AdviceType = PriorityAdviceType::Double;
  /// On a model failure: false, a compiler error naming the cause; true, one
  /// warning naming the cause. Either way the model is not asked again and
  /// LLVM's default priority is used for the rest of the compilation.
  bool FallBackOnFailure = false;
  /// The runner, for diagnostics ("pipe runner on '/tmp/ch'").
  std::string RunnerDescription = "model runner";
};

/// Creates the immutable pass (pass ID of
/// llvm::RegAllocPriorityAdvisorAnalysisLegacy) that hands greedy this
/// advisor. Add it to a legacy PassManager before the codegen passes; the
/// PassManager owns it. The runner is built by \p Factory when greedy asks
/// for the first function's advisor, and lives as long as the pass.
std::unique_ptr<llvm::Pass>
createMLPriorityAdvisorAnalysis(MLPriorityAdvisorOptions Options,
                                PriorityRunnerFactory Factory);

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_REGALLOC_PRIORITY_MLPRIORITYADVISOR_H
