"""The bitstream SerDes: LLVM's training-log / interactive-pipe layout plus extensions.

Each record starts with a JSON line; a message line is followed by the raw values of the
tensors the header lists for its kind and a final newline. See ``docs/serialization.md``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from mlbridge.errors import (
    HeaderMismatchError,
    InvalidTensorError,
    LimitExceededError,
    MalformedInputError,
    MLBridgeError,
    TruncatedInputError,
    UnsupportedValueError,
)
from mlbridge.serdes import _lines
from mlbridge.serdes.base import SerDes, check_id
from mlbridge.serdes.reader import ByteReader, RecyclingBuffer
from mlbridge.serdes.records import Context, End, Header, Message, MessageKind, Record
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import DYNAMIC, ElementType, TensorSpec

__all__ = ["BitstreamSerDes"]

_U32 = struct.Struct("<I")
_U32_MAX = 2**32 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_KINDS = {k.value: k for k in MessageKind}


class _Plan:
    """How to read the tensors of one message kind of one header (numeric, not bool)."""

    __slots__ = ("dynamic", "fields", "itemsizes", "names", "shapes", "sizes", "specs")

    def __init__(self, specs: tuple[TensorSpec, ...]) -> None:
        self.specs = specs
        self.names = tuple(s.name for s in specs)
        self.itemsizes = tuple(s.type.itemsize or 0 for s in specs)
        #: Per tensor: name, element type, numpy dtype, item size.
        self.fields = tuple(
            (s.name, s.type, s.type.numpy_dtype, n)
            for s, n in zip(specs, self.itemsizes, strict=True)
        )
        self.shapes = tuple(tuple(s.shape) for s in specs)
        #: Indices of the specs with a dynamic dimension.
        self.dynamic = tuple(i for i, s in enumerate(specs) if s.is_dynamic)
        #: Bytes of each tensor's values (0 for a dynamic one: they depend on the message).
        self.sizes = tuple(
            0 if s.is_dynamic else math.prod(s.shape) * n
            for s, n in zip(specs, self.itemsizes, strict=True)
        )


def encode_values(tensor: Tensor) -> bytes:
    """The bitstream value bytes of one tensor (raw bytes; strings length-prefixed)."""
    if tensor.type is not ElementType.STRING:
        return tensor.array.tobytes()
    parts = []
    for s in tensor.strings():
        if len(s) > _U32_MAX:
            raise UnsupportedValueError(
                f"tensor {tensor.name!r}: a string element of {len(s)} bytes does not fit "
                "a uint32 length"
            )
        parts += [_U32.pack(len(s)), s]
    return b"".join(parts)


def _check_int64_dims(shape: list[Any], name: str, where: str) -> None:
    """Refuse a dimension that is a number but not an int64 integer (as C++ does first)."""
    for d in shape:
        if type(d) is float or (type(d) is int and not _INT64_MIN <= d <= _INT64_MAX):
            raise MalformedInputError(
                f"{where}: shape {shape!r} of tensor {name!r} has {d!r} where an int64 "
                "integer is expected"
            )


class BitstreamSerDes(SerDes):
    """LLVM-compatible bitstream: JSON record lines plus raw little-endian values.

    The instance remembers the last header written (for :meth:`encode`) and the last one
    read (for :meth:`decode`), because messages carry no names or types of their own.
    """

    name = "bitstream"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.write_header: Header | None = None
        self.read_header: Header | None = None
        # Numeric values are read straight into arrays carved from this (readers with
        # read_into only).
        self._values = RecyclingBuffer()
        # Per message kind, how to read a message of read_header (_plan()).
        self._plans: dict[str, _Plan | None] = {}
        self._plans_header: Header | None = None
        # The message read_framed() is reading (_frame() to _framed_message()), and the
        # byte after its values (the final newline).
        self._framing: Any = None
        self._newline = memoryview(bytearray(1))

    def reset(self) -> None:
        """Forget both headers."""
        self.write_header = None
        self.read_header = None
        self._plans_header = None

    # -- encoding --------------------------------------------------------------------

    def encode(self, record: Record) -> bytes:
        """Encode one record; a message must match the last header written."""
        if isinstance(record, Message):
            return self._encode_message(record)
        if isinstance(record, Header):
            self.write_header = record
            return _lines.header_line(record)
        if isinstance(record, Context):
            return _lines.context_line(record)
        if isinstance(record, End):
            return _lines.END_LINE
        raise TypeError(f"not a record: {record!r}")

    def _specs(
        self, header: Header | None, kind: MessageKind, where: str
    ) -> tuple[TensorSpec, ...]:
        if header is None:
            raise HeaderMismatchError(f"{where}: a bitstream {kind.value} needs a header first")
        specs = header.specs_for(kind)
        if specs is None:
            spec_key = "score" if kind is MessageKind.OUTCOME else "advice"
            raise HeaderMismatchError(
                f"{where}: the header has no {spec_key} spec, so it cannot carry a "
                f"{kind.value} message"
            )
        return specs

    def _encode_message(self, message: Message) -> bytes:
        where = f"{message.kind.value} {message.id}"
        specs = self._specs(self.write_header, message.kind, where)
        tensors = message.tensors
        if len(tensors) != len(specs):
            raise HeaderMismatchError(
                f"{where}: the header lists {len(specs)} tensors "
                f"({', '.join(s.name for s in specs)}), the message has {len(tensors)}"
            )
        shapes: dict[str, list[int]] = {}
        for i, (spec, t) in enumerate(zip(specs, tensors, strict=True)):
            if t.name != spec.name or t.type is not spec.type:
                raise HeaderMismatchError(
                    f"{where}: tensor {i} is {t.name!r} ({t.type.llvm_name}), the header "
                    f"expects {spec.name!r} ({spec.type.llvm_name})"
                )
            if not spec.matches(t.shape):
                raise HeaderMismatchError(
                    f"{where}: tensor {t.name!r} has shape {list(t.shape)}, the header "
                    f"expects {list(spec.shape)}"
                )
            if spec.is_dynamic:
                shapes[spec.name] = list(t.shape)
        line: dict[str, Any] = {message.kind.value: message.id}
        if shapes:
            line["shapes"] = shapes
        parts = [orjson.dumps(line), b"\n"]
        parts += [encode_values(t) for t in tensors]
        parts.append(b"\n")
        return b"".join(parts)

    # -- decoding --------------------------------------------------------------------

    def decode(self, reader: ByteReader) -> Record | None:
        """Decode the next record; ``None`` at a clean end of stream."""
        read_framed = getattr(reader, "read_framed", None)
        if read_framed is not None and self.read_header is not None:
            # The per-decision case: a message of numeric tensors, read in one call.
            try:
                framed = read_framed(self.limits.max_message_bytes, self._frame)
            except TruncatedInputError:
                raise self._framed_truncated(reader.offset) from None
            if framed is not False:
                return None if framed is None else self._framed_message()
        if reader.at_end():
            return None
        offset = reader.offset
        line = reader.read_line(self.limits.max_message_bytes)
        _lines.check_depth(line, offset, self.limits)
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            obj = None
        if type(obj) is not dict or not obj:
            obj = _lines.parse_line(line, offset)  # raises, with the wording
        _lines.check_duplicate_keys(line, obj, offset)
        if next(iter(obj)) in _KINDS:  # a message
            return self._decode_message(obj, reader, offset, len(line) + 1)
        if "features" in obj:
            self.read_header = _lines.parse_header(obj, offset, self.limits)
            return self.read_header
        simple = _lines.parse_simple(obj, offset)
        if simple is not None:
            return simple
        return self._decode_message(obj, reader, offset, len(line) + 1)

    def _frame(self, line: bytes | bytearray, offset: int) -> list[memoryview] | None:
        """``read_framed``'s callback: where the values after ``line`` go, if it is usual.

        A message of numeric tensors whose line is exactly as the generic path wants it
        gets one block of recycled memory for all its values, plus the final newline.
        ``None`` (nothing consumed) for anything else: the generic path then reads the
        record and words any error. The checks are the generic path's, written out flat.
        """
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if type(obj) is not dict or not obj:
            return None
        key = next(iter(obj))
        kind = _KINDS.get(key)
        if kind is None:
            return None
        msg_id = obj[key]
        if (
            type(msg_id) is not int
            or not _INT64_MIN <= msg_id <= _INT64_MAX
            or not (len(obj) == 1 or (len(obj) == 2 and "shapes" in obj))
        ):
            return None
        shapes_obj = obj.get("shapes")
        keys = len(obj) + (len(shapes_obj) if type(shapes_obj) is dict else 0)
        if line.count(b'":') != keys or _lines.has_spaced_colon(line):
            return None  # a duplicate key (or odd spacing): the generic path
        if self._plans_header is self.read_header and key in self._plans:
            plan = self._plans[key]  # the usual case: no call
        else:
            plan = self._plan(kind, key)
        if plan is None:
            return None
        layout = self._layout(plan, obj.get("shapes"))
        if layout is None:
            return None
        shapes, sizes = layout
        total = 0
        for n in sizes:
            total += n
        if total > self.limits.max_message_bytes - len(line) - 1:
            return None
        block = self._values.message_block(total)
        self._framing = (plan, kind, msg_id, offset, offset + len(line) + 1, shapes, sizes, block)
        return [memoryview(block), self._newline]

    def _framed_message(self) -> Message:
        """The message whose values ``read_framed`` has just read (see :meth:`_frame`)."""
        plan, kind, msg_id, offset, start, shapes, sizes, block = self._framing
        self._framing = None  # a reference less to the block: recycled sooner
        if self._newline[0] != 10:
            raise MalformedInputError(
                f"{kind.value} {msg_id} at byte offset {offset}: expected the final newline "
                f"at byte offset {start + block.size}, got {bytes(self._newline)!r} (do the "
                "values match the header?)"
            )
        tensors = []
        trusted = Tensor._trusted
        at = 0
        fields = zip(plan.fields, shapes, sizes, strict=True)
        for (name, etype, dtype, itemsize), shape, size in fields:
            values = block[at : at + size]
            # The stream packs values without padding: a misaligned tensor gets a copy.
            array = values.view(dtype) if at % itemsize == 0 else values.copy().view(dtype)
            if len(shape) != 1:
                array = array.reshape(shape)
            tensors.append(trusted(name, etype, array))
            at += size
        return Message._trusted(kind, msg_id, tuple(tensors))

    def _framed_truncated(self, ended: int) -> TruncatedInputError:
        """The error of a framed message whose input ended at stream offset ``ended``."""
        plan, kind, msg_id, offset, start, shapes, sizes, _ = self._framing
        where = f"{kind.value} {msg_id} at byte offset {offset}"
        for spec, shape, size in zip(plan.specs, shapes, sizes, strict=True):
            if ended < start + size:
                return TruncatedInputError(
                    f"{where}: tensor {spec.name!r} ({spec.type.llvm_name}{list(shape)}) "
                    f"starting at byte offset {start}: input ends at byte offset {ended}, "
                    f"{ended - start} of its {size} bytes arrived"
                )
            start += size
        return TruncatedInputError(
            f"{where}: input ends at byte offset {ended} before the final newline"
        )

    def _plan(self, kind: MessageKind, key: str) -> _Plan | None:
        """The cached reading plan of ``kind`` for the current read header.

        ``None`` when the generic path must read it (no header or spec, strings, bools).
        """
        if self._plans_header is not self.read_header:
            self._plans = {}
            self._plans_header = self.read_header
        plan = self._plans.get(key, False)
        if plan is False:
            header = self.read_header
            specs = None if header is None else header.specs_for(kind)
            ok = specs is not None and all(
                s.type.itemsize and s.type is not ElementType.BOOL for s in specs
            )
            plan = self._plans[key] = _Plan(specs) if ok and specs is not None else None
        return plan  # type: ignore[return-value]

    def _layout(
        self, plan: _Plan, shapes_obj: object
    ) -> tuple[Sequence[tuple[int, ...]], Sequence[int]] | None:
        """The shapes and value bytes of a message of ``plan`` whose line gave ``shapes_obj``.

        ``None`` if anything is unusual (the generic path then words the error).
        """
        if shapes_obj is None:
            if plan.dynamic:
                return None
            return plan.shapes, plan.sizes
        if not plan.dynamic or type(shapes_obj) is not dict or len(shapes_obj) != len(plan.dynamic):
            return None
        shapes = list(plan.shapes)
        sizes = list(plan.sizes)
        max_dim = self.limits.max_dim  # the rank is the spec's, which the header bounds
        for i in plan.dynamic:
            shape = shapes_obj.get(plan.names[i])
            spec_shape = plan.shapes[i]
            if type(shape) is not list or len(shape) != len(spec_shape):
                return None
            for d, s in zip(shape, spec_shape, strict=True):
                if type(d) is not int or not 0 <= d <= max_dim or (s != d and s != DYNAMIC):
                    return None
            shapes[i] = shape = tuple(shape)
            sizes[i] = math.prod(shape) * plan.itemsizes[i]
            if not sizes[i] and len(shape) > 1:
                return None  # the generic path checks an empty tensor's other dimensions
        return shapes, sizes

    def _decode_message(
        self, obj: dict[str, Any], reader: ByteReader, offset: int, used: int
    ) -> Message:
        key = _lines.message_kind_key(obj, offset)
        kind = MessageKind(key)
        msg_id = check_id(obj[key], offset)
        unknown = set(obj) - {key, "shapes"}
        if unknown:
            raise MalformedInputError(
                f"{key} record at byte offset {offset} has unknown keys {sorted(unknown)}"
            )
        where = f"{key} {msg_id} at byte offset {offset}"
        try:
            specs = self._specs(self.read_header, kind, where)
        except HeaderMismatchError as e:
            raise MalformedInputError(str(e)) from None
        shapes = self._shapes(obj.get("shapes"), specs, where)
        budget = self.limits.max_message_bytes - used
        read_into = getattr(reader, "read_into", None)
        if read_into is not None:
            need = self._direct_bytes(specs, shapes, budget)
            if need is None:
                read_into = None  # a limit is exceeded: the plain path words the error
            else:
                self._values.start_message(need)
        tensors = []
        for spec, shape in zip(specs, shapes, strict=True):
            tensor, size = self._read_tensor(reader, spec, shape, budget, where, read_into)
            budget -= size
            tensors.append(tensor)
        end_offset = reader.offset
        try:
            newline = reader.read_exact(1)
        except TruncatedInputError:
            raise TruncatedInputError(
                f"{where}: input ends at byte offset {end_offset} before the final newline"
            ) from None
        if newline != b"\n":
            raise MalformedInputError(
                f"{where}: expected the final newline at byte offset {end_offset}, "
                f"got {newline!r} (do the values match the header?)"
            )
        return Message(kind, msg_id, tuple(tensors))

    def _direct_bytes(
        self, specs: tuple[TensorSpec, ...], shapes: list[tuple[int, ...]], budget: int
    ) -> int | None:
        """Bytes of the values read straight into arrays (numeric, not bool).

        Padded as :class:`RecyclingBuffer` lays them out; ``None`` if a limit would be
        exceeded.
        """
        need = 0
        total = 0
        for spec, shape in zip(specs, shapes, strict=True):
            itemsize = spec.type.itemsize
            if not itemsize or spec.type is ElementType.BOOL:
                continue
            try:
                size = self.limits.check_shape(spec.name, shape, itemsize, 0) * itemsize
            except MLBridgeError:
                return None
            total += size
            need += RecyclingBuffer.padded(size)
        return need if total <= budget else None

    def _shapes(
        self, shapes: object, specs: tuple[TensorSpec, ...], where: str
    ) -> list[tuple[int, ...]]:
        if shapes is None:
            shapes = {}
        if not isinstance(shapes, dict):
            raise MalformedInputError(f"{where}: 'shapes' must be an object")
        by_name = {s.name: s for s in specs}
        for name in shapes:
            spec = by_name.get(name)
            if spec is None:
                raise MalformedInputError(f"{where}: 'shapes' names unknown tensor {name!r}")
            if not spec.is_dynamic:
                raise MalformedInputError(
                    f"{where}: 'shapes' gives a shape for {name!r}, whose spec is static"
                )
        # C++'s lexical scan refuses a dimension beyond int64 anywhere in the line first.
        for name, shape in shapes.items():
            if isinstance(shape, list):
                _check_int64_dims(shape, name, where)
        result = []
        for spec in specs:
            if not spec.is_dynamic:
                result.append(spec.shape)
                continue
            if spec.name not in shapes:
                raise MalformedInputError(
                    f"{where}: no shape for tensor {spec.name!r}, whose spec "
                    f"{list(spec.shape)} is dynamic"
                )
            shape = shapes[spec.name]
            if (
                not isinstance(shape, list)
                or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape)
                or not spec.matches(shape)
            ):
                raise MalformedInputError(
                    f"{where}: shape {shape!r} of tensor {spec.name!r} contradicts the header "
                    f"spec {list(spec.shape)}"
                )
            result.append(tuple(shape))
        return result

    def _read_tensor(
        self,
        reader: ByteReader,
        spec: TensorSpec,
        shape: tuple[int, ...],
        budget: int,
        where: str,
        read_into: Any = None,
    ) -> tuple[Tensor, int]:
        start = reader.offset
        etype = spec.type
        itemsize = etype.itemsize or _U32.size
        count = self.limits.check_shape(spec.name, shape, itemsize, start)
        desc = f"{where}: tensor {spec.name!r} ({etype.llvm_name}{list(shape)})"
        try:
            if etype is not ElementType.STRING:
                size = count * itemsize
                if size > budget:
                    raise LimitExceededError(
                        f"{desc} needs {size} bytes, beyond max_message_bytes="
                        f"{self.limits.max_message_bytes}"
                    )
                if read_into is not None and etype is not ElementType.BOOL:
                    out = self._values.take(size)
                    read_into(memoryview(out))
                    array = out.view(etype.numpy_dtype).reshape(shape)
                    return Tensor._trusted(spec.name, etype, array), size
                raw = reader.read_exact(size)
                if etype is not ElementType.BOOL and len(raw) == size:
                    # Nothing to check: a view of the bytes read (no copy).
                    array = np.frombuffer(raw, dtype=etype.numpy_dtype).reshape(shape)
                    return Tensor._trusted(spec.name, etype, array), size
                try:
                    return Tensor.from_bytes(spec.name, etype, shape, raw), size
                except InvalidTensorError as e:
                    raise MalformedInputError(f"{desc} at byte offset {start}: {e}") from None
            items = []
            size = 0
            for i in range(count):
                (n,) = _U32.unpack(reader.read_exact(_U32.size))
                size += _U32.size + n
                if size > budget:
                    raise LimitExceededError(
                        f"{desc}: string element {i} of {n} bytes goes beyond "
                        f"max_message_bytes={self.limits.max_message_bytes}"
                    )
                items.append(reader.read_exact(n))
            array = np.empty(count, dtype=object)
            array[:] = items
            return Tensor._trusted(spec.name, etype, array.reshape(shape)), size
        except TruncatedInputError as e:
            raise TruncatedInputError(f"{desc} starting at byte offset {start}: {e}") from None
