import struct

import pytest
from conftest import VECTORS

from mlbridge import ElementType, Tensor, TensorSpec
from mlbridge.errors import (
    HeaderMismatchError,
    LimitExceededError,
    MalformedInputError,
    SerDesError,
    TruncatedInputError,
    UnsupportedValueError,
)
from mlbridge.serdes import (
    SERDES_NAMES,
    BytesReader,
    DecodeLimits,
    Header,
    Message,
    MessageKind,
    get_serdes,
)
from mlbridge.serdes._proto.mlbridge.v1 import tensor_pb2 as pb
from mlbridge.serdes.protobuf import encode_varint

STREAMS = [("session", s) for s in SERDES_NAMES] + [
    ("dynamic_shapes", "bitstream"),
    ("strings", "bitstream"),
    ("strings", "json"),
    ("strings_binary", "protobuf"),
]


def record_ends(serdes: str, data: bytes) -> list[int]:
    s, reader, ends = get_serdes(serdes), BytesReader(data), [0]
    while s.decode(reader) is not None:
        ends.append(reader.offset)
    return ends


@pytest.mark.parametrize(("case", "serdes"), STREAMS, ids=[f"{c}.{s}" for c, s in STREAMS])
def test_truncation_at_every_offset_is_a_clean_truncation_error(case, serdes):
    data = (VECTORS / f"{case}.{serdes}").read_bytes()
    full = get_serdes(serdes).decode_stream(data)
    ends = record_ends(serdes, data)
    for cut in range(len(data)):
        if cut in ends:
            assert get_serdes(serdes).decode_stream(data[:cut]) == full[: ends.index(cut)]
            continue
        with pytest.raises(TruncatedInputError):
            get_serdes(serdes).decode_stream(data[:cut])


BIT_HEADER = b'{"features":[{"name":"x","type":"int64_t","port":0,"shape":[2]}]}\n'


def bitstream(body: bytes, header: bytes = BIT_HEADER, **limits: int) -> list:
    return get_serdes("bitstream", limits=DecodeLimits(**limits)).decode_stream(header + body)


def test_bitstream_lying_header_is_an_error_naming_the_tensor():
    # The header says x has two int64 elements; the message carries one.
    with pytest.raises(SerDesError, match="'x'"):
        bitstream(b'{"observation":0}\n' + struct.pack("<q", 5) + b"\n")


def test_bitstream_truncated_values_report_tensor_and_offset():
    with pytest.raises(
        TruncatedInputError, match=r"tensor 'x' \(int64_t\[2\]\) starting at byte offset 84"
    ):
        bitstream(b'{"observation":0}\n' + b"\0" * 9)


def test_bitstream_missing_final_newline_is_an_error():
    with pytest.raises(MalformedInputError, match="final newline"):
        bitstream(b'{"observation":0}\n' + b"\0" * 16 + b"X")


def test_bitstream_unknown_type_in_header_is_an_error():
    header = b'{"features":[{"name":"x","type":"int128_t","port":0,"shape":[2]}]}\n'
    with pytest.raises(MalformedInputError, match="int128_t"):
        bitstream(b"", header=header)


def test_bitstream_message_before_header_is_an_error():
    with pytest.raises(MalformedInputError, match="needs a header"):
        bitstream(b'{"observation":0}\n\n', header=b"")


def test_bitstream_bad_bool_byte_is_an_error():
    header = b'{"features":[{"name":"b","type":"bool","port":0,"shape":[2]}]}\n'
    with pytest.raises(MalformedInputError, match="'b'.*byte value 7"):
        bitstream(b'{"observation":0}\n\x01\x07\n', header=header)


DYN_HEADER = b'{"features":[{"name":"d","type":"float","port":0,"shape":[-1,2]}]}\n'


@pytest.mark.parametrize(
    "line",
    [
        b'{"observation":0}',  # no shape for a dynamic tensor
        b'{"observation":0,"shapes":{"d":[3]}}',  # wrong rank
        b'{"observation":0,"shapes":{"d":[3,5]}}',  # static dimension differs
        b'{"observation":0,"shapes":{"d":[3,2],"e":[1]}}',  # unknown tensor
        b'{"observation":0,"shapes":{"d":[-1,2]}}',  # not concrete
    ],
)
def test_bitstream_shapes_that_contradict_the_header_are_errors(line):
    with pytest.raises(MalformedInputError, match="'[de]'"):
        bitstream(line + b"\n" + b"\0" * 24 + b"\n", header=DYN_HEADER)


def test_bitstream_shape_for_a_static_tensor_is_an_error():
    with pytest.raises(MalformedInputError, match="static"):
        bitstream(b'{"observation":0,"shapes":{"x":[2]}}\n' + b"\0" * 16 + b"\n")


def test_bitstream_absurd_shape_is_refused_before_allocating():
    line = b'{"observation":0,"shapes":{"d":[1099511627776,2]}}\n'
    with pytest.raises(LimitExceededError, match="max_message_bytes"):
        bitstream(line, header=DYN_HEADER)
    line = b'{"observation":0,"shapes":{"d":[1099511627777,2]}}\n'
    with pytest.raises(LimitExceededError, match="max_dim"):
        bitstream(line, header=DYN_HEADER)


def test_bitstream_huge_string_length_is_refused_before_reading():
    header = b'{"features":[{"name":"s","type":"string","port":0,"shape":[1]}]}\n'
    with pytest.raises(LimitExceededError, match="'s'"):
        bitstream(b'{"observation":0}\n' + struct.pack("<I", 2**32 - 1), header=header)


def test_bitstream_line_longer_than_the_limit_is_refused():
    with pytest.raises(LimitExceededError, match="limit of 64 bytes"):
        bitstream(b"", header=BIT_HEADER, max_message_bytes=64)


def test_bitstream_rank_limit_is_configurable():
    header = b'{"features":[{"name":"x","type":"int8_t","port":0,"shape":[1,1,1]}]}\n'
    with pytest.raises(LimitExceededError, match="max_rank=2"):
        bitstream(b"", header=header, max_rank=2)


def test_bitstream_writer_refuses_a_message_that_does_not_match_the_header():
    s = get_serdes("bitstream")
    s.encode(Header((TensorSpec("x", ElementType.INT64, (2,)),)))
    with pytest.raises(HeaderMismatchError, match="'y'.*'x'"):
        s.encode(Message(MessageKind.OBSERVATION, 0, (Tensor("y", "int64_t", [1, 2]),)))
    with pytest.raises(HeaderMismatchError, match=r"shape \[3\]"):
        s.encode(Message(MessageKind.OBSERVATION, 0, (Tensor("x", "int64_t", [1, 2, 3]),)))
    with pytest.raises(HeaderMismatchError, match="no advice spec"):
        s.encode(Message(MessageKind.ADVICE, 0, ()))
    with pytest.raises(
        HeaderMismatchError,
        match=r"^observation 0: the header lists 1 tensors \(x\), the message has 2$",
    ):
        s.encode(
            Message(
                MessageKind.OBSERVATION,
                0,
                (Tensor("x", "int64_t", [1, 2]), Tensor("x", "int64_t", [1, 2])),
            )
        )


@pytest.mark.parametrize("serdes", ["bitstream", "json"])
@pytest.mark.parametrize(
    "line",
    [b"{not json}", b"[1,2]", b"{}", b'{"unknown":1}', b'{"end":false}', b'{"context":5}',
     b'{"observation":1.5,"tensors":[]}', b'{"observation":true,"tensors":[]}',
     b'{"observation":99999999999999999999,"tensors":[]}'],
)  # fmt: skip
def test_invalid_record_lines_are_malformed_input(serdes, line):
    with pytest.raises(MalformedInputError, match="offset 0"):
        get_serdes(serdes).decode_stream(line + b"\n")


def json_message(tensor: bytes) -> bytes:
    return b'{"observation":0,"tensors":[' + tensor + b"]}\n"


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (b'{"name":"i","type":"int32_t","shape":[1],"data":[1.5]}', "not an integer"),
        (b'{"name":"i","type":"int32_t","shape":[1],"data":[1.0]}', "not an integer"),
        (b'{"name":"i","type":"int32_t","shape":[1],"data":[1e3]}', "not an integer"),
        (b'{"name":"i","type":"int8_t","shape":[1],"data":[128]}', "out of range"),
        (b'{"name":"i","type":"uint64_t","shape":[1],"data":[-1]}', "out of range"),
        (b'{"name":"i","type":"uint64_t","shape":[1],"data":[18446744073709551616]}',
         "not an integer"),
        (b'{"name":"i","type":"int64_t","shape":[1],"data":[true]}', "not an integer"),
        (b'{"name":"b","type":"bool","shape":[1],"data":[1]}', "true/false"),
        (b'{"name":"s","type":"string","shape":[1],"data":[1]}', "JSON strings"),
        (b'{"name":"f","type":"float","shape":[1],"data":["nan"]}', "'nan'"),
        (b'{"name":"f","type":"float","shape":[1],"data":[1e39]}', "out of range for float"),
        (b'{"name":"f","type":"float","shape":[1],"data":[null]}', "null"),
        (b'{"name":"f","type":"float","shape":[2],"data":[1.0]}', "needs 2 elements"),
        (b'{"name":"f","type":"float","shape":[1,1],"data":[[1.0]]}', "list"),
        (b'{"name":"f","type":"float128","shape":[1],"data":[1.0]}', "unknown element type"),
        (b'{"name":"f","type":"float","shape":[-1],"data":[]}', "not a concrete size"),
        (b'{"name":"","type":"float","shape":[1],"data":[1]}', "non-empty"),
        (b'{"name":"f","type":"float","shape":[1],"data":[1],"datum":[1]}', "keys"),
        (b'{"name":"f","type":"float","data":[1]}', "keys"),
    ],
)  # fmt: skip
def test_json_strict_value_checks_reject_bad_tensors(tensor, message):
    with pytest.raises(MalformedInputError, match=message):
        get_serdes("json").decode_stream(json_message(tensor))


def test_json_tensor_keys_may_come_in_any_order():
    # The C++ decoder reads an object, not a key sequence: both take any order.
    t = b'{"data":[1.5],"shape":[1],"type":"float","name":"f"}'
    (msg,) = get_serdes("json").decode_stream(json_message(t))
    assert msg.tensors[0] == Tensor("f", "float", [1.5])


def test_json_accepts_integer_literals_for_float_tensors():
    t = b'{"name":"f","type":"double","shape":[2],"data":[2,-3]}'
    (msg,) = get_serdes("json").decode_stream(json_message(t))
    assert msg.tensors[0] == Tensor("f", "double", [2.0, -3.0])


def test_json_absurd_shape_is_refused_before_allocating():
    t = b'{"name":"f","type":"float","shape":[1099511627776,1099511627776],"data":[]}'
    with pytest.raises(LimitExceededError, match="'f'"):
        get_serdes("json").decode_stream(json_message(t))


def test_json_invalid_utf8_string_element_is_an_error_naming_the_tensor():
    t = b'{"name":"words","type":"string","shape":[2],"data":["ok","\xff\xfe"]}'
    with pytest.raises(MalformedInputError, match="'words'.*element 1.*UTF-8"):
        get_serdes("json").decode_stream(json_message(t))


def test_json_lone_surrogate_escape_is_an_error_naming_the_tensor():
    t = b'{"name":"words","type":"string","shape":[1],"data":["\\ud800"]}'
    with pytest.raises(MalformedInputError, match="'words'.*UTF-8"):
        get_serdes("json").decode_stream(json_message(t))


def test_json_writer_refuses_non_utf8_strings_naming_the_tensor():
    msg = Message(MessageKind.OBSERVATION, 0, (Tensor("blob", "string", [b"\xff"]),))
    with pytest.raises(UnsupportedValueError, match="'blob'.*not valid UTF-8"):
        get_serdes("json").encode(msg)


def test_json_tensor_count_limit_is_enforced():
    t = b'{"name":"f","type":"float","shape":[],"data":[1]}'
    line = b'{"observation":0,"tensors":[' + b",".join([t] * 3) + b"]}\n"
    with pytest.raises(LimitExceededError, match="max_tensors=2"):
        get_serdes("json", limits=DecodeLimits(max_tensors=2)).decode_stream(line)


def proto_stream(rec) -> bytes:
    body = rec.SerializeToString()
    return encode_varint(len(body)) + body


def test_protobuf_unknown_element_type_is_an_error():
    rec = pb.Record()
    t = rec.message.tensors.add(name="x", type=99, shape=[1], data=b"\0")
    assert t.type == 99
    with pytest.raises(MalformedInputError, match="'x'.*unknown element type number 99"):
        get_serdes("protobuf").decode_stream(proto_stream(rec))


def test_protobuf_lying_shape_is_an_error_naming_the_tensor():
    rec = pb.Record()
    rec.message.tensors.add(name="x", type=pb.ELEMENT_TYPE_INT32, shape=[3], data=b"\0" * 8)
    with pytest.raises(MalformedInputError, match="'x'.*expected 12 bytes, got 8"):
        get_serdes("protobuf").decode_stream(proto_stream(rec))


def test_protobuf_bad_bool_byte_is_an_error():
    rec = pb.Record()
    rec.message.tensors.add(name="b", type=pb.ELEMENT_TYPE_BOOL, shape=[2], data=b"\x00\x02")
    with pytest.raises(MalformedInputError, match="'b'.*byte value 2"):
        get_serdes("protobuf").decode_stream(proto_stream(rec))


def test_protobuf_absurd_shape_is_refused_before_allocating():
    rec = pb.Record()
    rec.message.tensors.add(name="x", type=pb.ELEMENT_TYPE_FLOAT, shape=[2**40, 2**40])
    with pytest.raises(LimitExceededError, match="'x'"):
        get_serdes("protobuf").decode_stream(proto_stream(rec))


def test_protobuf_huge_length_prefix_is_refused_before_reading():
    with pytest.raises(LimitExceededError, match="max_message_bytes"):
        get_serdes("protobuf").decode_stream(encode_varint(2**40) + b"\0")


def test_protobuf_overlong_varint_is_an_error():
    with pytest.raises(MalformedInputError, match="varint"):
        get_serdes("protobuf").decode_stream(b"\xff" * 11)


def test_protobuf_garbage_body_is_an_error():
    with pytest.raises(MalformedInputError, match="not a valid mlbridge.v1.Record"):
        get_serdes("protobuf").decode_stream(b"\x03\xff\xff\xff")


def test_protobuf_empty_record_is_an_error():
    with pytest.raises(MalformedInputError, match="none of"):
        get_serdes("protobuf").decode_stream(b"\x00")


def test_protobuf_string_data_mismatch_is_an_error():
    rec = pb.Record()
    rec.message.tensors.add(name="s", type=pb.ELEMENT_TYPE_STRING, shape=[1], data=b"x")
    with pytest.raises(MalformedInputError, match="'s'.*'data'"):
        get_serdes("protobuf").decode_stream(proto_stream(rec))


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("depth", [10_000, 100_000])
def test_json_deep_line_is_a_limit_error_naming_max_depth(depth):
    line = b'{"observation":0,"tensors":' + nested(depth) + b"}\n"
    with pytest.raises(LimitExceededError, match="max_depth=32"):
        get_serdes("json").decode_stream(line)


def test_bitstream_deep_header_is_a_limit_error_naming_max_depth():
    with pytest.raises(LimitExceededError, match="max_depth=32"):
        get_serdes("bitstream").decode_stream(b'{"features":' + nested(100_000) + b"}\n")


def test_depth_limit_admits_its_own_depth_and_refuses_one_more():
    line = json_message(b'{"name":"f","type":"float","shape":[1],"data":[1]}')  # depth 4
    assert get_serdes("json", limits=DecodeLimits(max_depth=4)).decode_stream(line)
    with pytest.raises(LimitExceededError, match="max_depth=3"):
        get_serdes("json", limits=DecodeLimits(max_depth=3)).decode_stream(line)


def test_depth_scan_ignores_brackets_inside_strings():
    name = b"[" * 50 + b'\\"' + b"{" * 50
    line = json_message(b'{"name":"' + name + b'","type":"float","shape":[1],"data":[1]}')
    assert get_serdes("json", limits=DecodeLimits(max_depth=4)).decode_stream(line)


@pytest.mark.parametrize("etype", ["float", "double"])
def test_json_number_beyond_the_double_range_is_refused_naming_the_tensor(etype):
    t = b'{"name":"f","type":"' + etype.encode() + b'","shape":[1],"data":[1e400]}'
    with pytest.raises(MalformedInputError, match="'f'.*1e400 is out of range"):
        get_serdes("json").decode_stream(json_message(t))


@pytest.mark.parametrize("serdes", ["bitstream", "json"])
def test_header_dimension_above_max_dim_is_a_limit_error(serdes):
    spec = b'{"name":"x","type":"int64_t","port":0,"shape":[9223372036854775807]}'
    header = b'{"features":[' + spec + b"]}\n"
    with pytest.raises(LimitExceededError, match="'x'.*max_dim="):
        get_serdes(serdes).decode_stream(header)


def test_protobuf_header_dimension_above_max_dim_is_a_limit_error():
    rec = pb.Record()
    rec.header.features.add(name="x", type=pb.ELEMENT_TYPE_INT64, shape=[2**63 - 1])
    with pytest.raises(LimitExceededError, match="'x'.*max_dim="):
        get_serdes("protobuf").decode_stream(proto_stream(rec))


def wrong_wire_type_shape() -> bytes:
    """A message whose tensor carries shape (field 3) as fixed64 (wire type 1)."""
    tensor = pb.Tensor(name="t", type=pb.ELEMENT_TYPE_INT64, data=b"\0" * 8).SerializeToString()
    tensor += b"\x19" + struct.pack("<q", 1)
    message = b"\x1a" + encode_varint(len(tensor)) + tensor
    rec = b"\x1a" + encode_varint(len(message)) + message
    return encode_varint(len(rec)) + rec


def test_protobuf_shape_with_the_wrong_wire_type_is_refused():
    with pytest.raises(MalformedInputError, match="'shape'.*wrong wire type"):
        get_serdes("protobuf").decode_stream(wrong_wire_type_shape())


def test_protobuf_unknown_field_numbers_still_pass():
    # Forward compatibility: a field number the schema does not know is skipped.
    rec = pb.Record(context="c").SerializeToString() + b"\xa0\x06\x01"  # field 100, varint
    assert get_serdes("protobuf").decode_stream(encode_varint(len(rec)) + rec)


def test_protobuf_length_prefix_beyond_64_bits_is_malformed_not_a_limit():
    # Ten varint bytes whose last carries more than bit 63 (as the C++ decoder words it).
    with pytest.raises(MalformedInputError, match="overflows 64 bits"):
        get_serdes("protobuf").decode_stream(b"\x80" * 9 + b"\x0a" + b"\0" * 4)


# -- protobuf tensors at the edges of the fast path (a numeric tensor checked flat) ------


def protobuf_tensor(limits: DecodeLimits | None = None, **fields) -> Tensor:
    rec = pb.Record()
    rec.message.tensors.add(**fields)
    return get_serdes("protobuf", limits=limits).decode_stream(proto_stream(rec))[0].tensors[0]


def test_protobuf_data_one_itemsize_short_of_its_shape_is_an_error():
    # 8 int64 need 64 bytes; 1 byte is 8 / 8 (a division where a product belongs).
    with pytest.raises(MalformedInputError, match="'x'.*expected 64 bytes, got 1"):
        protobuf_tensor(name="x", type=pb.ELEMENT_TYPE_INT64, shape=[8], data=b"\1")


def test_protobuf_numeric_tensor_with_strings_is_an_error_naming_it():
    with pytest.raises(MalformedInputError, match="'x'.*int64_t tensor must not have 'strings'"):
        protobuf_tensor(
            name="x", type=pb.ELEMENT_TYPE_INT64, shape=[1], data=b"\0" * 8, strings=[b"a"]
        )


def test_protobuf_dimension_above_the_limit_is_refused():
    limits = DecodeLimits(max_dim=4)
    assert protobuf_tensor(limits, name="x", type=pb.ELEMENT_TYPE_INT8, shape=[4], data=b"\0" * 4)
    with pytest.raises(LimitExceededError, match="'x'"):
        protobuf_tensor(limits, name="x", type=pb.ELEMENT_TYPE_INT8, shape=[5], data=b"\0" * 5)


def test_protobuf_negative_dimension_is_refused():
    with pytest.raises(MalformedInputError, match="'x'.*dimension -1 .* not a concrete size"):
        protobuf_tensor(name="x", type=pb.ELEMENT_TYPE_INT8, shape=[-1], data=b"")


def test_protobuf_rank_limit_admits_its_own_rank_and_refuses_one_more():
    limits = DecodeLimits(max_rank=2)
    t = protobuf_tensor(limits, name="x", type=pb.ELEMENT_TYPE_INT8, shape=[1, 2], data=b"\1\2")
    assert t.shape == (1, 2) and t.array.tolist() == [[1, 2]]
    with pytest.raises(LimitExceededError, match="max_rank=2"):
        protobuf_tensor(limits, name="x", type=pb.ELEMENT_TYPE_INT8, shape=[1, 1, 2], data=b"\1\2")


def test_protobuf_tensor_without_a_name_is_an_error():
    with pytest.raises(MalformedInputError, match="byte offset 0.*empty name"):
        protobuf_tensor(name="", type=pb.ELEMENT_TYPE_INT8, shape=[1], data=b"\0")


def test_protobuf_length_prefix_of_exactly_2_to_the_64_is_an_error():
    # Ten varint bytes carry up to 70 bits; a length needs 64 at most, as in C++.
    prefix = b"\x80" * 9 + b"\x02"
    with pytest.raises(MalformedInputError, match="offset 0 overflows 64 bits"):
        get_serdes("protobuf").decode_stream(prefix + b"\0")


def test_protobuf_length_prefix_cut_short_names_where_it_started():
    data = proto_stream(pb.Record(context="f")) + b"\x80\x80"
    with pytest.raises(
        TruncatedInputError, match=r"inside the length prefix that started at offset \d+"
    ):
        get_serdes("protobuf").decode_stream(data)


# -- JSON values of the wrong kind are named by their JSON kind ----------------------------


@pytest.mark.parametrize(
    ("type_name", "data", "message"),
    [
        ("string", b'[true,1,1.5,[],{},null]',
         "a string tensor holds JSON strings, got bool, integer, list, null, number, object"),
        ("bool", b'[true,"a"]', "a bool tensor holds true/false, got bool, string"),
        ("float", b'[1,[2]]', "a float tensor holds numbers, got integer, list"),
        ("double", b'[{},null]', "a double tensor holds numbers, got null, object"),
    ],
)  # fmt: skip
def test_json_wrong_kinds_of_values_are_named(type_name, data, message):
    n = data.count(b",") + 1
    tensor = b'{"name":"t","type":"%s","shape":[%d],"data":%s}' % (type_name.encode(), n, data)
    with pytest.raises(MalformedInputError) as e:
        get_serdes("json").decode_stream(json_message(tensor))
    assert str(e.value).endswith(message), str(e.value)
    assert "'t'" in str(e.value)


def test_json_number_beyond_double_names_its_tensor_past_an_empty_one():
    line = (
        b'{"observation":0,"tensors":[{"name":"a","type":"float","shape":[0],"data":[]},'
        b'{"name":"b","type":"double","shape":[1],"data":[1e400]}]}\n'
    )
    with pytest.raises(MalformedInputError, match=r"tensor 'b': element 0: value 1e400 is out "
                       r"of range for double"):  # fmt: skip
        get_serdes("json").decode_stream(line)


def test_json_tensor_without_a_data_list_outranks_a_later_number_beyond_double():
    # As the C++ decoder: the whole message's structure before any value.
    line = (
        b'{"observation":0,"tensors":[{"name":"a","type":"float","shape":[0],"data":{}},'
        b'{"name":"b","type":"double","shape":[1],"data":[1e400]}]}\n'
    )
    with pytest.raises(MalformedInputError, match=r"tensor 0 \('a'\): data must be a list$"):
        get_serdes("json").decode_stream(line)


def test_json_bare_nan_is_invalid_json_not_a_range_error():
    line = (
        b'{"observation":0,"tensors":[{"name":"b","type":"double","shape":[2],'
        b'"data":[NaN,1e400]}]}\n'
    )
    with pytest.raises(MalformedInputError, match="invalid JSON") as e:
        get_serdes("json").decode_stream(line)
    assert "1e400" not in str(e.value)


def test_bitstream_reset_forgets_both_headers():
    s = get_serdes("bitstream")
    header = Header((TensorSpec("x", ElementType.INT64, (1,)),), None)
    message = Message(MessageKind.OBSERVATION, 0, (Tensor("x", ElementType.INT64, [7]),))
    header_bytes, message_bytes = s.encode(header), s.encode(message)
    assert s.decode(BytesReader(header_bytes)) == header
    s.reset()
    with pytest.raises(MalformedInputError, match="needs a header"):
        s.decode(BytesReader(message_bytes))
    with pytest.raises(HeaderMismatchError, match="needs a header first"):
        s.encode(message)


# -- limits and words the fast paths must keep -------------------------------------------


def test_json_tensor_count_limit_names_the_record_offset():
    header = get_serdes("json").encode_stream([Header((), None)])
    line = json_message(
        b'{"name":"a","type":"float","shape":[1],"data":[1]},'
        b'{"name":"b","type":"float","shape":[1],"data":[1]}'
    )
    with pytest.raises(
        LimitExceededError,
        match=rf"^record at byte offset {len(header)} has 2 tensors, more than max_tensors=1$",
    ):
        get_serdes("json", limits=DecodeLimits(max_tensors=1)).decode_stream(header + line)


def test_json_data_that_is_not_a_list_is_named():
    with pytest.raises(MalformedInputError, match=r"tensor 0 \('t'\): data must be a list$"):
        get_serdes("json").decode_stream(
            json_message(b'{"name":"t","type":"float","shape":[1],"data":{}}')
        )


def test_protobuf_tensor_count_limit_names_the_record_offset():
    first = proto_stream(pb.Record(context="f"))
    rec = pb.Record()
    for name in ("a", "b"):
        rec.message.tensors.add(name=name, type=pb.ELEMENT_TYPE_INT8, shape=[1], data=b"\0")
    with pytest.raises(
        LimitExceededError,
        match=rf"^record at byte offset {len(first)} has 2 tensors, more than max_tensors=1$",
    ):
        get_serdes("protobuf", limits=DecodeLimits(max_tensors=1)).decode_stream(
            first + proto_stream(rec)
        )


def test_protobuf_bad_score_spec_is_named_as_the_score():
    rec = pb.Record()
    rec.header.score.name = "r"
    rec.header.score.type = 99
    with pytest.raises(MalformedInputError, match=r"record at byte offset 0: score \('r'\)"):
        get_serdes("protobuf").decode_stream(proto_stream(rec))


@pytest.mark.parametrize(
    ("serdes", "data", "offset", "key"),
    [
        ("json", b'{"observation" :1,"observation":2,"tensors":[]}\n', 0, "observation"),
        ("bitstream", b'{"context" :"a","context":"b"}\n', 0, "context"),
        # A message line after a header: the one-call path must see it too.
        ("bitstream", BIT_HEADER + b'{"observation" :1,"observation":2}\n' + bytes(16) + b"\n",
         len(BIT_HEADER), "observation"),
    ],
)  # fmt: skip
def test_a_duplicate_key_hidden_by_a_space_before_its_colon_is_refused(serdes, data, offset, key):
    # The space hides one key from the line's '":' count, the duplicate adds one: the
    # counts match, yet the C++ decoders refuse the line.
    with pytest.raises(
        MalformedInputError,
        match=f"^line at byte offset {offset} has a duplicate key '{key}' in an object$",
    ):
        get_serdes(serdes).decode_stream(data)


def test_bitstream_message_line_with_spaces_around_its_colon_is_read():
    data = BIT_HEADER + b'{"observation" : 3}\n' + struct.pack("<2q", 5, 6) + b"\n"
    message = bitstream(data[len(BIT_HEADER) :])[1]
    assert message == Message(MessageKind.OBSERVATION, 3, (Tensor("x", "int64_t", [5, 6]),))


def test_check_shape_bounds_the_elements_times_their_wire_size():
    limits = DecodeLimits(max_message_bytes=16)
    assert limits.check_shape("x", [2], 8, 0) == 2  # 16 bytes: fits exactly
    with pytest.raises(
        LimitExceededError,
        match=r"^tensor 'x' at byte offset 5: shape \[3\] has 3 elements, more than fit in "
        r"max_message_bytes=16$",
    ):
        limits.check_shape("x", [3], 8, 5)


@pytest.mark.parametrize(("kind", "spec"), [(MessageKind.OUTCOME, "score"),
                                            (MessageKind.ADVICE, "advice")])  # fmt: skip
def test_bitstream_message_without_its_header_spec_names_the_missing_spec(kind, spec):
    sd = get_serdes("bitstream")
    sd.encode(Header((TensorSpec("x", ElementType.INT64, (2,)),)))
    message = Message(kind, 4, (Tensor("r", ElementType.FLOAT, [1.0]),))
    with pytest.raises(
        HeaderMismatchError,
        match=f"^{kind.value} 4: the header has no {spec} spec, so it cannot carry a "
        f"{kind.value} message$",
    ):
        sd.encode(message)


@pytest.mark.parametrize("line", [b"[1]", b"42", b'"observation"'])
def test_bitstream_line_that_is_not_an_object_is_refused(line):
    with pytest.raises(
        MalformedInputError, match="^record at byte offset 0 is not a non-empty JSON object: "
    ):
        get_serdes("bitstream").decode_stream(line + b"\n")


def test_json_invalid_line_whose_tensors_is_not_a_list_is_invalid_json():
    # orjson refuses 1e400; the search for the tensor holding it finds no tensor list.
    with pytest.raises(MalformedInputError, match="^invalid JSON in record at byte offset 0: "):
        get_serdes("json").decode_stream(b'{"observation":1,"tensors":7,"note":1e400}\n')


def test_bitstream_truncated_dynamic_tensor_says_how_many_of_its_bytes_arrived():
    line = b'{"observation":0,"shapes":{"d":[3,2]}}\n'
    start = len(DYN_HEADER) + len(line)
    with pytest.raises(
        TruncatedInputError,
        match=rf"^observation 0 at byte offset {len(DYN_HEADER)}: tensor 'd' \(float\[3, 2\]\) "
        rf"starting at byte offset {start}: input ends at byte offset {start + 10}, 10 of its "
        r"24 bytes arrived$",
    ):
        bitstream(line + bytes(10), header=DYN_HEADER)


def test_bitstream_string_element_of_the_uint32_maximum_length_is_written(monkeypatch):
    # A real element at the bound is 4 GiB: the bound is lowered to show it is inclusive.
    import mlbridge.serdes.bitstream as bitstream_module

    monkeypatch.setattr(bitstream_module, "_U32_MAX", 4)
    assert bitstream_module.encode_values(Tensor("s", "string", [b"abcd"])) == b"\4\0\0\0abcd"
    with pytest.raises(
        UnsupportedValueError,
        match="^tensor 's': a string element of 5 bytes does not fit a uint32 length$",
    ):
        bitstream_module.encode_values(Tensor("s", "string", [b"abcde"]))


def test_a_duplicate_key_naming_objects_of_differently_spaced_keys_is_refused():
    # Every key of the nested objects counts, however the line spaces them.
    line = b'{"x" :{"p":1,"q":2},"x" :{"p" :1,"q" :2}}\n'
    with pytest.raises(
        MalformedInputError, match="^line at byte offset 0 has a duplicate key 'x' in an object$"
    ):
        get_serdes("json").decode_stream(line)
