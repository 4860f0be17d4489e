//===- UserProto.cpp - Tensors in a user's protobuf message ---------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "mlbridge/SerDes/UserProtoSerDes.h"

#include "llvm/ADT/SmallVector.h"

#include <climits>

using namespace llvm;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Reflection;

namespace mlbridge {

UserProtoSerDes::UserProtoSerDes(const Descriptor &Type) : Type(Type) {}

Expected<ElementType>
UserProtoSerDes::elementTypeFor(const FieldDescriptor &Field) {
  switch (Field.type()) {
  case FieldDescriptor::TYPE_INT32:
  case FieldDescriptor::TYPE_SINT32:
  case FieldDescriptor::TYPE_SFIXED32:
    return ElementType::Int32;
  case FieldDescriptor::TYPE_INT64:
  case FieldDescriptor::TYPE_SINT64:
  case FieldDescriptor::TYPE_SFIXED64:
    return ElementType::Int64;
  case FieldDescriptor::TYPE_UINT32:
  case FieldDescriptor::TYPE_FIXED32:
    return ElementType::UInt32;
  case FieldDescriptor::TYPE_UINT64:
  case FieldDescriptor::TYPE_FIXED64:
    return ElementType::UInt64;
  case FieldDescriptor::TYPE_FLOAT:
    return ElementType::Float;
  case FieldDescriptor::TYPE_DOUBLE:
    return ElementType::Double;
  case FieldDescriptor::TYPE_BOOL:
    return ElementType::Bool;
  case FieldDescriptor::TYPE_STRING:
  case FieldDescriptor::TYPE_BYTES:
    return ElementType::String;
  default:
    return createStringError(inconvertibleErrorCode(),
                             "field '%s' has type %s, which holds no tensor",
                             Field.full_name().c_str(), Field.type_name());
  }
}

std::unique_ptr<google::protobuf::Message> UserProtoSerDes::newMessage() const {
  return std::unique_ptr<google::protobuf::Message>(
      Factory.GetPrototype(&Type)->New());
}

/// Sets element \p I of \p T into \p Field (added if repeated).
static void setElement(const TensorRef &T, size_t I,
                       google::protobuf::Message &Msg,
                       const FieldDescriptor &Field) {
  const Reflection &R = *Msg.GetReflection();
  bool Rep = Field.is_repeated();
  switch (T.type()) {
#define MLBRIDGE_SET(EnumName, CType, Suffix)                                  \
  case ElementType::EnumName: {                                                \
    CType V = T.data<CType>()[I];                                              \
    if (Rep)                                                                   \
      R.Add##Suffix(&Msg, &Field, V);                                          \
    else                                                                       \
      R.Set##Suffix(&Msg, &Field, V);                                          \
    return;                                                                    \
  }
    MLBRIDGE_SET(Int32, int32_t, Int32)
    MLBRIDGE_SET(Int64, int64_t, Int64)
    MLBRIDGE_SET(UInt32, uint32_t, UInt32)
    MLBRIDGE_SET(UInt64, uint64_t, UInt64)
    MLBRIDGE_SET(Float, float, Float)
    MLBRIDGE_SET(Double, double, Double)
    MLBRIDGE_SET(Bool, bool, Bool)
    MLBRIDGE_SET(String, std::string, String)
#undef MLBRIDGE_SET
  default:
    llvm_unreachable("checked by fill()");
  }
}

Error UserProtoSerDes::fill(ArrayRef<TensorRef> Tensors,
                            google::protobuf::Message &Msg) const {
  if (Msg.GetDescriptor() != &Type)
    return createStringError(
        inconvertibleErrorCode(), "message is a %s, expected %s",
        Msg.GetDescriptor()->full_name().c_str(), Type.full_name().c_str());
  for (const TensorRef &T : Tensors) {
    const FieldDescriptor *Field = Type.FindFieldByName(T.name().str());
    if (!Field)
      return createStringError(
          inconvertibleErrorCode(), "message %s has no field '%s'",
          Type.full_name().c_str(), T.name().str().c_str());
    Expected<ElementType> Want = elementTypeFor(*Field);
    if (!Want)
      return Want.takeError();
    if (*Want != T.type())
      return createStringError(
          inconvertibleErrorCode(), "field '%s' holds %s, tensor is %s",
          Field->full_name().c_str(), elementTypeName(*Want).data(),
          elementTypeName(T.type()).data());
    size_t N = T.getElementCount();
    ArrayRef<int64_t> Shape = T.shape();
    bool ShapeOk = Field->is_repeated()
                       ? Shape.size() == 1 && static_cast<size_t>(Shape[0]) == N
                       : Shape.size() == 1 && Shape[0] == 1 && N == 1;
    if (!ShapeOk)
      return createStringError(inconvertibleErrorCode(),
                               "field '%s' is %s and cannot hold tensor '%s' "
                               "of %zu elements",
                               Field->full_name().c_str(),
                               Field->is_repeated() ? "repeated (shape [n])"
                                                    : "singular (shape [1])",
                               T.name().str().c_str(), N);
    if (Field->is_repeated())
      Msg.GetReflection()->ClearField(&Msg, Field);
    for (size_t I = 0; I < N; ++I)
      setElement(T, I, Msg, *Field);
  }
  return Error::success();
}

Expected<std::string>
UserProtoSerDes::serialize(ArrayRef<TensorRef> Tensors) const {
  std::unique_ptr<google::protobuf::Message> Msg = newMessage();
  if (Error E = fill(Tensors, *Msg))
    return E;
  std::string Out;
  if (!Msg->SerializeToString(&Out))
    return createStringError(inconvertibleErrorCode(), "cannot serialize a %s",
                             Type.full_name().c_str());
  return Out;
}

template <typename T, typename GetRep, typename Get>
static TensorValue fieldTensor(const FieldDescriptor &Field, int N,
                               GetRep RepeatedGetter, Get SingleGetter) {
  std::vector<T> Values;
  if (Field.is_repeated()) {
    Values.reserve(N);
    for (int I = 0; I < N; ++I)
      Values.push_back(RepeatedGetter(I));
  } else {
    Values.push_back(SingleGetter());
  }
  if constexpr (std::is_same_v<T, bool>) {
    // std::vector<bool> has no contiguous storage.
    SmallVector<char, 16> Bytes(Values.begin(), Values.end());
    int64_t Count = static_cast<int64_t>(Bytes.size());
    return cantFail(TensorValue::fromBytes(Field.name(), ElementType::Bool,
                                           {Count}, Bytes));
  } else {
    return TensorValue::fromVector<T>(Field.name(), Values);
  }
}

Expected<TensorValue>
UserProtoSerDes::extractField(const google::protobuf::Message &Msg,
                              const FieldDescriptor &F) const {
  if (Msg.GetDescriptor() != &Type || F.containing_type() != &Type)
    return createStringError(
        inconvertibleErrorCode(), "message is a %s, expected %s",
        Msg.GetDescriptor()->full_name().c_str(), Type.full_name().c_str());
  Expected<ElementType> ET = elementTypeFor(F);
  if (!ET)
    return ET.takeError();
  const Reflection &R = *Msg.GetReflection();
  int N = F.is_repeated() ? R.FieldSize(Msg, &F) : 1;
  switch (*ET) {
#define MLBRIDGE_GET(EnumName, CType, Suffix)                                  \
  case ElementType::EnumName:                                                  \
    return fieldTensor<CType>(                                                 \
        F, N, [&](int J) { return R.GetRepeated##Suffix(Msg, &F, J); },        \
        [&] { return R.Get##Suffix(Msg, &F); });
    MLBRIDGE_GET(Int32, int32_t, Int32)
    MLBRIDGE_GET(Int64, int64_t, Int64)
    MLBRIDGE_GET(UInt32, uint32_t, UInt32)
    MLBRIDGE_GET(UInt64, uint64_t, UInt64)
    MLBRIDGE_GET(Float, float, Float)
    MLBRIDGE_GET(Double, double, Double)
    MLBRIDGE_GET(Bool, bool, Bool)
    MLBRIDGE_GET(String, std::string, String)
#undef MLBRIDGE_GET
  default:
    llvm_unreachable("elementTypeFor() returns no other type");
  }
}

Expected<std::vector<TensorValue>>
UserProtoSerDes::extract(const google::protobuf::Message &Msg) const {
  if (Msg.GetDescriptor() != &Type)
    return createStringError(
        inconvertibleErrorCode(), "message is a %s, expected %s",
        Msg.GetDescriptor()->full_name().c_str(), Type.full_name().c_str());
  std::vector<TensorValue> Out;
  for (int I = 0; I < Type.field_count(); ++I) {
    Expected<TensorValue> T = extractField(Msg, *Type.field(I));
    if (!T)
      return T.takeError();
    Out.push_back(std::move(*T));
  }
  // Field-number order, whatever the declaration order in the .proto.
  std::vector<int> Order(Out.size());
  for (size_t I = 0; I < Order.size(); ++I)
    Order[I] = static_cast<int>(I);
  llvm::stable_sort(Order, [&](int A, int B) {
    return Type.field(A)->number() < Type.field(B)->number();
  });
  std::vector<TensorValue> Sorted;
  Sorted.reserve(Out.size());
  for (int I : Order)
    Sorted.push_back(std::move(Out[I]));
  return Sorted;
}

Expected<std::vector<TensorValue>>
UserProtoSerDes::deserialize(StringRef Bytes) const {
  if (Bytes.size() > static_cast<size_t>(INT_MAX))
    return createStringError(inconvertibleErrorCode(),
                             "%zu bytes are too many for one %s", Bytes.size(),
                             Type.full_name().c_str());
  std::unique_ptr<google::protobuf::Message> Msg = newMessage();
  if (!Msg->ParseFromArray(Bytes.data(), static_cast<int>(Bytes.size())))
    return createStringError(inconvertibleErrorCode(),
                             "bytes are not a valid %s",
                             Type.full_name().c_str());
  return extract(*Msg);
}

} // namespace mlbridge
