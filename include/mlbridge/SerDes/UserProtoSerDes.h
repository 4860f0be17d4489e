//===- UserProtoSerDes.h - Tensors in a user's protobuf message -*- C++ -*-===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
///
/// \file
/// Maps named tensors to the fields of a user's own protobuf message by
/// reflection, for passes that already have a .proto. A singular field holds
/// a tensor of shape [1], a repeated field a tensor of shape [n].
///
//===----------------------------------------------------------------------===//

#ifndef MLBRIDGE_SERDES_USERPROTOSERDES_H
#define MLBRIDGE_SERDES_USERPROTOSERDES_H

#ifndef MLBRIDGE_HAVE_PROTOBUF
#error "UserProtoSerDes.h needs mlbridge built with MLBRIDGE_ENABLE_PROTOBUF"
#endif

#include "mlbridge/Tensor.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>

#include <memory>
#include <string>
#include <vector>

namespace mlbridge {

/// Converts between named tensors and one protobuf message type.
class UserProtoSerDes {
public:
  /// Uses the message type \p Type, which must outlive this object.
  explicit UserProtoSerDes(const google::protobuf::Descriptor &Type);

  /// The message type.
  const google::protobuf::Descriptor &messageType() const { return Type; }

  /// Returns the element type that a tensor needs to fill \p Field, or an
  /// error naming the field if its type has no tensor counterpart.
  static llvm::Expected<ElementType>
  elementTypeFor(const google::protobuf::FieldDescriptor &Field);

  /// Sets the field of \p Msg (of this type) named like each tensor. Errors
  /// name the field on an unknown name, a type mismatch, or a shape that is
  /// not [1] for a singular field or rank 1 for a repeated one.
  llvm::Error fill(llvm::ArrayRef<TensorRef> Tensors,
                   google::protobuf::Message &Msg) const;

  /// Serializes \p Tensors as a message of this type.
  llvm::Expected<std::string>
  serialize(llvm::ArrayRef<TensorRef> Tensors) const;

  /// Returns one tensor per field of \p Msg, in field-number order.
  llvm::Expected<std::vector<TensorValue>>
  extract(const google::protobuf::Message &Msg) const;

  /// Returns the tensor of field \p Field of \p Msg (of this type), named
  /// like the field: shape [1] for a singular field, [n] for a repeated one.
  llvm::Expected<TensorValue>
  extractField(const google::protobuf::Message &Msg,
               const google::protobuf::FieldDescriptor &Field) const;

  /// Parses \p Bytes as a message of this type and extracts its tensors.
  llvm::Expected<std::vector<TensorValue>>
  deserialize(llvm::StringRef Bytes) const;

  /// Creates an empty message of this type (dynamic if the type was not
  /// compiled in).
  std::unique_ptr<google::protobuf::Message> newMessage() const;

private:
  const google::protobuf::Descriptor &Type;
  /// Owns the prototypes of dynamic messages; mutable because protobuf
  /// creates them lazily.
  mutable google::protobuf::DynamicMessageFactory Factory;
};

} // namespace mlbridge

#endif // MLBRIDGE_SERDES_USERPROTOSERDES_H
