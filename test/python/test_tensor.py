import numpy as np
import pytest

from mlbridge import ElementType, InvalidTensorError, Tensor


def test_float_tensor_from_python_ints_is_allowed():
    t = Tensor("x", ElementType.FLOAT, [1, 2])
    assert t.array.dtype == np.float32
    assert t.tolist() == [1.0, 2.0]


def test_int_tensor_from_floats_is_an_error():
    with pytest.raises(InvalidTensorError, match="'x'.*integer"):
        Tensor("x", ElementType.INT64, [1.0, 2.0])


def test_int_tensor_out_of_range_is_an_error_naming_the_value():
    with pytest.raises(InvalidTensorError, match="300"):
        Tensor("x", ElementType.INT8, [1, 300])
    with pytest.raises(InvalidTensorError, match="-1"):
        Tensor("x", ElementType.UINT64, np.array([-1, 2], dtype=np.int64))


def test_bool_tensor_from_ints_is_an_error():
    with pytest.raises(InvalidTensorError, match="bool"):
        Tensor("x", ElementType.BOOL, [0, 1])


def test_int_tensor_from_bools_is_an_error():
    with pytest.raises(InvalidTensorError):
        Tensor("x", ElementType.INT32, [True, False])


def test_float_tensor_from_out_of_range_double_is_an_error():
    with pytest.raises(InvalidTensorError, match="out of range of float"):
        Tensor("x", ElementType.FLOAT, [1e39])


def test_float_tensor_keeps_infinity_and_nan():
    t = Tensor("x", ElementType.FLOAT, [np.inf, np.nan])
    assert np.isinf(t.array[0]) and np.isnan(t.array[1])


def test_scalar_builds_a_rank_zero_tensor():
    t = Tensor("x", ElementType.DOUBLE, 2.5)
    assert t.shape == ()
    assert t.size == 1


def test_uint64_max_from_python_int():
    t = Tensor("x", ElementType.UINT64, [2**64 - 1])
    assert t.to_bytes() == b"\xff" * 8


def test_matching_numpy_array_is_used_without_copy():
    a = np.arange(4, dtype=np.int32)
    assert Tensor("x", ElementType.INT32, a).array is a


def test_string_tensor_holds_bytes_from_str_or_bytes():
    t = Tensor("s", ElementType.STRING, ["h\u00e9", b"\xff"])
    assert t.strings() == [b"h\xc3\xa9", b"\xff"]
    assert t.array.dtype == object


def test_string_tensor_from_numbers_is_an_error():
    with pytest.raises(InvalidTensorError, match="'s'"):
        Tensor("s", ElementType.STRING, [1, 2])


def test_numeric_tensor_from_strings_is_an_error():
    with pytest.raises(InvalidTensorError):
        Tensor("x", ElementType.INT32, ["1"])


def test_from_bytes_is_a_zero_copy_little_endian_view():
    raw = (7).to_bytes(8, "little") + (9).to_bytes(8, "little")
    t = Tensor.from_bytes("x", ElementType.INT64, (2, 1), raw)
    assert t.tolist() == [[7], [9]]
    assert not t.array.flags.writeable


def test_from_bytes_rejects_a_wrong_size_naming_the_tensor():
    with pytest.raises(InvalidTensorError, match="'x'.*expected 16 bytes, got 15"):
        Tensor.from_bytes("x", ElementType.INT64, (2,), b"\0" * 15)


def test_from_bytes_rejects_a_bool_byte_other_than_0_or_1():
    with pytest.raises(InvalidTensorError, match="bool element 1 has byte value 2"):
        Tensor.from_bytes("b", ElementType.BOOL, (2,), b"\x01\x02")


def test_equality_is_bitwise_so_nan_equals_nan_and_zero_signs_differ():
    assert Tensor("x", "float", [np.nan]) == Tensor("x", "float", [np.nan])
    assert Tensor("x", "float", [0.0]) != Tensor("x", "float", [-0.0])
    assert Tensor("x", "float", [1.0]) != Tensor("y", "float", [1.0])
    assert Tensor("x", "float", [1.0]) != Tensor("x", "double", [1.0])


def test_empty_tensor_of_any_shape():
    t = Tensor("x", ElementType.INT16, np.zeros((2, 0), dtype=np.int16))
    assert t.shape == (2, 0)
    assert t.to_bytes() == b""


def test_names_must_be_valid_utf8():
    with pytest.raises(InvalidTensorError, match="UTF-8"):
        Tensor("\ud800", ElementType.INT8, [1])
