//===- FunctionFeaturesRegistration.cpp - Feature notes in llc's output ---===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The llc plugin's feature notes (docs/plugins.md): per-function features
/// and advice of the function-features pass, added to the output as
/// assembler comments, and their options (-mlbridge-annotate*).
///
//===----------------------------------------------------------------------===//
#include "passes/function_features/CodeGenAnnotation.h"
#include "passes/function_features/FunctionFeatures.h"
#include "plugins/common/Advisors.h"
#include "plugins/common/LegacyOptionNames.h"
#include "plugins/common/RunnerCommandLine.h"
#include "plugins/llc/Registration.h"

#include "llvm/IR/Module.h"
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Target/TargetMachine.h"

using namespace llvm;
using mlbridge::passes::CodeGenAnnotationLevel;
using mlbridge::plugins::AdvisorKind;

namespace {

cl::OptionCategory &Category = mlbridge::plugins::llcPluginCategory();

cl::opt<CodeGenAnnotationLevel> Annotate(
    "mlbridge-annotate",
    cl::desc("Feature notes added to the output as assembler comments "
             "(module inline asm; the generated code is unchanged)"),
    cl::values(clEnumValN(CodeGenAnnotationLevel::None, "none", "no notes"),
               clEnumValN(CodeGenAnnotationLevel::Module, "module",
                          "one summary line for the module"),
               clEnumValN(CodeGenAnnotationLevel::Functions, "functions",
                          "the summary plus one line per function")),
    cl::init(CodeGenAnnotationLevel::Functions), cl::cat(Category));

cl::opt<AdvisorKind> AdvisorOpt(
    "mlbridge-annotate-advisor",
    cl::desc("Where the per-function advice in the notes comes from"),
    cl::values(clEnumValN(AdvisorKind::Builtin, "builtin",
                          "the built-in policy, called directly"),
               clEnumValN(AdvisorKind::Runner, "runner",
                          "the model runner -mlbridge-annotate-runner names "
                          "(default)"),
               clEnumValN(AdvisorKind::Runner, "callback-runner",
                          "the same as 'runner' (with the default "
                          "-mlbridge-annotate-runner=callback)")),
    cl::init(mlbridge::plugins::defaultAdvisorKind()), cl::cat(Category));

// -mlbridge-annotate-runner, -channel, -address, -model, -serdes, -timeout-ms,
// -on-model-failure.
mlbridge::plugins::RunnerCommandLine RunnerOpts("mlbridge-annotate-", Category);

cl::opt<unsigned> SmallFunctionThreshold(
    "mlbridge-annotate-small-function-threshold",
    cl::desc("Built-in policy: loop-free functions with at most this many "
             "instructions are advised 'inline', larger ones 'size'"),
    cl::init(20), cl::value_desc("N"), cl::cat(Category));

// The names before the family was called after what it does (-mlbridge-llc-*).
mlbridge::plugins::LegacyOptionNames LegacyNames({
    {"mlbridge-llc-annotate", "mlbridge-annotate"},
    {"mlbridge-llc-advisor", "mlbridge-annotate-advisor"},
    {"mlbridge-llc-small-function-threshold",
     "mlbridge-annotate-small-function-threshold"},
});
mlbridge::plugins::LegacyOptionNames LegacyRunnerNames =
    mlbridge::plugins::LegacyOptionNames::forRunnerOptions(
        "mlbridge-llc-", "mlbridge-annotate-");

} // namespace

Error mlbridge::plugins::annotateFunctionFeatures(Module &M,
                                                  TargetMachine &TM) {
  if (Annotate == CodeGenAnnotationLevel::None)
    return Error::success();
  passes::BuiltinPolicyParams Params;
  Params.SmallFunctionThreshold = SmallFunctionThreshold;
  auto Advisor = makeFunctionAdvisor(AdvisorOpt, RunnerOpts.config(), Params);
  StringRef Comment = "#";
  if (const MCAsmInfo *MAI = TM.getMCAsmInfo())
    Comment = MAI->getCommentString();
  return passes::annotateModuleForCodeGen(M, Comment, Annotate, *Advisor);
}
