//===- FuzzDecoder.cpp - libFuzzer target of one SerDes decoder -----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Built once per SerDes, with MLBRIDGE_FUZZ_SERDES naming the SerDesKind.
// Decodes a whole stream until its end or the first error. Any crash, leak
// or sanitizer report is a bug; errors are the expected outcome. What
// decodes must encode again and decode back to the same records, bit for
// bit (an abort otherwise).
//
//===----------------------------------------------------------------------===//

#include "mlbridge/SerDes/SerDes.h"

#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

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
  // Whatever decodes must encode again (with a fresh SerDes, in order), and
  // the encoding must decode to the same records: a failure is a bug.
  std::unique_ptr<mlbridge::SerDes> Writer =
      llvm::cantFail(mlbridge::createSerDes(
          mlbridge::SerDesKind::MLBRIDGE_FUZZ_SERDES, Limits));
  std::string Out;
  for (const mlbridge::Record &R : *Records)
    if (llvm::Error E = Writer->encode(R, Out)) {
      llvm::errs() << "decoded record does not encode again: "
                   << llvm::toString(std::move(E)) << "\n";
      std::abort();
    }
  std::unique_ptr<mlbridge::SerDes> Again =
      llvm::cantFail(mlbridge::createSerDes(
          mlbridge::SerDesKind::MLBRIDGE_FUZZ_SERDES, Limits));
  mlbridge::MemoryByteReader Reader2(Out);
  llvm::Expected<std::vector<mlbridge::Record>> Back =
      mlbridge::decodeAll(*Again, Reader2);
  if (!Back) {
    llvm::errs() << "re-encoded records do not decode: "
                 << llvm::toString(Back.takeError()) << "\n";
    std::abort();
  }
  if (*Back != *Records) {
    llvm::errs() << "re-encoded stream decodes to other records\n";
    std::abort();
  }
  return 0;
}
