//===- AllocationCost.cpp - What a register allocation costs --------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/regalloc/AllocationCost.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/CodeGen/MachineBlockFrequencyInfo.h"
#include "llvm/CodeGen/MachineFrameInfo.h"
#include "llvm/CodeGen/MachineFunctionPass.h"
#include "llvm/CodeGen/MachineMemOperand.h"
#include "llvm/CodeGen/MachineOptimizationRemarkEmitter.h"
#include "llvm/CodeGen/PseudoSourceValue.h"
#include "llvm/CodeGen/TargetInstrInfo.h"
#include "llvm/CodeGen/TargetSubtargetInfo.h"
#include "llvm/Support/FormatVariadic.h"

#include <memory>

using namespace llvm;

namespace mlbridge::passes {

AllocationCost measureAllocationCost(const MachineFunction &MF,
                                     const MachineBlockFrequencyInfo &MBFI) {
  const MachineFrameInfo &MFI = MF.getFrameInfo();
  const TargetInstrInfo &TII = *MF.getSubtarget().getInstrInfo();
  auto IsSpillSlot = [&](const MachineMemOperand *A) {
    const auto *FS =
        dyn_cast_or_null<FixedStackPseudoSourceValue>(A->getPseudoValue());
    return FS && MFI.isSpillSlotObjectIndex(FS->getFrameIndex());
  };
  AllocationCost Cost;
  for (const MachineBasicBlock &MBB : MF) {
    AllocationCost Block;
    for (const MachineInstr &MI : MBB) {
      if (std::optional<DestSourcePair> Copy = TII.isCopyInstr(MI)) {
        const MachineOperand &Dst = *Copy->Destination, &Src = *Copy->Source;
        if (!(Dst.isReg() && Src.isReg() && Dst.getReg() == Src.getReg() &&
              Dst.getSubReg() == Src.getSubReg()))
          ++Block.Copies;
        continue;
      }
      int FI = 0;
      if (TII.isLoadFromStackSlot(MI, FI) && MFI.isSpillSlotObjectIndex(FI)) {
        ++Block.Reloads;
        continue;
      }
      if (TII.isStoreToStackSlot(MI, FI) && MFI.isSpillSlotObjectIndex(FI)) {
        ++Block.Spills;
        continue;
      }
      SmallVector<const MachineMemOperand *, 2> Accesses;
      if (TII.hasLoadFromStackSlot(MI, Accesses) &&
          any_of(Accesses, IsSpillSlot)) {
        Block.FoldedReloads += Accesses.size();
        continue;
      }
      Accesses.clear();
      if (TII.hasStoreToStackSlot(MI, Accesses) &&
          any_of(Accesses, IsSpillSlot))
        Block.FoldedSpills += Accesses.size();
    }
    const double Freq = MBFI.getBlockFreqRelativeToEntryBlock(&MBB);
    Cost.Spills += Block.Spills;
    Cost.Reloads += Block.Reloads;
    Cost.FoldedSpills += Block.FoldedSpills;
    Cost.FoldedReloads += Block.FoldedReloads;
    Cost.Copies += Block.Copies;
    Cost.SpillReloadCost += Freq * (Block.Spills + Block.Reloads +
                                    Block.FoldedSpills + Block.FoldedReloads);
    Cost.CopyCost += Freq * Block.Copies;
  }
  return Cost;
}

namespace {

/// Measures a finished allocation (run on MIR after the rewriter) and
/// reports it as one remark per function.
class AllocationCostPass final : public MachineFunctionPass {
public:
  static char ID;
  AllocationCostPass() : MachineFunctionPass(ID) {}

  StringRef getPassName() const override {
    return "mlbridge register allocation cost";
  }

  void getAnalysisUsage(AnalysisUsage &AU) const override {
    AU.setPreservesAll();
    AU.addRequired<MachineBlockFrequencyInfoWrapperPass>();
    AU.addRequired<MachineOptimizationRemarkEmitterPass>();
    MachineFunctionPass::getAnalysisUsage(AU);
  }

  bool runOnMachineFunction(MachineFunction &MF) override {
    AllocationCost C = measureAllocationCost(
        MF, getAnalysis<MachineBlockFrequencyInfoWrapperPass>().getMBFI());
    getAnalysis<MachineOptimizationRemarkEmitterPass>().getORE().emit([&]() {
      return MachineOptimizationRemarkAnalysis(
                 "mlbridge-regalloc-cost", "AllocationCost",
                 DiagnosticLocation(), &MF.front())
             << "spills " << ore::NV("Spills", C.Spills) << ", reloads "
             << ore::NV("Reloads", C.Reloads) << ", folded spills "
             << ore::NV("FoldedSpills", C.FoldedSpills) << ", folded reloads "
             << ore::NV("FoldedReloads", C.FoldedReloads) << ", copies "
             << ore::NV("Copies", C.Copies) << "; by block frequency: "
             << ore::NV("SpillReloadCost",
                        formatv("{0:f3}", C.SpillReloadCost).str())
             << " spill/reload, "
             << ore::NV("CopyCost", formatv("{0:f3}", C.CopyCost).str())
             << " copy";
    });
    return false;
  }
};

char AllocationCostPass::ID = 0;

} // namespace

const void *allocationCostPassID() { return &AllocationCostPass::ID; }

MachineFunctionPass *createAllocationCostPass() {
  // The legacy pass manager owns its passes.
  return std::make_unique<AllocationCostPass>().release();
}

} // namespace mlbridge::passes
