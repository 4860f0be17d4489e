//===- Registration.h - The pass families of the opt plugin -----*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Each pass family of MLBridgeLLVMPlugin (opt) defines its options and
/// registers its passes from one file of its own, `<Family>Registration.cpp`;
/// LLVMPlugin.cpp, the entry point, calls them in turn.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_PLUGINS_LLVM_REGISTRATION_H
#define MLBRIDGE_PLUGINS_LLVM_REGISTRATION_H

namespace llvm {
class PassBuilder;
namespace cl {
class OptionCategory;
} // namespace cl
} // namespace llvm

namespace mlbridge::plugins {

/// The `--help` category of every option of the opt plugin. A function so
/// that the options of every file may use it during static initialisation.
llvm::cl::OptionCategory &optPluginCategory();

/// `mlbridge-function-features` (docs/plugins.md).
void registerFunctionFeatures(llvm::PassBuilder &PB);
/// The ML inline advisor (docs/inliner.md).
void registerInliner(llvm::PassBuilder &PB);
/// `mlbridge-phase-order` (docs/phase-order.md).
void registerPhaseOrder(llvm::PassBuilder &PB);
/// `mlbridge-roundtrip`, the round-trip benchmark's opt host (docs/bench.md).
void registerRoundTrip(llvm::PassBuilder &PB);

} // namespace mlbridge::plugins

#endif // MLBRIDGE_PLUGINS_LLVM_REGISTRATION_H
