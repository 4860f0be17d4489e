"""The protobuf SerDes: ``mlbridge.v1.Record`` messages, varint-delimited on a stream."""

from __future__ import annotations

from typing import Any

import numpy as np
from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError

from mlbridge.errors import (
    InvalidTensorError,
    LimitExceededError,
    MalformedInputError,
    MLBridgeError,
    TruncatedInputError,
)
from mlbridge.serdes import _lines
from mlbridge.serdes._proto.mlbridge.v1 import tensor_pb2 as pb
from mlbridge.serdes.base import DecodeLimits, SerDes
from mlbridge.serdes.reader import ByteReader
from mlbridge.serdes.records import Context, End, Header, Message, MessageKind, Record
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType, TensorSpec

__all__ = [
    "ProtobufSerDes",
    "encode_varint",
    "record_from_proto",
    "record_to_proto",
    "spec_from_proto",
]

_KIND_TO_PB = {
    MessageKind.OBSERVATION: pb.MESSAGE_KIND_OBSERVATION,
    MessageKind.OUTCOME: pb.MESSAGE_KIND_OUTCOME,
    MessageKind.ADVICE: pb.MESSAGE_KIND_ADVICE,
}
_KIND_FROM_PB = {v: k for k, v in _KIND_TO_PB.items()}
_MAX_VARINT_BYTES = 10


def encode_varint(value: int) -> bytes:
    """Encode a non-negative integer as a protobuf base-128 varint."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _spec_to_pb(spec: TensorSpec, out: Any) -> None:
    out.name = spec.name
    out.type = spec.type.value
    out.shape.extend(spec.shape)
    out.port = spec.port
    if spec.valid_range is not None:
        out.range.low, out.range.high = spec.valid_range
    if spec.mask_feature is not None:
        out.mask = spec.mask_feature


def tensor_to_proto(tensor: Tensor, out: Any) -> None:
    """Fill a ``mlbridge.v1.Tensor`` message from ``tensor``."""
    out.name = tensor.name
    out.type = tensor.type.value
    out.shape.extend(tensor.shape)
    if tensor.type is ElementType.STRING:
        out.strings.extend(tensor.strings())
    else:
        out.data = tensor.array.tobytes()


def record_to_proto(record: Record) -> Any:
    """The ``mlbridge.v1.Record`` message of a record."""
    rec = pb.Record()
    if isinstance(record, Message):
        rec.message.SetInParent()
        rec.message.kind = _KIND_TO_PB[record.kind]
        rec.message.id = record.id
        for t in record.tensors:
            tensor_to_proto(t, rec.message.tensors.add())
    elif isinstance(record, Header):
        rec.header.SetInParent()
        for spec in record.features:
            _spec_to_pb(spec, rec.header.features.add())
        if record.advice is not None:
            _spec_to_pb(record.advice, rec.header.advice)
        if record.score is not None:
            _spec_to_pb(record.score, rec.header.score)
    elif isinstance(record, Context):
        rec.context = record.name
    elif isinstance(record, End):
        rec.end = True
    else:
        raise TypeError(f"not a record: {record!r}")
    return rec


def _element_type(value: int, where: str) -> ElementType:
    try:
        etype = ElementType(value)
    except ValueError:
        raise MalformedInputError(f"{where}: unknown element type number {value}") from None
    return etype


def spec_from_proto(msg: Any, where: str) -> TensorSpec:
    """The :class:`TensorSpec` of a ``mlbridge.v1.TensorSpec`` message, with its constraints.

    Raises:
        MalformedInputError: naming ``where``, if the spec or its constraints are invalid
            (as the C++ side refuses them).
    """
    etype = _element_type(msg.type, f"{where} ({msg.name!r})")
    try:
        spec = TensorSpec(msg.name, etype, tuple(msg.shape), msg.port)
        if not msg.HasField("range") and not msg.HasField("mask"):
            return spec
        # As JSON's "mask", a mask present must name a feature.
        if msg.HasField("mask") and not msg.mask:
            raise MLBridgeError(f"tensor spec {msg.name!r} has an empty mask feature name")
        return spec.with_constraints(
            (msg.range.low, msg.range.high) if msg.HasField("range") else None,
            msg.mask if msg.HasField("mask") else None,
        )
    except MLBridgeError as e:
        raise MalformedInputError(f"{where}: {e}") from None


#: Numeric element types (not bool: its bytes need a check) by number: type, dtype, itemsize.
_PLAIN_NUMERIC = {
    t.value: (t, t.numpy_dtype, t.itemsize)
    for t in ElementType
    if t.itemsize and t is not ElementType.BOOL
}


def tensor_from_proto(msg: Any, where: str, limits: DecodeLimits, offset: int) -> Tensor:
    """Build a :class:`Tensor` from a ``mlbridge.v1.Tensor`` message, checking everything."""
    plain = _PLAIN_NUMERIC.get(msg.type)
    if plain is not None:
        # The usual case, checked flat (a gRPC model checks every observation): a named
        # numeric tensor whose data fills its shape within the limits. Anything else goes
        # the generic way below, which words the error.
        name = msg.name
        shape = tuple(msg.shape)
        data = msg.data
        etype, dtype, itemsize = plain
        count = 1
        for d in shape:
            if not 0 <= d <= limits.max_dim:
                break
            count *= d
        else:
            if (
                name
                and count  # an empty tensor: the generic path checks its other dimensions
                and len(shape) <= limits.max_rank
                and len(data) == count * itemsize <= limits.max_message_bytes
                and not len(msg.strings)
            ):
                array = np.frombuffer(data, dtype=dtype)
                return Tensor._trusted(
                    name, etype, array if len(shape) == 1 else array.reshape(shape)
                )
    name = msg.name
    if not name:
        raise MalformedInputError(f"{where}: tensor has an empty name")
    outer = where
    where = f"{where}: tensor {name!r}"
    etype = _element_type(msg.type, where)
    shape = tuple(msg.shape)
    limits.check_shape(name, shape, etype.itemsize or 1, offset)
    try:
        if etype is ElementType.STRING:
            if msg.data:
                raise MalformedInputError(f"{where}: a string tensor must not have 'data'")
            return Tensor.from_strings(name, shape, msg.strings)
        if len(msg.strings):
            raise MalformedInputError(
                f"{where}: a {etype.llvm_name} tensor must not have 'strings'"
            )
        return Tensor.from_bytes(name, etype, shape, msg.data)
    except InvalidTensorError as e:
        raise MalformedInputError(f"{outer}: {e}") from None


def record_from_proto(rec: Any, limits: DecodeLimits, offset: int = 0) -> Record:
    """Build a record from a parsed ``mlbridge.v1.Record`` message."""
    which = rec.WhichOneof("record")
    where = f"record at byte offset {offset}"
    if which == "message":
        msg = rec.message
        kind = _KIND_FROM_PB.get(msg.kind)
        if kind is None:
            raise MalformedInputError(f"{where}: unknown message kind number {msg.kind}")
        limits.check_tensor_count(len(msg.tensors), offset)
        tensors = tuple(tensor_from_proto(t, f"{where}", limits, offset) for t in msg.tensors)
        return Message(kind, msg.id, tensors)
    if which == "header":
        h = rec.header
        limits.check_tensor_count(len(h.features), offset)
        features = tuple(
            spec_from_proto(f, f"{where}: feature {i}") for i, f in enumerate(h.features)
        )
        advice = spec_from_proto(h.advice, f"{where}: advice") if h.HasField("advice") else None
        score = spec_from_proto(h.score, f"{where}: score") if h.HasField("score") else None
        specs = (*features, *(s for s in (advice, score) if s is not None))
        _lines.check_spec_shapes(specs, offset)
        _lines.check_spec_limits(specs, limits, offset)
        return Header(features, advice=advice, score=score)
    if which == "context":
        return Context(rec.context)
    if which == "end":
        if not rec.end:
            raise MalformedInputError(f"{where}: 'end' must be true")
        return End()
    raise MalformedInputError(f"{where}: the Record sets none of header/context/message/end")


def _check_wire_types(msg: Any, offset: int) -> None:
    """Refuse a field of a known number under the wrong wire type, anywhere in ``msg``.

    Protobuf keeps such a field as unknown and leaves the known one empty (a tensor's
    shape would read as ``[]``); fields of unknown numbers pass, as protobuf's
    compatibility rules want. The C++ decoder makes the same check.
    """
    descriptor = msg.DESCRIPTOR
    for field in unknown_fields.UnknownFieldSet(msg):
        known = descriptor.fields_by_number.get(field.field_number)
        if known is not None:
            raise MalformedInputError(
                f"record at byte offset {offset}: field {known.name!r} of "
                f"{descriptor.full_name} has the wrong wire type"
            )
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        for sub in value if fd.is_repeated else (value,):
            _check_wire_types(sub, offset)


class ProtobufSerDes(SerDes):
    """``mlbridge.v1.Record`` messages, each preceded by its length as a varint."""

    name = "protobuf"

    def encode(self, record: Record) -> bytes:
        """Encode one record with its varint length prefix."""
        body = record_to_proto(record).SerializeToString()
        return encode_varint(len(body)) + body

    def _read_length(self, reader: ByteReader) -> int:
        start = reader.offset
        value = 0
        for i in range(_MAX_VARINT_BYTES):
            try:
                byte = reader.read_exact(1)[0]
            except TruncatedInputError:
                raise TruncatedInputError(
                    f"input ends at byte offset {reader.offset} inside the length prefix "
                    f"that started at offset {start}"
                ) from None
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                break
        else:
            raise MalformedInputError(f"length prefix at byte offset {start} is not a varint")
        if value >= 2**64:  # the tenth byte holds bit 63 only, as in the C++ decoder
            raise MalformedInputError(f"record length at byte offset {start} overflows 64 bits")
        if value > self.limits.max_message_bytes:
            raise LimitExceededError(
                f"record at byte offset {start} claims {value} bytes, more than "
                f"max_message_bytes={self.limits.max_message_bytes}"
            )
        return value

    def decode(self, reader: ByteReader) -> Record | None:
        """Decode the next delimited record; ``None`` at a clean end of stream."""
        if reader.at_end():
            return None
        offset = reader.offset
        size = self._read_length(reader)
        body_offset = reader.offset
        try:
            body = reader.read_exact(size)
        except TruncatedInputError as e:
            raise TruncatedInputError(
                f"record at byte offset {offset} ({size} bytes from offset {body_offset}): {e}"
            ) from None
        rec = pb.Record()
        try:
            rec.ParseFromString(body)
        except DecodeError as e:
            raise MalformedInputError(
                f"record at byte offset {offset} is not a valid mlbridge.v1.Record: {e}"
            ) from None
        _check_wire_types(rec, offset)
        return record_from_proto(rec, self.limits, offset)
