"""The SerDes interface and the limits every decoder applies."""

from __future__ import annotations

import abc
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from mlbridge.errors import LimitExceededError, MalformedInputError
from mlbridge.serdes.reader import ByteReader, BytesReader
from mlbridge.serdes.records import Record

__all__ = ["DecodeLimits", "SerDes"]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
#: The most a shape's nonzero dimensions may multiply to when it also has a zero one
#: (2^60 - 1): numpy shapes no larger array of 8-byte elements, even an empty one. The
#: C++ side has the same bound (MaxEmptyShapeProduct).
MAX_EMPTY_SHAPE_PRODUCT = _INT64_MAX // 8


@dataclass(frozen=True)
class DecodeLimits:
    """Bounds a decoder enforces before allocating anything.

    Attributes:
        max_message_bytes: Largest record (line or protobuf message), in bytes.
        max_rank: Largest number of dimensions of a tensor.
        max_tensors: Largest number of tensors in a message (or features in a header).
        max_dim: Largest single dimension (of a message's shape or a header's spec).
        max_depth: Deepest nesting of JSON arrays and objects in one line of the
            bitstream or JSON format, checked by a lexical scan before the line is parsed.
    """

    max_message_bytes: int = 256 * 1024 * 1024
    max_rank: int = 16
    max_tensors: int = 65_536
    max_dim: int = 2**40
    max_depth: int = 32

    def check_tensor_count(self, count: int, offset: int) -> None:
        """Refuse a message with more than ``max_tensors`` tensors."""
        if count > self.max_tensors:
            raise LimitExceededError(
                f"record at byte offset {offset} has {count} tensors, more than "
                f"max_tensors={self.max_tensors}"
            )

    def check_shape(
        self, name: str, shape: Sequence[int], min_element_bytes: int, offset: int
    ) -> int:
        """Check a concrete shape against the limits and return its element count.

        ``min_element_bytes`` is the least number of bytes an element occupies on the wire:
        the element count times it must fit in ``max_message_bytes``.
        """
        if len(shape) > self.max_rank:
            raise LimitExceededError(
                f"tensor {name!r} at byte offset {offset}: rank {len(shape)} exceeds "
                f"max_rank={self.max_rank}"
            )
        for d in shape:
            if d < 0:
                raise MalformedInputError(
                    f"tensor {name!r} at byte offset {offset}: dimension {d} in shape "
                    f"{list(shape)} is not a concrete size"
                )
            if d > _INT64_MAX:
                raise MalformedInputError(
                    f"tensor {name!r} at byte offset {offset}: dimension {d} is not an int64"
                )
            if d > self.max_dim:
                raise LimitExceededError(
                    f"tensor {name!r} at byte offset {offset}: dimension {d} exceeds "
                    f"max_dim={self.max_dim}"
                )
        count = math.prod(shape)
        if not count and math.prod(d for d in shape if d) > MAX_EMPTY_SHAPE_PRODUCT:
            raise LimitExceededError(
                f"tensor {name!r} at byte offset {offset}: shape {list(shape)} has a zero "
                f"dimension, but its others multiply to more than {MAX_EMPTY_SHAPE_PRODUCT} "
                "(no array of that shape can be made)"
            )
        if count * max(min_element_bytes, 0) > self.max_message_bytes:
            raise LimitExceededError(
                f"tensor {name!r} at byte offset {offset}: shape {list(shape)} has {count} "
                f"elements, more than fit in max_message_bytes={self.max_message_bytes}"
            )
        return count


def check_id(value: object, offset: int) -> int:
    """Validate a message id read from the wire (an int64)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedInputError(
            f"record at byte offset {offset}: message id must be an integer, got {value!r}"
        )
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise MalformedInputError(
            f"record at byte offset {offset}: message id {value} is out of the int64 range"
        )
    return value


class SerDes(abc.ABC):
    """Turns records into bytes and back.

    A SerDes instance is stateful for one stream: the bitstream format, for instance,
    needs the last header to write or read a message. Use one instance per stream
    direction (or call :meth:`reset`).

    Args:
        limits: The decoder limits (default: :class:`DecodeLimits()`).
    """

    #: The name accepted by :func:`mlbridge.serdes.get_serdes`.
    name: ClassVar[str]

    def __init__(self, *, limits: DecodeLimits | None = None) -> None:
        self.limits = limits if limits is not None else DecodeLimits()

    def reset(self) -> None:
        """Forget any stream state (such as the current header); stateless formats keep none."""
        return None

    @abc.abstractmethod
    def encode(self, record: Record) -> bytes:
        """Encode one record into its bytes on a stream."""

    @abc.abstractmethod
    def decode(self, reader: ByteReader) -> Record | None:
        """Decode the next record, or return ``None`` if the stream ended cleanly.

        Raises:
            SerDesError: If the input is malformed, truncated or exceeds a limit.
        """

    def encode_stream(self, records: Iterable[Record]) -> bytes:
        """Encode records, in order, into one stream."""
        return b"".join(self.encode(r) for r in records)

    def iter_decode(self, reader: ByteReader) -> Iterator[Record]:
        """Yield records from ``reader`` until the stream ends cleanly."""
        while (record := self.decode(reader)) is not None:
            yield record

    def decode_stream(self, data: bytes | bytearray | memoryview) -> list[Record]:
        """Decode a whole stream held in memory."""
        return list(self.iter_decode(BytesReader(data)))
