//===- GrpcCommon.cpp - What the gRPC runners share -----------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The helpers of GrpcCommon.h: observations and advice in the generic
// messages, and the checks of a user's method names and message fields.
//
//===----------------------------------------------------------------------===//

#include "GrpcCommon.h"

#include "mlbridge/SerDes/UserProtoSerDes.h"

#include <climits>

using namespace llvm;

namespace mlbridge::grpc_internal {

int clampToInt(uint64_t V) {
  return V > static_cast<uint64_t>(INT_MAX) ? INT_MAX : static_cast<int>(V);
}

DecoderLimits limitsFor(uint64_t MaxMessageBytes) {
  DecoderLimits L;
  L.MaxMessageBytes = MaxMessageBytes;
  return L;
}

Error makeObservation(StringRef Context, const TensorSpec &Advice, int64_t Id,
                      ArrayRef<TensorRef> Features, v1::Observation &Out) {
  Out.set_context(Context.str());
  specToProto(Advice, *Out.mutable_advice());
  return messageToProto(MessageKind::Observation, Id, Features,
                        *Out.mutable_features());
}

Expected<TensorValue> takeAdvice(Message M, int64_t Id,
                                 const TensorSpec &Advice) {
  if (M.Kind != MessageKind::Advice)
    return createStringError(inconvertibleErrorCode(),
                             "the reply is a message of kind '%s', not advice",
                             messageKindName(M.Kind).data());
  if (M.Id != Id)
    return createStringError(
        inconvertibleErrorCode(), "the reply has id %lld, the observation %lld",
        static_cast<long long>(M.Id), static_cast<long long>(Id));
  if (M.Tensors.size() != 1)
    return createStringError(
        inconvertibleErrorCode(),
        "the reply has %zu tensors, advice needs exactly 1 "
        "('%s')",
        M.Tensors.size(), Advice.name().c_str());
  TensorValue &T = M.Tensors.front();
  if (T.name() != Advice.name())
    return createStringError(inconvertibleErrorCode(),
                             "the reply's tensor is '%s', the advice is '%s'",
                             T.name().c_str(), Advice.name().c_str());
  if (T.type() != Advice.type())
    return createStringError(inconvertibleErrorCode(),
                             "advice '%s' is %s in the reply, %s in the spec",
                             Advice.name().c_str(),
                             elementTypeName(T.type()).data(),
                             elementTypeName(Advice.type()).data());
  if (!Advice.matchesConcreteShape(T.shape())) {
    std::string Shape;
    writeShapeJSON(T.shape(), Shape);
    return createStringError(inconvertibleErrorCode(),
                             "advice '%s' has shape %s in the reply, spec %s",
                             Advice.name().c_str(), Shape.c_str(),
                             Advice.toJSON().c_str());
  }
  return std::move(T);
}

Expected<const google::protobuf::FieldDescriptor *>
checkUserField(const google::protobuf::Descriptor &Type, StringRef Role,
               StringRef What, const TensorSpec &Spec) {
  const google::protobuf::FieldDescriptor *F =
      Type.FindFieldByName(Spec.name());
  if (!F)
    return createStringError(inconvertibleErrorCode(),
                             "the %s message %s has no field '%s' for %s '%s'",
                             Role.data(), Type.full_name().c_str(),
                             Spec.name().c_str(), What.data(),
                             Spec.name().c_str());
  Expected<ElementType> ET = UserProtoSerDes::elementTypeFor(*F);
  if (!ET)
    return createStringError(inconvertibleErrorCode(), "%s '%s': %s",
                             What.data(), Spec.name().c_str(),
                             toString(ET.takeError()).c_str());
  if (*ET != Spec.type())
    return createStringError(
        inconvertibleErrorCode(), "field '%s' holds %s, %s '%s' is %s",
        F->full_name().c_str(), elementTypeName(*ET).data(), What.data(),
        Spec.name().c_str(), elementTypeName(Spec.type()).data());
  ArrayRef<int64_t> Shape = Spec.shape();
  bool Fits =
      F->is_repeated() ? Shape.size() == 1 : Shape.size() == 1 && Shape[0] == 1;
  if (!Fits)
    return createStringError(
        inconvertibleErrorCode(),
        "field '%s' is %s and cannot hold %s '%s' of spec %s",
        F->full_name().c_str(),
        F->is_repeated() ? "repeated (shape [n])" : "singular (shape [1])",
        What.data(), Spec.name().c_str(), Spec.toJSON().c_str());
  return F;
}

Error checkMethodName(StringRef Name) {
  auto [Service, Method] = Name.drop_front().split('/');
  if (!Name.starts_with("/") || Service.empty() || Method.empty() ||
      Method.contains('/'))
    return createStringError(inconvertibleErrorCode(),
                             "method name '%s' is not /package.Service/Method",
                             Name.str().c_str());
  return Error::success();
}

} // namespace mlbridge::grpc_internal
