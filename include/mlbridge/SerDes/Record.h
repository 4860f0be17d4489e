//===- Record.h - The records every SerDes carries -------------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The record model shared by the bitstream, JSON and protobuf SerDes: a
/// stream is a sequence of header, context, message and end records.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_SERDES_RECORD_H
#define MLBRIDGE_SERDES_RECORD_H

#include "mlbridge/Tensor.h"
#include "mlbridge/TensorSpec.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace mlbridge {

/// The specs of a stream. A later header replaces an earlier one.
struct Header {
  /// The features of observation messages, in order.
  std::vector<TensorSpec> Features;
  /// The spec of advice messages, if any.
  std::optional<TensorSpec> Advice;
  /// The spec of outcome messages, if any.
  std::optional<TensorSpec> Score;

  friend bool operator==(const Header &L, const Header &R) {
    return L.Features == R.Features && L.Advice == R.Advice &&
           L.Score == R.Score;
  }
};

/// Names what the following messages are about (a function or module).
struct Context {
  std::string Name;
  friend bool operator==(const Context &L, const Context &R) {
    return L.Name == R.Name;
  }
};

/// What a message carries.
enum class MessageKind : uint8_t {
  Observation, ///< Features from the compiler.
  Outcome,     ///< The score of an earlier observation.
  Advice,      ///< A reply.
};

/// Returns "observation", "outcome" or "advice".
llvm::StringRef messageKindName(MessageKind Kind);

/// Parses a name produced by messageKindName().
std::optional<MessageKind> parseMessageKind(llvm::StringRef Name);

/// A set of named tensors.
struct Message {
  MessageKind Kind = MessageKind::Observation;
  /// The observation index within the current context.
  int64_t Id = 0;
  std::vector<TensorValue> Tensors;

  friend bool operator==(const Message &L, const Message &R) {
    return L.Kind == R.Kind && L.Id == R.Id && L.Tensors == R.Tensors;
  }
};

/// The session is over.
struct End {
  friend bool operator==(const End &, const End &) { return true; }
};

/// One record of a stream.
using Record = std::variant<Header, Context, Message, End>;

} // namespace mlbridge

#endif // MLBRIDGE_SERDES_RECORD_H
