//===- AllocationCost.h - What a register allocation costs ------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The static cost of a register allocation, the quality measure of the ML
/// register allocator (docs/ml-regalloc.md): spill and reload instructions
/// (stores to and loads from spill slots, also folded into other
/// instructions) and copies, each counted and weighted by its block's
/// frequency relative to the entry block, as LLVM's greedy allocator reports
/// its own (RAGreedy::computeStats; its remark covers greedy only).
///
/// The pass `mlbridge-regalloc-cost` measures any allocator's result: stop llc
/// after the rewriter (`-stop-after=virtregrewriter`, any `-regalloc`), then
/// `llc -load-pass-plugin=... -run-pass=mlbridge-regalloc-cost` on the MIR;
/// one remark per function (`-pass-remarks-analysis=mlbridge-regalloc-cost`).
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_REGALLOC_ALLOCATIONCOST_H
#define MLBRIDGE_PASSES_REGALLOC_ALLOCATIONCOST_H

namespace llvm {
class MachineBlockFrequencyInfo;
class MachineFunction;
class MachineFunctionPass;
} // namespace llvm

namespace mlbridge::passes {

struct AllocationCost {
  unsigned Spills = 0, Reloads = 0, FoldedSpills = 0, FoldedReloads = 0;
  /// Copies between different registers (identity copies are not counted).
  unsigned Copies = 0;
  /// Spills and reloads, folded or not, each weighted by its block's
  /// frequency relative to the entry block.
  double SpillReloadCost = 0;
  /// Copies, weighted the same way.
  double CopyCost = 0;
};

/// Measures \p MF's spills, reloads and copies (see the file comment).
AllocationCost
measureAllocationCost(const llvm::MachineFunction &MF,
                      const llvm::MachineBlockFrequencyInfo &MBFI);

/// The pass `mlbridge-regalloc-cost` (legacy pass manager, which owns it).
llvm::MachineFunctionPass *createAllocationCostPass();
/// Its pass ID, for registering it with a PassRegistry.
const void *allocationCostPassID();

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_REGALLOC_ALLOCATIONCOST_H
