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

/// The line-level records common to bitstream and JSON: header, context and
/// end. Returns std::nullopt if \p O is none of them.
llvm::Expected<std::optional<Record>>
parseCommonLine(const llvm::json::Object &O, const DecoderLimits &Limits,
                llvm::StringRef SerDesName, uint64_t Offset);

/// Turns an EndOfStreamError inside a record into a truncation error that
/// names \p What; other errors pass through.
llvm::Error inRecord(llvm::Error E, const llvm::Twine &What);

} // namespace mlbridge

#endif // MLBRIDGE_RUNTIME_SERDES_COMMON_H
