//===- Tensor.h - Tensor values and non-owning views -----------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// TensorValue owns a named tensor with a concrete shape; TensorRef views one
/// without owning it, so that runner buffers are serialized without copies.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_TENSOR_H
#define MLBRIDGE_TENSOR_H

#include "mlbridge/TensorSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cassert>
#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace mlbridge {

/// The alignment of every numeric tensor's storage, in bytes (a cache line;
/// what XLA and 512-bit SIMD loads want).
inline constexpr size_t TensorAlignment = 64;

/// A non-owning view of a named tensor with a concrete shape: numeric and
/// bool elements as little-endian bytes, string elements as strings. The
/// viewed memory must outlive the view.
class TensorRef {
public:
  /// Views a numeric or bool tensor whose elements are \p Bytes.
  TensorRef(llvm::StringRef Name, ElementType Type,
            llvm::ArrayRef<int64_t> Shape, llvm::ArrayRef<char> Bytes)
      : Name(Name), Type(Type), Shape(Shape), Bytes(Bytes) {
    assert(Type != ElementType::String && "use the string constructor");
  }
  /// Views a string tensor whose elements are \p Strings.
  TensorRef(llvm::StringRef Name, llvm::ArrayRef<int64_t> Shape,
            llvm::ArrayRef<std::string> Strings)
      : Name(Name), Type(ElementType::String), Shape(Shape), Strings(Strings) {}

  /// The tensor's name.
  llvm::StringRef name() const { return Name; }
  /// The element type.
  ElementType type() const { return Type; }
  /// The concrete shape.
  llvm::ArrayRef<int64_t> shape() const { return Shape; }
  /// The raw little-endian bytes (empty for string tensors).
  llvm::ArrayRef<char> bytes() const { return Bytes; }
  /// The string elements (empty for other tensors).
  llvm::ArrayRef<std::string> strings() const { return Strings; }
  /// The number of elements the data holds.
  size_t getElementCount() const {
    return Type == ElementType::String ? Strings.size()
                                       : Bytes.size() / elementSize(Type);
  }
  /// Returns the elements as \p T, which must be the tensor's type.
  template <typename T> llvm::ArrayRef<T> data() const {
    assert(elementTypeOf<T> == Type && "wrong element type");
    if constexpr (std::is_same_v<T, std::string>)
      return Strings;
    else
      return llvm::ArrayRef<T>(reinterpret_cast<const T *>(Bytes.data()),
                               Bytes.size() / sizeof(T));
  }

private:
  llvm::StringRef Name;
  ElementType Type;
  llvm::ArrayRef<int64_t> Shape;
  llvm::ArrayRef<char> Bytes;
  llvm::ArrayRef<std::string> Strings;
};

/// An allocator of TensorAlignment-aligned storage.
template <typename T> struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U> AlignedAllocator(const AlignedAllocator<U> &) {}
  T *allocate(size_t N) {
    return static_cast<T *>(
        ::operator new(N * sizeof(T), std::align_val_t(TensorAlignment)));
  }
  void deallocate(T *P, size_t) {
    ::operator delete(P, std::align_val_t(TensorAlignment));
  }
  template <typename U> bool operator==(const AlignedAllocator<U> &) const {
    return true;
  }
  template <typename U> bool operator!=(const AlignedAllocator<U> &) const {
    return false;
  }
};

/// An owning named tensor with a concrete shape. Numeric and bool elements
/// live in TensorAlignment-aligned storage, little-endian (this library only
/// builds for little-endian hosts); string elements in a vector of strings.
class TensorValue {
public:
  /// Creates a zero-filled (or empty-string-filled) tensor. Fails if the
  /// shape has a negative dimension or too many elements.
  static llvm::Expected<TensorValue>
  create(llvm::StringRef Name, ElementType Type, llvm::ArrayRef<int64_t> Shape);
  /// Creates a tensor from its raw little-endian bytes, checking their size
  /// and that bool bytes are 0 or 1.
  static llvm::Expected<TensorValue> fromBytes(llvm::StringRef Name,
                                               ElementType Type,
                                               llvm::ArrayRef<int64_t> Shape,
                                               llvm::ArrayRef<char> Bytes);
  /// Creates a string tensor, checking the element count.
  static llvm::Expected<TensorValue>
  fromStrings(llvm::StringRef Name, llvm::ArrayRef<int64_t> Shape,
              std::vector<std::string> Strings);
  /// Creates a tensor of shape \p Shape from \p Data, checking the count.
  template <typename T>
  static llvm::Expected<TensorValue> fromArray(llvm::StringRef Name,
                                               llvm::ArrayRef<int64_t> Shape,
                                               llvm::ArrayRef<T> Data) {
    if constexpr (std::is_same_v<T, std::string>) {
      return fromStrings(Name, Shape,
                         std::vector<std::string>(Data.begin(), Data.end()));
    } else {
      return fromBytes(
          Name, elementTypeOf<T>, Shape,
          llvm::ArrayRef<char>(reinterpret_cast<const char *>(Data.data()),
                               Data.size() * sizeof(T)));
    }
  }
  /// Creates a vector tensor of shape `[Data.size()]`.
  template <typename T>
  static TensorValue fromVector(llvm::StringRef Name, llvm::ArrayRef<T> Data) {
    int64_t N = static_cast<int64_t>(Data.size());
    return llvm::cantFail(fromArray<T>(Name, {N}, Data));
  }
  /// Creates a one-element tensor of shape `[1]` (LLVM's scalar form).
  template <typename T> static TensorValue scalar(llvm::StringRef Name, T V) {
    return fromVector<T>(Name, llvm::ArrayRef<T>(V));
  }

  TensorValue(TensorValue &&) = default;
  TensorValue &operator=(TensorValue &&) = default;
  TensorValue(const TensorValue &) = default;
  TensorValue &operator=(const TensorValue &) = default;

  /// The tensor's name.
  const std::string &name() const { return Name; }
  /// The element type.
  ElementType type() const { return Type; }
  /// The concrete shape.
  llvm::ArrayRef<int64_t> shape() const { return Shape; }
  /// The number of elements.
  size_t getElementCount() const { return NumElements; }
  /// The raw bytes of a numeric or bool tensor (empty for strings).
  llvm::ArrayRef<char> bytes() const {
    return llvm::ArrayRef<char>(reinterpret_cast<const char *>(Words.data()),
                                NumBytes);
  }
  /// The raw bytes, writable. Bool bytes must stay 0 or 1.
  llvm::MutableArrayRef<char> mutableBytes() {
    return llvm::MutableArrayRef<char>(reinterpret_cast<char *>(Words.data()),
                                       NumBytes);
  }
  /// The string elements (empty for other tensors).
  llvm::ArrayRef<std::string> strings() const { return Strings; }
  /// The string elements, writable.
  llvm::MutableArrayRef<std::string> mutableStrings() { return Strings; }

  /// Returns the elements as \p T, or an error naming the tensor and both
  /// types if \p T is not the tensor's element type.
  template <typename T> llvm::Expected<llvm::ArrayRef<T>> getData() const {
    if (llvm::Error E = checkType(elementTypeOf<T>))
      return E;
    return data<T>();
  }
  /// Like getData(), writable.
  template <typename T>
  llvm::Expected<llvm::MutableArrayRef<T>> getMutableData() {
    if (llvm::Error E = checkType(elementTypeOf<T>))
      return E;
    return mutableData<T>();
  }
  /// Returns the elements as \p T, which must be the element type (asserted).
  template <typename T> llvm::ArrayRef<T> data() const {
    assert(elementTypeOf<T> == Type && "wrong element type");
    if constexpr (std::is_same_v<T, std::string>)
      return Strings;
    else
      return llvm::ArrayRef<T>(reinterpret_cast<const T *>(Words.data()),
                               NumElements);
  }
  /// Like data(), writable.
  template <typename T> llvm::MutableArrayRef<T> mutableData() {
    assert(elementTypeOf<T> == Type && "wrong element type");
    if constexpr (std::is_same_v<T, std::string>)
      return Strings;
    else
      return llvm::MutableArrayRef<T>(reinterpret_cast<T *>(Words.data()),
                                      NumElements);
  }

  /// A view of this tensor; valid while this tensor is alive and unchanged.
  TensorRef ref() const {
    if (Type == ElementType::String)
      return TensorRef(Name, Shape, Strings);
    return TensorRef(Name, Type, Shape, bytes());
  }

  /// Changes the shape. If the element count changes, numeric elements up to
  /// the smaller count keep their bytes and the others are zero (string
  /// elements all become empty), and pointers into the storage are invalid.
  llvm::Error reshape(llvm::ArrayRef<int64_t> NewShape);

  /// Returns an error naming the tensor if \p Expected is not its type.
  llvm::Error checkType(ElementType Expected) const;

  /// Two tensors are equal if name, type, shape and elements (bitwise for
  /// floats) are equal.
  friend bool operator==(const TensorValue &L, const TensorValue &R) {
    return L.Type == R.Type && L.Name == R.Name && L.Shape == R.Shape &&
           L.bytes() == R.bytes() && L.Strings == R.Strings;
  }
  friend bool operator!=(const TensorValue &L, const TensorValue &R) {
    return !(L == R);
  }

private:
  TensorValue(llvm::StringRef Name, ElementType Type,
              llvm::ArrayRef<int64_t> Shape, size_t NumElements);

  std::string Name;
  ElementType Type;
  std::vector<int64_t> Shape;
  size_t NumElements = 0;
  size_t NumBytes = 0;
  /// TensorAlignment-aligned words: a runner may hand a feature's storage to
  /// a model as is (XLA wants its arguments aligned to 64 bytes at most).
  std::vector<uint64_t, AlignedAllocator<uint64_t>> Words;
  std::vector<std::string> Strings;
};

/// Returns views of \p Values, in order.
std::vector<TensorRef> makeRefs(llvm::ArrayRef<TensorValue> Values);

} // namespace mlbridge

#endif // MLBRIDGE_TENSOR_H
