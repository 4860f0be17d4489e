//===- TFAOTFakeModel.cpp - Shared objects that are not good AOT models ---===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Built twice for TFAOTModelRunnerTest: with FAKE_ABI_VERSION, a library that
// claims another mlbridge AOT ABI version; without, a library with no
// mlbridge AOT symbols at all.
//
//===----------------------------------------------------------------------===//

#include <cstdint>

#ifdef FAKE_ABI_VERSION
extern "C" __attribute__((visibility("default"))) uint32_t
mlbridge_aot_abi_version(void) {
  return FAKE_ABI_VERSION;
}
#else
extern "C" __attribute__((visibility("default"))) int
not_an_mlbridge_model(void) {
  return 0;
}
#endif
