//===- CaseJSON.h - Test-vector cases as records ---------------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Converts between the records of test/vectors/cases.json (tensors given as
/// hex of their raw bytes or string elements) and mlbridge records. Used by
/// mlbridge-serdes-tool and the unit tests.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_TOOLS_SERDESTOOL_CASEJSON_H
#define MLBRIDGE_TOOLS_SERDESTOOL_CASEJSON_H

#include "mlbridge/SerDes/Record.h"

#include "llvm/Support/JSON.h"

namespace mlbridge {

/// Reads the `records` array of a case.
llvm::Expected<std::vector<Record>>
recordsFromJSON(const llvm::json::Value &Records);

/// Writes records in the case schema (the inverse of recordsFromJSON()).
llvm::json::Array recordsToJSON(llvm::ArrayRef<Record> Records);

} // namespace mlbridge

#endif // MLBRIDGE_TOOLS_SERDESTOOL_CASEJSON_H
