//===- TestUtil.h - Helpers for the mlbridge unit tests --------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_TEST_UNIT_TESTUTIL_H
#define MLBRIDGE_TEST_UNIT_TESTUTIL_H

#include "mlbridge/SerDes/SerDes.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "gtest/gtest.h"

#include <string>

namespace mlbridge::test {

/// Checks that the string \p Haystack contains \p Needle, and says which
/// it lacks.
#define EXPECT_CONTAINS(Haystack, Needle)                                      \
  EXPECT_NE(std::string(Haystack).find(Needle), std::string::npos)             \
      << "'" << (Haystack) << "' lacks '" << (Needle) << "'"

/// Fails the test with the error's message if \p E is an error.
#define MLB_ASSERT_OK(E)                                                       \
  do {                                                                         \
    if (llvm::Error Err_ = (E))                                                \
      FAIL() << llvm::toString(std::move(Err_));                               \
  } while (false)

/// Unwraps an Expected or fails the test with its message.
#define MLB_ASSERT_VALUE(Var, Exp)                                             \
  auto Var##OrErr = (Exp);                                                     \
  if (!Var##OrErr)                                                             \
    FAIL() << llvm::toString(Var##OrErr.takeError());                          \
  auto &Var = *Var##OrErr

/// Returns the message of \p E, or "<success>".
inline std::string errorText(llvm::Error E) {
  return E ? llvm::toString(std::move(E)) : "<success>";
}

/// Returns the error message of \p V, or "<success>".
template <typename T> std::string errorText(llvm::Expected<T> V) {
  return V ? "<success>" : llvm::toString(V.takeError());
}

/// Reads a file of the source tree (relative to the repository root).
inline std::string readSourceFile(llvm::StringRef Rel, bool &Found) {
  std::string Path = std::string(MLBRIDGE_SOURCE_DIR) + "/" + Rel.str();
  auto Buf = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  Found = static_cast<bool>(Buf);
  return Found ? (*Buf)->getBuffer().str() : std::string();
}

/// Creates a SerDes of \p Kind (which the build supports).
inline std::unique_ptr<SerDes> makeSerDes(SerDesKind Kind) {
  return llvm::cantFail(createSerDes(Kind));
}

/// Encodes \p Records with a fresh SerDes of \p Kind.
inline llvm::Expected<std::string> encodeAll(SerDesKind Kind,
                                             llvm::ArrayRef<Record> Records) {
  std::unique_ptr<SerDes> S = makeSerDes(Kind);
  std::string Out;
  for (const Record &R : Records)
    if (llvm::Error E = S->encode(R, Out))
      return E;
  return Out;
}

/// Decodes a whole stream with a fresh SerDes of \p Kind.
inline llvm::Expected<std::vector<Record>>
decodeBytes(SerDesKind Kind, llvm::StringRef Bytes,
            const DecoderLimits &Limits = DecoderLimits()) {
  std::unique_ptr<SerDes> S = llvm::cantFail(createSerDes(Kind, Limits));
  MemoryByteReader Reader(Bytes);
  return decodeAll(*S, Reader);
}

/// The SerDes kinds this build supports.
inline std::vector<SerDesKind> allSerDesKinds() {
  std::vector<SerDesKind> Kinds = {SerDesKind::Bitstream, SerDesKind::JSON};
#ifdef MLBRIDGE_HAVE_PROTOBUF
  Kinds.push_back(SerDesKind::Protobuf);
#endif
  return Kinds;
}

/// Names a SerDes kind in parameterized test names.
inline std::string kindTestName(const testing::TestParamInfo<SerDesKind> &I) {
  return serDesKindName(I.param).str();
}

} // namespace mlbridge::test

#endif // MLBRIDGE_TEST_UNIT_TESTUTIL_H
