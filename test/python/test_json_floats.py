"""The claim of docs/serialization.md: orjson writes floats exactly in the documented layout.

The reference formatter below follows the document's words, starting from the shortest
round-trip digits that Python's ``repr`` gives (numpy's for float32).
"""

import math
import re
from decimal import Decimal

import numpy as np
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mlbridge import ElementType, Tensor
from mlbridge.serdes import Message, MessageKind, get_serdes

FIXED_RANGE = {np.float64: (-5, 15), np.float32: (-6, 12)}


def shortest_digits(value: float, dtype: type) -> tuple[str, int]:
    """The shortest round-trip digits (no trailing zeros) and the decimal exponent ``e``.

    ``value == 0.d1d2d3... * 10 ** (e + 1)``, i.e. ``d1.d2d3... * 10 ** e``.
    """
    text = repr(float(value)) if dtype is np.float64 else str(np.float32(value))
    _, digits, exp = Decimal(text).normalize().as_tuple()
    return "".join(map(str, digits)), len(digits) - 1 + exp


def reference(value: float, dtype: type) -> str:
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    digits, e = shortest_digits(value, dtype)
    low, high = FIXED_RANGE[dtype]
    if low <= e <= high:
        if e >= 0:
            whole = digits[: e + 1].ljust(e + 1, "0")
            frac = digits[e + 1 :] or "0"
            return f"{sign}{whole}.{frac}"
        return f"{sign}0.{'0' * (-e - 1)}{digits}"
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def written(value: float, dtype: type) -> str:
    etype = ElementType.DOUBLE if dtype is np.float64 else ElementType.FLOAT
    t = Tensor("f", etype, np.array([value], dtype=dtype))
    line = get_serdes("json").encode(Message(MessageKind.OBSERVATION, 0, (t,)))
    return re.search(rb'"data":\[(.*)\]\}\]\}', line).group(1).decode()


@pytest.mark.parametrize(
    ("value", "dtype", "text"),
    [
        (2.0, np.float64, "2.0"),
        (1e15, np.float64, "1000000000000000.0"),
        (1e16, np.float64, "1e+16"),
        (0.00001, np.float64, "0.00001"),
        (0.0000125, np.float64, "0.0000125"),
        (1e-6, np.float64, "1e-6"),
        (12.5, np.float64, "12.5"),
        (1.25e-7, np.float64, "1.25e-7"),
        (-0.0, np.float64, "-0.0"),
        (0.1, np.float32, "0.1"),
        (1e-6, np.float32, "0.000001"),
        (1e13, np.float32, "1e+13"),
        (3.4028235e38, np.float32, "3.4028235e+38"),
        (float("nan"), np.float32, '"NaN"'),
        (float("-inf"), np.float64, '"-Infinity"'),
    ],
)
def test_documented_float_examples(value, dtype, text):
    assert reference(value, dtype) == text
    assert written(value, dtype) == text


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
@example(5e-324)
@example(1.7976931348623157e308)
@example(123456789012345678.0)
def test_orjson_writes_doubles_in_the_documented_layout(value):
    assert orjson.dumps(np.array([value]), option=orjson.OPT_SERIALIZE_NUMPY).decode() == (
        f"[{reference(value, np.float64)}]"
    )


@settings(max_examples=500, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
@example(1e-45)
@example(1.1754944e-38)
@example(16777216.0)
@example(1e-7)
def test_orjson_writes_float32s_in_the_documented_layout(value):
    a = np.array([value], dtype=np.float32)
    assert orjson.dumps(a, option=orjson.OPT_SERIALIZE_NUMPY).decode() == (
        f"[{reference(value, np.float32)}]"
    )


@settings(max_examples=200, deadline=None)
@given(
    st.tuples(st.just(np.float32), st.floats(width=32))
    | st.tuples(st.just(np.float64), st.floats())
)
def test_json_serdes_writes_every_float_like_the_reference(dtype_and_value):
    dtype, value = dtype_and_value
    assert written(value, dtype) == reference(value, dtype)
