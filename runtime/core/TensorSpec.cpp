//===- TensorSpec.cpp - Named, typed tensor descriptions ------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/TensorSpec.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/JSON.h"

#include <cstdio>

using namespace llvm;

namespace mlbridge {

static constexpr StringLiteral TypeNames[NumElementTypes] = {
    "int8_t",  "uint8_t",  "int16_t", "uint16_t", "int32_t", "uint32_t",
    "int64_t", "uint64_t", "float",   "double",   "bool",    "string"};

StringRef elementTypeName(ElementType Type) {
  return TypeNames[static_cast<unsigned>(Type)];
}

Expected<ElementType> parseElementType(StringRef Name) {
  for (unsigned I = 0; I < NumElementTypes; ++I)
    if (TypeNames[I] == Name)
      return static_cast<ElementType>(I);
  return createStringError(inconvertibleErrorCode(),
                           "unknown element type '%s'", Name.str().c_str());
}

size_t elementSize(ElementType Type) {
  switch (Type) {
  case ElementType::Int8:
  case ElementType::UInt8:
  case ElementType::Bool:
    return 1;
  case ElementType::Int16:
  case ElementType::UInt16:
    return 2;
  case ElementType::Int32:
  case ElementType::UInt32:
  case ElementType::Float:
    return 4;
  case ElementType::Int64:
  case ElementType::UInt64:
  case ElementType::Double:
    return 8;
  case ElementType::String:
    return 0;
  }
  llvm_unreachable("unknown element type");
}

bool isIntegerType(ElementType Type) { return Type <= ElementType::UInt64; }

std::optional<uint64_t> shapeElementCount(ArrayRef<int64_t> Shape,
                                          uint64_t Max) {
  // A zero dimension makes no elements, however large the others (as the
  // Python decoders count), within what numpy can shape.
  if (llvm::is_contained(Shape, 0)) {
    uint64_t Rest = 1;
    for (int64_t Dim : Shape) {
      assert(Dim >= 0 && "dynamic or negative dimension");
      uint64_t D = static_cast<uint64_t>(Dim);
      if (D == 0)
        continue;
      if (Rest > MaxEmptyShapeProduct / D)
        return std::nullopt;
      Rest *= D;
    }
    return 0;
  }
  uint64_t Count = 1;
  for (int64_t Dim : Shape) {
    assert(Dim >= 0 && "dynamic or negative dimension");
    uint64_t D = static_cast<uint64_t>(Dim);
    if (D != 0 && Count > Max / D)
      return std::nullopt;
    Count *= D;
  }
  return Count;
}

Expected<TensorSpec> TensorSpec::create(StringRef Name, ElementType Type,
                                        ArrayRef<int64_t> Shape, int Port) {
  if (Name.empty())
    return createStringError(inconvertibleErrorCode(),
                             "tensor spec has an empty name");
  if (!json::isUTF8(Name))
    return createStringError(inconvertibleErrorCode(),
                             "tensor spec name is not valid UTF-8");
  if (static_cast<unsigned>(Type) >= NumElementTypes)
    return createStringError(inconvertibleErrorCode(),
                             "tensor spec '%s' has an invalid element type",
                             Name.str().c_str());
  SmallVector<int64_t, 8> Static;
  for (int64_t Dim : Shape) {
    if (Dim < DynamicDim)
      return createStringError(
          inconvertibleErrorCode(),
          "tensor spec '%s' has dimension %lld (must be >= 0, or -1 for "
          "dynamic)",
          Name.str().c_str(), static_cast<long long>(Dim));
    if (Dim != DynamicDim)
      Static.push_back(Dim);
  }
  if (!shapeElementCount(Static))
    return createStringError(inconvertibleErrorCode(),
                             "tensor spec '%s' has too many elements",
                             Name.str().c_str());
  return TensorSpec(Name, Type, Shape, Port);
}

Expected<TensorSpec>
TensorSpec::withConstraints(std::optional<ValueRange> NewRange,
                            StringRef NewMask) const {
  if (NewRange) {
    if (Type == ElementType::Bool || Type == ElementType::String)
      return createStringError(inconvertibleErrorCode(),
                               "tensor spec '%s' has a range, but its type %s "
                               "is not numeric",
                               Name.c_str(), elementTypeName(Type).data());
    if (NewRange->Low >= NewRange->High)
      return createStringError(
          inconvertibleErrorCode(),
          "tensor spec '%s' has the empty range [%lld, %lld) (the range is "
          "[low, high): low <= value < high)",
          Name.c_str(), static_cast<long long>(NewRange->Low),
          static_cast<long long>(NewRange->High));
  }
  if (!NewMask.empty()) {
    if (!isIntegerType(Type))
      return createStringError(inconvertibleErrorCode(),
                               "tensor spec '%s' has a mask feature, but its "
                               "type %s is not an integer type",
                               Name.c_str(), elementTypeName(Type).data());
    if (!json::isUTF8(NewMask))
      return createStringError(inconvertibleErrorCode(),
                               "tensor spec '%s' has a mask feature name that "
                               "is not valid UTF-8",
                               Name.c_str());
  }
  TensorSpec Result = *this;
  Result.Range = NewRange;
  Result.MaskFeature = NewMask.str();
  return Result;
}

bool TensorSpec::isDynamic() const { return is_contained(Shape, DynamicDim); }

std::optional<uint64_t> TensorSpec::getElementCount() const {
  if (isDynamic())
    return std::nullopt;
  return shapeElementCount(Shape);
}

std::optional<uint64_t> TensorSpec::getByteSize() const {
  std::optional<uint64_t> Count = getElementCount();
  if (!Count || Type == ElementType::String)
    return std::nullopt;
  // create() bounded the count by INT64_MAX; bytes may exceed that only for
  // absurd specs, which fail when a buffer is allocated.
  return *Count * elementSize(Type);
}

bool TensorSpec::matchesConcreteShape(ArrayRef<int64_t> Concrete) const {
  if (Concrete.size() != Shape.size())
    return false;
  for (auto [Want, Got] : zip(Shape, Concrete)) {
    if (Got < 0)
      return false;
    if (Want != DynamicDim && Want != Got)
      return false;
  }
  return true;
}

void writeShapeJSON(ArrayRef<int64_t> Shape, std::string &Out) {
  Out += '[';
  for (size_t I = 0; I < Shape.size(); ++I) {
    if (I)
      Out += ',';
    Out += std::to_string(Shape[I]);
  }
  Out += ']';
}

void writeJSONString(StringRef S, std::string &Out) {
  static constexpr char Hex[] = "0123456789abcdef";
  Out += '"';
  for (char C : S) {
    unsigned char U = static_cast<unsigned char>(C);
    switch (C) {
    case '"':
      Out += "\\\"";
      break;
    case '\\':
      Out += "\\\\";
      break;
    case '\b':
      Out += "\\b";
      break;
    case '\t':
      Out += "\\t";
      break;
    case '\n':
      Out += "\\n";
      break;
    case '\f':
      Out += "\\f";
      break;
    case '\r':
      Out += "\\r";
      break;
    default:
      if (U < 0x20) {
        Out += "\\u00";
        Out += Hex[U >> 4];
        Out += Hex[U & 15];
      } else {
        Out += C;
      }
    }
  }
  Out += '"';
}

void TensorSpec::writeJSON(std::string &Out) const {
  Out += "{\"name\":";
  writeJSONString(Name, Out);
  Out += ",\"type\":\"";
  Out += elementTypeName(Type);
  Out += "\",\"port\":";
  Out += std::to_string(Port);
  Out += ",\"shape\":";
  writeShapeJSON(Shape, Out);
  if (Range) {
    Out += ",\"range\":[";
    Out += std::to_string(Range->Low);
    Out += ',';
    Out += std::to_string(Range->High);
    Out += ']';
  }
  if (!MaskFeature.empty()) {
    Out += ",\"mask\":";
    writeJSONString(MaskFeature, Out);
  }
  Out += '}';
}

std::string TensorSpec::toJSON() const {
  std::string Out;
  writeJSON(Out);
  return Out;
}

Expected<TensorSpec> TensorSpec::fromJSON(const json::Value &Value) {
  auto Fail = [](const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(),
                             "invalid tensor spec: " + Msg);
  };
  const json::Object *O = Value.getAsObject();
  if (!O)
    return Fail("not a JSON object");
  std::optional<StringRef> Name = O->getString("name");
  if (!Name)
    return Fail("missing string 'name'");
  std::optional<StringRef> TypeName = O->getString("type");
  if (!TypeName)
    return Fail("'" + *Name + "' has no string 'type'");
  Expected<ElementType> Type = parseElementType(*TypeName);
  if (!Type)
    return Fail("'" + *Name + "': " + toString(Type.takeError()));
  int Port = 0;
  if (const json::Value *P = O->get("port")) {
    std::optional<int64_t> N = P->getAsInteger();
    if (!N || *N < INT32_MIN || *N > INT32_MAX)
      return Fail("'" + *Name + "' has a 'port' that is not an int");
    Port = static_cast<int>(*N);
  }
  const json::Array *ShapeArray = O->getArray("shape");
  if (!ShapeArray)
    return Fail("'" + *Name + "' has no array 'shape'");
  std::vector<int64_t> Shape;
  Shape.reserve(ShapeArray->size());
  for (const json::Value &D : *ShapeArray) {
    std::optional<int64_t> N = D.getAsInteger();
    if (!N)
      return Fail("'" + *Name + "' has a non-integer dimension");
    Shape.push_back(*N);
  }
  Expected<TensorSpec> Spec = create(*Name, *Type, Shape, Port);
  if (!Spec)
    return Spec.takeError();
  std::optional<ValueRange> Range;
  if (const json::Value *R = O->get("range")) {
    const json::Array *A = R->getAsArray();
    std::optional<int64_t> Low, High;
    if (A && A->size() == 2) {
      Low = (*A)[0].getAsInteger();
      High = (*A)[1].getAsInteger();
    }
    if (!Low || !High)
      return Fail("'" + *Name +
                  "' has a 'range' that is not an array of two 64-bit "
                  "integers [low, high]");
    Range = ValueRange{*Low, *High};
  }
  StringRef Mask;
  if (const json::Value *M = O->get("mask")) {
    std::optional<StringRef> S = M->getAsString();
    if (!S || S->empty())
      return Fail("'" + *Name +
                  "' has a 'mask' that is not a non-empty string");
    Mask = *S;
  }
  if (!Range && Mask.empty())
    return Spec;
  Expected<TensorSpec> Constrained = Spec->withConstraints(Range, Mask);
  if (!Constrained)
    return Fail(toString(Constrained.takeError()));
  return Constrained;
}

Expected<TensorSpec> TensorSpec::parseJSON(StringRef Text) {
  Expected<json::Value> V = json::parse(Text);
  if (!V)
    return createStringError(inconvertibleErrorCode(),
                             "invalid tensor spec JSON: " +
                                 toString(V.takeError()));
  return fromJSON(*V);
}

} // namespace mlbridge
