//===- Registration.h - The pass families of the llc plugin -----*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Each pass family of MLBridgeLLCPlugin (llc) defines its options and what it
/// adds before code generation in one file of its own,
/// `<Family>Registration.cpp`; LLCPlugin.cpp, the entry point, calls them
/// from its PreCodeGenCallback.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PLUGINS_LLC_REGISTRATION_H
#define MLBRIDGE_PLUGINS_LLC_REGISTRATION_H

#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace llvm {
class Module;
class Pass;
class TargetMachine;
namespace cl {
class OptionCategory;
} // namespace cl
} // namespace llvm

namespace mlbridge::plugins {

/// The `--help` category of every option of the llc plugin. A function so
/// that the options of every file may use it during static initialisation.
llvm::cl::OptionCategory &llcPluginCategory();

/// The feature notes (docs/plugins.md): adds them to \p M as the options ask.
/// The error names the cause.
llvm::Error annotateFunctionFeatures(llvm::Module &M, llvm::TargetMachine &TM);

/// The ML register-allocation priority advisor (docs/regalloc.md): the passes
/// to add before the codegen passes; empty unless the options select it.
std::vector<std::unique_ptr<llvm::Pass>> regallocPriorityPasses();

} // namespace mlbridge::plugins

#endif // MLBRIDGE_PLUGINS_LLC_REGISTRATION_H
