//===- TensorSpec.h - Named, typed tensor descriptions ---------*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Element types and TensorSpec: the name, element type, shape and port of a
/// tensor exchanged between a compiler and a model. The JSON form is
/// byte-identical to LLVM's (llvm/Analysis/TensorSpec.h) so that mlbridge can
/// speak LLVM's interactive protocol; see docs/serialization.md.
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_TENSORSPEC_H
#define MLBRIDGE_TENSORSPEC_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace llvm::json {
class Value;
} // namespace llvm::json

namespace mlbridge {

/// The element type of a tensor. The order matches the protobuf enum
/// `mlbridge.v1.ElementType` (minus one) and the C API's enum.
enum class ElementType : uint8_t {
  Int8,
  UInt8,
  Int16,
  UInt16,
  Int32,
  UInt32,
  Int64,
  UInt64,
  Float,
  Double,
  Bool,
  String,
};

/// The number of ElementType values.
inline constexpr unsigned NumElementTypes = 12;

/// Returns the wire name of \p Type: LLVM's names ("int64_t", "float", ...)
/// plus "bool" and "string".
llvm::StringRef elementTypeName(ElementType Type);

/// Parses a wire name produced by elementTypeName(); the error names \p Name.
llvm::Expected<ElementType> parseElementType(llvm::StringRef Name);

/// Returns the size in bytes of one element of \p Type, or 0 for String
/// (whose elements have variable size).
size_t elementSize(ElementType Type);

/// Returns true for the integer element types (signed and unsigned).
bool isIntegerType(ElementType Type);

/// Maps a C++ element type to its ElementType. Only the exact fixed-width
/// types, float, double, bool and std::string have a mapping, so that a
/// feature's type is never changed silently.
template <typename T> struct ElementTypeOf;
#define MLBRIDGE_ELEMENT_TYPE(CType, Enum)                                     \
  template <> struct ElementTypeOf<CType> {                                    \
    static constexpr ElementType value = ElementType::Enum;                    \
  };
MLBRIDGE_ELEMENT_TYPE(int8_t, Int8)
MLBRIDGE_ELEMENT_TYPE(uint8_t, UInt8)
MLBRIDGE_ELEMENT_TYPE(int16_t, Int16)
MLBRIDGE_ELEMENT_TYPE(uint16_t, UInt16)
MLBRIDGE_ELEMENT_TYPE(int32_t, Int32)
MLBRIDGE_ELEMENT_TYPE(uint32_t, UInt32)
MLBRIDGE_ELEMENT_TYPE(int64_t, Int64)
MLBRIDGE_ELEMENT_TYPE(uint64_t, UInt64)
MLBRIDGE_ELEMENT_TYPE(float, Float)
MLBRIDGE_ELEMENT_TYPE(double, Double)
MLBRIDGE_ELEMENT_TYPE(bool, Bool)
MLBRIDGE_ELEMENT_TYPE(std::string, String)
#undef MLBRIDGE_ELEMENT_TYPE

/// True if \p T has an ElementType mapping.
template <typename T, typename = void>
struct IsElementType : std::false_type {};
template <typename T>
struct IsElementType<T, std::void_t<decltype(ElementTypeOf<T>::value)>>
    : std::true_type {};

/// The ElementType of the C++ type \p T.
template <typename T>
inline constexpr ElementType elementTypeOf = ElementTypeOf<T>::value;

/// Marks a dynamic dimension, whose size is given per message.
inline constexpr int64_t DynamicDim = -1;

/// The values an advice may take: every element v satisfies
/// Low <= v < High (a half-open range, as `"range":[Low,High]` in JSON). NaN
/// is never in a range.
struct ValueRange {
  int64_t Low;
  int64_t High;
  friend bool operator==(const ValueRange &L, const ValueRange &R) {
    return L.Low == R.Low && L.High == R.High;
  }
};

/// A tensor's description: name, element type, shape and port, and for an
/// advice optional constraints on its values (see docs/serialization.md):
/// a ValueRange, and a mask feature, the name of a feature that must have a
/// nonzero element at (flat) index v for each advice element v.
///
/// A shape is a list of dimensions; rank 0 is a scalar with one element. A
/// dimension is a non-negative size or DynamicDim.
class TensorSpec {
public:
  /// Creates a spec, checking that the name is non-empty valid UTF-8, every
  /// dimension is >= -1 and the static element count fits in int64_t.
  static llvm::Expected<TensorSpec> create(llvm::StringRef Name,
                                           ElementType Type,
                                           llvm::ArrayRef<int64_t> Shape,
                                           int Port = 0);

  /// Returns this spec with the constraints \p Range and \p MaskFeature
  /// (empty: none), checking them: a range needs a numeric type (not bool or
  /// string) and Low < High; a mask feature needs an integer type.
  llvm::Expected<TensorSpec>
  withConstraints(std::optional<ValueRange> Range,
                  llvm::StringRef MaskFeature = "") const;

  /// Reads a spec from its JSON form; unknown keys are ignored, `port`
  /// defaults to 0; `range` and `mask` are the optional constraints.
  static llvm::Expected<TensorSpec> fromJSON(const llvm::json::Value &Value);
  /// Parses \p Text as JSON and reads a spec from it.
  static llvm::Expected<TensorSpec> parseJSON(llvm::StringRef Text);

  /// The tensor's name.
  const std::string &name() const { return Name; }
  /// The element type.
  ElementType type() const { return Type; }
  /// The shape; DynamicDim marks dynamic dimensions.
  llvm::ArrayRef<int64_t> shape() const { return Shape; }
  /// The number of dimensions.
  size_t rank() const { return Shape.size(); }
  /// The port (kept for LLVM compatibility).
  int port() const { return Port; }

  /// The range the values must be in, if constrained.
  const std::optional<ValueRange> &validRange() const { return Range; }
  /// The name of the mask feature, or empty if there is none.
  const std::string &maskFeature() const { return MaskFeature; }
  /// True if the spec has a range or a mask feature.
  bool hasConstraints() const { return Range || !MaskFeature.empty(); }

  /// True if any dimension is dynamic.
  bool isDynamic() const;
  /// The number of elements, or std::nullopt if the spec is dynamic.
  std::optional<uint64_t> getElementCount() const;
  /// The number of bytes of a value, or std::nullopt if the spec is dynamic
  /// or its elements are strings.
  std::optional<uint64_t> getByteSize() const;
  /// True if \p Concrete (which has no dynamic dimension) has this spec's
  /// rank and agrees with each of its static dimensions.
  bool matchesConcreteShape(llvm::ArrayRef<int64_t> Concrete) const;

  /// Appends the JSON form, exactly LLVM's:
  /// `{"name":"x","type":"int64_t","port":0,"shape":[1]}`, followed by
  /// `"range":[0,33]` and `"mask":"mask"` only if the spec has them (LLVM's
  /// reader ignores those keys).
  void writeJSON(std::string &Out) const;
  /// Returns the JSON form (see writeJSON()).
  std::string toJSON() const;

  friend bool operator==(const TensorSpec &L, const TensorSpec &R) {
    return L.Type == R.Type && L.Port == R.Port && L.Name == R.Name &&
           L.Shape == R.Shape && L.Range == R.Range &&
           L.MaskFeature == R.MaskFeature;
  }
  friend bool operator!=(const TensorSpec &L, const TensorSpec &R) {
    return !(L == R);
  }

private:
  TensorSpec(llvm::StringRef Name, ElementType Type,
             llvm::ArrayRef<int64_t> Shape, int Port)
      : Name(Name.str()), Type(Type), Shape(Shape.begin(), Shape.end()),
        Port(Port) {}

  std::string Name;
  ElementType Type;
  std::vector<int64_t> Shape;
  int Port;
  std::optional<ValueRange> Range;
  std::string MaskFeature;
};

/// Creates a spec of element type \p T. For specs written in source code:
/// an invalid spec is a programming error (asserted); use TensorSpec::create
/// for untrusted input.
template <typename T>
TensorSpec createSpec(llvm::StringRef Name, llvm::ArrayRef<int64_t> Shape,
                      int Port = 0) {
  return llvm::cantFail(TensorSpec::create(Name, elementTypeOf<T>, Shape, Port),
                        "createSpec: invalid tensor spec");
}

/// The most a shape's nonzero dimensions may multiply to when it also has a
/// zero dimension (2^60 - 1): 8-byte elements of it stay within 2^63 - 1
/// bytes, the largest empty array numpy (the Python side) can shape.
inline constexpr uint64_t MaxEmptyShapeProduct = INT64_MAX / 8;

/// Multiplies \p Shape's dimensions (all non-negative); returns std::nullopt
/// on overflow of \p Max. A shape with a zero dimension has 0 elements,
/// however large its other dimensions, as long as they multiply to at most
/// MaxEmptyShapeProduct (else std::nullopt).
std::optional<uint64_t> shapeElementCount(llvm::ArrayRef<int64_t> Shape,
                                          uint64_t Max = INT64_MAX);

/// Appends \p Shape as a JSON array of integers, e.g. `[2,3]`.
void writeShapeJSON(llvm::ArrayRef<int64_t> Shape, std::string &Out);

/// Appends \p S as a JSON string, escaped as docs/serialization.md says.
/// \p S must be valid UTF-8.
void writeJSONString(llvm::StringRef S, std::string &Out);

} // namespace mlbridge

#endif // MLBRIDGE_TENSORSPEC_H
