//===- PhaseOrderActions.cpp - The action set of phase ordering -----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
#include "passes/phase_order/PhaseOrderActions.h"

#include "llvm/Analysis/InlineCost.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Transforms/IPO/Inliner.h"

using namespace llvm;

namespace mlbridge::passes {

namespace {

Error makeError(const Twine &Message) {
  return createStringError(std::make_error_code(std::errc::invalid_argument),
                           Message);
}

} // namespace

std::vector<PhaseOrderAction> defaultPhaseOrderActions() {
  // Consecutive pieces of `opt-22 -passes='default<Oz>'
  // -print-pipeline-passes`, with -Oz's pass parameters; docs/phase-order.md
  // says which part of -Oz each one comes from. 14 is an extra cleanup.
  static const char *const Pipelines[] = {
      // 0: early function simplification.
      "function(lower-expect,simplifycfg<bonus-inst-threshold=1;keep-loops;"
      "speculate-blocks;simplify-cond-branch>,sroa<modify-cfg>,early-cse<>)",
      // 1: interprocedural constants and globals, promotion.
      "ipsccp,called-value-propagation,globalopt,function(mem2reg,instcombine<"
      "max-iterations=1;no-verify-fixpoint>,simplifycfg<switch-range-to-icmp>)",
      // 2: inlining with -Oz's parameters.
      "always-inline,mlbridge-inline-oz",
      // 3..8: the function simplification pipeline of -Oz's CGSCC walk.
      "function(jump-threading,correlated-propagation,simplifycfg<switch-range-"
      "to-icmp>,instcombine<max-iterations=1;no-verify-fixpoint>,aggressive-"
      "instcombine)",
      "function(tailcallelim,simplifycfg<switch-range-to-icmp>,reassociate,"
      "constraint-elimination)",
      "function(loop-mssa(loop-instsimplify,loop-simplifycfg,licm<no-"
      "allowspeculation>,loop-rotate<no-header-duplication;no-prepare-for-lto>"
      ",licm<allowspeculation>,simple-loop-unswitch<no-nontrivial;trivial>),"
      "simplifycfg<switch-range-to-icmp>,instcombine<max-iterations=1;no-"
      "verify-fixpoint>)",
      "function(loop(loop-idiom,indvars,loop-deletion,loop-unroll-full),sroa<"
      "modify-cfg>)",
      "function(vector-combine,mldst-motion<no-split-footer-bb>,gvn<>,sccp,"
      "bdce,instcombine<max-iterations=1;no-verify-fixpoint>)",
      "function(jump-threading,correlated-propagation,adce,memcpyopt,dse,loop-"
      "mssa(licm<allowspeculation>),simplifycfg<switch-range-to-icmp;switch-"
      "to-arithmetic;hoist-common-insts;sink-common-insts>,instcombine<max-"
      "iterations=1;no-verify-fixpoint>)",
      // 9: after the CGSCC walk: attributes, dead arguments and globals.
      "cgscc(function-attrs),deadargelim,globalopt,globaldce,elim-avail-"
      "extern,rpo-function-attrs",
      // 10..12: -Oz's optimization pipeline (no vectorization at -Oz).
      "function(float2int,lower-constant-intrinsics,loop(loop-rotate<no-"
      "header-duplication;no-prepare-for-lto>,loop-deletion),loop-load-elim,"
      "instcombine<max-iterations=1;no-verify-fixpoint>,simplifycfg<forward-"
      "switch-cond;switch-range-to-icmp;switch-to-arithmetic;switch-to-lookup;"
      "no-keep-loops;hoist-common-insts;sink-common-insts>)",
      "function(vector-combine,instcombine<max-iterations=1;no-verify-"
      "fixpoint>,sroa<preserve-cfg>,infer-alignment,instcombine<max-"
      "iterations=1;no-verify-fixpoint>,loop-mssa(licm<allowspeculation>))",
      "function(alignment-from-assumptions,loop-sink,instsimplify,div-rem-"
      "pairs,tailcallelim,simplifycfg<switch-range-to-icmp;switch-to-"
      "arithmetic;hoist-loads-stores-with-cond-faulting;speculate-"
      "unpredictables>)",
      // 13: -Oz's module tail.
      "globaldce,constmerge,strip-dead-prototypes,rel-lookup-table-converter",
      // 14: dead code and stores again, for use after any of the above.
      "function(dse,adce,bdce,simplifycfg<switch-range-to-icmp>)",
  };
  std::vector<PhaseOrderAction> Actions;
  for (const char *P : Pipelines)
    Actions.push_back({P, 0});
  return Actions;
}

void registerPhaseOrderActionPasses(PassBuilder &PB) {
  PB.registerPipelineParsingCallback(
      [&PB](StringRef Name, ModulePassManager &MPM,
            ArrayRef<PassBuilder::PipelineElement>) {
        if (Name != InlineOzPassName)
          return false;
        // -Oz: getInlineParamsFromOptLevel(Oz) = getInlineParams(2, 2), and
        // at most 4 devirtualization iterations per SCC.
        ModuleInlinerWrapperPass Inliner(getInlineParams(2, 2),
                                         /*MandatoryFirst=*/true, {},
                                         InliningAdvisorMode::Default,
                                         /*MaxDevirtIterations=*/4);
        cantFail(PB.parsePassPipeline(
            Inliner.getPM(),
            "function-attrs<skip-non-recursive-function-attrs>,function(sroa<"
            "modify-cfg>,early-cse<memssa>,simplifycfg<switch-range-to-icmp>,"
            "instcombine<max-iterations=1;no-verify-fixpoint>)"));
        MPM.addPass(std::move(Inliner));
        return true;
      });
}

Expected<std::vector<PhaseOrderAction>>
parsePhaseOrderActions(StringRef Text, StringRef Source) {
  std::vector<PhaseOrderAction> Actions;
  unsigned LineNo = 0;
  while (!Text.empty()) {
    auto [Line, Rest] = Text.split('\n');
    Text = Rest;
    ++LineNo;
    Line = Line.split('#').first.trim();
    if (!Line.empty())
      Actions.push_back({Line.str(), LineNo});
  }
  if (Actions.empty())
    return makeError("the phase-order actions file '" + Source +
                     "' has no action: write one new-PM pipeline per line "
                     "(e.g. 'function(instcombine)'; '#' starts a comment)");
  return Actions;
}

Expected<std::vector<PhaseOrderAction>> readPhaseOrderActions(StringRef Path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
      MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!Buffer)
    return makeError("cannot read the phase-order actions file '" + Path +
                     "': " + Buffer.getError().message());
  return parsePhaseOrderActions((*Buffer)->getBuffer(), Path);
}

Error checkPhaseOrderActions(PassBuilder &PB,
                             const std::vector<PhaseOrderAction> &Actions,
                             StringRef Source) {
  for (size_t I = 0; I < Actions.size(); ++I) {
    ModulePassManager MPM;
    if (Error E = PB.parsePassPipeline(MPM, Actions[I].Pipeline)) {
      std::string Where =
          Actions[I].Line
              ? formatv("'{0}' line {1}", Source, Actions[I].Line).str()
              : Source.str();
      return makeError(formatv("phase-order action {0} ({1}) '{2}' is not a "
                               "valid pipeline: {3}",
                               I, Where, Actions[I].Pipeline,
                               toString(std::move(E))));
    }
  }
  return Error::success();
}

} // namespace mlbridge::passes
