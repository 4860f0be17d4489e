import numpy as np
import pytest

from mlbridge import ElementType, SpecError, TensorSpec

TABLE = [
    # name, python name, numpy dtype, itemsize, protobuf number
    ("int8_t", "INT8", "int8", 1, 1),
    ("uint8_t", "UINT8", "uint8", 1, 2),
    ("int16_t", "INT16", "int16", 2, 3),
    ("uint16_t", "UINT16", "uint16", 2, 4),
    ("int32_t", "INT32", "int32", 4, 5),
    ("uint32_t", "UINT32", "uint32", 4, 6),
    ("int64_t", "INT64", "int64", 8, 7),
    ("uint64_t", "UINT64", "uint64", 8, 8),
    ("float", "FLOAT", "float32", 4, 9),
    ("double", "DOUBLE", "float64", 8, 10),
    ("bool", "BOOL", "bool", 1, 11),
    ("string", "STRING", "object", None, 12),
]


@pytest.mark.parametrize(("llvm", "py", "dtype", "size", "number"), TABLE)
def test_element_type_matches_the_documented_table(llvm, py, dtype, size, number):
    et = ElementType[py]
    assert et.llvm_name == llvm
    assert et.numpy_dtype == np.dtype(dtype)
    assert et.itemsize == size
    assert et.value == number
    assert ElementType.from_llvm_name(llvm) is et


def test_unknown_element_type_name_is_a_spec_error_listing_the_known_names():
    with pytest.raises(SpecError, match="unknown element type 'int128_t'.*int64_t"):
        ElementType.from_llvm_name("int128_t")


def test_spec_json_is_llvms_exact_bytes():
    spec = TensorSpec("callee_basic_block_count", ElementType.INT64, (1,))
    assert spec.to_json() == (
        b'{"name":"callee_basic_block_count","type":"int64_t","port":0,"shape":[1]}'
    )


def test_spec_json_of_scalar_and_dynamic_shapes():
    assert TensorSpec("s", ElementType.FLOAT).to_json() == (
        b'{"name":"s","type":"float","port":0,"shape":[]}'
    )
    assert TensorSpec("d", "double", (-1, 2), port=3).to_json() == (
        b'{"name":"d","type":"double","port":3,"shape":[-1,2]}'
    )


def test_spec_from_json_round_trips():
    spec = TensorSpec("x", ElementType.UINT16, (2, -1, 3), port=1)
    assert TensorSpec.from_json(spec.to_json()) == spec


def test_spec_from_json_defaults_port_to_zero():
    spec = TensorSpec.from_json(b'{"name":"x","type":"bool","shape":[2]}')
    assert spec.port == 0


@pytest.mark.parametrize(
    "text",
    [
        b'{"name":"","type":"float","port":0,"shape":[]}',
        b'{"name":"x","type":"f32","port":0,"shape":[]}',
        b'{"name":"x","type":"float","port":0,"shape":[-2]}',
        b'{"name":"x","type":"float","port":0,"shape":[1.5]}',
        b'{"name":"x","type":"float","port":0,"shape":[true]}',
        b'{"name":"x","type":"float","port":0}',
        b'{"name":"x","type":"float","port":0,"shape":[],"extra":1}',
        b"[1]",
        b"{not json",
    ],
)
def test_invalid_spec_json_is_a_spec_error(text):
    with pytest.raises(SpecError):
        TensorSpec.from_json(text)


def test_dynamic_spec_reports_dynamic_and_has_no_element_count():
    spec = TensorSpec("x", ElementType.INT32, (-1, 4))
    assert spec.is_dynamic
    with pytest.raises(SpecError, match="dynamic"):
        _ = spec.element_count


def test_static_spec_element_count_is_the_product_and_one_for_scalars():
    assert TensorSpec("x", ElementType.INT32, (2, 3)).element_count == 6
    assert TensorSpec("x", ElementType.INT32, ()).element_count == 1
    assert TensorSpec("x", ElementType.INT32, (0, 3)).element_count == 0


def test_matches_checks_rank_and_static_dimensions():
    spec = TensorSpec("x", ElementType.INT32, (-1, 4))
    assert spec.matches((7, 4))
    assert spec.matches([0, 4])
    assert not spec.matches((7, 5))
    assert not spec.matches((4,))
    assert not spec.matches((-1, 4))


def test_spec_is_frozen_and_hashable():
    spec = TensorSpec("x", ElementType.INT32, [1, 2])
    assert spec.shape == (1, 2)
    assert hash(spec) == hash(TensorSpec("x", ElementType.INT32, (1, 2)))
    with pytest.raises(AttributeError):
        spec.name = "y"  # type: ignore[misc]
