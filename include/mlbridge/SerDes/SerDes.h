//===- SerDes.h - Serializers of named tensors -----------------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The abstract SerDes: encodes records by appending to a string, decodes
/// them from a ByteReader. docs/serialization.md defines every byte.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_SERDES_SERDES_H
#define MLBRIDGE_SERDES_SERDES_H

#include "mlbridge/SerDes/ByteReader.h"
#include "mlbridge/SerDes/Record.h"

#include <memory>
#include <optional>
#include <string>

namespace mlbridge {

/// The wire formats.
enum class SerDesKind : uint8_t { Bitstream, JSON, Protobuf };

/// Returns "bitstream", "json" or "protobuf".
llvm::StringRef serDesKindName(SerDesKind Kind);

/// Parses a name produced by serDesKindName(); the error lists the choices.
llvm::Expected<SerDesKind> parseSerDesKind(llvm::StringRef Name);

/// Limits every decoder enforces before allocating; errors name the limit.
struct DecoderLimits {
  /// Bytes of one record (a message line, a protobuf record, ...).
  uint64_t MaxMessageBytes = uint64_t(256) << 20;
  /// Dimensions of one tensor.
  size_t MaxRank = 16;
  /// Tensors of one message (and feature specs of one header).
  size_t MaxTensors = 65536;
  /// Size of one dimension.
  int64_t MaxDimension = int64_t(1) << 40;
  /// Nesting of JSON arrays and objects in one line (the header, context,
  /// end and message lines of the bitstream and JSON formats). Checked by a
  /// lexical scan before the line is parsed, so no parser recurses deeper.
  size_t MaxDepth = 32;
};

/// Encodes and decodes records in one wire format.
///
/// A SerDes keeps the session's current header: the last one it encoded or
/// decoded. The bitstream format needs it to lay out messages; the others
/// keep it for their callers. A SerDes is used by one thread at a time.
class SerDes {
public:
  virtual ~SerDes();

  /// The wire format.
  SerDesKind kind() const { return Kind; }
  /// The wire format's name ("bitstream", "json", "protobuf").
  llvm::StringRef name() const { return serDesKindName(Kind); }

  /// Appends a header record to \p Out and makes it the current header.
  virtual llvm::Error encodeHeader(const Header &H, std::string &Out) = 0;
  /// Appends a context record to \p Out.
  virtual llvm::Error encodeContext(llvm::StringRef Name, std::string &Out) = 0;
  /// Appends a message record to \p Out. On error \p Out is unchanged.
  virtual llvm::Error encodeMessage(MessageKind Kind, int64_t Id,
                                    llvm::ArrayRef<TensorRef> Tensors,
                                    std::string &Out) = 0;
  /// Appends an end record to \p Out.
  virtual llvm::Error encodeEnd(std::string &Out) = 0;

  /// One piece of an encoded message: \p Size bytes at \p External, or (if
  /// that is null) at offset \p Offset of the scratch string.
  struct Piece {
    const char *External = nullptr;
    size_t Offset = 0;
    size_t Size = 0;
  };
  /// Encodes a message record as \p Pieces to be written in order: bytes
  /// appended to \p Scratch, and (where the format allows) the tensors' own
  /// value bytes, referenced and not copied, so that a transport can send a
  /// large tensor with one writev() and no copy. The pieces stay valid while
  /// \p Scratch and the tensors do. On error, \p Scratch and \p Pieces are
  /// unchanged. The default encodes the whole record into \p Scratch.
  virtual llvm::Error encodeMessagePieces(MessageKind Kind, int64_t Id,
                                          llvm::ArrayRef<TensorRef> Tensors,
                                          std::string &Scratch,
                                          std::vector<Piece> &Pieces);

  /// Appends any record to \p Out.
  llvm::Error encode(const Record &R, std::string &Out);

  /// Decodes the next record. Returns std::nullopt if the input ended
  /// cleanly before the record began; a record cut short is an error that
  /// names the byte offset. A decoded header becomes the current header.
  virtual llvm::Expected<std::optional<Record>> decode(ByteReader &Reader) = 0;

  /// The current header, or null if there is none yet.
  const Header *currentHeader() const {
    return CurrentHeader ? &*CurrentHeader : nullptr;
  }
  /// Sets the current header without encoding it (e.g. a reply stream that
  /// follows the header sent on another stream).
  void setCurrentHeader(Header H) { CurrentHeader = std::move(H); }

  /// The decoder limits.
  const DecoderLimits &limits() const { return Limits; }
  /// Replaces the decoder limits.
  void setLimits(const DecoderLimits &L) { Limits = L; }

protected:
  SerDes(SerDesKind Kind, const DecoderLimits &Limits)
      : Kind(Kind), Limits(Limits) {}

  /// Checks a decoded concrete shape against the limits and returns its
  /// element count; \p What names the tensor in errors.
  llvm::Expected<uint64_t> checkShape(llvm::ArrayRef<int64_t> Shape,
                                      ElementType Type,
                                      llvm::StringRef What) const;

  std::optional<Header> CurrentHeader;

private:
  SerDesKind Kind;
  DecoderLimits Limits;
};

/// Creates a SerDes of kind \p Kind. Fails for Protobuf if the library was
/// built without protobuf.
llvm::Expected<std::unique_ptr<SerDes>>
createSerDes(SerDesKind Kind, const DecoderLimits &Limits = DecoderLimits());

/// Creates the bitstream SerDes.
std::unique_ptr<SerDes>
createBitstreamSerDes(const DecoderLimits &Limits = DecoderLimits());
/// Creates the JSON SerDes.
std::unique_ptr<SerDes>
createJSONSerDes(const DecoderLimits &Limits = DecoderLimits());
#ifdef MLBRIDGE_HAVE_PROTOBUF
/// Creates the generic protobuf SerDes (delimited mlbridge.v1.Record).
std::unique_ptr<SerDes>
createProtobufSerDes(const DecoderLimits &Limits = DecoderLimits());
#endif

/// Decodes every record of \p Reader until the end of the input or an end
/// record (which is included).
llvm::Expected<std::vector<Record>> decodeAll(SerDes &S, ByteReader &Reader);

} // namespace mlbridge

#endif // MLBRIDGE_SERDES_SERDES_H
