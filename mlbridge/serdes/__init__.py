"""Serialization of named tensors: the ``bitstream``, ``json`` and ``protobuf`` formats.

Every format carries the same records (:class:`Header`, :class:`Context`,
:class:`Message`, :class:`End`); ``docs/serialization.md`` defines every byte.

    >>> from mlbridge.serdes import get_serdes
    >>> serdes = get_serdes("json")
    >>> records = serdes.decode_stream(serdes.encode_stream([Context("main"), End()]))
"""

from __future__ import annotations

from typing import Literal

from mlbridge.serdes.base import DecodeLimits, SerDes
from mlbridge.serdes.bitstream import BitstreamSerDes
from mlbridge.serdes.json_lines import JsonSerDes
from mlbridge.serdes.protobuf import ProtobufSerDes
from mlbridge.serdes.reader import ByteReader, BytesReader, StreamReader
from mlbridge.serdes.records import Context, End, Header, Message, MessageKind, Record
from mlbridge.serdes.user_message import ProtoMessageSerDes

__all__ = [
    "SERDES_NAMES",
    "BitstreamSerDes",
    "ByteReader",
    "BytesReader",
    "Context",
    "DecodeLimits",
    "End",
    "Header",
    "JsonSerDes",
    "Message",
    "MessageKind",
    "ProtoMessageSerDes",
    "ProtobufSerDes",
    "Record",
    "SerDes",
    "SerDesName",
    "StreamReader",
    "get_serdes",
]

#: The name of a SerDes, as accepted by :func:`get_serdes`.
SerDesName = Literal["bitstream", "json", "protobuf"]

_REGISTRY: dict[str, type[SerDes]] = {
    cls.name: cls for cls in (BitstreamSerDes, JsonSerDes, ProtobufSerDes)
}
#: The names accepted by :func:`get_serdes`.
SERDES_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def get_serdes(name: SerDesName | str, *, limits: DecodeLimits | None = None) -> SerDes:
    """A new SerDes instance (with its own stream state) for the format ``name``.

    Raises:
        ValueError: If ``name`` is not one of :data:`SERDES_NAMES`.
    """
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown SerDes {name!r} (expected one of: {', '.join(SERDES_NAMES)})"
        ) from None
    return cls(limits=limits)
