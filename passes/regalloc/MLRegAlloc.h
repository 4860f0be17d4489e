//===- MLRegAlloc.h - RL4ReAl-style ML register allocator -------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// A register allocator for llc-22 (`-regalloc=mlbridge`, docs/ml-regalloc.md)
/// whose decisions are made by agents behind an mlbridge::MLModelRunner, in
/// the shape of RL4ReAl (CC 2023): an episode over the function's
/// interference graph in which
///
///   - the priority agent picks the next live range to allocate, among the
///     queued ones;
///   - the coloring agent picks, for that live range, a physical register
///     among the legal ones (free, or held only by live ranges it may evict,
///     which are then spilled), or spilling it;
///   - with MLRegAllocOptions::Split, the split agent acts when the coloring
///     agent chose to spill a live range that has uses in several blocks or
///     lives through a block with a call, or that some register is free for
///     in some of its blocks: it picks a block to split the live range around
///     (a new live range holds the value inside the block, copies at its
///     borders; both go back to the queue), or a region (the blocks where
///     one register is free, and the ends of those where it is taken for
///     part of the live range: the new live range inside takes that
///     register, the rest goes back to the queue), or spilling after all. With
///     the split agent, a live range evicted for the first time goes back to
///     the queue rather than being spilled, as LLVM's greedy allocator does.
///
/// The agent that acts next depends on the previous outcome. Splitting is
/// the allocator's own (LLVM's SplitKit is not in the installed headers).
///
/// Every query carries the whole current graph, one model interface for every
/// agent (the feature `agent` says which acts; one runner, one model):
///
///   agent              int64 [1]      0 priority, 1 coloring, 2 split
///   function_name      string [1]
///   node_features      float [N, 11]  one row per live range (NodeFeature)
///   edges              int64 [E, 2]   interfering live ranges (node indices)
///   spill_weights      float [N]      LLVM's spill weights (capped at
///                                     UnspillableWeight: JSON has no inf)
///   node               int64 [1]      the live range being colored, or -1
///   register_features  float [R, 5]   coloring: one row per candidate
///                                     register (RegisterFeature); else R = 0
///   block_features     float [S, 7]   split: one row per candidate block
///                                     or region (BlockFeature); else S = 0
///   action_mask        int64 [A]      1 where the action is legal
///   advice: regalloc_action  int64 [1], an index of a nonzero action_mask
///                            element
///
/// Priority: A = N, action i allocates node i next. Coloring: A = R + 1,
/// action r < R assigns candidate register r, action R spills the live range
/// (or, with splitting, asks the split agent). Split: A = S + 1, action
/// s < S splits around candidate block or region s, action S spills.
/// Legality stays here: the mask is computed by the allocator and an advice
/// outside it is an error (the runtime's advice constraints), never applied.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_REGALLOC_MLREGALLOC_H
#define MLBRIDGE_PASSES_REGALLOC_MLREGALLOC_H

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/TensorSpec.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class FunctionPass;
} // namespace llvm

namespace mlbridge::passes {

/// Which agent acts (the feature `agent`).
enum class RegAllocAgent : int64_t { Priority = 0, Coloring = 1, Split = 2 };

/// The columns of `node_features`.
enum NodeFeature : unsigned {
  NodeWeight,       ///< spill weight, capped at UnspillableWeight
  NodeSpillable,    ///< 1 if the live range may be spilled
  NodeLogSize,      ///< log2(1 + slot-index length)
  NodeSegments,     ///< live segments
  NodeInstructions, ///< instructions reading or writing it
  NodeQueued,       ///< 1 while waiting for a register
  NodeAssigned,     ///< 1 once it has one
  NodeSpilled,      ///< 1 once spilled (or evicted and spilled)
  NodeDegree,       ///< interfering live ranges
  NodeClassSize,    ///< allocatable registers of its class
  NodeHasHint,      ///< 1 if a copy hints a register
  NumNodeFeatures
};

/// The columns of `register_features`.
enum RegisterFeature : unsigned {
  RegFree,        ///< 1 if no live range holds it where this one lives
  RegHinted,      ///< 1 if a copy hints it
  RegEvictCost,   ///< spill weight evicted by taking it (0 if free)
  RegFirstCSRUse, ///< 1 if taking it is the first use of a callee-saved one
  RegOrder,       ///< position in the allocation order, in [0, 1)
  NumRegisterFeatures
};

/// The columns of `block_features`.
enum BlockFeature : unsigned {
  BlockFrequency,    ///< log2(1 + frequency relative to the entry block)
  BlockUses,         ///< instructions of the block that read or write it
  BlockLiveIn,       ///< 1 if it is live into the block
  BlockLiveOut,      ///< 1 if a split copies it back at the block's end
  BlockInstructions, ///< the block's instructions, / 100
  BlockCalls,        ///< the block's calls (each clobbers registers)
  BlockRegion,       ///< 1 for a region's row, else 0
  NumBlockFeatures
};
// A region's row is in the units of a block of frequency 1 (BlockFrequency
// is log2(2) = 1): BlockUses, BlockLiveIn and BlockLiveOut are the region's
// uses (earlier splits' copies among them) and its copies in and out, each
// weighted by its block's frequency relative to the entry block;
// BlockInstructions and BlockCalls are sums (over its blocks, and its partial
// blocks' heads and tails).

/// `node_features`' weight of an unspillable live range (its LLVM weight is
/// infinite, which JSON cannot carry).
constexpr float UnspillableWeight = 1e6f;

/// The metadata key (MLModelRunner::modelMetadata()) under which a model
/// declares the rounds of messages it passes along `edges`, in decimal: see
/// MLRegAllocOptions::MessageRounds. mlbridge.regalloc.gnn's ONNX export
/// writes it.
constexpr const char *MessageRoundsMetadataKey =
    "mlbridge.regalloc.message_rounds";

/// The feature specs of the interface above, in order.
std::vector<TensorSpec> regallocFeatureSpecs();
/// The advice spec: `regalloc_action`, int64 [1], masked by `action_mask`.
TensorSpec regallocAdviceSpec();

/// The built-in policy (the default runner, and the fallback): LLVM's basic
/// allocator's choices in this interface. Priority: the largest spill
/// weight; coloring: the first free candidate, else the one evicting the
/// least weight, else spill; split: spill (the basic allocator never
/// splits).
CallbackModelRunner::Callback builtinRegAllocPolicy();
/// The built-in policy with a split agent that splits where that saves the
/// most (`-mlbridge-regalloc-policy=split`; mlbridge.regalloc.split_policy
/// in Python, decision for decision). Priority and coloring: as
/// builtinRegAllocPolicy. Split: the first legal block of the largest gain
/// `(uses - live_in - live_out) * (2^frequency - 1)` (the reloads and stores
/// spilling would put in the block, minus the copies at its borders, weighted
/// by its frequency relative to the entry block; computed in double from the
/// float features), if that gain is positive; else spill. For a region's
/// row this is its weighted uses minus its weighted copies. A block the live
/// range only lives through has a negative gain, so this policy splits
/// around blocks with uses and regions only. The fallback on a model failure
/// stays builtinRegAllocPolicy.
CallbackModelRunner::Callback splitRegAllocPolicy();
/// A uniformly random legal action, seeded: a policy that knows nothing, for
/// showing that legality never depends on the model.
CallbackModelRunner::Callback randomRegAllocPolicy(uint64_t Seed);

/// Builds the runner for the given feature specs and advice spec.
using RegAllocRunnerFactory =
    std::function<llvm::Expected<std::unique_ptr<MLModelRunner>>(
        std::vector<TensorSpec> Features, TensorSpec Advice)>;

struct MLRegAllocOptions {
  /// On a model failure: warn once and finish with the built-in policy
  /// (true), or report an error (false; the allocation is still finished
  /// with the built-in policy so that llc ends cleanly).
  bool FallBackOnFailure = false;
  /// Names the runner in error messages ("pipe runner over /tmp/x").
  std::string RunnerDescription = "model runner";
  /// Whether the split agent acts (see above).
  bool Split = false;
  /// With Split: a register held by live ranges that can each move to
  /// another register free for them is a legal coloring candidate, taken by
  /// moving them (nothing is spilled), as greedy recolors before it spills.
  bool Moves = true;
  /// Where a region split's borders go (with Split).
  enum class RegionBorders {
    /// Around every block where the region's register is free (and the
    /// heads and tails of those where it is taken for part of the live
    /// range).
    Free,
    /// Where LLVM's spill placement (SpillPlacement over EdgeBundles, as the
    /// greedy allocator's region splits) finds copies cheapest, given where
    /// the register is taken and the live range's uses.
    Placed,
    /// Both regions, each offered once (a region both ways, once): the
    /// split policy's held-out spill cost is lowest so (docs/ml-regalloc.md).
    Both,
  };
  RegionBorders Borders = RegionBorders::Both;
  /// The functions the model runner allocates; the built-in policy allocates
  /// the others in-process, without asking it. Empty: every function. A
  /// trainer samples the functions of a large module this way.
  llvm::StringSet<> ModelFunctions;
  /// Set for a model that passes this many rounds of messages along `edges`
  /// and reads embeddings only of the nodes its decision is about (the
  /// queued ones for the priority agent, `node` for the others), as
  /// mlbridge.regalloc.gnn's does: a query then carries only the edges with
  /// an end fewer than this many edges away from those nodes (none for 0), in
  /// the same order, and such a model decides exactly as over the whole
  /// graph. Unset: the rounds the model declares (MessageRoundsMetadataKey),
  /// else every edge. Fewer than the model declares is an error.
  std::optional<unsigned> MessageRounds;
};

/// The allocator pass (legacy pass manager, which takes ownership).
llvm::FunctionPass *createMLRegAlloc(MLRegAllocOptions Options,
                                     RegAllocRunnerFactory Factory);

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_REGALLOC_MLREGALLOC_H
