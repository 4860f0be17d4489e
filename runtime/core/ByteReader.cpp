//===- ByteReader.cpp - Abstract input for decoders -----------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/SerDes/ByteReader.h"

#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace llvm;

namespace mlbridge {

char EndOfStreamError::ID = 0;

void EndOfStreamError::log(raw_ostream &OS) const {
  OS << "end of stream at byte offset " << Offset;
}

std::error_code EndOfStreamError::convertToErrorCode() const {
  return inconvertibleErrorCode();
}

bool isEndOfStream(const Error &E) { return E.isA<EndOfStreamError>(); }

ByteReader::~ByteReader() = default;

Error MemoryByteReader::readExact(MutableArrayRef<char> Out) {
  if (Out.empty())
    return Error::success();
  size_t Available = Buffer.size() - Pos;
  if (Available == 0)
    return make_error<EndOfStreamError>(Pos);
  if (Available < Out.size())
    return createStringError(
        inconvertibleErrorCode(),
        "input truncated at byte offset %zu: needed %zu bytes, got %zu",
        Buffer.size(), Out.size(), Available);
  std::memcpy(Out.data(), Buffer.data() + Pos, Out.size());
  Pos += Out.size();
  return Error::success();
}

Error MemoryByteReader::readLine(std::string &Line, size_t MaxLen) {
  if (Pos == Buffer.size())
    return make_error<EndOfStreamError>(Pos);
  StringRef Rest = Buffer.drop_front(Pos);
  size_t NL =
      Rest.take_front(MaxLen == SIZE_MAX ? MaxLen : MaxLen + 1).find('\n');
  if (NL == StringRef::npos) {
    if (Rest.size() > MaxLen)
      return createStringError(inconvertibleErrorCode(),
                               "line at byte offset %zu is longer than the "
                               "limit of %zu bytes",
                               Pos, MaxLen);
    return createStringError(inconvertibleErrorCode(),
                             "input truncated at byte offset %zu: line "
                             "starting at offset %zu has no final '\\n'",
                             Buffer.size(), Pos);
  }
  Line.assign(Rest.data(), NL);
  Pos += NL + 1;
  return Error::success();
}

} // namespace mlbridge
