//===- PhaseOrderActions.h - The action set of phase ordering ---*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The sub-sequences a phase-ordering agent chooses from: a built-in default
/// set in the spirit of POSET-RL (docs/phase-order.md) or a file with one
/// new-pass-manager pipeline per line.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PASSES_PHASE_ORDER_PHASEORDERACTIONS_H
#define MLBRIDGE_PASSES_PHASE_ORDER_PHASEORDERACTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace llvm {
class PassBuilder;
} // namespace llvm

namespace mlbridge::passes {

/// One action: a module-level new-PM pipeline text and where it came from.
struct PhaseOrderAction {
  std::string Pipeline;
  /// The line of the actions file (1-based); 0 for the built-in set.
  unsigned Line = 0;
};

/// The built-in action set: 15 sub-sequences cut from LLVM 22's -Oz pipeline
/// (docs/phase-order.md). Applied in order 0..13 they approximate -Oz; the
/// agent chooses the order, repetitions and when to stop.
std::vector<PhaseOrderAction> defaultPhaseOrderActions();

/// The name of the module pass that inlines with -Oz's inline parameters:
/// `cgscc(inline)` alone uses the default threshold (225), far above -Oz's.
inline constexpr llvm::StringLiteral InlineOzPassName = "mlbridge-inline-oz";

/// Registers `mlbridge-inline-oz` with \p PB: LLVM's CGSCC inliner with
/// getInlineParams(2, 2) (what -Oz uses), function-attrs and a light function
/// cleanup after each SCC, as in -Oz's inliner pipeline.
void registerPhaseOrderActionPasses(llvm::PassBuilder &PB);

/// Parses an actions file's text: one pipeline per line; `#` starts a
/// comment; blank lines are ignored. \p Source names the file in errors. An
/// empty set is an error.
llvm::Expected<std::vector<PhaseOrderAction>>
parsePhaseOrderActions(llvm::StringRef Text, llvm::StringRef Source);

/// Reads and parses the actions file \p Path.
llvm::Expected<std::vector<PhaseOrderAction>>
readPhaseOrderActions(llvm::StringRef Path);

/// Checks that every action parses as a module pipeline with \p PB. The
/// error names the action's index, its line in \p Source and LLVM's reason.
llvm::Error checkPhaseOrderActions(llvm::PassBuilder &PB,
                                   const std::vector<PhaseOrderAction> &Actions,
                                   llvm::StringRef Source);

} // namespace mlbridge::passes

#endif // MLBRIDGE_PASSES_PHASE_ORDER_PHASEORDERACTIONS_H
