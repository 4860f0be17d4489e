import re

import numpy as np
import pytest

from mlbridge import ElementType, SpecError, TensorSpec
from mlbridge.errors import AdviceConstraintError

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


# -- constraints (docs/serialization.md: "Advice constraints") ------------------------

EVICT = TensorSpec("index_to_evict", ElementType.INT64, (1,), valid_range=(0, 33),
                   mask_feature="mask")  # fmt: skip


def test_constraints_are_written_after_the_shape_only_when_present():
    assert EVICT.to_json() == (
        b'{"name":"index_to_evict","type":"int64_t","port":0,"shape":[1],'
        b'"range":[0,33],"mask":"mask"}'
    )
    assert TensorSpec("p", ElementType.FLOAT, (1,), valid_range=(-3, 7)).to_json() == (
        b'{"name":"p","type":"float","port":0,"shape":[1],"range":[-3,7]}'
    )
    assert not TensorSpec("p", ElementType.FLOAT, (1,)).has_constraints


def test_constrained_spec_round_trips_and_differs_from_the_bare_one():
    assert TensorSpec.from_json(EVICT.to_json()) == EVICT
    assert EVICT != TensorSpec("index_to_evict", ElementType.INT64, (1,))
    assert EVICT.with_constraints() == TensorSpec("index_to_evict", ElementType.INT64, (1,))


@pytest.mark.parametrize(
    ("rest", "message"),
    [
        (b'"range":[0]', "two 64-bit integers"),
        (b'"range":[0,1.5]', "two 64-bit integers"),
        (b'"range":[0,true]', "two 64-bit integers"),
        (b'"range":[0,9223372036854775808]', "two 64-bit integers"),
        (b'"range":"0,1"', "'range'"),
        (b'"range":null', "'range'"),
        (b'"range":[3,3]', "empty range \\[3, 3\\)"),
        (b'"mask":""', "'mask'"),
        (b'"mask":1', "'mask'"),
    ],
)
def test_bad_constraints_are_spec_errors(rest, message):
    text = b'{"name":"a","type":"int64_t","shape":[1],' + rest + b"}"
    with pytest.raises(SpecError, match=message):
        TensorSpec.from_json(text)


def test_constraints_need_a_fitting_type():
    with pytest.raises(SpecError, match="not an integer type"):
        TensorSpec.from_json(b'{"name":"a","type":"float","shape":[1],"mask":"m"}')
    with pytest.raises(SpecError, match="not numeric"):
        TensorSpec.from_json(b'{"name":"a","type":"bool","shape":[1],"range":[0,1]}')


def test_an_integral_float_bound_is_an_integer_as_in_llvms_json():
    spec = TensorSpec.from_json(b'{"name":"a","type":"int64_t","shape":[1],"range":[0.0,33]}')
    assert spec.valid_range == (0, 33)


def test_check_value_refuses_values_outside_the_range_or_mask():
    mask = np.zeros((1, 33), np.int64)
    mask[0, 3] = 1
    EVICT.check_value(np.array([3]), {"mask": mask})
    for bad, message in [
        (99, "element 0 is 99, outside its range \\[0, 33\\)"),
        (-1, "is -1, outside"),
        (5, "is 5, whose entry in its mask feature 'mask' is 0"),
    ]:
        with pytest.raises(AdviceConstraintError, match=message):
            EVICT.check_value(np.array([bad]), {"mask": mask})
    with pytest.raises(AdviceConstraintError, match="masked by feature 'mask'"):
        EVICT.check_value(np.array([3]), {})


def test_check_value_of_floats_refuses_nan_and_infinity():
    spec = TensorSpec("priority", ElementType.FLOAT, (1,), valid_range=(0, 2**32))
    for bad in (float("nan"), float("inf"), -0.5, 2.0**32):
        with pytest.raises(AdviceConstraintError, match="outside its range \\[0, 4294967296\\)"):
            spec.check_value(np.float32(bad))
    spec.check_value(np.float32(4294967040.0))  # the largest float below 2^32


@pytest.mark.parametrize(("llvm", "py", "dtype", "size", "number"), TABLE[:-1])
def test_from_numpy_dtype_finds_each_numeric_type_by_kind_and_item_size(
    llvm, py, dtype, size, number
):
    assert ElementType.from_numpy_dtype(np.dtype(dtype)) is ElementType[py]
    assert ElementType.from_numpy_dtype(np.dtype(dtype).type) is ElementType[py]


@pytest.mark.parametrize("dtype", ["S4", "U3"])
def test_from_numpy_dtype_reads_byte_and_unicode_strings_as_string(dtype):
    assert ElementType.from_numpy_dtype(np.dtype(dtype)) is ElementType.STRING


@pytest.mark.parametrize("dtype", ["float16", "complex64", "datetime64[s]"])
def test_from_numpy_dtype_refuses_a_type_llvm_has_not(dtype):
    with pytest.raises(
        SpecError, match=re.escape(f"no element type for numpy dtype {np.dtype(dtype)}")
    ):
        ElementType.from_numpy_dtype(np.dtype(dtype))


def test_spec_text_that_is_not_json_is_named_so():
    with pytest.raises(SpecError, match=r"^invalid tensor spec JSON: "):
        TensorSpec.from_json(b"{not json")
