//===- Tensor.cpp - Tensor values and views -------------------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/Tensor.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Endian.h"

#include <algorithm>

using namespace llvm;

static_assert(llvm::endianness::native == llvm::endianness::little,
              "mlbridge stores tensors in host order and needs a "
              "little-endian host");
static_assert(sizeof(bool) == 1, "bool elements are one byte");

namespace mlbridge {

// Numeric buffers are capped so that byte counts always fit in size_t and
// int64_t; decoders apply much smaller limits before getting here.
static constexpr uint64_t MaxTensorBytes = uint64_t(1) << 48;

TensorValue::TensorValue(StringRef Name, ElementType Type,
                         ArrayRef<int64_t> Shape, size_t NumElements)
    : Name(Name.str()), Type(Type), Shape(Shape.begin(), Shape.end()),
      NumElements(NumElements) {
  if (Type == ElementType::String) {
    Strings.resize(NumElements);
  } else {
    NumBytes = NumElements * elementSize(Type);
    Words.resize((NumBytes + 7) / 8);
  }
}

static Expected<size_t> checkedCount(StringRef Name, ElementType Type,
                                     ArrayRef<int64_t> Shape) {
  for (int64_t Dim : Shape)
    if (Dim < 0)
      return createStringError(inconvertibleErrorCode(),
                               "tensor '%s' has a negative dimension %lld",
                               Name.str().c_str(), static_cast<long long>(Dim));
  size_t Size =
      Type == ElementType::String ? sizeof(std::string) : elementSize(Type);
  std::optional<uint64_t> Count =
      shapeElementCount(Shape, MaxTensorBytes / Size);
  if (!Count)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has too many elements",
                             Name.str().c_str());
  return static_cast<size_t>(*Count);
}

Expected<TensorValue> TensorValue::create(StringRef Name, ElementType Type,
                                          ArrayRef<int64_t> Shape) {
  Expected<size_t> Count = checkedCount(Name, Type, Shape);
  if (!Count)
    return Count.takeError();
  return TensorValue(Name, Type, Shape, *Count);
}

Expected<TensorValue> TensorValue::fromBytes(StringRef Name, ElementType Type,
                                             ArrayRef<int64_t> Shape,
                                             ArrayRef<char> Bytes) {
  if (Type == ElementType::String)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s': string tensors have no raw bytes",
                             Name.str().c_str());
  Expected<size_t> Count = checkedCount(Name, Type, Shape);
  if (!Count)
    return Count.takeError();
  if (*Count * elementSize(Type) != Bytes.size())
    return createStringError(
        inconvertibleErrorCode(),
        "tensor '%s' (%s) needs %zu bytes for its shape, got %zu",
        Name.str().c_str(), elementTypeName(Type).data(),
        *Count * elementSize(Type), Bytes.size());
  if (Type == ElementType::Bool)
    for (size_t I = 0; I < Bytes.size(); ++I)
      if (Bytes[I] != 0 && Bytes[I] != 1)
        return createStringError(
            inconvertibleErrorCode(),
            "tensor '%s': bool element %zu is byte %u (must be 0 or 1)",
            Name.str().c_str(), I, static_cast<unsigned char>(Bytes[I]));
  TensorValue V(Name, Type, Shape, *Count);
  if (!Bytes.empty())
    std::memcpy(V.Words.data(), Bytes.data(), Bytes.size());
  return V;
}

Expected<TensorValue> TensorValue::fromStrings(StringRef Name,
                                               ArrayRef<int64_t> Shape,
                                               std::vector<std::string> Strs) {
  Expected<size_t> Count = checkedCount(Name, ElementType::String, Shape);
  if (!Count)
    return Count.takeError();
  if (*Count != Strs.size())
    return createStringError(
        inconvertibleErrorCode(),
        "tensor '%s' needs %zu strings for its shape, got %zu",
        Name.str().c_str(), *Count, Strs.size());
  TensorValue V(Name, ElementType::String, Shape, 0);
  V.NumElements = *Count;
  V.Strings = std::move(Strs);
  return V;
}

Error TensorValue::reshape(ArrayRef<int64_t> NewShape) {
  Expected<size_t> Count = checkedCount(Name, Type, NewShape);
  if (!Count)
    return Count.takeError();
  Shape.assign(NewShape.begin(), NewShape.end());
  if (*Count == NumElements)
    return Error::success();
  NumElements = *Count;
  if (Type == ElementType::String) {
    Strings.assign(NumElements, std::string());
  } else {
    size_t OldBytes = NumBytes;
    NumBytes = NumElements * elementSize(Type);
    size_t NumWords = (NumBytes + 7) / 8;
    // A dynamic feature changes its size from one query to the next and the
    // caller then overwrites every element: keep the storage when it fits
    // (zeroing only words it did not hold), and grow it geometrically, as
    // push_back does, so that a size that creeps up reallocates (and faults in
    // fresh pages) a few times rather than every time.
    if (NumWords > Words.capacity())
      Words.reserve(
          std::max(NumWords, Words.capacity() + Words.capacity() / 2));
    size_t HeldBytes = Words.size() * 8;
    Words.resize(NumWords);
    // resize() zeroes whole new words; the last word held may hold stale bytes
    // beyond the old count.
    if (NumBytes > OldBytes && HeldBytes > OldBytes)
      std::memset(reinterpret_cast<char *>(Words.data()) + OldBytes, 0,
                  std::min(NumBytes, HeldBytes) - OldBytes);
  }
  return Error::success();
}

Error TensorValue::checkType(ElementType Expected) const {
  if (Expected == Type)
    return Error::success();
  return createStringError(inconvertibleErrorCode(),
                           "tensor '%s' is %s, accessed as %s", Name.c_str(),
                           elementTypeName(Type).data(),
                           elementTypeName(Expected).data());
}

std::vector<TensorRef> makeRefs(ArrayRef<TensorValue> Values) {
  std::vector<TensorRef> Refs;
  Refs.reserve(Values.size());
  for (const TensorValue &V : Values)
    Refs.push_back(V.ref());
  return Refs;
}

} // namespace mlbridge
