import numpy as np
import pytest
from _strategies import streams
from hypothesis import HealthCheck, given, settings

from mlbridge import ElementType, Tensor, TensorSpec
from mlbridge.serdes import (
    SERDES_NAMES,
    Context,
    End,
    Header,
    Message,
    MessageKind,
    get_serdes,
)

SAMPLES = {
    ElementType.INT8: [[-128, 0], [1, 127]],
    ElementType.UINT8: [[0, 1], [254, 255]],
    ElementType.INT16: [[-32768, 0], [1, 32767]],
    ElementType.UINT16: [[0, 1], [2, 65535]],
    ElementType.INT32: [[-(2**31), 0], [1, 2**31 - 1]],
    ElementType.UINT32: [[0, 1], [2, 2**32 - 1]],
    ElementType.INT64: [[-(2**63), 0], [1, 2**63 - 1]],
    ElementType.UINT64: [[0, 1], [2, 2**64 - 1]],
    ElementType.FLOAT: [[0.1, -0.0], [np.inf, 3.4028235e38]],
    ElementType.DOUBLE: [[0.1, -0.0], [-np.inf, 5e-324]],
    ElementType.BOOL: [[True, False], [False, True]],
    ElementType.STRING: [["", "a"], ["\u00e9", "x\ny"]],
}


def session(etype: ElementType) -> list:
    matrix = Tensor("m", etype, SAMPLES[etype])
    scalar = Tensor("s", etype, np.asarray(SAMPLES[etype], dtype=matrix.array.dtype)[0, 0])
    header = Header(
        (TensorSpec("m", etype, (2, 2)), TensorSpec("s", etype, ())),
        advice=TensorSpec("a", etype, (-1,)),
        score=TensorSpec("r", etype, (1,)),
    )
    return [
        header,
        Context("fn"),
        Message(MessageKind.OBSERVATION, 0, (matrix, scalar)),
        Message(MessageKind.ADVICE, 0, (Tensor("a", etype, matrix.array.reshape(-1)),)),
        Message(MessageKind.OUTCOME, 0, (Tensor("r", etype, matrix.array[1, :1]),)),
        End(),
    ]


@pytest.mark.parametrize("serdes", SERDES_NAMES)
@pytest.mark.parametrize("etype", list(ElementType), ids=lambda t: t.llvm_name)
def test_round_trip_of_every_element_type(serdes, etype):
    records = session(etype)
    data = get_serdes(serdes).encode_stream(records)
    assert get_serdes(serdes).decode_stream(data) == records


@pytest.mark.parametrize("serdes", SERDES_NAMES)
def test_encode_stream_is_the_concatenation_of_encode(serdes):
    records = session(ElementType.INT32)
    s = get_serdes(serdes)
    assert get_serdes(serdes).encode_stream(records) == b"".join(s.encode(r) for r in records)


@pytest.mark.parametrize("serdes", SERDES_NAMES)
def test_decode_returns_none_at_a_clean_end(serdes):
    from mlbridge.serdes import BytesReader

    s = get_serdes(serdes)
    reader = BytesReader(s.encode(Context("c")))
    assert s.decode(reader) == Context("c")
    assert s.decode(reader) is None


def test_get_serdes_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown SerDes 'xml'"):
        get_serdes("xml")


def test_bitstream_decodes_observations_as_numpy_views():
    records = session(ElementType.FLOAT)
    decoded = get_serdes("bitstream").decode_stream(get_serdes("bitstream").encode_stream(records))
    array = decoded[2].tensors[0].array
    assert array.dtype == np.float32 and array.shape == (2, 2)
    assert array.base is not None  # np.frombuffer view, no per-element conversion


def test_json_writes_multi_dimensional_data_flat():
    t = Tensor("m", ElementType.INT32, [[1, 2], [3, 4]])
    line = get_serdes("json").encode(Message(MessageKind.OBSERVATION, 7, (t,)))
    assert line == (
        b'{"observation":7,"tensors":[{"name":"m","type":"int32_t","shape":[2,2],'
        b'"data":[1,2,3,4]}]}\n'
    )


def test_json_writes_non_finite_floats_as_strings():
    t = Tensor("f", ElementType.FLOAT, [np.nan, 1.5, np.inf, -np.inf])
    line = get_serdes("json").encode(Message(MessageKind.ADVICE, 0, (t,)))
    assert b'"data":["NaN",1.5,"Infinity","-Infinity"]' in line


PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(streams())
def test_bitstream_round_trips_any_stream(records):
    data = get_serdes("bitstream").encode_stream(records)
    assert get_serdes("bitstream").decode_stream(data) == records


@PROPERTY
@given(streams())
def test_protobuf_round_trips_any_stream(records):
    data = get_serdes("protobuf").encode_stream(records)
    assert get_serdes("protobuf").decode_stream(data) == records


@PROPERTY
@given(streams(utf8=True))
def test_json_round_trips_any_stream(records):
    data = get_serdes("json").encode_stream(records)
    assert get_serdes("json").decode_stream(data) == records


@pytest.mark.parametrize("serdes", SERDES_NAMES)
@pytest.mark.parametrize("msg_id", [-(2**63), 2**63 - 1])
def test_message_ids_at_the_int64_bounds_round_trip(serdes, msg_id):
    header = Header((TensorSpec("x", ElementType.INT32, (1,)),))
    message = Message(MessageKind.OBSERVATION, msg_id, (Tensor("x", ElementType.INT32, [3]),))
    data = get_serdes(serdes).encode_stream([header, message])
    assert get_serdes(serdes).decode_stream(data)[1].id == msg_id


@pytest.mark.parametrize("serdes", SERDES_NAMES)
@pytest.mark.parametrize(
    "etype", [t for t in ElementType if t is not ElementType.STRING], ids=lambda t: t.llvm_name
)
def test_an_empty_tensor_decodes_with_its_element_type(serdes, etype):
    header = Header((TensorSpec("e", etype, (0,)),))
    message = Message(MessageKind.OBSERVATION, 0, (Tensor("e", etype, np.zeros(0)),))
    data = get_serdes(serdes).encode_stream([header, message])
    array = get_serdes(serdes).decode_stream(data)[1].tensors[0].array
    assert array.dtype == etype.numpy_dtype and array.shape == (0,)
