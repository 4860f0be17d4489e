"""Tensor values: a name, an element type and a numpy array.

Numeric and bool tensors hold a C-contiguous little-endian array of the element type's
dtype; string tensors hold an array of dtype ``object`` whose elements are ``bytes``.

Construction never changes a value silently: a float tensor may be built from integers
(the type is stated explicitly), but an integer tensor from floats, a bool tensor from
integers, or any tensor from values outside its type's range is an error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from mlbridge.errors import InvalidTensorError
from mlbridge.tensor_spec import ElementType, TensorSpec, _is_utf8

__all__ = ["Tensor"]


def _as_bytes(name: str, item: object) -> bytes:
    if isinstance(item, (bytes, np.bytes_)):
        return bytes(item)
    if isinstance(item, (str, np.str_)):
        try:
            return str(item).encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidTensorError(
                f"tensor {name!r}: string element is not encodable: {e}"
            ) from None
    if isinstance(item, (bytearray, memoryview)):
        return bytes(item)
    raise InvalidTensorError(
        f"tensor {name!r}: a string tensor holds bytes or str, got {type(item).__name__}"
    )


def _string_array(name: str, values: object) -> np.ndarray[Any, np.dtype[Any]]:
    if isinstance(values, (bytes, str, np.bytes_, np.str_)):
        out = np.empty((), dtype=object)
        out[()] = _as_bytes(name, values)
        return out
    src = values if isinstance(values, np.ndarray) else None
    if src is None:
        try:
            src = np.array(values, dtype=object)
        except ValueError as e:
            raise InvalidTensorError(f"tensor {name!r}: ragged or invalid values: {e}") from None
    if src.dtype.kind not in "OSU":
        raise InvalidTensorError(
            f"tensor {name!r}: expected string values (bytes or str), got dtype {src.dtype}"
        )
    out = np.empty(src.shape, dtype=object)
    flat = out.reshape(-1)
    for i, item in enumerate(src.reshape(-1)):
        flat[i] = _as_bytes(name, item)
    return out


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _numeric_array(name: str, etype: ElementType, values: object) -> np.ndarray[Any, np.dtype[Any]]:
    target = etype.numpy_dtype
    if etype.is_integer and not isinstance(values, np.ndarray):
        # Python ints: numpy may infer float64 or object for a mix of large values, so
        # check the element types and let numpy range-check each int exactly.
        try:
            objects = np.array(values, dtype=object)
        except ValueError as e:
            raise InvalidTensorError(f"tensor {name!r}: ragged or invalid values: {e}") from None
        if all(_is_int(x) for x in objects.reshape(-1)):
            try:
                return np.array(objects.tolist(), dtype=target).reshape(objects.shape)
            except OverflowError as e:
                raise InvalidTensorError(f"tensor {name!r} ({etype.llvm_name}): {e}") from None
    if isinstance(values, np.ndarray):
        src = values
    else:
        try:
            src = np.asarray(values)
        except (ValueError, OverflowError) as e:
            raise InvalidTensorError(f"tensor {name!r}: invalid values: {e}") from None
    kind = src.dtype.kind
    what = f"tensor {name!r} ({etype.llvm_name})"
    if src.dtype == object and src.size > 0:
        # Python ints beyond int64/uint64 or mixed objects end up here.
        raise InvalidTensorError(f"{what}: values are not all {etype.llvm_name} numbers")
    if src.size == 0:
        return np.zeros(src.shape, dtype=target)
    if etype is ElementType.BOOL:
        if kind != "b":
            raise InvalidTensorError(f"{what}: expected bool values, got dtype {src.dtype}")
    elif etype.is_integer:
        if kind not in "iu":
            raise InvalidTensorError(
                f"{what}: expected integer values, got dtype {src.dtype} "
                "(convert explicitly, e.g. with np.rint(...).astype(...))"
            )
        info = np.iinfo(target)
        lo, hi = int(src.min()), int(src.max())
        if lo < info.min or hi > info.max:
            bad = lo if lo < info.min else hi
            raise InvalidTensorError(
                f"{what}: value {bad} is out of range [{info.min}, {info.max}]"
            )
    else:
        if kind not in "iuf":
            raise InvalidTensorError(f"{what}: expected numbers, got dtype {src.dtype}")
        if kind == "f" and target.itemsize < src.dtype.itemsize:
            with np.errstate(over="ignore"):
                converted = src.astype(target)
            overflow = np.isinf(converted) & np.isfinite(src)
            if overflow.any():
                bad = src[overflow].flat[0]
                raise InvalidTensorError(f"{what}: value {bad!r} is out of range of float")
            return np.asarray(converted, order="C")
    return np.asarray(src, dtype=target, order="C")


class Tensor:
    """A named, typed tensor value.

    Args:
        name: The tensor name (non-empty).
        type: The element type (an :class:`ElementType` or its JSON name, e.g. ``"float"``).
        values: A numpy array, a (nested) list, or a scalar. A numpy array that already
            has the right dtype and layout is used without a copy.

    Raises:
        InvalidTensorError: If the values cannot be represented exactly as ``type``.
    """

    __slots__ = ("_array", "_name", "_type")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str, type: ElementType | str, values: object) -> None:
        if not isinstance(name, str) or not name or not _is_utf8(name):
            raise InvalidTensorError(f"tensor name must be a non-empty UTF-8 string, got {name!r}")
        etype = ElementType.from_llvm_name(type) if isinstance(type, str) else type
        if not isinstance(etype, ElementType):
            raise InvalidTensorError(f"tensor {name!r}: type must be an ElementType")
        if etype is ElementType.STRING:
            array = _string_array(name, values)
        else:
            array = _numeric_array(name, etype, values)
        self._name = name
        self._type = etype
        self._array = array

    @classmethod
    def _trusted(
        cls, name: str, etype: ElementType, array: np.ndarray[Any, np.dtype[Any]]
    ) -> Tensor:
        """Wrap an array already known to be valid (used by the decoders)."""
        self = cls.__new__(cls)
        self._name = name
        self._type = etype
        self._array = array
        return self

    @classmethod
    def from_bytes(
        cls, name: str, type: ElementType, shape: Sequence[int], raw: bytes | memoryview
    ) -> Tensor:
        """Build a numeric or bool tensor from its raw little-endian row-major bytes.

        The array is a read-only view of ``raw`` (no copy).
        """
        if type is ElementType.STRING:
            raise InvalidTensorError(f"tensor {name!r}: use from_strings for string tensors")
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise InvalidTensorError(f"tensor {name!r}: shape {list(shape)} is not concrete")
        itemsize = type.numpy_dtype.itemsize
        expected = math.prod(shape) * itemsize
        if len(raw) != expected:
            raise InvalidTensorError(
                f"tensor {name!r} ({type.llvm_name}{list(shape)}): expected {expected} bytes, "
                f"got {len(raw)}"
            )
        if type is ElementType.BOOL:
            flags = np.frombuffer(raw, dtype=np.uint8)
            if flags.size and flags.max() > 1:
                index = int(np.argmax(flags > 1))
                raise InvalidTensorError(
                    f"tensor {name!r}: bool element {index} has byte value {flags[index]} "
                    "(expected 0 or 1)"
                )
        array = np.frombuffer(raw, dtype=type.numpy_dtype).reshape(shape)
        return cls._trusted(name, type, array)

    @classmethod
    def from_strings(cls, name: str, shape: Sequence[int], strings: Iterable[bytes]) -> Tensor:
        """Build a string tensor from its elements (row-major) and shape."""
        items = [_as_bytes(name, s) for s in strings]
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape) or math.prod(shape) != len(items):
            raise InvalidTensorError(
                f"tensor {name!r}: {len(items)} string elements do not fill shape {list(shape)}"
            )
        array = np.empty(len(items), dtype=object)
        array[:] = items
        return cls._trusted(name, ElementType.STRING, array.reshape(shape))

    @property
    def name(self) -> str:
        """The tensor name."""
        return self._name

    @property
    def type(self) -> ElementType:
        """The element type."""
        return self._type

    @property
    def shape(self) -> tuple[int, ...]:
        """The concrete shape (``()`` for a scalar)."""
        return tuple(self._array.shape)

    @property
    def array(self) -> np.ndarray[Any, np.dtype[Any]]:
        """The values as a numpy array (``object`` array of ``bytes`` for strings)."""
        return self._array

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(self._array.size)

    @property
    def spec(self) -> TensorSpec:
        """A static :class:`TensorSpec` describing this tensor."""
        return TensorSpec(self._name, self._type, self.shape)

    def to_bytes(self) -> bytes:
        """The raw little-endian row-major bytes (numeric and bool tensors only)."""
        if self._type is ElementType.STRING:
            raise InvalidTensorError(f"tensor {self._name!r}: a string tensor has no raw bytes")
        return self._array.tobytes()

    def strings(self) -> list[bytes]:
        """The string elements in row-major order (string tensors only)."""
        if self._type is not ElementType.STRING:
            raise InvalidTensorError(f"tensor {self._name!r} is not a string tensor")
        return list(self._array.reshape(-1))

    def tolist(self) -> Any:
        """The values as (nested) Python objects."""
        return self._array.tolist()

    def __eq__(self, other: object) -> bool:
        """Equal when name, type, shape and every element (bit for bit) are equal."""
        if not isinstance(other, Tensor):
            return NotImplemented
        if (self._name, self._type, self.shape) != (other._name, other._type, other.shape):
            return False
        if self._type is ElementType.STRING:
            return self.strings() == other.strings()
        return self.to_bytes() == other.to_bytes()

    def __repr__(self) -> str:
        values = np.array2string(self._array, threshold=8, separator=", ")
        return f"Tensor({self._name!r}, {self._type.llvm_name}{list(self.shape)}, {values})"
