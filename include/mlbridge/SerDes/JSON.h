//===- JSON.h - Number formatting of the JSON SerDes -----------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The float layout of the JSON SerDes (docs/serialization.md, "Values"):
/// the shortest round-trip digits of the value's own type, in fixed notation
/// for moderate exponents and scientific otherwise. It matches orjson.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_SERDES_JSON_H
#define MLBRIDGE_SERDES_JSON_H

#include <string>

namespace mlbridge {

/// Appends \p V as the JSON SerDes writes a `double` element.
void writeJSONDouble(double V, std::string &Out);

/// Appends \p V as the JSON SerDes writes a `float` element.
void writeJSONFloat(float V, std::string &Out);

} // namespace mlbridge

#endif // MLBRIDGE_SERDES_JSON_H
