import importlib
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

from mlbridge import ElementType, Tensor, TensorSpec
from mlbridge.errors import LimitExceededError, MalformedInputError, SerDesError
from mlbridge.serdes import (
    Context,
    DecodeLimits,
    End,
    Header,
    Message,
    MessageKind,
    ProtoMessageSerDes,
    get_serdes,
)
from mlbridge.serdes._proto.mlbridge.v1 import tensor_pb2 as pb
from mlbridge.serdes.protobuf import tensor_from_proto, tensor_to_proto

GENERATED = REPO / "mlbridge" / "serdes" / "_proto" / "mlbridge" / "v1" / "tensor_pb2.py"


def test_generated_pb2_is_current(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", "proto", f"--python_out={tmp_path}",
         "proto/mlbridge/v1/tensor.proto"],
        cwd=REPO,
        check=True,
    )  # fmt: skip
    fresh = (tmp_path / "mlbridge" / "v1" / "tensor_pb2.py").read_text()
    assert fresh == GENERATED.read_text(), (
        "tensor_pb2.py is stale: regenerate it with `.venv/bin/python -m grpc_tools.protoc "
        "-I proto --python_out=mlbridge/serdes/_proto proto/mlbridge/v1/tensor.proto`"
    )


def test_records_are_varint_length_prefixed():
    data = get_serdes("protobuf").encode(End())
    assert data == b"\x02\x20\x01"  # length 2, field 4 (end) varint 1


def test_observation_kind_and_id_zero_are_omitted():
    data = get_serdes("protobuf").encode(Message(MessageKind.OBSERVATION, 0, ()))
    assert data == b"\x02\x1a\x00"  # length 2, field 3 (message), empty


def test_empty_context_is_still_present():
    assert get_serdes("protobuf").encode(Context("")) == b"\x02\x12\x00"


def test_header_omits_unset_advice_and_score():
    rec = pb.Record()
    data = get_serdes("protobuf").encode(Header((TensorSpec("x", ElementType.BOOL, (2,)),)))
    rec.ParseFromString(data[1:])
    assert not rec.header.HasField("advice") and not rec.header.HasField("score")


def test_string_tensors_use_strings_and_numeric_tensors_use_data():
    msg = Message(MessageKind.ADVICE, 3, (Tensor("s", "string", [b"a", b""]),
                                          Tensor("x", "uint16_t", [1, 258])))  # fmt: skip
    rec = pb.Record()
    rec.ParseFromString(get_serdes("protobuf").encode(msg)[1:])
    s, x = rec.message.tensors
    assert list(s.strings) == [b"a", b""] and s.data == b""
    assert x.data == b"\x01\x00\x02\x01" and not x.strings
    assert rec.message.kind == pb.MESSAGE_KIND_ADVICE and rec.message.id == 3


USER_PROTO = """
syntax = "proto3";
package mlbridge_test;
message Features {
  int64 callee_size = 1;
  repeated float embedding = 2;
  sint32 delta = 3;
  fixed64 hash = 4;
  repeated bool flags = 5;
  string fn_name = 6;
  repeated bytes blobs = 7;
  uint32 count = 8;
  double weight = 9;
}
message WithNested {
  Features inner = 1;
}
"""


@pytest.fixture(scope="module")
def user_pb2(tmp_path_factory):
    out = tmp_path_factory.mktemp("user_proto")
    (out / "mlbridge_user_test.proto").write_text(USER_PROTO)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{out}", f"--python_out={out}",
         str(out / "mlbridge_user_test.proto")],
        check=True,
    )  # fmt: skip
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("mlbridge_user_test_pb2")
    finally:
        sys.path.remove(str(out))


def user_tensors():
    return (
        Tensor("callee_size", "int64_t", [12]),
        Tensor("embedding", "float", [0.5, -1.25, 3.0]),
        Tensor("delta", "int32_t", [-7]),
        Tensor("hash", "uint64_t", [2**64 - 1]),
        Tensor("flags", "bool", [True, False]),
        Tensor("fn_name", "string", ["f\u00fc"]),
        Tensor("blobs", "string", [b"\xff", b""]),
        Tensor("count", "uint32_t", [3]),
        Tensor("weight", "double", [0.1]),
    )


def test_user_message_fields_hold_tensors_by_name(user_pb2):
    msg = ProtoMessageSerDes(user_pb2.Features).to_message(user_tensors())
    assert msg.callee_size == 12
    assert list(msg.embedding) == [0.5, -1.25, 3.0]
    assert msg.fn_name == "f\u00fc" and list(msg.blobs) == [b"\xff", b""]
    assert msg.hash == 2**64 - 1


def test_user_message_round_trips_through_bytes(user_pb2):
    serdes = ProtoMessageSerDes(user_pb2.Features)
    assert serdes.decode(serdes.encode(user_tensors())) == user_tensors()


def test_user_message_decodes_singular_fields_as_shape_1_and_repeated_as_n(user_pb2):
    decoded = ProtoMessageSerDes(user_pb2.Features).decode(
        user_pb2.Features(embedding=[1.0, 2.0]).SerializeToString()
    )
    shapes = {t.name: t.shape for t in decoded}
    assert shapes["callee_size"] == (1,) and shapes["embedding"] == (2,)
    assert shapes["flags"] == (0,)
    assert decoded[0].array.dtype == np.int64


def test_user_message_unknown_tensor_name_is_an_error_naming_it(user_pb2):
    with pytest.raises(SerDesError, match="mlbridge_test.Features has no field 'nope'"):
        ProtoMessageSerDes(user_pb2.Features).to_message([Tensor("nope", "int64_t", [1])])


def test_user_message_type_mismatch_is_an_error_naming_the_field(user_pb2):
    with pytest.raises(SerDesError, match="Features.callee_size holds int64_t.*int32_t"):
        ProtoMessageSerDes(user_pb2.Features).to_message([Tensor("callee_size", "int32_t", [1])])


def test_user_message_singular_field_needs_shape_1(user_pb2):
    with pytest.raises(SerDesError, match="Features.count is singular"):
        ProtoMessageSerDes(user_pb2.Features).to_message([Tensor("count", "uint32_t", [1, 2])])


def test_user_message_string_field_refuses_non_utf8(user_pb2):
    with pytest.raises(SerDesError, match="Features.fn_name.*UTF-8"):
        ProtoMessageSerDes(user_pb2.Features).to_message([Tensor("fn_name", "string", [b"\xff"])])


def test_user_message_nested_message_field_is_an_error_naming_it(user_pb2):
    with pytest.raises(
        SerDesError,
        match=r"WithNested\.inner.*\(only scalar numeric, bool, string and bytes fields can\)$",
    ):
        ProtoMessageSerDes(user_pb2.WithNested).decode(b"")


def test_user_message_invalid_bytes_are_malformed_input(user_pb2):
    with pytest.raises(MalformedInputError, match="mlbridge_test.Features"):
        ProtoMessageSerDes(user_pb2.Features).decode(b"\xff\xff")


def _string_tensor_proto(count: int) -> object:
    out = pb.Tensor()
    tensor_to_proto(Tensor("s", "string", [b""] * count), out)
    return out


def test_a_string_tensor_counts_at_least_one_byte_per_element_against_the_limit():
    # gRPC hands tensors to tensor_from_proto one by one: the element count is bounded
    # here, not only by the size of the record around it.
    limits = DecodeLimits(max_message_bytes=6)
    six = tensor_from_proto(_string_tensor_proto(6), "here", limits, 0)
    assert six.strings() == [b""] * 6
    with pytest.raises(
        LimitExceededError,
        match=r"^tensor 's' at byte offset 0: shape \[7\] has 7 elements, more than fit in "
        r"max_message_bytes=6$",
    ):
        tensor_from_proto(_string_tensor_proto(7), "here", limits, 0)
