//===- ByteReader.h - Abstract input for decoders --------------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The byte source a SerDes decodes from. Decoders know nothing of pipes,
/// sockets or files: a transport implements ByteReader.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_SERDES_BYTEREADER_H
#define MLBRIDGE_SERDES_BYTEREADER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mlbridge {

/// Reported when the input ends cleanly: no byte at all was available where
/// a read began. A read that gets some but not all of its bytes fails with a
/// different error (truncated input).
class EndOfStreamError : public llvm::ErrorInfo<EndOfStreamError> {
public:
  static char ID;
  /// \p Offset is the stream offset at which the input ended.
  explicit EndOfStreamError(uint64_t Offset) : Offset(Offset) {}
  /// The stream offset at which the input ended.
  uint64_t offset() const { return Offset; }
  void log(llvm::raw_ostream &OS) const override;
  std::error_code convertToErrorCode() const override;

private:
  uint64_t Offset;
};

/// Returns true if \p E is an EndOfStreamError (without consuming it).
bool isEndOfStream(const llvm::Error &E);

/// A sequential byte source with a running offset.
class ByteReader {
public:
  virtual ~ByteReader();

  /// Fills \p Buffer completely. Fails with EndOfStreamError if the input is
  /// at its end, or with a truncation error naming the offset if it ends
  /// part-way.
  virtual llvm::Error readExact(llvm::MutableArrayRef<char> Buffer) = 0;

  /// Reads up to and including the next '\n' into \p Line (without the
  /// '\n'). Fails with EndOfStreamError if the input is at its end, with an
  /// error if it ends before a '\n' or if more than \p MaxLen bytes come
  /// before it.
  virtual llvm::Error readLine(std::string &Line, size_t MaxLen) = 0;

  /// The number of bytes consumed so far.
  virtual uint64_t offset() const = 0;
};

/// Reads from a memory buffer, which must outlive the reader.
class MemoryByteReader final : public ByteReader {
public:
  /// Reads \p Buffer; offsets count from its start.
  explicit MemoryByteReader(llvm::StringRef Buffer) : Buffer(Buffer) {}

  llvm::Error readExact(llvm::MutableArrayRef<char> Out) override;
  llvm::Error readLine(std::string &Line, size_t MaxLen) override;
  uint64_t offset() const override { return Pos; }

  /// True if every byte has been consumed.
  bool atEnd() const { return Pos == Buffer.size(); }
  /// The bytes not yet consumed.
  llvm::StringRef remaining() const { return Buffer.drop_front(Pos); }

private:
  llvm::StringRef Buffer;
  size_t Pos = 0;
};

} // namespace mlbridge

#endif // MLBRIDGE_SERDES_BYTEREADER_H
