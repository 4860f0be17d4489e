//===- Bitstream.h - Raw tensor values of LLVM's protocol ------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// The value encoding of the bitstream SerDes on its own: LLVM's interactive
/// runner expects the advice tensor's raw bytes with no framing.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_SERDES_BITSTREAM_H
#define MLBRIDGE_SERDES_BITSTREAM_H

#include "mlbridge/SerDes/ByteReader.h"
#include "mlbridge/SerDes/SerDes.h"

namespace mlbridge {

/// Appends the values of \p Tensor: numeric and bool elements as raw bytes,
/// each string as a little-endian uint32 length and its bytes.
llvm::Error encodeRawTensor(const TensorRef &Tensor, std::string &Out);

/// Reads one value of \p Spec with shape \p Shape (which must be concrete
/// and match the spec) from \p Reader, in the encoding of encodeRawTensor().
/// Errors name the tensor and the byte offset.
llvm::Expected<TensorValue>
decodeRawTensor(const TensorSpec &Spec, llvm::ArrayRef<int64_t> Shape,
                ByteReader &Reader,
                const DecoderLimits &Limits = DecoderLimits());

/// Reads one value of the static spec \p Spec from \p Bytes, which must hold
/// exactly that value.
llvm::Expected<TensorValue>
decodeRawTensor(const TensorSpec &Spec, llvm::StringRef Bytes,
                const DecoderLimits &Limits = DecoderLimits());

} // namespace mlbridge

#endif // MLBRIDGE_SERDES_BITSTREAM_H
