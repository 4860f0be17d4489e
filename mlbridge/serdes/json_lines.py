"""The JSON SerDes: one record per line (JSON Lines), self-describing messages.

Numeric data is written by ``orjson`` straight from numpy arrays; its number layout is the
one ``docs/serialization.md`` specifies (shortest round-trip digits of the tensor's type,
fixed or scientific notation by exponent). Non-finite floats become the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"``.
"""

from __future__ import annotations

import functools
import json
import math
import struct
from typing import Any

import numpy as np
import orjson

from mlbridge.errors import MalformedInputError, MLBridgeError, UnsupportedValueError
from mlbridge.serdes import _lines
from mlbridge.serdes.base import SerDes, check_id
from mlbridge.serdes.reader import ByteReader
from mlbridge.serdes.records import Context, End, Header, Message, MessageKind, Record
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType

__all__ = ["JsonSerDes"]

_NUMPY = orjson.OPT_SERIALIZE_NUMPY
_NON_FINITE_OUT = {"nan": b'"NaN"', "inf": b'"Infinity"', "-inf": b'"-Infinity"'}
_NON_FINITE_IN = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}
_TENSOR_KEYS = ("name", "type", "shape", "data")
_TENSOR_KEY_SET = frozenset(_TENSOR_KEYS)


def _float_data(flat: np.ndarray[Any, np.dtype[Any]]) -> bytes:
    finite = np.isfinite(flat)
    if finite.all():
        return orjson.dumps(flat, option=_NUMPY)
    # Slow path, only when there is a NaN or an infinity: orjson would write null.
    # Numbers never contain a comma, so the fast output splits into elements.
    parts = orjson.dumps(np.where(finite, flat, 0).astype(flat.dtype), option=_NUMPY)[1:-1]
    items = parts.split(b",")
    for i in np.flatnonzero(~finite):
        items[i] = _NON_FINITE_OUT[str(float(flat[i]))]
    return b"[" + b",".join(items) + b"]"


def encode_data(tensor: Tensor) -> bytes:
    """The JSON ``data`` array of a tensor: flat, row-major."""
    if tensor.type is ElementType.STRING:
        texts = []
        for i, s in enumerate(tensor.strings()):
            try:
                texts.append(s.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise UnsupportedValueError(
                    f"tensor {tensor.name!r}: string element {i} is not valid UTF-8 ({e.reason} "
                    f"at byte {e.start}) and cannot be written in JSON; use the bitstream or "
                    "protobuf SerDes for binary data"
                ) from None
        return orjson.dumps(texts)
    flat = np.ascontiguousarray(tensor.array).reshape(-1)
    if tensor.type.is_floating:
        return _float_data(flat)
    return orjson.dumps(flat, option=_NUMPY)


def encode_tensor(tensor: Tensor) -> bytes:
    """The JSON object of one tensor."""
    return b"".join(
        (
            b'{"name":',
            orjson.dumps(tensor.name),
            b',"type":"',
            tensor.type.llvm_name.encode(),
            b'","shape":',
            orjson.dumps(list(tensor.shape)),
            b',"data":',
            encode_data(tensor),
            b"}",
        )
    )


def _fail(where: str, message: str) -> MalformedInputError:
    return MalformedInputError(f"{where}: {message}")


@functools.lru_cache(maxsize=256)
def _doubles(n: int) -> struct.Struct:
    """The packer of ``n`` native doubles (compiled once per length)."""
    return struct.Struct(f"{n}d")


def _fast_numbers(data: list[Any], etype: ElementType) -> np.ndarray[Any, np.dtype[Any]] | None:
    """``data`` as a numeric ``etype`` by vectorized conversion; None to check element-wise.

    Floats: ``struct`` packs ints and floats as doubles (correctly rounded, as ``float()``;
    several times faster than ``array.array`` or ``np.array`` on a list) and refuses
    strings, null and containers; float32 is then one rounding of each double, as
    ``astype()`` does, and an overflow becomes inf, sent to the element-wise path below
    (an error). Integers: numpy infers int64/uint64 from ints only (float64 for a
    fraction, a string or object dtype otherwise). A JSON bool would pass as 0 or 1 in
    both: the elements equal to 0 or 1 are looked at one by one.
    """
    try:
        if etype.is_floating:
            wide = np.frombuffer(_doubles(len(data)).pack(*data), dtype=np.float64)
            if etype is ElementType.DOUBLE:
                arr = wide
            else:
                with np.errstate(over="ignore"):
                    arr = wide.astype(np.float32)
        else:
            arr = np.array(data)
    except (TypeError, ValueError, OverflowError, struct.error):
        return None
    kind = arr.dtype.kind
    if arr.ndim != 1 or kind not in "fiu":
        return None
    suspects = np.flatnonzero((arr == 0) | (arr == 1))
    if suspects.size and any(type(data[i]) is bool for i in suspects.tolist()):
        return None
    if etype.is_floating:
        # The element-wise path's values: float64, then one rounding to float32.
        return arr if np.isfinite(arr).all() else None  # float32 overflow: an error
    if kind == "f":
        return None  # a fraction or exponent in an integer tensor: an error
    info = np.iinfo(etype.numpy_dtype)
    if int(arr.min()) < info.min or int(arr.max()) > info.max:
        return None
    return arr.astype(etype.numpy_dtype, copy=False)


def decode_data(data: list[Any], etype: ElementType, where: str) -> np.ndarray[Any, np.dtype[Any]]:
    """Convert a parsed ``data`` list to a flat numpy array of ``etype``, strictly.

    Numeric data takes a vectorized path (:func:`_fast_numbers`); anything it does not
    accept is checked element by element, which also words the errors.
    """
    if data and etype.itemsize and etype is not ElementType.BOOL:
        fast = _fast_numbers(data, etype)
        if fast is not None:
            return fast
    types = set(map(type, data))
    name = etype.llvm_name
    if etype is ElementType.STRING:
        if not types <= {str}:
            raise _fail(where, f"a string tensor holds JSON strings, got {_type_names(types)}")
        out = np.empty(len(data), dtype=object)
        for i, s in enumerate(data):
            try:
                out[i] = s.encode("utf-8")
            except UnicodeEncodeError:
                raise _fail(where, f"string element {i} is not valid UTF-8") from None
        return out
    if etype is ElementType.BOOL:
        if not types <= {bool}:
            raise _fail(where, f"a bool tensor holds true/false, got {_type_names(types)}")
        return np.array(data, dtype=np.bool_)
    if etype.is_integer:
        if not types <= {int}:
            bad = next(x for x in data if type(x) is not int)
            raise _fail(
                where, f"{name} element {bad!r} is not an integer (fractions, exponents, "
                "out-of-range values and non-numbers are rejected)"
            )  # fmt: skip
        try:
            return np.array(data, dtype=etype.numpy_dtype)
        except OverflowError:
            info = np.iinfo(etype.numpy_dtype)
            bad = next(x for x in data if not info.min <= x <= info.max)
            raise _fail(
                where, f"value {bad} is out of range for {name} [{info.min}, {info.max}]"
            ) from None
    # float / double
    if not types <= {int, float}:
        if not types <= {int, float, str}:
            raise _fail(where, f"a {name} tensor holds numbers, got {_type_names(types)}")
        try:
            data = [_NON_FINITE_IN[x] if type(x) is str else x for x in data]
        except KeyError as e:
            raise _fail(
                where, f"string {e.args[0]!r} is not a {name} (only \"NaN\", \"Infinity\", "
                "\"-Infinity\" are)"
            ) from None  # fmt: skip
    wide = np.array(data, dtype=np.float64)
    if etype is ElementType.DOUBLE:
        return wide
    with np.errstate(over="ignore"):
        narrow = wide.astype(np.float32)
    overflow = np.isinf(narrow) & np.isfinite(wide)
    if overflow.any():
        raise _fail(where, f"value {wide[overflow][0]!r} is out of range for float")
    return narrow


def _type_names(types: set[type]) -> str:
    names = {bool: "bool", int: "integer", float: "number", str: "string", list: "list",
             dict: "object", type(None): "null"}  # fmt: skip
    return ", ".join(sorted(names.get(t, t.__name__) for t in types))


class _Literal(str):
    """A JSON number literal with a fraction or exponent, kept as its text."""


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _find_bad_value(line: bytes) -> tuple[str, dict[str, Any] | None, int] | None:
    """Find the tensor holding what orjson refused (slow path for error messages).

    An invalid UTF-8 string, or a number literal beyond the double range (``1e400``,
    which orjson refuses for the whole line) in a tensor's data.

    Returns:
        The error's words; when the fault is only numbers beyond double, the line's
        object with them replaced by zeros (else ``None``): the C++ decoder parses such
        a line and reads its tensors in order, each one's structure and shape before its
        values, so what comes before the value is to be checked first (invalid UTF-8
        fails its parse at once); and the index of the tensor holding the value.
        ``None`` if there is no such value.
    """
    try:
        obj = json.loads(
            line.decode("utf-8", errors="surrogateescape"),
            parse_float=_Literal,
            parse_constant=_no_constant,
        )
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    number: str | None = None
    where = 0
    for k, t in enumerate(obj["tensors"] if isinstance(obj.get("tensors"), list) else []):
        if not isinstance(t, dict) or not isinstance(t.get("data"), list):
            continue
        data = t["data"]
        for i, s in enumerate(data):
            if type(s) is _Literal:
                value = float(s)
                data[i] = value if math.isfinite(value) else 0.0
                if number is None and not math.isfinite(value):
                    where = k
                    number = (
                        f"tensor {t.get('name')!r}: element {i}: value {s} is out of range "
                        f"for {t.get('type')}"
                    )
            elif isinstance(s, str):
                try:
                    s.encode("utf-8")
                except UnicodeEncodeError:
                    words = f"tensor {t.get('name')!r}: string element {i} is not valid UTF-8"
                    return words, None, k
    if number is None:
        return None
    try:
        line.decode("utf-8")  # the C++ parser refuses invalid UTF-8 anywhere at once
    except UnicodeDecodeError:
        return number, None, where
    return number, obj, where


class JsonSerDes(SerDes):
    """JSON Lines: every message carries its tensors' names, types, shapes and values."""

    name = "json"

    def encode(self, record: Record) -> bytes:
        """Encode one record as one line."""
        if isinstance(record, Message):
            tensors = b",".join(encode_tensor(t) for t in record.tensors)
            head = orjson.dumps({record.kind.value: record.id})[:-1]
            return head + b',"tensors":[' + tensors + b"]}\n"
        if isinstance(record, Header):
            return _lines.header_line(record)
        if isinstance(record, Context):
            return _lines.context_line(record)
        if isinstance(record, End):
            return _lines.END_LINE
        raise TypeError(f"not a record: {record!r}")

    def decode(self, reader: ByteReader) -> Record | None:
        """Decode the next line; ``None`` at a clean end of stream."""
        if reader.at_end():
            return None
        offset = reader.offset
        line = reader.read_line(self.limits.max_message_bytes)
        _lines.check_depth(line, offset, self.limits)
        try:
            obj = _lines.parse_line(line, offset)
        except MalformedInputError:
            found = _find_bad_value(line)
            if found is None:
                raise
            bad, sane, tensor = found
            if sane is not None and "features" not in sane:
                # As the C++ decoder: the tensors before it, and its structure and shape.
                is_message = _lines.parse_simple(sane, offset) is None
                if is_message:
                    self._decode_message(sane, offset, last=tensor)
            raise MalformedInputError(f"record at byte offset {offset}: {bad}") from None
        if "features" in obj:
            return _lines.parse_header(obj, offset, self.limits)
        simple = _lines.parse_simple(obj, offset)
        if simple is not None:
            return simple
        return self._decode_message(obj, offset)

    def _decode_message(self, obj: dict[str, Any], offset: int, last: int | None = None) -> Message:
        """The message of line object ``obj``; with ``last``, its tensors up to that one."""
        key = _lines.message_kind_key(obj, offset)
        msg_id = check_id(obj[key], offset)
        if set(obj) != {key, "tensors"} or not isinstance(obj["tensors"], list):
            raise MalformedInputError(
                f"{key} record at byte offset {offset} must be "
                f'{{"{key}":<id>,"tensors":[...]}}, got keys {list(obj)}'
            )
        items = obj["tensors"]
        self.limits.check_tensor_count(len(items), offset)
        # C++'s lexical scan refuses a dimension that is not an int64 integer anywhere in
        # the line before anything else.
        for i, t in enumerate(items):
            shape = t.get("shape") if type(t) is dict else None
            if type(shape) is list:
                for d in shape:
                    if type(d) is float or (
                        type(d) is int and not -_lines.INT64_MAX - 1 <= d <= _lines.INT64_MAX
                    ):
                        raise MalformedInputError(
                            f"{key} {msg_id} at byte offset {offset}: tensor {i} "
                            f"({t.get('name')!r}): shape {shape!r} has {d!r} where an int64 "
                            "integer is expected"
                        )
        tensors = tuple(
            self._decode_tensor(t, f"{key} {msg_id} at byte offset {offset}: tensor {i}", offset)
            for i, t in enumerate(items if last is None else items[: last + 1])
        )
        return Message(MessageKind(key), msg_id, tensors)

    def _decode_tensor(self, obj: object, where: str, offset: int) -> Tensor:
        # Exactly these keys, in any order (as the C++ decoder).
        if not isinstance(obj, dict) or obj.keys() != _TENSOR_KEY_SET:
            got = list(obj) if isinstance(obj, dict) else type(obj).__name__
            raise _fail(where, f"expected an object with keys {list(_TENSOR_KEYS)}, got {got}")
        name = obj["name"]
        if not isinstance(name, str) or not name:
            raise _fail(where, f"tensor name must be a non-empty string, got {name!r}")
        where = f"{where} ({name!r})"
        type_name = obj["type"]
        try:
            etype = ElementType.from_llvm_name(type_name)
        except MLBridgeError as e:
            raise _fail(where, str(e)) from None
        shape = obj["shape"]
        if not isinstance(shape, list) or not all(
            type(d) is int
            for d in shape  # noqa: E721 - bool is not a dimension
        ):
            raise _fail(where, f"shape must be a list of integers, got {shape!r}")
        count = self.limits.check_shape(name, shape, 1, offset)
        data = obj["data"]
        if not isinstance(data, list):
            raise _fail(where, "data must be a list")
        if len(data) != count:
            raise _fail(where, f"shape {shape} needs {count} elements, data has {len(data)}")
        flat = decode_data(data, etype, where)
        return Tensor._trusted(name, etype, flat.reshape(shape))
