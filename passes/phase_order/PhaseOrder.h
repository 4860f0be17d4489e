//===- PhaseOrder.h - Model-guided phase ordering in one opt run -*- C++
//-*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// mlbridge-phase-order (docs/phase-order.md): a module pass that runs one
/// POSET-RL-style episode per module inside the compiler. It observes the
/// module, asks a model which sub-sequence of passes to apply next (or to
/// stop), applies it with the PassBuilder, and repeats until the model says
/// stop or the step limit is reached. The loop is mlbridge::runEpisode with a
/// PhaseOrderEnvironment; the model runner comes from the plugin, so the pass
/// works unchanged with pipe, gRPC, ONNX, TF AOT and callback runners.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_PHASE_ORDER_PHASEORDER_H
#define MLBRIDGE_PASSES_PHASE_ORDER_PHASEORDER_H

#include "mlbridge/Environment.h"
#include "mlbridge/MLModelRunner.h"
#include "passes/phase_order/ModuleObservation.h"
#include "passes/phase_order/PhaseOrderActions.h"

#include "llvm/IR/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class PassBuilder;
} // namespace llvm

namespace mlbridge::passes {

/// The model interface (docs/phase-order.md): features `observation` float
/// [Dim], `step`, `code_size`, `action_count` (int64 [1] each) and
/// `action_history` float [ActionCount] (how often each sequence has been
/// applied in this episode), in this order.
std::vector<TensorSpec> phaseOrderFeatureSpecs(unsigned ObservationDim,
                                               unsigned ActionCount);
/// The advice: `action` int64 [1]; 0..N-1 applies that sequence, N stops.
TensorSpec phaseOrderAdviceSpec();
/// The score of an outcome (reward channel): `code_size` int64 [1].
TensorSpec phaseOrderScoreSpec();

/// The in-process policy of a callback runner when no model is given: the
/// built-in order, action i at step i, then stop (action \p ActionCount).
/// Reads the feature `step` by its name in phaseOrderFeatureSpecs() (fails
/// if it is not sent).
CallbackModelRunner::Callback builtinPhaseOrderPolicy(unsigned ActionCount);

/// A runner for one episode, and where the code size after each step goes
/// when the runner takes outcomes (a pipe runner while training).
struct PhaseOrderAgent {
  std::unique_ptr<MLModelRunner> Runner;
  /// Called after each applied step with (step, `code_size` score); empty
  /// when the runner has no reward channel.
  std::function<llvm::Error(int64_t Step, const TensorValue &Score)>
      ReportOutcome;
};

/// Makes the agent of an episode from the feature, advice and score specs
/// and the number of actions (for a built-in policy).
using PhaseOrderAgentFactory = std::function<llvm::Expected<PhaseOrderAgent>(
    std::vector<TensorSpec> Features, TensorSpec Advice, TensorSpec Score,
    unsigned ActionCount)>;

/// What kind of observation the agent gets.
enum class PhaseOrderObservation { Counts, IR2Vec };

/// The pass's settings.
struct PhaseOrderOptions {
  /// An actions file (one pipeline per line); empty: the built-in set.
  std::string ActionsFile;
  unsigned MaxSteps = 15;
  PhaseOrderObservation Observation = PhaseOrderObservation::Counts;
  /// IR2Vec: a vocabulary file or a registered vocabulary's name.
  std::string IR2VecVocab;
  /// Where to write one line per step; null for none.
  llvm::raw_ostream *Trace = nullptr;
  /// On a model failure, stop the episode with one warning (true) or fail
  /// the compilation (false).
  bool FallBackOnFailure = false;
  /// Names the runner in diagnostics.
  std::string RunnerDescription;
  /// How the options are spelled in diagnostics (prefix of `actions`,
  /// `ir2vec-vocab`, `observation`).
  std::string OptionPrefix = "-mlbridge-phase-order-";
};

/// The episode's environment: the module is the state, an action runs one
/// sub-sequence. Exposed for tests and other drivers.
class PhaseOrderEnvironment final : public Environment {
public:
  /// \p Pipelines[i] is action i; \p Vocab is null for count observations.
  PhaseOrderEnvironment(
      llvm::Module &M, llvm::ModuleAnalysisManager &MAM,
      const std::vector<PhaseOrderAction> &Actions,
      std::vector<llvm::ModulePassManager> &Pipelines,
      const IR2VecVocabulary *Vocab, unsigned MaxSteps,
      llvm::raw_ostream *Trace,
      std::function<llvm::Error(int64_t, const TensorValue &)> ReportOutcome);

  llvm::Error reset() override;
  llvm::Error observe(MLModelRunner &Agent) override;
  llvm::Error step(const Action &A) override;
  bool isDone() const override { return Done; }
  ActionSelection actionSelection(size_t) const override {
    return ActionSelection::Raw;
  }

  /// The number of sequences applied so far.
  unsigned applied() const { return Applied; }
  /// The sequences applied so far as one pipeline: their texts joined by
  /// commas, the pipeline that makes the same module in one opt run ("" if
  /// none was applied).
  std::string appliedPipeline() const;
  /// The current code-size estimate.
  int64_t codeSize() const { return CodeSize; }

private:
  llvm::Module &M;
  llvm::ModuleAnalysisManager &MAM;
  const std::vector<PhaseOrderAction> &Actions;
  std::vector<llvm::ModulePassManager> &Pipelines;
  const IR2VecVocabulary *Vocab;
  unsigned MaxSteps;
  llvm::raw_ostream *Trace;
  std::function<llvm::Error(int64_t, const TensorValue &)> ReportOutcome;
  unsigned Step = 0;
  unsigned Applied = 0;
  int64_t CodeSize = 0;
  /// How often each sequence has been applied (the `action_history` feature).
  std::vector<float> History;
  /// The actions applied so far, in order.
  std::vector<size_t> AppliedActions;
  bool Done = false;
};

/// The module pass `mlbridge-phase-order`.
class PhaseOrderPass : public llvm::PassInfoMixin<PhaseOrderPass> {
public:
  /// \p PB parses the action pipelines (it must outlive the pass: the
  /// plugin's PassBuilder).
  PhaseOrderPass(llvm::PassBuilder &PB, PhaseOrderOptions Options,
                 PhaseOrderAgentFactory MakeAgent);

  llvm::PreservedAnalyses run(llvm::Module &M,
                              llvm::ModuleAnalysisManager &MAM);
  static bool isRequired() { return true; }

private:
  llvm::PassBuilder *PB;
  PhaseOrderOptions Options;
  PhaseOrderAgentFactory MakeAgent;
};

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_PHASE_ORDER_PHASEORDER_H
