"""Tensors carried in a user's own protobuf message, mapped field by field by reflection.

Each tensor maps to the field of the same name: a singular field holds a tensor of shape
``[1]``, a repeated field a tensor of shape ``[n]``. Field and tensor types must agree::

    int32 / sint32 / sfixed32  <->  int32_t      uint32 / fixed32  <->  uint32_t
    int64 / sint64 / sfixed64  <->  int64_t      uint64 / fixed64  <->  uint64_t
    float <-> float    double <-> double    bool <-> bool    string / bytes <-> string
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage

from mlbridge.errors import MalformedInputError, SerDesError
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType

__all__ = ["FIELD_TYPES", "ProtoMessageSerDes"]

_F = FieldDescriptor
#: The element type each supported protobuf field type maps to.
FIELD_TYPES: dict[int, ElementType] = {
    _F.TYPE_INT32: ElementType.INT32,
    _F.TYPE_SINT32: ElementType.INT32,
    _F.TYPE_SFIXED32: ElementType.INT32,
    _F.TYPE_INT64: ElementType.INT64,
    _F.TYPE_SINT64: ElementType.INT64,
    _F.TYPE_SFIXED64: ElementType.INT64,
    _F.TYPE_UINT32: ElementType.UINT32,
    _F.TYPE_FIXED32: ElementType.UINT32,
    _F.TYPE_UINT64: ElementType.UINT64,
    _F.TYPE_FIXED64: ElementType.UINT64,
    _F.TYPE_FLOAT: ElementType.FLOAT,
    _F.TYPE_DOUBLE: ElementType.DOUBLE,
    _F.TYPE_BOOL: ElementType.BOOL,
    _F.TYPE_STRING: ElementType.STRING,
    _F.TYPE_BYTES: ElementType.STRING,
}


class ProtoMessageSerDes:
    """Map tensors to and from the fields of a user's protobuf message class.

    Args:
        message_class: A generated protobuf message class (e.g. ``my_pb2.Features``).
    """

    def __init__(self, message_class: type[ProtoMessage]) -> None:
        self.message_class = message_class
        self._descriptor = message_class.DESCRIPTOR
        self._type_name = self._descriptor.full_name

    def _field(self, name: str) -> tuple[FieldDescriptor, ElementType]:
        field = self._descriptor.fields_by_name.get(name)
        if field is None:
            raise SerDesError(f"{self._type_name} has no field {name!r}")
        etype = FIELD_TYPES.get(field.type)
        if etype is None:
            raise SerDesError(
                f"field {self._type_name}.{name} has a type that cannot hold a tensor "
                "(only scalar numeric, bool, string and bytes fields can)"
            )
        return field, etype

    def to_message(self, tensors: Iterable[Tensor]) -> ProtoMessage:
        """Build a message holding ``tensors``; :class:`SerDesError` on any mismatch."""
        msg = self.message_class()
        for t in tensors:
            field, etype = self._field(t.name)
            where = f"field {self._type_name}.{t.name}"
            if t.type is not etype:
                raise SerDesError(
                    f"{where} holds {etype.llvm_name}, tensor {t.name!r} is {t.type.llvm_name}"
                )
            if field.is_repeated:
                if len(t.shape) != 1:
                    raise SerDesError(
                        f"{where} is repeated: it holds a tensor of shape [n], got {list(t.shape)}"
                    )
            elif t.shape != (1,):
                raise SerDesError(
                    f"{where} is singular: it holds a tensor of shape [1], got {list(t.shape)}"
                )
            values = self._values(t, field, where)
            if field.is_repeated:
                getattr(msg, field.name).extend(values)
            else:
                setattr(msg, field.name, values[0])
        return msg

    @staticmethod
    def _values(t: Tensor, field: FieldDescriptor, where: str) -> list[Any]:
        if t.type is not ElementType.STRING:
            return list(t.array.tolist())
        if field.type == _F.TYPE_BYTES:
            return t.strings()
        try:
            return [s.decode("utf-8") for s in t.strings()]
        except UnicodeDecodeError:
            raise SerDesError(
                f"{where} is a string field; tensor {t.name!r} holds bytes that are not "
                "valid UTF-8 (use a bytes field)"
            ) from None

    def from_message(self, message: ProtoMessage) -> tuple[Tensor, ...]:
        """Return the tensors of every field of ``message``, in field declaration order."""
        if message.DESCRIPTOR is not self._descriptor:
            raise SerDesError(
                f"expected a {self._type_name} message, got {message.DESCRIPTOR.full_name}"
            )
        tensors = []
        for field in self._descriptor.fields:
            _, etype = self._field(field.name)
            raw = getattr(message, field.name)
            values = list(raw) if field.is_repeated else [raw]
            if etype is ElementType.STRING:
                items = [v if isinstance(v, bytes) else v.encode("utf-8") for v in values]
                tensors.append(Tensor.from_strings(field.name, (len(items),), items))
            else:
                array = np.array(values, dtype=etype.numpy_dtype).reshape(len(values))
                tensors.append(Tensor._trusted(field.name, etype, array))
        return tuple(tensors)

    def encode(self, tensors: Iterable[Tensor]) -> bytes:
        """Serialize ``tensors`` as one message (no length prefix)."""
        return self.to_message(tensors).SerializeToString()

    def decode(self, data: bytes) -> tuple[Tensor, ...]:
        """Parse one message and return its tensors."""
        msg = self.message_class()
        try:
            msg.ParseFromString(data)
        except DecodeError as e:
            raise MalformedInputError(f"invalid {self._type_name} message: {e}") from None
        return self.from_message(msg)
