//===- Register.cpp - Registers the protobuf SerDes -----------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Registers "protobuf" with the core's registry (mlbridge/Registry.h) when
/// MLBridge::Protobuf is loaded, so that createSerDes(SerDesKind::Protobuf)
/// finds it. The static library's link option `--undefined=` names the
/// anchor below, so static links keep this file (runtime/CMakeLists.txt).
///
//===----------------------------------------------------------------------===//
#include "mlbridge/Registry.h"

#include "llvm/Support/Compiler.h"

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT void
mlbridge_component_protobuf() {}

namespace {
struct Registrar {
  Registrar() {
    mlbridge::registerSerDes("protobuf", &mlbridge::createProtobufSerDes);
  }
} TheRegistrar;
} // namespace
