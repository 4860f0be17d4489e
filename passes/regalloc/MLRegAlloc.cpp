//===- MLRegAlloc.cpp - RL4ReAl-style ML register allocator ---------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The allocator of MLRegAlloc.h, written against LLVM 22's installed
/// headers only: live intervals, the register matrix, the virtual register
/// map, spill weights (VirtRegAuxInfo) and the inline spiller. The loop is
/// the one of LLVM's basic allocator (lib/CodeGen/RegAllocBasic.cpp, whose
/// RegAllocBase is not installed), with every choice made by an agent.
///
//===----------------------------------------------------------------------===//
#include "passes/regalloc/MLRegAlloc.h"

#include "mlbridge/Environment.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/CodeGen/CalcSpillWeights.h"
#include "llvm/CodeGen/EdgeBundles.h"
#include "llvm/CodeGen/LiveDebugVariables.h"
#include "llvm/CodeGen/LiveIntervals.h"
#include "llvm/CodeGen/LiveRangeEdit.h"
#include "llvm/CodeGen/LiveRegMatrix.h"
#include "llvm/CodeGen/LiveStacks.h"
#include "llvm/CodeGen/MachineBlockFrequencyInfo.h"
#include "llvm/CodeGen/MachineDominators.h"
#include "llvm/CodeGen/MachineFunctionPass.h"
#include "llvm/CodeGen/MachineInstrBuilder.h"
#include "llvm/CodeGen/MachineLoopInfo.h"
#include "llvm/CodeGen/MachineOptimizationRemarkEmitter.h"
#include "llvm/CodeGen/MachineRegisterInfo.h"
#include "llvm/CodeGen/RegisterClassInfo.h"
#include "llvm/CodeGen/SlotIndexes.h"
#include "llvm/CodeGen/SpillPlacement.h"
#include "llvm/CodeGen/Spiller.h"
#include "llvm/CodeGen/TargetInstrInfo.h"
#include "llvm/CodeGen/TargetOpcodes.h"
#include "llvm/CodeGen/TargetRegisterInfo.h"
#include "llvm/CodeGen/TargetSubtargetInfo.h"
#include "llvm/CodeGen/VirtRegMap.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/InitializePasses.h"
#include "llvm/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

using namespace llvm;

namespace mlbridge::passes {
namespace {

constexpr const char *RemarkPass = "mlbridge-regalloc";
using RegionBorders = MLRegAllocOptions::RegionBorders;
constexpr StringLiteral AdviceName = "regalloc_action";
constexpr StringLiteral MaskName = "action_mask";

enum class NodeStatus : uint8_t { Queued, Assigned, Spilled, Gone };

/// One live range of the episode's graph. Nodes are never removed: a spilled
/// or erased live range stays as a row with its status, so that indices the
/// model saw keep their meaning for the whole episode.
struct Node {
  Register Reg;
  NodeStatus Status = NodeStatus::Queued;
  /// Times it was evicted and queued again (with the split agent).
  unsigned Requeued = 0;
  /// Region splits that made it (of the live range it was split from, and
  /// of it): a live range is split around regions a bounded number of times.
  unsigned RegionSplits = 0;
  float Features[NumNodeFeatures] = {};
};

/// Where a split puts one copy: at the start of a block (after its PHIs and
/// labels) or before its terminators; into the new register or back.
struct SplitCopy {
  MachineBasicBlock *Block = nullptr;
  bool AtEnd = false;
  bool IntoInner = false;
  /// Inside the block, around interference: before this instruction.
  MachineInstr *Before = nullptr;
};

/// One split the split agent may be offered: around one block, or around a
/// region (the blocks of the live range where one register is free, and the
/// ends of those where it is taken for part of the live range, which the part
/// inside then takes).
struct SplitCandidate {
  /// The blocks whose uses and defs the new register takes.
  SmallVector<MachineBasicBlock *, 4> Blocks;
  /// The instructions whose uses and defs it takes in a region's partial
  /// blocks (their heads and tails), and how many such blocks there are.
  SmallVector<MachineInstr *, 4> InsideInstrs;
  unsigned PartialBlocks = 0;
  /// Whether a region takes all the uses and defs of the live range.
  bool AllUses = false;
  /// Whether a block split leaves the live range holding its value through
  /// the block (live out, no copy back).
  bool KeepsValue = false;
  SmallVector<SplitCopy, 4> Copies;
  /// A region's register (none for a block split).
  MCRegister Phys;
  /// Whether spill placement chose the region's borders.
  bool Placed = false;
  float Features[NumBlockFeatures] = {};
};

/// One register the coloring agent may be offered.
struct Candidate {
  MCRegister Phys;
  bool Legal = false;
  float Features[NumRegisterFeatures] = {};
  /// The live ranges taking it evicts (spills).
  SmallVector<Register, 4> Evicts;
  /// Or the live ranges taking it moves, each to a register free for it.
  SmallVector<std::pair<Register, MCRegister>, 4> Moves;
};

/// How many region splits a live range may come from: what ends splitting
/// (a region counts the copies of earlier splits as uses, so a part of copies
/// only can be split again), and what keeps a policy that splits at random
/// from splitting a large function's live ranges block by block (a graph of
/// many thousand nodes, every one of them queried on). The split policy gains
/// nothing from a fourth (held-out spill cost).
constexpr unsigned MaxRegionSplits = 3;
/// See AllocationEnvironment::mayGrow.
constexpr size_t MaxGrowth = 4;
/// A stretch of slots where a register is taken: [first, second).
using HeldSegment = std::pair<SlotIndex, SlotIndex>;

float cappedWeight(const LiveInterval &LI) {
  return LI.isSpillable() ? std::min(LI.weight(), UnspillableWeight)
                          : UnspillableWeight;
}

/// One function's allocation as an mlbridge::Environment: the state of the
/// graph, the legal actions and their effect. It is the LiveRangeEdit
/// delegate of every spill it makes.
class AllocationEnvironment final : public Environment,
                                    private LiveRangeEdit::Delegate {
public:
  AllocationEnvironment(MachineFunction &MF, LiveIntervals &LIS,
                        VirtRegMap &VRM, LiveRegMatrix &Matrix,
                        const RegisterClassInfo &RCI, Spiller &Spill,
                        VirtRegAuxInfo &VRAI,
                        const MachineBlockFrequencyInfo &MBFI,
                        MachineOptimizationRemarkEmitter &ORE, bool SplitAgent,
                        bool Moves, RegionBorders Borders,
                        const EdgeBundles *Bundles, SpillPlacement *Placer)
      : MF(MF), LIS(LIS), VRM(VRM), Matrix(Matrix), RCI(RCI), Spill(Spill),
        VRAI(VRAI), MBFI(MBFI), ORE(ORE), MRI(MF.getRegInfo()),
        TRI(*MF.getSubtarget().getRegisterInfo()),
        TII(*MF.getSubtarget().getInstrInfo()), SplitAgent(SplitAgent),
        Moves(SplitAgent && Moves),
        Borders(Placer && Bundles ? Borders : RegionBorders::Free),
        Bundles(Bundles), Placer(Placer) {
    for (const MCPhysReg *CSR = TRI.getCalleeSavedRegs(&MF); CSR && *CSR; ++CSR)
      CalleeSaved.insert(*CSR);
  }

  /// Starts the episode; called again after a runner failed, it goes on from
  /// where the episode is (the fallback policy finishes it).
  Error reset() override {
    if (Started)
      return Error::success();
    Started = true;
    for (unsigned I = 0, E = MRI.getNumVirtRegs(); I != E; ++I) {
      Register Reg = Register::index2VirtReg(I);
      if (MRI.reg_nodbg_empty(Reg) || VRM.hasPhys(Reg))
        continue;
      addNode(Reg, /*WithEdges=*/false);
    }
    addInitialEdges();
    InitialNodes = Nodes.size();
    if (Error E = prepare())
      return E;
    return takeForcedActions();
  }

  Error observe(MLModelRunner &Agent) override {
    const size_t N = Nodes.size();
    NodeRows.resize(N * NumNodeFeatures);
    Weights.resize(N);
    for (size_t I = 0; I < N; ++I) {
      std::copy_n(Nodes[I].Features, NumNodeFeatures,
                  &NodeRows[I * NumNodeFeatures]);
      Weights[I] = Nodes[I].Features[NodeWeight];
    }
    RegRows.clear();
    if (Agent_ == RegAllocAgent::Coloring)
      for (const Candidate &C : Candidates)
        RegRows.append(std::begin(C.Features), std::end(C.Features));
    BlockRows.clear();
    if (Agent_ == RegAllocAgent::Split)
      for (const SplitCandidate &C : SplitCandidates)
        BlockRows.append(std::begin(C.Features), std::end(C.Features));
    const int64_t CurrentNode =
        Agent_ == RegAllocAgent::Priority ? -1 : static_cast<int64_t>(Current);
    return Agent.populateFeatures(
        std::pair(StringRef("agent"), static_cast<int64_t>(Agent_)),
        std::pair(StringRef("function_name"), MF.getName().str()),
        std::pair(StringRef("node_features"), ArrayRef<float>(NodeRows)),
        std::pair(StringRef("edges"), MessageRounds
                                          ? edgesRead(*MessageRounds)
                                          : ArrayRef<int64_t>(EdgeList)),
        std::pair(StringRef("spill_weights"), ArrayRef<float>(Weights)),
        std::pair(StringRef("node"), CurrentNode),
        std::pair(StringRef("register_features"), ArrayRef<float>(RegRows)),
        std::pair(StringRef("block_features"), ArrayRef<float>(BlockRows)),
        std::pair(StringRef(MaskName), ArrayRef<int64_t>(Mask)));
  }

  Error step(const Action &A) override {
    if (A.Advice.type() != ElementType::Int64 ||
        A.Advice.getElementCount() != 1)
      return createStringError("the advice 'action' is not one int64");
    const int64_t Index = A.Advice.data<int64_t>()[0];
    // The runners check the mask (advice constraints); this is the
    // allocator's own guard, so that no runner can get an illegal action in.
    if (Index < 0 || static_cast<uint64_t>(Index) >= Mask.size() ||
        !Mask[Index])
      return createStringError(
          "the %s agent chose action %lld, which is not legal (action_mask "
          "has %zu entries)",
          agentName(Agent_), static_cast<long long>(Index), Mask.size());
    if (Error E = act(static_cast<unsigned>(Index)))
      return E;
    return takeForcedActions();
  }

  bool isDone() const override { return Done; }
  size_t nextAgent() const override { return static_cast<size_t>(Agent_); }
  ActionSelection actionSelection(size_t) const override {
    return ActionSelection::Raw;
  }

  size_t nodes() const { return Nodes.size(); }

  /// From now on, queries carry only the edges a model passing \p Rounds
  /// rounds of messages reads (edgesRead()); none: every edge.
  void sendEdgesFor(std::optional<unsigned> Rounds) { MessageRounds = Rounds; }

private:
  static const char *agentName(RegAllocAgent A) {
    switch (A) {
    case RegAllocAgent::Priority:
      return "priority";
    case RegAllocAgent::Coloring:
      return "coloring";
    case RegAllocAgent::Split:
      return "split";
    }
    return "unknown";
  }

  /// Applies the current agent's legal action \p Index.
  Error act(unsigned Index) {
    switch (Agent_) {
    case RegAllocAgent::Priority:
      // The coloring agent acts next (unless nothing is legal for it).
      startColoring(Index);
      return Error::success();
    case RegAllocAgent::Coloring:
      if (color(Index))
        return Error::success(); // the split agent acts next
      return prepare();
    case RegAllocAgent::Split:
      split(Index);
      return prepare();
    }
    return prepare();
  }

  /// Takes, without asking, every action that is the only legal one: the
  /// last queued live range; the one register a live range that may not be
  /// spilled can take; spilling, where no register is legal (the split agent
  /// may then still have a choice). No agent has a choice there, and every
  /// policy answers the same: about 5% of the queries on the held-out
  /// projects.
  Error takeForcedActions() {
    while (!Done) {
      std::optional<unsigned> Only;
      for (size_t I = 0; I < Mask.size(); ++I) {
        if (!Mask[I])
          continue;
        if (Only)
          return Error::success(); // a choice: the agent decides
        Only = static_cast<unsigned>(I);
      }
      if (!Only)
        return Error::success();
      if (Error E = act(*Only))
        return E;
    }
    return Error::success();
  }

  // The graph.

  unsigned addNode(Register Reg, bool WithEdges) {
    auto [It, New] = NodeOf.try_emplace(Reg, Nodes.size());
    if (!New) {
      // Back in the queue (its register was taken away, or it was split).
      Node &Existing = Nodes[It->second];
      setStatus(Existing, NodeStatus::Queued);
      refreshFeatures(Existing);
      return It->second;
    }
    Nodes.push_back(Node{Reg});
    Node &N = Nodes.back();
    setStatus(N, NodeStatus::Queued);
    const TargetRegisterClass *RC = MRI.getRegClass(Reg);
    N.Features[NodeClassSize] =
        static_cast<float>(RCI.getNumAllocatableRegs(RC));
    refreshFeatures(N);
    const LiveInterval &LI = LIS.getInterval(Reg);
    if (WithEdges && !LI.empty())
      for (unsigned J = 0, E = Nodes.size() - 1; J < E; ++J) {
        if (!isLive(Nodes[J]))
          continue;
        const LiveInterval &Other = LIS.getInterval(Nodes[J].Reg);
        if (!Other.empty() && LI.overlaps(Other))
          addEdge(J, It->second);
      }
    return It->second;
  }

  void refreshFeatures(Node &N) {
    const LiveInterval &LI = LIS.getInterval(N.Reg);
    N.Features[NodeWeight] = cappedWeight(LI);
    N.Features[NodeSpillable] = LI.isSpillable();
    N.Features[NodeLogSize] = std::log2(1.0f + LI.getSize());
    N.Features[NodeSegments] = static_cast<float>(LI.size());
    N.Features[NodeInstructions] = static_cast<float>(
        std::distance(MRI.reg_nodbg_instructions(N.Reg).begin(),
                      MRI.reg_nodbg_instructions(N.Reg).end()));
    N.Features[NodeHasHint] = VRM.hasKnownPreference(N.Reg);
  }

  static void setStatus(Node &N, NodeStatus S) {
    N.Status = S;
    N.Features[NodeQueued] = S == NodeStatus::Queued;
    N.Features[NodeAssigned] = S == NodeStatus::Assigned;
    N.Features[NodeSpilled] = S == NodeStatus::Spilled;
  }

  static bool isLive(const Node &N) {
    return N.Status == NodeStatus::Queued || N.Status == NodeStatus::Assigned;
  }

  void addEdge(unsigned A, unsigned B) {
    if (A > B)
      std::swap(A, B);
    if (!EdgeSet.insert((uint64_t(A) << 32) | B).second)
      return;
    EdgeList.push_back(A);
    EdgeList.push_back(B);
    Nodes[A].Features[NodeDegree] += 1;
    Nodes[B].Features[NodeDegree] += 1;
  }

  /// The edges a model passing \p Rounds rounds of messages reads for the
  /// current decision (MLRegAllocOptions::MessageRounds): those with an end
  /// fewer than \p Rounds edges away from a node the decision is about (the
  /// queued ones, or the one being colored or split), in the whole list's
  /// order, so that every message into a node whose embedding the decision
  /// reads comes in the same order as over the whole graph.
  ArrayRef<int64_t> edgesRead(unsigned Rounds) {
    SentEdges.clear();
    if (Rounds == 0)
      return SentEdges;
    Near.assign(Nodes.size(), 0);
    if (Agent_ == RegAllocAgent::Priority)
      for (size_t I = 0; I < Nodes.size(); ++I)
        Near[I] = Mask[I] != 0;
    else
      Near[Current] = 1;
    const size_t E = EdgeList.size();
    for (unsigned R = 1; R < Rounds; ++R) {
      NearNext = Near;
      for (size_t I = 0; I < E; I += 2) {
        const int64_t A = EdgeList[I], B = EdgeList[I + 1];
        NearNext[A] |= Near[B];
        NearNext[B] |= Near[A];
      }
      Near.swap(NearNext);
    }
    for (size_t I = 0; I < E; I += 2)
      if (Near[EdgeList[I]] || Near[EdgeList[I + 1]])
        SentEdges.append({EdgeList[I], EdgeList[I + 1]});
    return SentEdges;
  }

  /// All interferences among the first nodes: a sweep over the live ranges
  /// sorted by start, the exact overlap test only where the spans meet.
  void addInitialEdges() {
    // Empty live ranges (only undefined uses) interfere with nothing.
    SmallVector<unsigned, 0> ByStart;
    for (unsigned I = 0; I < Nodes.size(); ++I)
      if (!LIS.getInterval(Nodes[I].Reg).empty())
        ByStart.push_back(I);
    auto Start = [&](unsigned I) {
      return LIS.getInterval(Nodes[I].Reg).beginIndex();
    };
    llvm::sort(ByStart,
               [&](unsigned A, unsigned B) { return Start(A) < Start(B); });
    SmallVector<unsigned, 0> Active;
    for (unsigned I : ByStart) {
      const LiveInterval &LI = LIS.getInterval(Nodes[I].Reg);
      llvm::erase_if(Active, [&](unsigned J) {
        return LIS.getInterval(Nodes[J].Reg).endIndex() <= LI.beginIndex();
      });
      for (unsigned J : Active)
        if (LI.overlaps(LIS.getInterval(Nodes[J].Reg)))
          addEdge(I, J);
      Active.push_back(I);
    }
  }

  // The episode.

  /// Drops queued live ranges that lost their uses (the spiller can leave
  /// them), then sets up the next decision: the priority agent's, or the end.
  Error prepare() {
    for (Node &N : Nodes)
      if (N.Status == NodeStatus::Queued && MRI.reg_nodbg_empty(N.Reg)) {
        LIS.removeInterval(N.Reg);
        setStatus(N, NodeStatus::Gone);
      }
    Agent_ = RegAllocAgent::Priority;
    Mask.assign(Nodes.size(), 0);
    bool Any = false;
    for (size_t I = 0; I < Nodes.size(); ++I)
      if (Nodes[I].Status == NodeStatus::Queued)
        Mask[I] = Any = true;
    Done = !Any;
    return Error::success();
  }

  /// The priority agent chose node \p I: offer its candidates to the
  /// coloring agent, or, when nothing is legal, fail as LLVM does.
  void startColoring(unsigned I) {
    Current = I;
    Matrix.invalidateVirtRegs();
    const LiveInterval &LI = LIS.getInterval(Nodes[I].Reg);
    remark("Priority", [&](raw_ostream &OS) {
      OS << "priority agent: node " << I << " (" << printReg(LI.reg(), &TRI)
         << ") next";
    });
    computeCandidates(LI);
    Agent_ = RegAllocAgent::Coloring;
    Mask.assign(Candidates.size() + 1, 0);
    bool Any = false;
    for (size_t R = 0; R < Candidates.size(); ++R)
      if (Candidates[R].Legal)
        Mask[R] = Any = true;
    if (LI.isSpillable())
      Mask.back() = Any = true;
    if (!Any)
      outOfRegisters(I);
  }

  void computeCandidates(const LiveInterval &LI) {
    Candidates.clear();
    const TargetRegisterClass *RC = MRI.getRegClass(LI.reg());
    ArrayRef<MCPhysReg> Order = RCI.getOrder(RC);
    SmallVector<MCPhysReg, 16> Hints;
    const bool HardHints =
        TRI.getRegAllocationHints(LI.reg(), Order, Hints, MF, &VRM, &Matrix);
    SmallVector<MCPhysReg, 32> Regs(Hints.begin(), Hints.end());
    if (!HardHints)
      for (MCPhysReg P : Order)
        if (!is_contained(Hints, P))
          Regs.push_back(P);
    for (size_t Pos = 0; Pos < Regs.size(); ++Pos) {
      Candidate C;
      C.Phys = Regs[Pos];
      C.Features[RegHinted] = is_contained(Hints, Regs[Pos]);
      C.Features[RegOrder] = float(Pos) / float(Regs.size());
      C.Features[RegFirstCSRUse] =
          CalleeSaved.contains(C.Phys) && !Matrix.isPhysRegUsed(C.Phys);
      switch (Matrix.checkInterference(LI, C.Phys)) {
      case LiveRegMatrix::IK_Free:
        C.Legal = true;
        C.Features[RegFree] = 1;
        break;
      case LiveRegMatrix::IK_VirtReg: {
        // What holds the register may move instead (with the split agent).
        if (Moves && planMoves(LI, C)) {
          C.Legal = true;
          C.Features[RegEvictCost] = 0;
          break;
        }
        // Evictable when every live range in the way may be spilled and
        // weighs no more than this one (as LLVM's basic allocator decides).
        float Cost = 0;
        C.Legal = true;
        for (MCRegUnit Unit : TRI.regunits(C.Phys)) {
          LiveIntervalUnion::Query &Q = Matrix.query(LI, Unit);
          for (const LiveInterval *Intf : Q.interferingVRegs()) {
            if (!Intf->isSpillable() || Intf->weight() > LI.weight()) {
              C.Legal = false;
              break;
            }
            if (!is_contained(C.Evicts, Intf->reg())) {
              C.Evicts.push_back(Intf->reg());
              Cost += Intf->weight();
            }
          }
          if (!C.Legal)
            break;
        }
        C.Features[RegEvictCost] = C.Legal ? Cost : -1;
        break;
      }
      default: // a fixed register or a clobber in the way
        C.Features[RegEvictCost] = -1;
        break;
      }
      if (!C.Legal)
        C.Evicts.clear();
      Candidates.push_back(std::move(C));
    }
  }

  /// Whether every live range holding \p C.Phys where \p LI lives can move
  /// to another register, free for it everywhere and not overlapping
  /// C.Phys: then taking C.Phys spills nothing (C.Moves, each range's new
  /// register), as LLVM's greedy allocator recolors before it spills.
  bool planMoves(const LiveInterval &LI, Candidate &C) {
    constexpr size_t MaxMoves = 4;
    SmallVector<const LiveInterval *, 4> Holders;
    for (MCRegUnit Unit : TRI.regunits(C.Phys))
      for (const LiveInterval *Intf :
           Matrix.query(LI, Unit).interferingVRegs(MaxMoves + 1)) {
        if (!is_contained(Holders, Intf))
          Holders.push_back(Intf);
        if (Holders.size() > MaxMoves)
          return false;
      }
    SmallVector<std::pair<Register, MCRegister>, 4> Moves;
    for (const LiveInterval *Intf : Holders) {
      const MCRegister From = VRM.getPhys(Intf->reg());
      // Its own candidates, in the order computeCandidates offers them.
      ArrayRef<MCPhysReg> Order = RCI.getOrder(MRI.getRegClass(Intf->reg()));
      SmallVector<MCPhysReg, 16> Regs;
      if (!TRI.getRegAllocationHints(Intf->reg(), Order, Regs, MF, &VRM,
                                     &Matrix))
        for (MCPhysReg P : Order)
          if (!is_contained(Regs, P))
            Regs.push_back(P);
      std::optional<MCRegister> To;
      for (MCPhysReg P : Regs) {
        if (TRI.regsOverlap(P, C.Phys) || TRI.regsOverlap(P, From) ||
            any_of(Moves, [&](const std::pair<Register, MCRegister> &M) {
              return TRI.regsOverlap(P, M.second);
            }))
          continue;
        if (Matrix.checkInterference(*Intf, P) == LiveRegMatrix::IK_Free) {
          To = P;
          break;
        }
      }
      if (!To)
        return false;
      Moves.push_back({Intf->reg(), *To});
    }
    C.Moves = std::move(Moves);
    return !C.Moves.empty();
  }

  /// The coloring agent chose action \p R for the current node; true when
  /// the split agent acts next.
  bool color(unsigned R) {
    // Spills add nodes (Nodes may reallocate): no Node& is kept across one.
    const Register Reg = Nodes[Current].Reg;
    if (R == Candidates.size() && startSplit())
      return true;
    if (R == Candidates.size()) {
      remark("Spill", [&](raw_ostream &OS) {
        OS << "coloring agent: node " << Current << " (" << printReg(Reg, &TRI)
           << ") spilled";
      });
      setStatus(Nodes[Current], NodeStatus::Spilled);
      spill(LIS.getInterval(Reg));
      return false;
    }
    const Candidate &C = Candidates[R];
    for (const auto &[Moved, To] : C.Moves) {
      LiveInterval &MLI = LIS.getInterval(Moved);
      const unsigned E = NodeOf.lookup(Moved);
      remark("Move", [&](raw_ostream &OS) {
        OS << "coloring agent: node " << E << " (" << printReg(Moved, &TRI)
           << ") moved from " << printReg(VRM.getPhys(Moved), &TRI) << " to "
           << printReg(To, &TRI);
      });
      Matrix.unassign(MLI);
      Matrix.assign(MLI, To);
    }
    for (Register Evicted : C.Evicts) {
      if (!VRM.hasPhys(Evicted))
        continue; // spilled already, with an earlier one
      LiveInterval &ELI = LIS.getInterval(Evicted);
      const unsigned E = NodeOf.lookup(Evicted);
      // With the split agent, an evicted live range is queued again, once:
      // it may find another register, or be split where one is free.
      const bool Requeue = SplitAgent && Nodes[E].Requeued == 0 && mayGrow();
      remark("Evict", [&](raw_ostream &OS) {
        OS << "coloring agent: node " << E << " (" << printReg(Evicted, &TRI)
           << ") evicted from " << printReg(C.Phys, &TRI)
           << (Requeue ? " and queued again" : " and spilled");
      });
      Matrix.unassign(ELI);
      if (Requeue) {
        ++Nodes[E].Requeued;
        addNode(Evicted, /*WithEdges=*/false);
        continue;
      }
      setStatus(Nodes[E], NodeStatus::Spilled);
      spill(ELI);
    }
    // Spilling can shrink or empty this live range too; assign only what is
    // still there and free.
    if (Nodes[Current].Status != NodeStatus::Queued || MRI.reg_nodbg_empty(Reg))
      return false;
    const LiveInterval &Now = LIS.getInterval(Reg);
    Matrix.invalidateVirtRegs();
    if (Matrix.checkInterference(Now, C.Phys) != LiveRegMatrix::IK_Free)
      return false; // stays queued: the priority agent sees it again
    remark("Assign", [&](raw_ostream &OS) {
      OS << "coloring agent: node " << Current << " (" << printReg(Reg, &TRI)
         << ") assigned " << printReg(C.Phys, &TRI);
    });
    Matrix.assign(Now, C.Phys);
    setStatus(Nodes[Current], NodeStatus::Assigned);
    return false;
  }

  // Splitting.

  /// Whether the split agent may still act (and evicted live ranges be
  /// queued again): while the graph has fewer than MaxGrowth times the nodes
  /// it started with. Every query carries the whole graph, so a policy that
  /// splits and evicts at random would otherwise make a large function's
  /// episode quadratic in its splits; past the bound the episode goes on as
  /// LLVM's basic allocator's does.
  bool mayGrow() {
    if (Nodes.size() < MaxGrowth * InitialNodes + 64)
      return true;
    if (!Grown) {
      Grown = true;
      remark("GrowthBound", [&](raw_ostream &OS) {
        OS << "the graph has " << Nodes.size() << " nodes, " << MaxGrowth
           << " times the " << InitialNodes
           << " it started with (plus 64): no more splits, evicted live "
              "ranges are spilled";
      });
    }
    return false;
  }

  /// The blocks the current node may be split around: those with its own
  /// uses or defs (not the copies of earlier splits), when there are at least
  /// two or a block of the second kind, and those it lives through that
  /// contain a call (no use of it, no copy of an earlier split of it: split
  /// around such a block, the rest of the live range no longer crosses that
  /// call's clobbers). Left out are blocks where a split would need more
  /// than two copies at the block's borders (landing pads, blocks with an
  /// asm goto, terminators that read or write it, inline assembly using it)
  /// and blocks from which it is live into a landing pad (its value must be
  /// in place at the invoke, before the copy at the block's end).
  void computeSplitCandidates(Register Reg) {
    SplitCandidates.clear();
    const LiveInterval &LI = LIS.getInterval(Reg);
    if (!SplitAgent || LI.hasSubRanges() ||
        MRI.getRegClass(Reg)->expensiveOrImpossibleToCopy())
      return;
    // A block split counts neither the copies of earlier splits nor blocks
    // split out once already; a region counts both (RegionUses,
    // RegionRefused): a part that only carries the value between other parts
    // (its instructions are all copies) then may take a register where one is
    // free, and its copies are moves, not reloads and stores.
    SmallDenseMap<MachineBasicBlock *, unsigned, 8> Uses, RegionUses;
    SmallPtrSet<MachineBasicBlock *, 8> Refused, RegionRefused;
    for (MachineInstr &MI : MRI.reg_nodbg_instructions(Reg)) {
      MachineBasicBlock *MBB = MI.getParent();
      ++RegionUses[MBB];
      if (MI.isTerminator() || MI.isInlineAsm())
        RegionRefused.insert(MBB);
      if (SplitCopies.contains(&MI)) {
        Refused.insert(MBB); // split out once already (if it had no uses)
        continue;
      }
      ++Uses[MBB];
      if (MI.isTerminator() || MI.isInlineAsm())
        Refused.insert(MBB);
    }
    for (MachineBasicBlock &MBB : MF) {
      auto It = Uses.find(&MBB);
      const unsigned BlockUseCount = It == Uses.end() ? 0 : It->second;
      if (Refused.contains(&MBB) || MBB.isEHPad() || MBB.mayHaveInlineAsmBr() ||
          MBB.isInlineAsmBrIndirectTarget())
        continue;
      unsigned Calls = 0;
      for (const MachineInstr &MI : MBB)
        Calls += MI.isCall();
      const bool LiveIn = LIS.isLiveInToMBB(LI, &MBB);
      const bool LiveOut = LIS.isLiveOutOfMBB(LI, &MBB);
      if (BlockUseCount == 0) {
        // Lives through a call: worth splitting out even with no use here.
        if (!LiveIn || !LiveOut || Calls == 0)
          continue;
      }
      // Live into a landing pad: the value must be in place at the call that
      // may throw (an invoke), not only at the copy a split would put before
      // the terminators, after that call.
      if (LiveOut && any_of(MBB.successors(), [&](MachineBasicBlock *Succ) {
            return Succ->isEHPad() && LIS.isLiveInToMBB(LI, Succ);
          }))
        continue;
      SplitCandidate C;
      C.Blocks.push_back(&MBB);
      // Copied in at the block's start, and back before its terminators
      // only if the block defines the value it leaves with (a loop of one
      // block copies on every iteration). Else the live range keeps holding
      // the value through the block, beside the new register (they overlap,
      // as greedy's splits do for speed): spilled, it is reloaded once for
      // the block's uses, not once per use, and stores nothing. A block it
      // only lives through is split out of it, copy back and all.
      bool CopyBack = LiveOut;
      if (LiveOut && BlockUseCount > 0) {
        const VNInfo *Out = LI.getVNInfoBefore(LIS.getMBBEndIdx(&MBB));
        CopyBack =
            Out && !Out->isPHIDef() && LIS.getMBBFromIndex(Out->def) == &MBB;
      }
      if (LiveIn)
        C.Copies.push_back({&MBB, /*AtEnd=*/false, /*IntoInner=*/true});
      if (CopyBack)
        C.Copies.push_back({&MBB, /*AtEnd=*/true, /*IntoInner=*/false});
      C.KeepsValue = LiveOut && !CopyBack;
      C.Features[BlockFrequency] =
          std::log2(1.0 + MBFI.getBlockFreqRelativeToEntryBlock(&MBB));
      C.Features[BlockUses] = static_cast<float>(BlockUseCount);
      C.Features[BlockLiveIn] = LiveIn;
      C.Features[BlockLiveOut] = CopyBack;
      C.Features[BlockInstructions] = static_cast<float>(MBB.size()) / 100.0f;
      C.Features[BlockCalls] = static_cast<float>(Calls);
      SplitCandidates.push_back(C);
    }
    // All its uses in one block and no call to split out: nothing to split
    // them from.
    if (Uses.size() < 2 &&
        none_of(SplitCandidates, [](const SplitCandidate &C) {
          return C.Features[BlockUses] == 0;
        }))
      SplitCandidates.clear();
    if (Nodes[NodeOf.lookup(Reg)].RegionSplits < MaxRegionSplits)
      addRegionCandidates(LI, RegionUses, RegionRefused);
  }

  /// Where \p Phys is taken, in \p MBB, while \p LI lives there: the first
  /// and the end of the last slot at which an assigned live range (\p Held:
  /// heldSegments, where those holding \p Phys live), a fixed register or a
  /// call clobber is in the way. None where it is free.
  std::optional<std::pair<SlotIndex, SlotIndex>>
  interferenceInBlock(const LiveInterval &LI, const MachineBasicBlock &MBB,
                      MCRegister Phys, ArrayRef<HeldSegment> Held) {
    const SlotIndex Start = LIS.getMBBStartIdx(&MBB);
    const SlotIndex End = LIS.getMBBEndIdx(&MBB);
    std::optional<std::pair<SlotIndex, SlotIndex>> Bounds;
    auto Widen = [&](SlotIndex From, SlotIndex To) {
      if (!Bounds)
        Bounds = {From, To};
      Bounds->first = std::min(Bounds->first, From);
      Bounds->second = std::max(Bounds->second, To);
    };
    ArrayRef<SlotIndex> MaskSlots = LIS.getRegMaskSlotsInBlock(MBB.getNumber());
    ArrayRef<const uint32_t *> MaskBits =
        LIS.getRegMaskBitsInBlock(MBB.getNumber());
    for (size_t I = 0; I < MaskSlots.size(); ++I)
      if (MachineOperand::clobbersPhysReg(MaskBits[I], Phys) &&
          LI.liveAt(MaskSlots[I]))
        Widen(MaskSlots[I], MaskSlots[I].getDeadSlot());
    // Where LI's segments in the block overlap \p Other's.
    auto Overlaps = [&](const LiveRange &Other) {
      for (auto Seg = LI.find(Start); Seg != LI.end() && Seg->start < End;
           ++Seg) {
        const SlotIndex From = std::max(Seg->start, Start);
        const SlotIndex To = std::min(Seg->end, End);
        for (auto O = Other.find(From); O != Other.end() && O->start < To;
             ++O) {
          const SlotIndex A = std::max(From, O->start);
          const SlotIndex B = std::min(To, O->end);
          if (A < B)
            Widen(A, B);
        }
      }
    };
    for (MCRegUnit Unit : TRI.regunits(Phys))
      Overlaps(LIS.getRegUnit(Unit));
    for (auto Seg = LI.find(Start); Seg != LI.end() && Seg->start < End;
         ++Seg) {
      const SlotIndex From = std::max(Seg->start, Start);
      const SlotIndex To = std::min(Seg->end, End);
      for (auto H = partition_point(
               Held, [&](const HeldSegment &S) { return S.second <= From; });
           H != Held.end() && H->first < To; ++H) {
        const SlotIndex A = std::max(From, H->first);
        const SlotIndex B = std::min(To, H->second);
        if (A < B)
          Widen(A, B);
      }
    }
    return Bounds;
  }

  /// Where the live ranges holding \p Phys somewhere \p LI lives live: their
  /// segments merged, sorted and disjoint (one search per block, however many
  /// they are: a long live range in a large function has hundreds).
  SmallVector<HeldSegment, 64> heldSegments(const LiveInterval &LI,
                                            MCRegister Phys) {
    SmallVector<HeldSegment, 64> All;
    for (const LiveInterval *H : holdersOf(LI, Phys))
      for (const LiveRange::Segment &S : *H)
        All.push_back({S.start, S.end});
    llvm::sort(All);
    SmallVector<HeldSegment, 64> Merged;
    for (const HeldSegment &S : All) {
      if (!Merged.empty() && S.first <= Merged.back().second)
        Merged.back().second = std::max(Merged.back().second, S.second);
      else
        Merged.push_back(S);
    }
    return Merged;
  }

  /// Whether a register taken in \p MBB between \p Intf's bounds is taken
  /// after a copy placed at the block's end (before its first terminator).
  bool takenAtEnd(const MachineBasicBlock &MBB,
                  std::pair<SlotIndex, SlotIndex> Intf) {
    SlotIndex Copy = LIS.getMBBStartIdx(&MBB);
    for (auto I = MBB.getFirstTerminator(); I != MBB.begin();) {
      --I;
      if (!I->isDebugInstr()) {
        Copy = LIS.getInstructionIndex(*I).getDeadSlot();
        break;
      }
    }
    return Copy < Intf.second;
  }

  /// The live ranges holding \p Phys somewhere \p LI lives.
  SmallVector<const LiveInterval *, 8> holdersOf(const LiveInterval &LI,
                                                 MCRegister Phys) {
    SmallVector<const LiveInterval *, 8> Holders;
    for (MCRegUnit Unit : TRI.regunits(Phys))
      for (const LiveInterval *H : Matrix.query(LI, Unit).interferingVRegs())
        if (!is_contained(Holders, H))
          Holders.push_back(H);
    return Holders;
  }

  /// A region block where the region's register is taken for part of the
  /// live range: the new register may hold the value before the first
  /// interference (the head) and after the last (the tail), with copies
  /// around the interference, as LLVM's greedy allocator does.
  struct PartialBlock {
    MachineBasicBlock *Block = nullptr;
    /// The head's end: the first instruction at or after the interference
    /// (nullptr: no head, or a free block's head, which ends with the
    /// block).
    MachineInstr *LeaveBefore = nullptr;
    /// The tail's start: the first instruction after the interference
    /// (nullptr: the interference reaches the terminators, no tail).
    MachineInstr *EnterBefore = nullptr;
    bool Head = false, Tail = false;
    /// The instructions of the head and tail that read or write the live
    /// range.
    SmallVector<MachineInstr *, 4> Inside;
    unsigned Instructions = 0, Calls = 0;
  };

  /// The head and tail \p MBB offers a region of \p LI in the register taken
  /// between \p Intf's bounds: each only if it has uses or defs of \p LI
  /// (a part without any would only move a copy within the block).
  std::optional<PartialBlock> partialBlock(const LiveInterval &LI,
                                           MachineBasicBlock &MBB,
                                           std::pair<SlotIndex, SlotIndex> Intf,
                                           bool MayHead = true,
                                           bool MayTail = true) {
    PartialBlock P;
    P.Block = &MBB;
    MachineInstr *Last = nullptr; // the last instruction touching Intf
    for (MachineInstr &MI : MBB) {
      if (MI.isDebugInstr())
        continue;
      const SlotIndex Idx = LIS.getInstructionIndex(MI);
      if (!P.LeaveBefore && Intf.first <= Idx.getDeadSlot())
        P.LeaveBefore = &MI;
      if (Idx.getBaseIndex() < Intf.second)
        Last = &MI;
    }
    if (!P.LeaveBefore || !Last)
      return std::nullopt;
    // The head: the instructions before LeaveBefore (a terminator there: the
    // copy goes before the first terminator, earlier, which is as good).
    unsigned HeadUses = 0, TailUses = 0;
    SmallVector<MachineInstr *, 4> HeadRefs, TailRefs;
    unsigned HeadInstrs = 0, HeadCalls = 0, TailInstrs = 0, TailCalls = 0;
    for (MachineInstr &MI : MBB) {
      if (&MI == P.LeaveBefore)
        break;
      if (MI.isDebugInstr())
        continue;
      ++HeadInstrs;
      HeadCalls += MI.isCall();
      if (MI.readsRegister(LI.reg(), &TRI) ||
          MI.modifiesRegister(LI.reg(), &TRI)) {
        ++HeadUses;
        HeadRefs.push_back(&MI);
      }
    }
    // The tail: after Last, up to the terminators (no tail after a
    // terminator).
    if (!Last->isTerminator()) {
      MachineBasicBlock::iterator After = skipDebugInstructionsForward(
          std::next(MachineBasicBlock::iterator(Last)), MBB.end());
      P.EnterBefore =
          After == MBB.end() || After->isTerminator() ? nullptr : &*After;
      for (auto It = After; It != MBB.end(); ++It) {
        if (It->isDebugInstr())
          continue;
        ++TailInstrs;
        TailCalls += It->isCall();
        if (It->readsRegister(LI.reg(), &TRI) ||
            It->modifiesRegister(LI.reg(), &TRI)) {
          ++TailUses;
          TailRefs.push_back(&*It);
        }
      }
    }
    P.Head = MayHead && HeadUses > 0;
    P.Tail = MayTail && TailUses > 0 && P.EnterBefore;
    if (!P.Head && !P.Tail)
      return std::nullopt;
    if (P.Head) {
      P.Inside.append(HeadRefs.begin(), HeadRefs.end());
      P.Instructions += HeadInstrs;
      P.Calls += HeadCalls;
    }
    if (P.Tail) {
      P.Inside.append(TailRefs.begin(), TailRefs.end());
      P.Instructions += TailInstrs;
      P.Calls += TailCalls;
    }
    return P;
  }

  /// A block where the region's register is free but spill placement
  /// keeps the value in it across only one of the block's borders: the new
  /// register takes every use and def in the block and holds the value from
  /// the block's start (\p Head) to its terminators, or from its first
  /// instruction (after PHIs and labels) to its end. None if it has no use
  /// or def of \p LI, or (a tail) no instruction before its terminators.
  std::optional<PartialBlock> freeBlockEnd(const LiveInterval &LI,
                                           MachineBasicBlock &MBB, bool Head) {
    PartialBlock P;
    P.Block = &MBB;
    for (MachineInstr &MI : MBB) {
      if (MI.isDebugInstr())
        continue;
      ++P.Instructions;
      P.Calls += MI.isCall();
      if (MI.readsRegister(LI.reg(), &TRI) ||
          MI.modifiesRegister(LI.reg(), &TRI))
        P.Inside.push_back(&MI);
    }
    if (P.Inside.empty())
      return std::nullopt;
    if (Head) {
      P.Head = true;
      auto Term = MBB.getFirstTerminator();
      P.LeaveBefore = Term == MBB.end() ? nullptr : &*Term;
      return P;
    }
    auto First = MBB.SkipPHIsLabelsAndDebug(MBB.begin());
    if (First == MBB.end() || First->isTerminator())
      return std::nullopt;
    P.Tail = true;
    P.EnterBefore = &*First;
    return P;
  }

  /// What spill placement needs of a block with uses or defs of a live
  /// range (greedy's SplitAnalysis::BlockInfo).
  struct UseBlock {
    SlotIndex First, Last;
    bool Defines = false, LastIsImplicitDef = false;
  };

  /// Asks LLVM's spill placement where \p LI should be in \p Phys, given
  /// \p Intfs (where \p Phys is taken in each of \p Live's blocks) and
  /// \p UseBlocks: a port of the greedy allocator's addSplitConstraints,
  /// growRegion and addThroughConstraints against this allocator's own
  /// interference. Sets \p RegBundles to the edge bundles across which the
  /// value should be in \p Phys; false if there is none, or if the placement
  /// gives up (a spill needed before a block's first split point, or more
  /// than greedy's budget of block visits).
  bool
  placeRegion(const LiveInterval &LI, ArrayRef<MachineBasicBlock *> Live,
              ArrayRef<std::optional<std::pair<SlotIndex, SlotIndex>>> Intfs,
              const SmallDenseMap<MachineBasicBlock *, UseBlock, 8> &UseBlocks,
              BitVector &RegBundles) {
    using SP = SpillPlacement;
    Placer->prepare(RegBundles);
    // The placement keeps a pointer to RegBundles until finish().
    auto Finish = [&](bool Result) {
      Placer->finish();
      return Result && RegBundles.any();
    };
    SmallVector<SP::BlockConstraint, 16> Constraints;
    BitVector Through(MF.getNumBlockIDs());
    DenseMap<unsigned, size_t> IndexOf;
    for (size_t I = 0; I < Live.size(); ++I) {
      MachineBasicBlock *MBB = Live[I];
      const unsigned N = MBB->getNumber();
      const bool LiveIn = LIS.isLiveInToMBB(LI, MBB);
      const bool LiveOut = LIS.isLiveOutOfMBB(LI, MBB);
      auto It = UseBlocks.find(MBB);
      if (It == UseBlocks.end()) {
        if (LiveIn && LiveOut) {
          Through.set(N);
          IndexOf[N] = I;
        }
        continue;
      }
      const UseBlock &B = It->second;
      SP::BlockConstraint BC;
      BC.Number = N;
      BC.Entry = LiveIn ? SP::PrefReg : SP::DontCare;
      BC.Exit = LiveOut && !B.LastIsImplicitDef ? SP::PrefReg : SP::DontCare;
      BC.ChangesValue = B.Defines;
      if (const auto &Intf = Intfs[I]) {
        if (LiveIn) {
          if (Intf->first <= LIS.getMBBStartIdx(MBB))
            BC.Entry = SP::MustSpill;
          else if (Intf->first < B.First)
            BC.Entry = SP::PrefSpill;
          auto Split = MBB->SkipPHIsLabelsAndDebug(MBB->begin());
          if (BC.Entry != SP::PrefReg && Split != MBB->end() &&
              B.First < LIS.getInstructionIndex(*Split))
            return Finish(false);
        }
        if (LiveOut) {
          if (takenAtEnd(*MBB, *Intf))
            BC.Exit = SP::MustSpill;
          else if (Intf->second > B.Last)
            BC.Exit = SP::PrefSpill;
        }
      }
      Constraints.push_back(BC);
    }
    Placer->addConstraints(Constraints);
    if (!Placer->scanActiveBundles())
      return Finish(false);
    // Grow the region into the blocks it lives through, bundle by bundle
    // from those that prefer the register (greedy's growRegion).
    unsigned Budget = 10000; // greedy's -grow-region-complexity-budget
    SmallVector<unsigned, 16> New;
    while (true) {
      for (unsigned Bundle : Placer->getRecentPositive()) {
        ArrayRef<unsigned> Blocks = Bundles->getBlocks(Bundle);
        if (Blocks.size() >= Budget)
          return Finish(false);
        Budget -= Blocks.size();
        for (unsigned B : Blocks)
          if (Through.test(B)) {
            Through.reset(B);
            New.push_back(B);
          }
      }
      if (New.empty())
        break;
      SmallVector<SP::BlockConstraint, 8> Taken;
      SmallVector<unsigned, 8> Links;
      for (unsigned N : New) {
        const size_t I = IndexOf.lookup(N);
        const auto &Intf = Intfs[I];
        if (!Intf) {
          Links.push_back(N);
          continue;
        }
        MachineBasicBlock *MBB = Live[I];
        SP::BlockConstraint BC;
        BC.Number = N;
        BC.Entry = Intf->first <= LIS.getMBBStartIdx(MBB) ? SP::MustSpill
                                                          : SP::PrefSpill;
        BC.Exit = takenAtEnd(*MBB, *Intf) ? SP::MustSpill : SP::PrefSpill;
        BC.ChangesValue = false;
        Taken.push_back(BC);
      }
      New.clear();
      Placer->addConstraints(Taken);
      Placer->addLinks(Links);
      Placer->iterate();
    }
    return Finish(true);
  }

  /// The region splits of \p LI: for each register the coloring agent was
  /// offered (in its order), the blocks where it lives and the register is
  /// free, without those \p Refused (a terminator or inline assembly reads
  /// or writes it) and the others a block split refuses, and the heads and
  /// tails of the blocks where the register is taken for part of it
  /// (partialBlock). Offered, once per distinct region, when the region has
  /// some of its uses or defs (\p Uses: the copies of earlier splits count)
  /// and leaves out some of the live range; a live range comes from at most
  /// MaxRegionSplits region splits, so that splits end. A region may take all
  /// the uses and defs:
  /// the rest of the live range then only carries the value, from copy to
  /// copy, across what holds the register (a long, light live range evicted
  /// by a short, heavy one keeps its register everywhere else, as LLVM's
  /// greedy allocator splits it around the interference). Copies go around the
  /// interference in partial blocks and on the region's border: into the
  /// new register at the start of a block entered inside whose predecessors
  /// all leave outside, else at the end of each predecessor leaving outside;
  /// back at the start of a block entered outside whose predecessors all
  /// leave inside, else at the end of each block leaving inside to it.
  ///
  /// With placed borders (RegionBorders), each register's region may instead
  /// (Placed), or also (Both), be the one LLVM's spill placement chooses
  /// (placeRegion): the value is in the register across the edge bundles it
  /// picks, so a block may keep only its head (in the register from its
  /// start) or its tail (to its end) though the register is free there, and
  /// a free block it lives through may stay outside; the copies follow from
  /// where blocks are entered and left inside, as above.
  void addRegionCandidates(
      const LiveInterval &LI,
      const SmallDenseMap<MachineBasicBlock *, unsigned, 8> &Uses,
      const SmallPtrSet<MachineBasicBlock *, 8> &Refused) {
    SmallVector<MachineBasicBlock *, 16> Live;
    for (MachineBasicBlock &MBB : MF)
      if (LI.overlaps(LIS.getMBBStartIdx(&MBB), LIS.getMBBEndIdx(&MBB)))
        Live.push_back(&MBB);
    // A copy before the terminators would come after a terminator's def.
    for (MachineBasicBlock *MBB : Live)
      for (const MachineInstr &T : MBB->terminators())
        if (T.modifiesRegister(LI.reg(), &TRI))
          return;
    auto Allowed = [&](MachineBasicBlock *MBB) {
      if (Refused.contains(MBB) || MBB->isEHPad() ||
          MBB->mayHaveInlineAsmBr() || MBB->isInlineAsmBrIndirectTarget())
        return false;
      return !(LIS.isLiveOutOfMBB(LI, MBB) &&
               any_of(MBB->successors(), [&](MachineBasicBlock *Succ) {
                 return Succ->isEHPad() && LIS.isLiveInToMBB(LI, Succ);
               }));
    };
    auto Freq = [&](MachineBasicBlock *MBB) {
      return MBFI.getBlockFreqRelativeToEntryBlock(MBB);
    };
    // Each region offered so far: (block number, 3 whole, 1 head, 2 tail
    // around interference; 5 head, 6 tail of a free block).
    SmallVector<SmallVector<unsigned, 16>, 4> Seen;
    SmallVector<bool, 16> LiveIn, LiveOut;
    for (MachineBasicBlock *MBB : Live) {
      LiveIn.push_back(LIS.isLiveInToMBB(LI, MBB));
      LiveOut.push_back(LIS.isLiveOutOfMBB(LI, MBB));
    }
    SmallVector<bool, 2> Layouts;
    if (Borders != RegionBorders::Placed)
      Layouts.push_back(false);
    SmallDenseMap<MachineBasicBlock *, UseBlock, 8> UseBlocks;
    if (Borders != RegionBorders::Free) {
      Layouts.push_back(true);
      for (MachineInstr &MI : MRI.reg_nodbg_instructions(LI.reg())) {
        const SlotIndex Idx = LIS.getInstructionIndex(MI);
        auto [It, New] = UseBlocks.try_emplace(MI.getParent());
        UseBlock &B = It->second;
        if (New || Idx < B.First)
          B.First = Idx;
        if (New || B.Last < Idx) {
          B.Last = Idx;
          B.LastIsImplicitDef = MI.isImplicitDef();
        }
        B.Defines |= MI.modifiesRegister(LI.reg(), &TRI);
      }
    }
    for (const Candidate &Reg : Candidates) {
      const SmallVector<HeldSegment, 64> Held = heldSegments(LI, Reg.Phys);
      SmallVector<std::optional<std::pair<SlotIndex, SlotIndex>>, 16> Intfs;
      for (MachineBasicBlock *MBB : Live)
        Intfs.push_back(Allowed(MBB)
                            ? interferenceInBlock(LI, *MBB, Reg.Phys, Held)
                            : std::make_pair(LIS.getMBBStartIdx(MBB),
                                             LIS.getMBBEndIdx(MBB)));
      for (const bool Placed : Layouts) {
        BitVector RegBundles;
        if (Placed && !placeRegion(LI, Live, Intfs, UseBlocks, RegBundles))
          continue;
        SmallPtrSet<MachineBasicBlock *, 16> Whole;
        SmallDenseMap<MachineBasicBlock *, PartialBlock, 4> Partial;
        // Where the register is taken in each block that is not whole.
        SmallDenseMap<MachineBasicBlock *, std::pair<SlotIndex, SlotIndex>, 16>
            Taken;
        SmallVector<unsigned, 16> Key;
        bool UseInside = false, UseOutside = false;
        for (size_t I = 0; I < Live.size(); ++I) {
          MachineBasicBlock *MBB = Live[I];
          const unsigned N = MBB->getNumber();
          const auto UseIt = Uses.find(MBB);
          const unsigned BlockUses = UseIt == Uses.end() ? 0 : UseIt->second;
          const std::optional<std::pair<SlotIndex, SlotIndex>> &Intf = Intfs[I];
          // The live borders of the block across which the new register holds
          // the value: all of them, unless spill placement decides.
          bool In = LiveIn[I], Out = LiveOut[I];
          if (Placed) {
            In = In && RegBundles[Bundles->getBundle(N, /*Out=*/false)];
            Out = Out && RegBundles[Bundles->getBundle(N, /*Out=*/true)];
          }
          std::optional<PartialBlock> P;
          unsigned Code = 0;
          if (!Intf) {
            if (In == LiveIn[I] && Out == LiveOut[I]) {
              Whole.insert(MBB);
              UseInside |= BlockUses > 0;
              Key.push_back(N * 8 + 3);
              continue;
            }
            if (In || Out)
              P = freeBlockEnd(LI, *MBB, /*Head=*/In);
            Code = 4;
          } else {
            Taken[MBB] = *Intf;
            if (Allowed(MBB))
              P = partialBlock(LI, *MBB, *Intf, In || !LiveIn[I],
                               Out || !LiveOut[I]);
          }
          if (!P) {
            UseOutside |= BlockUses > 0;
            continue;
          }
          UseInside = true;
          UseOutside |= P->Inside.size() < BlockUses;
          Key.push_back(N * 8 + Code + (P->Head ? 1 : 0) + (P->Tail ? 2 : 0));
          Partial.try_emplace(MBB, std::move(*P));
        }
        const bool Everywhere = Whole.size() == Live.size();
        if (!UseInside || Everywhere || is_contained(Seen, Key))
          continue;
        Seen.push_back(std::move(Key));
        // Where the new register holds the value as a block is entered and
        // left.
        auto EntersInside = [&](MachineBasicBlock *MBB) {
          if (Whole.contains(MBB))
            return true;
          auto It = Partial.find(MBB);
          return It != Partial.end() && It->second.Head;
        };
        auto LeavesInside = [&](MachineBasicBlock *MBB) {
          if (Whole.contains(MBB))
            return true;
          auto It = Partial.find(MBB);
          return It != Partial.end() && It->second.Tail;
        };
        auto InsideInstr = [&](const MachineInstr &MI) {
          if (Whole.contains(MI.getParent()))
            return true;
          auto It = Partial.find(MI.getParent());
          return It != Partial.end() && is_contained(It->second.Inside, &MI);
        };
        SplitCandidate C;
        C.Phys = Reg.Phys;
        C.Placed = Placed;
        C.AllUses = !UseOutside;
        double UseFreq = 0, InFreq = 0;
        unsigned Instructions = 0, Calls = 0;
        // Copies back are planned per value: one leaving the new register
        // where that value may have been defined inside.
        struct Planned {
          SplitCopy Copy;
          double Freq;
          const VNInfo *Value; // copied back; null for a copy into Inner
        };
        SmallVector<Planned, 16> Plan;
        auto CopyBack = [&](SplitCopy Copy, double F, const VNInfo *V) {
          if (V)
            Plan.push_back({Copy, F, V});
        };
        // The copies around the interference first: a border copy before the
        // same terminators must come after them.
        for (MachineBasicBlock *MBB : Live) {
          auto It = Partial.find(MBB);
          if (It == Partial.end())
            continue;
          const PartialBlock &P = It->second;
          ++C.PartialBlocks;
          C.InsideInstrs.append(P.Inside.begin(), P.Inside.end());
          UseFreq += P.Inside.size() * Freq(MBB);
          Instructions += P.Instructions;
          Calls += P.Calls;
          if (P.Head) {
            // No LeaveBefore: a free block's head, to the block's end.
            const bool AtEnd = !P.LeaveBefore || P.LeaveBefore->isTerminator();
            CopyBack({MBB, AtEnd, /*IntoInner=*/false,
                      AtEnd ? nullptr : P.LeaveBefore},
                     Freq(MBB),
                     P.LeaveBefore ? LI.getVNInfoAt(LIS.getInstructionIndex(
                                         *P.LeaveBefore))
                                   : LI.getVNInfoBefore(LIS.getMBBEndIdx(MBB)));
          }
          if (P.Tail && LI.liveAt(LIS.getInstructionIndex(*P.EnterBefore)))
            Plan.push_back(
                {{MBB, /*AtEnd=*/false, /*IntoInner=*/true, P.EnterBefore},
                 Freq(MBB),
                 nullptr});
        }
        SmallPtrSet<MachineBasicBlock *, 8> InAtEnd, OutAtStart, OutAtEnd;
        bool EndTaken = false;
        for (MachineBasicBlock *MBB : Live) {
          if (Whole.contains(MBB)) {
            C.Blocks.push_back(MBB);
            if (auto It = Uses.find(MBB); It != Uses.end())
              UseFreq += It->second * Freq(MBB);
            Instructions += MBB->size();
            for (const MachineInstr &MI : *MBB)
              Calls += MI.isCall();
          }
          if (EntersInside(MBB) && LIS.isLiveInToMBB(LI, MBB) &&
              !all_of(MBB->predecessors(), LeavesInside)) {
            if (none_of(MBB->predecessors(), LeavesInside)) {
              Plan.push_back({{MBB, /*AtEnd=*/false, /*IntoInner=*/true},
                              Freq(MBB),
                              nullptr});
            } else {
              for (MachineBasicBlock *Pred : MBB->predecessors())
                if (!LeavesInside(Pred) && InAtEnd.insert(Pred).second) {
                  Plan.push_back({{Pred, /*AtEnd=*/true, /*IntoInner=*/true},
                                  Freq(Pred),
                                  nullptr});
                  // The new register holds the value from that copy to the
                  // block's end: the register must be free there too, or the
                  // new register could not take it.
                  auto It = Taken.find(Pred);
                  EndTaken |=
                      It != Taken.end() && takenAtEnd(*Pred, It->second);
                }
            }
          }
          if (!LeavesInside(MBB) || !LIS.isLiveOutOfMBB(LI, MBB))
            continue;
          for (MachineBasicBlock *Succ : MBB->successors()) {
            if (EntersInside(Succ) || !LIS.isLiveInToMBB(LI, Succ))
              continue;
            if (all_of(Succ->predecessors(), LeavesInside)) {
              if (OutAtStart.insert(Succ).second)
                CopyBack({Succ, /*AtEnd=*/false, /*IntoInner=*/false},
                         Freq(Succ), LI.getVNInfoAt(LIS.getMBBStartIdx(Succ)));
            } else if (OutAtEnd.insert(MBB).second) {
              CopyBack({MBB, /*AtEnd=*/true, /*IntoInner=*/false}, Freq(MBB),
                       LI.getVNInfoBefore(LIS.getMBBEndIdx(MBB)));
            }
          }
        }
        if (EndTaken)
          continue;
        // A value defined outside is still in the live range where it leaves
        // the new register: no copy back. One defined inside by an instruction
        // is copied back once, after that instruction, where that is cheaper
        // than at every exit (a value defined once in the entry block and
        // used in a loop: one store, not one per exit, as LLVM's spiller
        // hoists them).
        MapVector<const VNInfo *, double> ExitFreq; // in a fixed order
        for (const Planned &P : Plan)
          if (P.Value)
            ExitFreq[P.Value] += P.Freq;
        DenseSet<const VNInfo *> AfterDef;
        double OutFreq = 0;
        for (const auto &[V, F] : ExitFreq) {
          if (V->isPHIDef()) {
            OutFreq += F;
            continue;
          }
          MachineInstr *Def = LIS.getInstructionFromIndex(V->def);
          if (!Def) { // no instruction to tell: copy back at every exit
            OutFreq += F;
            continue;
          }
          if (!InsideInstr(*Def))
            continue;
          const double DefFreq = Freq(Def->getParent());
          if (DefFreq < F) {
            AfterDef.insert(V);
            auto Next = std::next(Def->getIterator());
            const bool AtEnd =
                Next == Def->getParent()->end() || Next->isTerminator();
            C.Copies.push_back({Def->getParent(), AtEnd, /*IntoInner=*/false,
                                AtEnd ? nullptr : &*Next});
            OutFreq += DefFreq;
          } else {
            OutFreq += F;
          }
        }
        for (const Planned &P : Plan) {
          if (P.Value) {
            if (P.Value->isPHIDef()) {
              C.Copies.push_back(P.Copy);
              continue;
            }
            MachineInstr *Def = LIS.getInstructionFromIndex(P.Value->def);
            if (Def && (!InsideInstr(*Def) || AfterDef.contains(P.Value)))
              continue;
          } else {
            InFreq += P.Freq;
          }
          C.Copies.push_back(P.Copy);
        }
        // In the units of a block row whose frequency is 1: the gain
        // `uses - live_in - live_out` is the frequency-weighted reloads and
        // stores the region saves, minus its copies.
        C.Features[BlockFrequency] = 1.0f;
        C.Features[BlockUses] = static_cast<float>(UseFreq);
        C.Features[BlockLiveIn] = static_cast<float>(InFreq);
        C.Features[BlockLiveOut] = static_cast<float>(OutFreq);
        C.Features[BlockInstructions] =
            static_cast<float>(Instructions) / 100.0f;
        C.Features[BlockCalls] = static_cast<float>(Calls);
        C.Features[BlockRegion] = 1.0f;
        SplitCandidates.push_back(std::move(C));
      }
    }
  }

  /// The coloring agent chose to spill the current node: with candidate
  /// blocks, the split agent decides first.
  bool startSplit() {
    if (!mayGrow())
      return false;
    computeSplitCandidates(Nodes[Current].Reg);
    if (SplitCandidates.empty())
      return false;
    Agent_ = RegAllocAgent::Split;
    Mask.assign(SplitCandidates.size() + 1, 1); // spilling stays legal
    return true;
  }

  /// The split agent chose action \p S for the current node.
  void split(unsigned S) {
    const Register Reg = Nodes[Current].Reg;
    if (S == SplitCandidates.size()) {
      remark("Spill", [&](raw_ostream &OS) {
        OS << "split agent: node " << Current << " (" << printReg(Reg, &TRI)
           << ") spilled";
      });
      setStatus(Nodes[Current], NodeStatus::Spilled);
      spill(LIS.getInterval(Reg));
      return;
    }
    const SplitCandidate &C = SplitCandidates[S];
    SmallVector<Register, 4> Parts = splitAround(Reg, C);
    remark("Split", [&](raw_ostream &OS) {
      OS << "split agent: node " << Current << " (" << printReg(Reg, &TRI)
         << ") split around ";
      if (C.Phys)
        OS << "a region of " << C.Blocks.size() << " blocks and "
           << C.PartialBlocks << " partial blocks for "
           << printReg(C.Phys, &TRI)
           << (C.Placed ? " placed by spill placement" : "")
           << (C.AllUses ? ", with all its uses and defs," : "");
      else
        OS << printMBBReference(*C.Blocks.front())
           << (C.KeepsValue ? ", keeping its value through the block," : "");
      OS << " into";
      for (Register P : Parts) {
        OS << " node " << NodeOf.lookup(P) << " (" << printReg(P, &TRI);
        if (VRM.hasPhys(P))
          OS << " in " << printReg(VRM.getPhys(P), &TRI);
        OS << ")";
      }
    });
  }

  /// Splits \p Reg as \p C says: a new register holds its value inside
  /// C's blocks and instructions (its uses and defs there are rewritten),
  /// with C's copies at the borders. The live intervals of both are computed
  /// anew from the code, and each part that is not connected to the rest
  /// becomes a register of its own, as the machine verifier requires. A
  /// region's parts take its register where it is still free; every other part
  /// joins the graph queued, and so does \p Reg again. All parts name the live
  /// range's original (familyOriginal) as theirs. Returns the new registers.
  SmallVector<Register, 4> splitAround(Register Reg, const SplitCandidate &C) {
    const unsigned Generation =
        Nodes[NodeOf.lookup(Reg)].RegionSplits + (C.Phys ? 1 : 0);
    const Register Family = familyOriginal(Reg);
    SmallVector<Register, 4> NewRegs;
    // The registers holding the value inside C: Inner and its components.
    SmallDenseSet<Register, 4> InnerParts;
    {
      const LiveInterval &Old = LIS.getInterval(Reg);
      // The edit notes every register made while it lives (VirtRegMap grows,
      // NewRegs lists them).
      LiveRangeEdit LRE(&Old, NewRegs, MF, LIS, &VRM, this, &DeadRemats);
      const Register Inner = LRE.createFrom(Reg);
      InnerParts.insert(Inner);
      SmallPtrSet<const MachineBasicBlock *, 16> Inside(C.Blocks.begin(),
                                                        C.Blocks.end());
      SmallPtrSet<const MachineInstr *, 8> InsideInstrs(C.InsideInstrs.begin(),
                                                        C.InsideInstrs.end());
      for (MachineOperand &MO : make_early_inc_range(MRI.reg_operands(Reg)))
        if (Inside.contains(MO.getParent()->getParent()) ||
            InsideInstrs.contains(MO.getParent()))
          MO.setReg(Inner);
      SmallVector<MachineInstr *, 8> Copies;
      for (const SplitCopy &At : C.Copies) {
        MachineBasicBlock &MBB = *At.Block;
        MachineInstr *MI =
            BuildMI(MBB,
                    At.Before  ? At.Before->getIterator()
                    : At.AtEnd ? MBB.getFirstTerminator()
                               : MBB.SkipPHIsLabelsAndDebug(MBB.begin()),
                    DebugLoc(), TII.get(TargetOpcode::COPY),
                    At.IntoInner ? Inner : Reg)
                .addReg(At.IntoInner ? Reg : Inner);
        LIS.InsertMachineInstrInMaps(*MI);
        SplitCopies.insert(MI);
        Copies.push_back(MI);
      }
      // Computed anew from the code (Inner has none yet unless the edit made
      // one), which marks dead defs. A copy whose value is never read (into
      // the new register at the entry of blocks it only lives through, when
      // the live range keeps the value there) is removed, and the intervals
      // are computed again, until no copy is dead.
      for (bool Erased = true; Erased;) {
        for (Register R : {Reg, Inner}) {
          if (LIS.hasInterval(R))
            LIS.removeInterval(R);
          LIS.createAndComputeVirtRegInterval(R);
        }
        Erased = false;
        for (MachineInstr *&MI : Copies) {
          if (!MI || !MI->getOperand(0).isDead())
            continue;
          LIS.RemoveMachineInstrFromMaps(*MI);
          SplitCopies.erase(MI);
          MI->eraseFromParent();
          MI = nullptr;
          Erased = true;
        }
      }
      for (Register R : {Reg, Inner}) {
        SmallVector<LiveInterval *, 4> Components;
        LIS.splitSeparateComponents(LIS.getInterval(R), Components);
        if (R == Inner)
          for (const LiveInterval *Part : Components)
            InnerParts.insert(Part->reg());
      }
      for (Register R : concat<const Register>(ArrayRef<Register>(Reg),
                                               ArrayRef<Register>(NewRegs)))
        VRM.setIsSplitFromReg(R, Family);
    }
    SmallVector<Register, 4> Parts;
    SmallVector<Register, 4> All{Reg};
    All.append(NewRegs.begin(), NewRegs.end());
    for (Register R : All) {
      if (!LIS.hasInterval(R) || VRM.hasPhys(R))
        continue;
      if (MRI.reg_nodbg_empty(R)) {
        LIS.removeInterval(R);
        continue;
      }
      LiveInterval &LI = LIS.getInterval(R);
      VRAI.calculateSpillWeightAndHint(LI);
      const unsigned N = addNode(R, /*WithEdges=*/true);
      Nodes[N].RegionSplits = Generation;
      if (R != Reg)
        Parts.push_back(R);
      // The inside of a region takes the region's register, where it is
      // still free (a copy at an outside block's end may be in the way).
      if (!C.Phys || !InnerParts.contains(R))
        continue;
      Matrix.invalidateVirtRegs();
      if (Matrix.checkInterference(LI, C.Phys) == LiveRegMatrix::IK_Free) {
        Matrix.assign(LI, C.Phys);
        setStatus(Nodes[N], NodeStatus::Assigned);
      }
    }
    return Parts;
  }

  /// The original of \p Reg's parts: the live range as it was before its
  /// first split, kept as the interval of a register without instructions
  /// (LLVM's greedy allocator keeps a split register's interval so too). The
  /// inline spiller gives the parts of one original one stack slot, and drops
  /// or hoists (postOptimization) the stores of a value the slot already
  /// holds: a copy back into a spilled part costs no store then. It needs the
  /// original's interval to cover every part's values, which this one does:
  /// the parts live only where the live range did, and at any point they all
  /// hold its one value.
  Register familyOriginal(Register Reg) {
    const Register Orig = VRM.getOriginal(Reg);
    const LiveInterval &LI = LIS.getInterval(Reg);
    if (Orig != Reg && LIS.hasInterval(Orig) &&
        LIS.getInterval(Orig).covers(LI))
      return Orig;
    const Register Shadow = MRI.createVirtualRegister(MRI.getRegClass(Reg));
    VRM.grow();
    LIS.createEmptyInterval(Shadow).assign(LI, LIS.getVNInfoAllocator());
    return Shadow;
  }

  void spill(const LiveInterval &LI) {
    SmallVector<Register, 4> NewRegs;
    LiveRangeEdit LRE(&LI, NewRegs, MF, LIS, &VRM, this, &DeadRemats);
    Spill.spill(LRE);
    for (Register Reg : NewRegs) {
      if (!LIS.hasInterval(Reg) || VRM.hasPhys(Reg))
        continue;
      if (MRI.reg_nodbg_empty(Reg)) {
        LIS.removeInterval(Reg);
        continue;
      }
      addNode(Reg, /*WithEdges=*/true);
    }
  }

  /// No register and no spill: LLVM's own answer (an error on the
  /// instruction, then the first register so that compilation can go on).
  void outOfRegisters(unsigned I) {
    const Register Reg = Nodes[I].Reg;
    const TargetRegisterClass *RC = MRI.getRegClass(Reg);
    ArrayRef<MCPhysReg> Order = RCI.getOrder(RC);
    const MachineInstr *MI = nullptr;
    for (const MachineInstr &Use : MRI.reg_instructions(Reg)) {
      MI = &Use;
      if (MI->isInlineAsm())
        break;
    }
    if (MI && MI->isInlineAsm())
      MI->emitInlineAsmError(
          "inline assembly requires more registers than available");
    else
      MF.getFunction().getContext().emitError(
          "mlbridge-regalloc: ran out of registers in '" + MF.getName() + "'");
    if (Order.empty())
      report_fatal_error("no registers from class available to allocate");
    VRM.assignVirt2Phys(Reg, Order.front());
    setStatus(Nodes[I], NodeStatus::Assigned);
    // The next decision is the priority agent's again.
    Candidates.clear();
    Mask.clear();
    Agent_ = RegAllocAgent::Priority;
    (void)prepare();
  }

  template <typename Fn> void remark(StringRef Name, Fn Describe) {
    ORE.emit([&]() {
      std::string Text;
      raw_string_ostream OS(Text);
      Describe(OS);
      return MachineOptimizationRemarkAnalysis(
                 RemarkPass, Name, DiagnosticLocation(), &MF.front())
             << Text;
    });
  }

  // LiveRangeEdit::Delegate: what the spiller does to other live ranges.
  bool LRE_CanEraseVirtReg(Register Reg) override {
    LiveInterval &LI = LIS.getInterval(Reg);
    if (VRM.hasPhys(Reg)) {
      Matrix.unassign(LI);
      if (auto It = NodeOf.find(Reg); It != NodeOf.end())
        setStatus(Nodes[It->second], NodeStatus::Gone);
      return true;
    }
    // Unassigned: queued; prepare() drops it once it has no uses.
    LI.clear();
    return false;
  }

  void LRE_WillShrinkVirtReg(Register Reg) override {
    if (!VRM.hasPhys(Reg))
      return;
    // Assigned: back to the queue, to be colored again.
    LiveInterval &LI = LIS.getInterval(Reg);
    Matrix.unassign(LI);
    addNode(Reg, /*WithEdges=*/false);
  }

  MachineFunction &MF;
  LiveIntervals &LIS;
  VirtRegMap &VRM;
  LiveRegMatrix &Matrix;
  const RegisterClassInfo &RCI;
  Spiller &Spill;
  VirtRegAuxInfo &VRAI;
  const MachineBlockFrequencyInfo &MBFI;
  MachineOptimizationRemarkEmitter &ORE;
  MachineRegisterInfo &MRI;
  const TargetRegisterInfo &TRI;
  const TargetInstrInfo &TII;
  const bool SplitAgent;
  // Whether a coloring candidate may move what holds it (planMoves).
  const bool Moves;
  const RegionBorders Borders;
  // Set unless Borders is Free.
  const EdgeBundles *Bundles;
  SpillPlacement *Placer;
  std::optional<unsigned> MessageRounds;
  DenseSet<MCPhysReg> CalleeSaved;

  std::vector<Node> Nodes;
  DenseMap<Register, unsigned> NodeOf;
  DenseSet<uint64_t> EdgeSet;
  std::vector<int64_t> EdgeList;
  std::vector<Candidate> Candidates;
  std::vector<SplitCandidate> SplitCandidates;
  // Copies that splits made: a split never counts them as uses.
  SmallPtrSet<const MachineInstr *, 16> SplitCopies;
  std::vector<int64_t> Mask;
  RegAllocAgent Agent_ = RegAllocAgent::Priority;
  unsigned Current = 0;
  size_t InitialNodes = 0;
  bool Grown = false;
  bool Started = false;
  bool Done = false;
  // Scratch space of observe().
  std::vector<float> NodeRows, Weights;
  SmallVector<float, 0> RegRows, BlockRows;
  SmallVector<int64_t, 0> SentEdges;
  std::vector<uint8_t> Near, NearNext;

public:
  SmallPtrSet<MachineInstr *, 32> DeadRemats;
};

/// The allocator pass. The runner is made on the first function and kept for
/// the compilation; after a model failure the built-in policy decides.
class MLRegAlloc final : public MachineFunctionPass {
public:
  static char ID;
  MLRegAlloc(MLRegAllocOptions Options, RegAllocRunnerFactory Factory)
      : MachineFunctionPass(ID), Options(std::move(Options)),
        Factory(std::move(Factory)) {
    if (placesBorders()) {
      PassRegistry &Registry = *PassRegistry::getPassRegistry();
      initializeEdgeBundlesWrapperLegacyPass(Registry);
      initializeSpillPlacementWrapperLegacyPass(Registry);
    }
  }

  StringRef getPassName() const override {
    return "mlbridge ML Register Allocator";
  }

  void getAnalysisUsage(AnalysisUsage &AU) const override {
    AU.setPreservesCFG();
    AU.addRequired<AAResultsWrapperPass>();
    AU.addPreserved<AAResultsWrapperPass>();
    AU.addRequired<LiveIntervalsWrapperPass>();
    AU.addPreserved<LiveIntervalsWrapperPass>();
    AU.addPreserved<SlotIndexesWrapperPass>();
    AU.addRequired<LiveDebugVariablesWrapperLegacy>();
    AU.addPreserved<LiveDebugVariablesWrapperLegacy>();
    AU.addRequired<LiveStacksWrapperLegacy>();
    AU.addPreserved<LiveStacksWrapperLegacy>();
    AU.addRequired<MachineBlockFrequencyInfoWrapperPass>();
    AU.addPreserved<MachineBlockFrequencyInfoWrapperPass>();
    AU.addRequired<MachineDominatorTreeWrapperPass>();
    AU.addPreserved<MachineDominatorTreeWrapperPass>();
    AU.addRequired<MachineLoopInfoWrapperPass>();
    AU.addPreserved<MachineLoopInfoWrapperPass>();
    AU.addRequired<VirtRegMapWrapperLegacy>();
    AU.addPreserved<VirtRegMapWrapperLegacy>();
    AU.addRequired<LiveRegMatrixWrapperLegacy>();
    AU.addPreserved<LiveRegMatrixWrapperLegacy>();
    AU.addRequired<MachineOptimizationRemarkEmitterPass>();
    // Only when region borders are placed, so that every other run keeps
    // its pipeline.
    if (placesBorders()) {
      AU.addRequired<EdgeBundlesWrapperLegacy>();
      AU.addRequired<SpillPlacementWrapperLegacy>();
    }
    MachineFunctionPass::getAnalysisUsage(AU);
  }

  MachineFunctionProperties getRequiredProperties() const override {
    return MachineFunctionProperties().setNoPHIs();
  }
  MachineFunctionProperties getClearedProperties() const override {
    return MachineFunctionProperties().setIsSSA();
  }

  bool runOnMachineFunction(MachineFunction &MF) override {
    LiveIntervals &LIS = getAnalysis<LiveIntervalsWrapperPass>().getLIS();
    VirtRegMap &VRM = getAnalysis<VirtRegMapWrapperLegacy>().getVRM();
    LiveRegMatrix &Matrix = getAnalysis<LiveRegMatrixWrapperLegacy>().getLRM();
    MachineBlockFrequencyInfo &MBFI =
        getAnalysis<MachineBlockFrequencyInfoWrapperPass>().getMBFI();
    MF.getRegInfo().freezeReservedRegs();
    RegisterClassInfo RCI;
    RCI.runOnMachineFunction(MF);
    VirtRegAuxInfo VRAI(
        MF, LIS, VRM, getAnalysis<MachineLoopInfoWrapperPass>().getLI(), MBFI);
    VRAI.calculateSpillWeightsAndHints();
    Spiller::RequiredAnalyses Analyses{
        LIS, getAnalysis<LiveStacksWrapperLegacy>().getLS(),
        getAnalysis<MachineDominatorTreeWrapperPass>().getDomTree(), MBFI};
    std::unique_ptr<Spiller> Spill(
        createInlineSpiller(Analyses, MF, VRM, VRAI, &Matrix));
    const EdgeBundles *Bundles = nullptr;
    SpillPlacement *Placer = nullptr;
    if (placesBorders()) {
      Bundles = &getAnalysis<EdgeBundlesWrapperLegacy>().getEdgeBundles();
      Placer = &getAnalysis<SpillPlacementWrapperLegacy>().getResult();
    }
    AllocationEnvironment Env(
        MF, LIS, VRM, Matrix, RCI, *Spill, VRAI, MBFI,
        getAnalysis<MachineOptimizationRemarkEmitterPass>().getORE(),
        Options.Split, Options.Moves, Options.Borders, Bundles, Placer);

    allocate(MF, Env);

    Spill->postOptimization();
    for (MachineInstr *Dead : Env.DeadRemats) {
      LIS.RemoveMachineInstrFromMaps(*Dead);
      Dead->eraseFromParent();
    }
    return true;
  }

private:
  bool placesBorders() const {
    return Options.Split && Options.Borders != RegionBorders::Free;
  }

  void allocate(MachineFunction &MF, AllocationEnvironment &Env) {
    LLVMContext &Ctx = MF.getFunction().getContext();
    EpisodeOptions Bounds;
    Bounds.RecordActions = false;
    if (MLModelRunner *Agent = modelFor(MF)) {
      Env.sendEdgesFor(ModelRounds);
      Bounds.MaxSteps = stepBound(Env);
      Expected<EpisodeResult> R =
          runEpisode(Env, {Agent, Agent, Agent}, Bounds);
      if (R)
        return;
      stop(R.takeError(), Ctx, (" in '" + MF.getName() + "'").str());
    }
    // The built-in policy: from the start, or from where the model stopped.
    Bounds.MaxSteps = stepBound(Env);
    MLModelRunner *B = builtin();
    if (!B)
      return;
    // The built-in policy reads no edges.
    Env.sendEdgesFor(0);
    Expected<EpisodeResult> R = runEpisode(Env, {B, B, B}, Bounds);
    if (!R)
      Ctx.emitError("mlbridge-regalloc: the built-in policy failed in '" +
                    MF.getName() + "': " + toString(R.takeError()));
  }

  /// Every live range is decided at most a few times (an eviction requeues
  /// nothing; a spill adds live ranges that cannot be spilled again).
  static size_t stepBound(const AllocationEnvironment &Env) {
    return 1000000 + 256 * Env.nodes();
  }

  MLModelRunner *modelFor(MachineFunction &MF) {
    if (Stopped)
      return nullptr;
    if (!Options.ModelFunctions.empty() &&
        !Options.ModelFunctions.contains(MF.getName()))
      return nullptr;
    LLVMContext &Ctx = MF.getFunction().getContext();
    if (!Runner) {
      Expected<std::unique_ptr<MLModelRunner>> R =
          Factory(regallocFeatureSpecs(), regallocAdviceSpec());
      if (!R) {
        stop(R.takeError(), Ctx, "",
             "cannot create the " + Options.RunnerDescription + ": ");
        return nullptr;
      }
      Runner = std::move(*R);
      Expected<std::optional<unsigned>> Rounds = messageRounds(*Runner);
      if (!Rounds) {
        stop(Rounds.takeError(), Ctx, "");
        return nullptr;
      }
      ModelRounds = *Rounds;
    }
    if (Error E = Runner->switchContext(MF.getName())) {
      stop(std::move(E), Ctx, (" in '" + MF.getName() + "'").str());
      return nullptr;
    }
    return Runner.get();
  }

  /// The rounds of messages the model's queries carry edges for: those of
  /// the options, else those the model declares (its metadata
  /// MessageRoundsMetadataKey), else none (every edge).
  Expected<std::optional<unsigned>>
  messageRounds(const MLModelRunner &Model) const {
    std::optional<unsigned> Declared;
    if (std::optional<std::string> Value =
            Model.modelMetadata(MessageRoundsMetadataKey)) {
      unsigned N;
      if (StringRef(*Value).getAsInteger(10, N))
        return createStringError(
            "the model's metadata '%s' is '%s', not a number of rounds of "
            "messages (export the model again)",
            MessageRoundsMetadataKey, Value->c_str());
      Declared = N;
    }
    if (!Options.MessageRounds)
      return Declared;
    if (Declared && *Options.MessageRounds < *Declared)
      return createStringError(
          "queries with the edges of %u rounds of messages "
          "(-mlbridge-regalloc-message-rounds) would leave out edges the "
          "model reads: it passes %u (its metadata '%s'); ask for at least "
          "%u, or leave the option out to take the model's",
          *Options.MessageRounds, *Declared, MessageRoundsMetadataKey,
          *Declared);
    return Options.MessageRounds;
  }

  MLModelRunner *builtin() {
    if (!Builtin) {
      Expected<std::unique_ptr<CallbackModelRunner>> R =
          CallbackModelRunner::create(regallocFeatureSpecs(),
                                      regallocAdviceSpec(),
                                      builtinRegAllocPolicy());
      if (!R)
        report_fatal_error(Twine("mlbridge-regalloc: ") +
                           toString(R.takeError()));
      Builtin = std::move(*R);
    }
    return Builtin.get();
  }

  /// Reports \p E once (error, or warning with the fallback option); the
  /// model is not asked again.
  void stop(Error E, LLVMContext &Ctx, const std::string &Where,
            const std::string &CausePrefix = "") {
    Stopped = true;
    std::string Cause = CausePrefix + toString(std::move(E));
    // Ends the session (the model may be gone already) and its waits.
    Runner.reset();
    if (Options.FallBackOnFailure)
      Ctx.diagnose(DiagnosticInfoGeneric(
          "mlbridge-regalloc: the model failed" + Where +
              ", allocating with the built-in policy for the rest of the "
              "compilation: " +
              Cause,
          DS_Warning));
    else
      Ctx.diagnose(DiagnosticInfoGeneric(
          "mlbridge-regalloc: no allocation" + Where + ": " + Cause, DS_Error));
  }

  MLRegAllocOptions Options;
  RegAllocRunnerFactory Factory;
  std::unique_ptr<MLModelRunner> Runner;
  std::optional<unsigned> ModelRounds;
  std::unique_ptr<MLModelRunner> Builtin;
  bool Stopped = false;
};

char MLRegAlloc::ID = 0;

/// The features of one query, found by name (the policies get them in spec
/// order, but may be handed a subset by a careless caller).
struct Observation {
  int64_t Agent = -1;
  const TensorRef *NodeFeatures = nullptr;
  const TensorRef *RegisterFeatures = nullptr;
  /// Only the split policy needs it (on the split agent's queries).
  const TensorRef *BlockFeatures = nullptr;
  const TensorRef *ActionMask = nullptr;

  static Expected<Observation> read(ArrayRef<TensorRef> Features) {
    Observation O;
    for (const TensorRef &T : Features) {
      if (T.name() == "agent" && T.type() == ElementType::Int64 &&
          T.getElementCount() == 1)
        O.Agent = T.data<int64_t>()[0];
      else if (T.name() == "node_features" && T.type() == ElementType::Float)
        O.NodeFeatures = &T;
      else if (T.name() == "register_features" &&
               T.type() == ElementType::Float)
        O.RegisterFeatures = &T;
      else if (T.name() == "block_features" && T.type() == ElementType::Float)
        O.BlockFeatures = &T;
      else if (T.name() == MaskName && T.type() == ElementType::Int64)
        O.ActionMask = &T;
    }
    if (O.Agent < 0 || !O.NodeFeatures || !O.RegisterFeatures || !O.ActionMask)
      return createStringError(
          "the register allocation policy needs the features agent, "
          "node_features, register_features and action_mask, as "
          "regallocFeatureSpecs() gives them");
    return O;
  }
};

TensorValue actionValue(int64_t Index) {
  return TensorValue::scalar<int64_t>(AdviceName, Index);
}

/// The basic policy's decision (builtinRegAllocPolicy), or none when nothing
/// is legal.
std::optional<int64_t> basicDecision(const Observation &O) {
  ArrayRef<int64_t> Mask = O.ActionMask->data<int64_t>();
  std::optional<int64_t> Best;
  float BestKey = 0;
  if (O.Agent == static_cast<int64_t>(RegAllocAgent::Split)) {
    // LLVM's basic allocator spills, never splits.
    Best = static_cast<int64_t>(Mask.size()) - 1;
  } else if (O.Agent == static_cast<int64_t>(RegAllocAgent::Priority)) {
    // The heaviest queued live range first (unspillable ones weigh most).
    ArrayRef<float> Rows = O.NodeFeatures->data<float>();
    for (size_t I = 0; I < Mask.size(); ++I) {
      float W = Rows[I * NumNodeFeatures + NodeWeight];
      if (Mask[I] && (!Best || W > BestKey)) {
        Best = I;
        BestKey = W;
      }
    }
  } else {
    // The first free register, else the cheapest eviction, else spill.
    ArrayRef<float> Rows = O.RegisterFeatures->data<float>();
    const size_t R = Mask.empty() ? 0 : Mask.size() - 1;
    for (size_t I = 0; I < R && !Best; ++I)
      if (Mask[I] && Rows[I * NumRegisterFeatures + RegFree] != 0)
        Best = I;
    if (!Best) {
      for (size_t I = 0; I < R; ++I) {
        float Cost = Rows[I * NumRegisterFeatures + RegEvictCost];
        if (Mask[I] && (!Best || Cost < BestKey)) {
          Best = I;
          BestKey = Cost;
        }
      }
    }
    // LLVM's basic allocator evicts lighter live ranges before it spills
    // this one.
    if (!Best && !Mask.empty() && Mask.back())
      Best = static_cast<int64_t>(R);
  }
  return Best;
}

/// The split policy's split decision (splitRegAllocPolicy): the first legal
/// block of the largest gain, if that is positive; else spill (the last
/// action). The gain of a block is
/// `(uses - (live_in + live_out)) * (2^frequency - 1)`, in double precision
/// from the float features, in the order mlbridge.regalloc.split_gains
/// computes it in numpy, so that both decide the same.
Expected<int64_t> splitDecision(const Observation &O) {
  ArrayRef<int64_t> Mask = O.ActionMask->data<int64_t>();
  if (none_of(Mask, [](int64_t M) { return M != 0; }))
    return createStringError("no legal action (action_mask is all zero)");
  if (!O.BlockFeatures)
    return createStringError(
        "the split policy needs the feature block_features, as "
        "regallocFeatureSpecs() gives it");
  ArrayRef<float> Rows = O.BlockFeatures->data<float>();
  const size_t S = std::min(Rows.size() / NumBlockFeatures, Mask.size() - 1);
  const int64_t Spill = static_cast<int64_t>(Mask.size()) - 1;
  std::optional<int64_t> Best;
  double BestGain = 0;
  for (size_t I = 0; I < S; ++I) {
    if (!Mask[I])
      continue;
    const float *Row = &Rows[I * NumBlockFeatures];
    const double Copies = double(Row[BlockLiveIn]) + double(Row[BlockLiveOut]);
    const double Gain = (double(Row[BlockUses]) - Copies) *
                        (std::exp2(double(Row[BlockFrequency])) - 1.0);
    // numpy's argmax stops at the first NaN, whose gain is not positive.
    if (std::isnan(Gain))
      return Spill;
    if (!Best || Gain > BestGain) {
      Best = static_cast<int64_t>(I);
      BestGain = Gain;
    }
  }
  return Best && BestGain > 0 ? *Best : Spill;
}

Expected<TensorValue> decided(std::optional<int64_t> Best) {
  if (!Best)
    return createStringError("no legal action (action_mask is all zero)");
  return actionValue(*Best);
}

} // namespace

std::vector<TensorSpec> regallocFeatureSpecs() {
  return {createSpec<int64_t>("agent", {1}),
          createSpec<std::string>("function_name", {1}),
          createSpec<float>("node_features", {-1, NumNodeFeatures}),
          createSpec<int64_t>("edges", {-1, 2}),
          createSpec<float>("spill_weights", {-1}),
          createSpec<int64_t>("node", {1}),
          createSpec<float>("register_features", {-1, NumRegisterFeatures}),
          createSpec<float>("block_features", {-1, NumBlockFeatures}),
          createSpec<int64_t>(MaskName, {-1})};
}

TensorSpec regallocAdviceSpec() {
  // A mask on an int64 spec is always a valid constraint.
  return cantFail(createSpec<int64_t>(AdviceName, {1})
                      .withConstraints(std::nullopt, MaskName));
}

CallbackModelRunner::Callback builtinRegAllocPolicy() {
  return [](ArrayRef<TensorRef> Features) -> Expected<TensorValue> {
    Expected<Observation> O = Observation::read(Features);
    if (!O)
      return O.takeError();
    return decided(basicDecision(*O));
  };
}

CallbackModelRunner::Callback splitRegAllocPolicy() {
  return [](ArrayRef<TensorRef> Features) -> Expected<TensorValue> {
    Expected<Observation> O = Observation::read(Features);
    if (!O)
      return O.takeError();
    if (O->Agent != static_cast<int64_t>(RegAllocAgent::Split))
      return decided(basicDecision(*O));
    Expected<int64_t> Best = splitDecision(*O);
    if (!Best)
      return Best.takeError();
    return actionValue(*Best);
  };
}

CallbackModelRunner::Callback randomRegAllocPolicy(uint64_t Seed) {
  auto Engine = std::make_shared<std::mt19937_64>(Seed);
  return [Engine](ArrayRef<TensorRef> Features) -> Expected<TensorValue> {
    Expected<Observation> O = Observation::read(Features);
    if (!O)
      return O.takeError();
    ArrayRef<int64_t> Mask = O->ActionMask->data<int64_t>();
    SmallVector<int64_t, 64> Legal;
    for (size_t I = 0; I < Mask.size(); ++I)
      if (Mask[I])
        Legal.push_back(static_cast<int64_t>(I));
    if (Legal.empty())
      return createStringError("no legal action (action_mask is all zero)");
    std::uniform_int_distribution<size_t> Pick(0, Legal.size() - 1);
    return actionValue(Legal[Pick(*Engine)]);
  };
}

FunctionPass *createMLRegAlloc(MLRegAllocOptions Options,
                               RegAllocRunnerFactory Factory) {
  // The legacy pass manager owns its passes (and deletes them).
  return std::make_unique<MLRegAlloc>(std::move(Options), std::move(Factory))
      .release();
}

} // namespace mlbridge::passes
