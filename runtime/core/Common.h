//===- Common.h - Helpers shared by the SerDes implementations -*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Internal to the runtime: the JSON header/context/end lines that the
// bitstream and JSON SerDes share, and error helpers.
//
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_RUNTIME_SERDES_COMMON_H
#define MLBRIDGE_RUNTIME_SERDES_COMMON_H

#include "mlbridge/SerDes/SerDes.h"

#include "llvm/Support/JSON.h"

namespace mlbridge {

/// Formats a shape as `[a,b]` for error messages.
std::string formatShape(llvm::ArrayRef<int64_t> Shape);

/// Creates a decode error prefixed with the SerDes name.
llvm::Error decodeError(llvm::StringRef SerDesName, const llvm::Twine &Msg);

/// Appends the header line shared by bitstream and JSON, with its '\n'.
void writeHeaderLine(const Header &H, std::string &Out);

/// Appends `{"context":"..."}\n`; fails if \p Name is not valid UTF-8.
llvm::Error writeContextLine(llvm::StringRef Name, std::string &Out);

/// Reads a header from its parsed JSON line, applying \p Limits.
llvm::Expected<Header> parseHeader(const llvm::json::Object &O,
                                   const DecoderLimits &Limits);

/// The start of a message line: its kind, its id and the parsed line, for
/// the SerDes to read the tensors from.
struct MessageLine {
  MessageKind Kind;
  int64_t Id;
  llvm::json::Object Object;
};

/// Refuses a message line with keys other than its kind key and \p Other
/// ("shapes" in bitstream, "tensors" in JSON), as the Python decoders do.
llvm::Error checkMessageKeys(const MessageLine &ML, llvm::StringRef Other,
                             llvm::StringRef SerDesName, uint64_t Offset);

/// One line of the bitstream or JSON SerDes, read and parsed: a complete
/// header, context or end record, or the start of a message.
using LineRecord = std::variant<Record, MessageLine>;

/// Reads the next line from \p Reader into \p Line (its start offset into
/// \p Offset) and decodes what bitstream and JSON share. A header becomes
/// \p CurrentHeader. Returns std::nullopt at a clean end of input.
llvm::Expected<std::optional<LineRecord>>
readLineRecord(ByteReader &Reader, const DecoderLimits &Limits,
               llvm::StringRef SerDesName, std::optional<Header> &CurrentHeader,
               std::string &Line, uint64_t &Offset);

/// Checks a decoded concrete shape against \p Limits and returns its element
/// count; \p What names the tensor in errors.
llvm::Expected<uint64_t> checkTensorShape(llvm::ArrayRef<int64_t> Shape,
                                          ElementType Type,
                                          llvm::StringRef What,
                                          const DecoderLimits &Limits);

/// The SerDes whose records are lines (bitstream and JSON): they share the
/// header, context and end lines and differ in how messages are laid out.
class LineSerDes : public SerDes {
public:
  using SerDes::SerDes;

  llvm::Error encodeHeader(const Header &H, std::string &Out) override {
    writeHeaderLine(H, Out);
    CurrentHeader = H;
    return llvm::Error::success();
  }

  llvm::Error encodeContext(llvm::StringRef Name, std::string &Out) override {
    return writeContextLine(Name, Out);
  }

  llvm::Error encodeEnd(std::string &Out) override {
    Out += "{\"end\":true}\n";
    return llvm::Error::success();
  }
};

/// Checks \p Line lexically, before any parser sees it, for what llvm::json
/// would let through but the wire format (and the Python side) refuses: arrays
/// and objects nested deeper than \p MaxDepth (brackets inside strings do not
/// count), numbers outside JSON's grammar (`01`, `1.`), a surrogate escape
/// without its pair, and a non-integer literal (`1.0`, `1e2`) where the records
/// define an integer: message ids, ports, dimensions. \p Offset and
/// \p SerDesName word the error.
llvm::Error checkJSONLine(llvm::StringRef Line, size_t MaxDepth,
                          llvm::StringRef SerDesName, uint64_t Offset);

/// Reads \p Size bytes into \p Out (replacing its contents), growing \p Out
/// as the bytes arrive rather than on the claimed size alone: a short input
/// that claims a large length costs no more memory than it delivers. Errors
/// are those of ByteReader::readExact() for the whole \p Size.
llvm::Error readGrowing(ByteReader &Reader, std::string &Out, uint64_t Size);

/// Turns an EndOfStreamError inside a record into a truncation error that
/// names \p What; other errors pass through.
llvm::Error inRecord(llvm::Error E, const llvm::Twine &What);

} // namespace mlbridge

#endif // MLBRIDGE_RUNTIME_SERDES_COMMON_H
