//===- ProtoTensors.h - Tensors to and from mlbridge.v1 messages -*- C++
//-*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Internal to the runtime: the conversions between tensors and the generic
// protobuf messages (mlbridge.v1.TensorSpec, mlbridge.v1.TensorMessage) that
// the protobuf SerDes and the gRPC runners share.
//
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_RUNTIME_SERDES_PROTOTENSORS_H
#define MLBRIDGE_RUNTIME_SERDES_PROTOTENSORS_H

#include "mlbridge/SerDes/SerDes.h"

#include "mlbridge/v1/tensor.pb.h"

namespace mlbridge {

/// Fills \p P with \p S.
void specToProto(const TensorSpec &S, v1::TensorSpec &P);

/// Reads a spec; errors start with "protobuf: ". The decoder limits are
/// checked apart (checkSpecLimits), after every spec of a header is read.
llvm::Expected<TensorSpec> specFromProto(const v1::TensorSpec &P);

/// Refuses \p S if its rank or a dimension is above \p Limits.
llvm::Error checkSpecLimits(const TensorSpec &S, const DecoderLimits &Limits);

/// Fills \p P (which must be empty) with a message of \p Tensors; fails if a
/// tensor's data does not match its shape or its name is not UTF-8.
llvm::Error messageToProto(MessageKind Kind, int64_t Id,
                           llvm::ArrayRef<TensorRef> Tensors,
                           v1::TensorMessage &P);

/// Reads a message, applying \p Limits. \p Where names the message in
/// errors ("message at byte offset 12"); errors start with "protobuf: ".
llvm::Expected<Message> messageFromProto(const v1::TensorMessage &P,
                                         const DecoderLimits &Limits,
                                         const llvm::Twine &Where);

} // namespace mlbridge

#endif // MLBRIDGE_RUNTIME_SERDES_PROTOTENSORS_H
