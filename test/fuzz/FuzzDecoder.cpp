//===- FuzzDecoder.cpp - libFuzzer target of one SerDes decoder -----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Built once per SerDes, with MLBRIDGE_FUZZ_SERDES naming the SerDesKind.
// Decodes a whole stream until its end or the first error. Any crash, leak
// or sanitizer report is a bug; errors are the expected outcome.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/SerDes/SerDes.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  // Small limits keep each input cheap while still exercising the checks.
  mlbridge::DecoderLimits Limits;
  Limits.MaxMessageBytes = 1 << 20;
  std::unique_ptr<mlbridge::SerDes> S = llvm::cantFail(mlbridge::createSerDes(
      mlbridge::SerDesKind::MLBRIDGE_FUZZ_SERDES, Limits));
  mlbridge::MemoryByteReader Reader(
      llvm::StringRef(reinterpret_cast<const char *>(Data), Size));
  llvm::Expected<std::vector<mlbridge::Record>> Records =
      mlbridge::decodeAll(*S, Reader);
  if (!Records) {
    llvm::consumeError(Records.takeError());
    return 0;
  }
  // Whatever decodes must encode again.
  std::string Out;
  for (const mlbridge::Record &R : *Records)
    if (llvm::Error E = S->encode(R, Out))
      llvm::consumeError(std::move(E));
  return 0;
}
