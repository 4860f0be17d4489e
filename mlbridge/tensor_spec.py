"""Element types and tensor specs, mirroring LLVM's ``llvm/Analysis/TensorSpec.h``.

A :class:`TensorSpec` describes a tensor: its name, element type, shape (``-1`` marks a
dynamic dimension) and port. Its JSON form is byte-identical to LLVM's::

    >>> TensorSpec("callee_basic_block_count", ElementType.INT64, (1,)).to_json()
    b'{"name":"callee_basic_block_count","type":"int64_t","port":0,"shape":[1]}'

An advice spec may also constrain its values (docs/serialization.md): a half-open
``valid_range`` ``(low, high)``, ``low <= v < high``, and a ``mask_feature``, the name of a
feature whose element at (flat) index ``v`` must be nonzero. They are written after the
shape only when present (``"range":[0,33],"mask":"mask"``), and checked by
:meth:`TensorSpec.check_value` as the C++ runners check them.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from mlbridge.errors import AdviceConstraintError, SpecError

__all__ = ["DYNAMIC", "ElementType", "TensorSpec"]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

#: The dimension value that marks a dynamic dimension.
DYNAMIC = -1


class ElementType(enum.Enum):
    """The element type of a tensor; the value is the protobuf ``ElementType`` number."""

    INT8 = 1
    UINT8 = 2
    INT16 = 3
    UINT16 = 4
    INT32 = 5
    UINT32 = 6
    INT64 = 7
    UINT64 = 8
    FLOAT = 9
    DOUBLE = 10
    BOOL = 11
    STRING = 12

    @property
    def llvm_name(self) -> str:
        """The name used in JSON and headers (``"int64_t"``, ``"float"``, ``"string"``)."""
        return _LLVM_NAMES[self]

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        """The numpy dtype of the values (little-endian; ``object`` for strings)."""
        return _DTYPES[self]

    @property
    def itemsize(self) -> int | None:
        """Bytes per element on the wire, or ``None`` for the variable-size ``STRING``."""
        return None if self is ElementType.STRING else self.numpy_dtype.itemsize

    @property
    def is_integer(self) -> bool:
        """Whether the type is one of the eight integer types."""
        return self.numpy_dtype.kind in "iu"

    @property
    def is_floating(self) -> bool:
        """Whether the type is ``FLOAT`` or ``DOUBLE``."""
        return self in (ElementType.FLOAT, ElementType.DOUBLE)

    @classmethod
    def from_llvm_name(cls, name: str) -> ElementType:
        """Parse a type name as written in JSON (``"int64_t"``); raise :class:`SpecError`."""
        try:
            return _BY_LLVM_NAME[name]
        except (KeyError, TypeError):
            known = ", ".join(_BY_LLVM_NAME)
            raise SpecError(f"unknown element type {name!r} (expected one of: {known})") from None

    @classmethod
    def from_numpy_dtype(cls, dtype: np.dtype[Any] | type) -> ElementType:
        """The element type whose values have the given numpy dtype."""
        dt = np.dtype(dtype)
        for et, et_dtype in _DTYPES.items():
            if dt.kind == et_dtype.kind and dt.itemsize == et_dtype.itemsize:
                return et
        if dt.kind in "SU":
            return ElementType.STRING
        raise SpecError(f"no element type for numpy dtype {dt}")


_LLVM_NAMES: dict[ElementType, str] = {
    ElementType.INT8: "int8_t",
    ElementType.UINT8: "uint8_t",
    ElementType.INT16: "int16_t",
    ElementType.UINT16: "uint16_t",
    ElementType.INT32: "int32_t",
    ElementType.UINT32: "uint32_t",
    ElementType.INT64: "int64_t",
    ElementType.UINT64: "uint64_t",
    ElementType.FLOAT: "float",
    ElementType.DOUBLE: "double",
    ElementType.BOOL: "bool",
    ElementType.STRING: "string",
}
_BY_LLVM_NAME: dict[str, ElementType] = {v: k for k, v in _LLVM_NAMES.items()}
_DTYPES: dict[ElementType, np.dtype[Any]] = {
    ElementType.INT8: np.dtype("<i1"),
    ElementType.UINT8: np.dtype("<u1"),
    ElementType.INT16: np.dtype("<i2"),
    ElementType.UINT16: np.dtype("<u2"),
    ElementType.INT32: np.dtype("<i4"),
    ElementType.UINT32: np.dtype("<u4"),
    ElementType.INT64: np.dtype("<i8"),
    ElementType.UINT64: np.dtype("<u8"),
    ElementType.FLOAT: np.dtype("<f4"),
    ElementType.DOUBLE: np.dtype("<f8"),
    ElementType.BOOL: np.dtype("?"),
    ElementType.STRING: np.dtype(object),
}


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise SpecError(f"{what} must be an integer, got {value!r}")
    return int(value)


def _is_int64(value: object) -> bool:
    """Whether ``value`` is a 64-bit integer (an integral float counts, as in LLVM's JSON)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return value.is_integer() and -(2.0**63) <= value < 2.0**63
    return isinstance(value, (int, np.integer)) and _INT64_MIN <= int(value) <= _INT64_MAX


def _number_text(value: object) -> str:
    """A value as the C++ side's messages write it (``%.17g``: ``nan``, ``1.5``, ``99``)."""
    if isinstance(value, float):
        return f"{value:.17g}"
    return str(value)


@dataclass(frozen=True)
class TensorSpec:
    """The description of a tensor: name, element type, shape and port.

    Attributes:
        name: Non-empty tensor name.
        type: The element type.
        shape: Dimensions, each ``>= 0`` or :data:`DYNAMIC` (``-1``); ``()`` is a scalar.
        port: LLVM's port number, kept for compatibility (default 0).
        valid_range: ``(low, high)``: every value ``v`` satisfies ``low <= v < high``
            (64-bit integers, ``low < high``; numeric types only; NaN is never in range).
        mask_feature: The name of a feature that must have a nonzero element at index
            ``v`` for each value ``v`` (integer types only).
    """

    name: str
    type: ElementType
    shape: tuple[int, ...] = ()
    port: int = 0
    valid_range: tuple[int, int] | None = None
    mask_feature: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or not _is_utf8(self.name):
            raise SpecError(f"tensor spec name must be a non-empty UTF-8 string, got {self.name!r}")
        if isinstance(self.type, str):
            object.__setattr__(self, "type", ElementType.from_llvm_name(self.type))
        elif not isinstance(self.type, ElementType):
            raise SpecError(f"tensor spec {self.name!r}: type must be an ElementType")
        if isinstance(self.shape, (str, bytes)) or not isinstance(self.shape, Iterable):
            raise SpecError(f"tensor spec {self.name!r}: shape must be a sequence of integers")
        shape = tuple(_check_int(d, f"tensor spec {self.name!r}: dimension") for d in self.shape)
        for d in shape:
            if d < DYNAMIC:
                raise SpecError(
                    f"tensor spec {self.name!r}: dimension {d} is invalid "
                    "(expected a size >= 0 or -1 for a dynamic dimension)"
                )
        object.__setattr__(self, "shape", shape)
        port = _check_int(self.port, f"tensor spec {self.name!r}: port")
        if not -(2**31) <= port < 2**31:
            raise SpecError(f"tensor spec {self.name!r}: port {port} is not a 32-bit int")
        object.__setattr__(self, "port", port)
        if self.valid_range is not None:
            self._check_range()
        if self.mask_feature is not None:
            if not isinstance(self.mask_feature, str) or not self.mask_feature:
                raise SpecError(
                    f"tensor spec {self.name!r}: the mask feature must be a non-empty string, "
                    f"got {self.mask_feature!r}"
                )
            if not _is_utf8(self.mask_feature):
                raise SpecError(
                    f"tensor spec {self.name!r} has a mask feature name that is not valid UTF-8"
                )
            if not self.type.is_integer:
                raise SpecError(
                    f"tensor spec {self.name!r} has a mask feature, but its type "
                    f"{self.type.llvm_name} is not an integer type"
                )

    def _check_range(self) -> None:
        rng = self.valid_range
        if isinstance(rng, (str, bytes)) or not isinstance(rng, Iterable):
            raise SpecError(f"tensor spec {self.name!r}: range must be a pair [low, high]")
        bounds = tuple(rng)
        if len(bounds) != 2 or not all(_is_int64(b) for b in bounds):
            raise SpecError(
                f"tensor spec {self.name!r} has a range that is not two 64-bit integers "
                f"[low, high]: {list(bounds)!r}"
            )
        low, high = int(bounds[0]), int(bounds[1])
        if self.type in (ElementType.BOOL, ElementType.STRING):
            raise SpecError(
                f"tensor spec {self.name!r} has a range, but its type {self.type.llvm_name} "
                "is not numeric"
            )
        if low >= high:
            raise SpecError(
                f"tensor spec {self.name!r} has the empty range [{low}, {high}) (the range is "
                "[low, high): low <= value < high)"
            )
        object.__setattr__(self, "valid_range", (low, high))

    @property
    def has_constraints(self) -> bool:
        """Whether the spec has a range or a mask feature."""
        return self.valid_range is not None or self.mask_feature is not None

    def with_constraints(
        self, valid_range: tuple[int, int] | None = None, mask_feature: str | None = None
    ) -> TensorSpec:
        """This spec with the given constraints (replacing any it has); checked."""
        return TensorSpec(self.name, self.type, self.shape, self.port, valid_range, mask_feature)

    def check_value(self, values: object, features: Mapping[str, object] | None = None) -> None:
        """Check advice values against this spec's constraints, as the C++ runners do.

        Args:
            values: The advice's elements (an array or anything numpy converts).
            features: The observation's features by name (for the mask feature).

        Raises:
            AdviceConstraintError: Naming the advice, the element, its value and the range
                or mask entry it violates (or the missing mask feature).
        """
        if not self.has_constraints:
            return
        flat = np.asarray(values).reshape(-1)
        mask = None
        if self.mask_feature is not None:
            found = None if features is None else features.get(self.mask_feature)
            mask = None if found is None else np.asarray(found).reshape(-1)
            if mask is None or mask.dtype.kind not in "biuf":
                raise AdviceConstraintError(
                    f"advice {self.name!r} is masked by feature {self.mask_feature!r}, which "
                    "is not a numeric feature of the model"
                )
        for i, value in enumerate(flat.tolist()):
            if self.valid_range is not None:
                low, high = self.valid_range
                # Python compares int and float exactly; NaN compares false.
                if not (low <= value < high):
                    raise AdviceConstraintError(
                        f"advice {self.name!r} element {i} is {_number_text(value)}, outside "
                        f"its range [{low}, {high})"
                    )
            if mask is None:
                continue
            if not 0 <= value < mask.size:
                raise AdviceConstraintError(
                    f"advice {self.name!r} element {i} is {_number_text(value)}, which is not "
                    f"an index of its mask feature {self.mask_feature!r} ({mask.size} entries)"
                )
            if mask[int(value)] == 0:
                raise AdviceConstraintError(
                    f"advice {self.name!r} element {i} is {_number_text(value)}, whose entry "
                    f"in its mask feature {self.mask_feature!r} is 0 (not allowed)"
                )

    @property
    def rank(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def is_dynamic(self) -> bool:
        """Whether any dimension is dynamic (``-1``)."""
        return DYNAMIC in self.shape

    @property
    def element_count(self) -> int:
        """The number of elements (1 for a scalar); :class:`SpecError` if dynamic."""
        if self.is_dynamic:
            raise SpecError(f"tensor spec {self.name!r} is dynamic: its element count is unknown")
        return math.prod(self.shape)

    def matches(self, shape: Sequence[int]) -> bool:
        """Whether a concrete shape fits this spec (same rank, equal static dimensions)."""
        shape = tuple(shape)
        if len(shape) != len(self.shape):
            return False
        return all(
            d >= 0 and (s == DYNAMIC or s == d) for s, d in zip(self.shape, shape, strict=True)
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this spec, keys in LLVM's order (constraints after, if any)."""
        obj: dict[str, Any] = {"name": self.name, "type": self.type.llvm_name,
                               "port": self.port, "shape": list(self.shape)}  # fmt: skip
        if self.valid_range is not None:
            obj["range"] = list(self.valid_range)
        if self.mask_feature is not None:
            obj["mask"] = self.mask_feature
        return obj

    def to_json(self) -> bytes:
        """LLVM's exact JSON bytes: ``{"name":..,"type":..,"port":0,"shape":[..]}``."""
        return orjson.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> TensorSpec:
        """Build a spec from its parsed JSON object; raise :class:`SpecError` if invalid."""
        if not isinstance(obj, Mapping):
            raise SpecError(f"a tensor spec must be a JSON object, got {type(obj).__name__}")
        unknown = set(obj) - {"name", "type", "port", "shape", "range", "mask"}
        if unknown:
            raise SpecError(f"tensor spec has unknown keys: {sorted(unknown)}")
        for key in ("name", "type", "shape"):
            if key not in obj:
                raise SpecError(f"tensor spec {obj.get('name', '?')!r} has no {key!r}")
        shape = obj["shape"]
        if not isinstance(shape, list):
            raise SpecError(f"tensor spec {obj['name']!r}: shape must be a list")
        type_name = obj["type"]
        if not isinstance(type_name, str):
            raise SpecError(f"tensor spec {obj['name']!r}: type must be a string")
        rng = obj.get("range")
        if "range" in obj:
            # As LLVM's JSON reader, which the C++ side uses: an integral float is an integer.
            if not isinstance(rng, list) or len(rng) != 2 or not all(_is_int64(b) for b in rng):
                raise SpecError(
                    f"tensor spec {obj['name']!r} has a 'range' that is not an array of two "
                    "64-bit integers [low, high]"
                )
            rng = (int(rng[0]), int(rng[1]))
        mask = obj.get("mask")
        if "mask" in obj and (not isinstance(mask, str) or not mask):
            raise SpecError(
                f"tensor spec {obj['name']!r} has a 'mask' that is not a non-empty string"
            )
        return cls(obj["name"], ElementType.from_llvm_name(type_name), tuple(shape),
                   obj.get("port", 0), rng, mask)  # fmt: skip

    @classmethod
    def from_json(cls, data: bytes | str) -> TensorSpec:
        """Parse the JSON form (as produced by :meth:`to_json` or LLVM)."""
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise SpecError(f"invalid tensor spec JSON: {e}") from None
        return cls.from_dict(obj)
