"""The records and specs the SerDes exchange check what they are built from, with words
that name the fault (mlbridge.serdes.records, mlbridge.tensor_spec, mlbridge.serdes)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mlbridge import ElementType, Tensor, TensorSpec
from mlbridge.errors import AdviceConstraintError, MalformedInputError, SpecError
from mlbridge.serdes import Context, Header, Message, MessageKind, get_serdes

A = TensorSpec("a", ElementType.INT64, (1,))


def test_a_header_keeps_its_features_as_a_tuple():
    header = Header([A], None)
    assert header.features == (A,)
    assert hash(header) == hash(Header((A,), None))


def test_a_message_keeps_its_tensors_as_a_tuple():
    t = Tensor("a", ElementType.INT64, [1])
    message = Message(MessageKind.OBSERVATION, 0, [t])
    assert type(message.tensors) is tuple and message.tensors == (t,)


@pytest.mark.parametrize("msg_id", [-(2**63), 2**63 - 1])
def test_message_ids_span_int64(msg_id):
    assert Message(MessageKind.OBSERVATION, msg_id, ()).id == msg_id


@pytest.mark.parametrize("msg_id", [-(2**63) - 1, 2**63])
def test_message_ids_beyond_int64_are_refused(msg_id):
    with pytest.raises(ValueError, match=f"^message id {msg_id} is out of the int64 range$"):
        Message(MessageKind.OBSERVATION, msg_id, ())


@pytest.mark.parametrize("msg_id", [True, "1", 1.0])
def test_message_ids_that_are_not_ints_are_refused(msg_id):
    with pytest.raises(TypeError, match=re.escape(f"message id must be an int, got {msg_id!r}")):
        Message(MessageKind.OBSERVATION, msg_id, ())


def test_a_context_name_that_is_not_utf8_is_refused():
    with pytest.raises(ValueError, match=r"^context name '\\udcff' is not valid UTF-8: "):
        Context("\udcff")


def test_spec_type_must_be_an_element_type():
    with pytest.raises(SpecError, match=r"^tensor spec 'x': type must be an ElementType$"):
        TensorSpec("x", None, (1,))  # type: ignore[arg-type]


def test_spec_shape_must_be_a_sequence_of_integers():
    with pytest.raises(SpecError, match=r"^tensor spec 'x': shape must be a sequence of integers$"):
        TensorSpec("x", ElementType.FLOAT, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("port", [-(2**31), 2**31 - 1])
def test_spec_ports_span_int32_and_become_ints(port):
    spec = TensorSpec("x", ElementType.FLOAT, (1,), np.int64(port))
    assert spec.port == port and type(spec.port) is int


@pytest.mark.parametrize("port", [-(2**31) - 1, 2**31])
def test_spec_ports_beyond_int32_are_refused(port):
    with pytest.raises(SpecError, match="port"):
        TensorSpec("x", ElementType.FLOAT, (1,), port)


@pytest.mark.parametrize("rng", ["01", 5])
def test_a_range_that_is_not_a_pair_is_refused(rng):
    with pytest.raises(SpecError, match=r"^tensor spec 'x': range must be a pair \[low, high\]$"):
        TensorSpec("x", ElementType.INT64, (1,), valid_range=rng)


def test_an_empty_range_explains_what_a_range_is():
    with pytest.raises(
        SpecError,
        match=r"^tensor spec 'x' has the empty range \[3, 3\) \(the range is \[low, high\): "
        r"low <= value < high\)$",
    ):
        TensorSpec("x", ElementType.INT64, (1,), valid_range=(3, 3))


def test_a_float_bound_of_2_to_the_63_is_not_an_int64():
    with pytest.raises(SpecError, match="not two 64-bit integers"):
        TensorSpec("x", ElementType.INT64, (1,), valid_range=(0, 2.0**63))
    assert TensorSpec("x", ElementType.INT64, (1,), valid_range=(-(2.0**63), 0)).valid_range


def test_a_mask_needs_the_observations_features():
    spec = TensorSpec("x", ElementType.INT64, (1,), mask_feature="mask")
    message = (
        r"^advice 'x' is masked by feature 'mask', which is not a numeric feature of the model$"
    )
    with pytest.raises(AdviceConstraintError, match=message):
        spec.check_value([0])
    with pytest.raises(AdviceConstraintError, match=message):
        spec.check_value([0], {"mask": np.array(["a"])})
    spec.check_value([0], {"mask": np.array([1], dtype=np.int64)})


def test_an_index_outside_its_mask_is_named_with_its_value():
    spec = TensorSpec("x", ElementType.INT64, (1,), mask_feature="mask")
    with pytest.raises(
        AdviceConstraintError,
        match=r"^advice 'x' element 0 is 5, which is not an index of its mask feature 'mask' "
        r"\(2 entries\)$",
    ):
        spec.check_value([5], {"mask": np.array([1, 1])})


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([1], r"^a tensor spec must be a JSON object, got list$"),
        ({"name": "x", "type": "float", "shape": 3}, r"^tensor spec 'x': shape must be a list$"),
    ],
)
def test_spec_dicts_that_are_not_specs_are_named(obj, message):
    with pytest.raises(SpecError, match=message):
        TensorSpec.from_dict(obj)


def test_an_unknown_serdes_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown SerDes 'xml' \(expected one of: bitstream, "
                       r"json, protobuf\)"):  # fmt: skip
        get_serdes("xml")


def test_a_json_dimension_beyond_int64_is_named():
    header = get_serdes("json").encode_stream([Header((), None)])
    line = (
        b'{"observation":0,"tensors":[{"name":"t","type":"int8_t",'
        b'"shape":[9223372036854775808],"data":[]}]}\n'
    )
    with pytest.raises(
        MalformedInputError,
        match=rf"^observation 0 at byte offset {len(header)}: tensor 0 \('t'\): shape "
        r"\[9223372036854775808\] has 9223372036854775808 where an int64 integer is expected$",
    ):
        get_serdes("json").decode_stream(header + line)


def test_a_line_that_is_not_an_object_is_quoted_up_to_80_bytes():
    line = b"[" + b"1," * 60 + b"1]"
    with pytest.raises(MalformedInputError) as error:
        get_serdes("json").decode_stream(line + b"\n")
    assert str(error.value) == (
        f"record at byte offset 0 is not a non-empty JSON object: {line[:80]!r}"
    )


def test_a_duplicate_feature_is_named():
    data = (
        b'{"features":[{"name":"a","type":"float","port":0,"shape":[1]},'
        b'{"name":"a","type":"float","port":0,"shape":[1]}]}\n'
    )
    with pytest.raises(MalformedInputError, match=r"duplicate feature 'a'$"):
        get_serdes("json").decode_stream(data)


def test_a_spec_of_exactly_the_rank_limit_is_accepted():
    from mlbridge.serdes import DecodeLimits

    header = Header((TensorSpec("m", ElementType.INT8, (1, 1, 1)),), None)
    data = get_serdes("json").encode_stream([header])
    assert get_serdes("json", limits=DecodeLimits(max_rank=3)).decode_stream(data) == [header]
