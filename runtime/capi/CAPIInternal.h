//===- CAPIInternal.h - What the C API's files share ------------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The C handles and the helpers of the C API (include/mlbridge-c/mlbridge.h):
/// Common.cpp (errors, types, specs), Runners.cpp (runners and replies),
/// SerDes.cpp (encoding and decoding messages). Handles own C++ objects
/// through std::unique_ptr; they are released to C on creation and
/// re-wrapped on destruction. Errors never cross the boundary as exceptions
/// or llvm::Error: they become a status and a thread-local message.
///
//===----------------------------------------------------------------------===//
#ifndef MLBRIDGE_RUNTIME_CAPI_CAPIINTERNAL_H
#define MLBRIDGE_RUNTIME_CAPI_CAPIINTERNAL_H

#include "mlbridge-c/mlbridge.h"

#include "mlbridge/MLModelRunner.h"
#include "mlbridge/SerDes/SerDes.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

struct mlbridge_runner {
  std::unique_ptr<mlbridge::MLModelRunner> Runner;
};

struct mlbridge_serdes {
  std::unique_ptr<mlbridge::SerDes> Impl;
};

struct mlbridge_message {
  mlbridge::Message Msg;
  /// Per tensor, the pointers and lengths that string views point at.
  std::vector<std::vector<const char *>> StringPtrs;
  std::vector<std::vector<size_t>> StringLens;
};

struct mlbridge_reply {
  std::optional<mlbridge::TensorValue> Value;
  std::string Error;
  /// Set when a reply function itself failed (bad arguments).
  mlbridge_status Status = MLBRIDGE_OK;
};

namespace mlbridge::capi {

/// Sets the thread's last error to \p Msg and returns \p Status.
mlbridge_status fail(mlbridge_status Status, const llvm::Twine &Msg);
/// The same with the message of \p E.
mlbridge_status fail(mlbridge_status Status, llvm::Error E);

/// Whether \p T is an mlbridge_element_type.
bool validType(int T);

/// The TensorSpec of a C spec, checked.
llvm::Expected<TensorSpec> toSpec(const mlbridge_tensor_spec *S);
/// The TensorSpecs of \p Count C specs, checked (names unique).
llvm::Expected<std::vector<TensorSpec>>
toSpecs(const mlbridge_tensor_spec *Features, size_t Count);

/// Views of \p Refs as C structs; the string arrays live in \p Ptrs/\p Lens.
std::vector<mlbridge_tensor>
toCViews(llvm::ArrayRef<TensorRef> Refs, std::vector<std::string> &Names,
         std::vector<std::vector<const char *>> &Ptrs,
         std::vector<std::vector<size_t>> &Lens);

/// \p Count strings of C, each with its length (\p Lengths may be null:
/// NUL-terminated strings).
llvm::Expected<std::vector<std::string>>
toStrings(const char *const *Strings, const size_t *Lengths, size_t Count);

} // namespace mlbridge::capi

#endif // MLBRIDGE_RUNTIME_CAPI_CAPIINTERNAL_H
