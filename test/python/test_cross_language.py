"""Live cross-language checks against the C++ SerDes through ``mlbridge-serdes-tool``.

The tool (built by ``make build`` into ``<build>/bin``) speaks:

- ``encode <serdes>``: one case object ``{"name":..,"records":[...]}`` on stdin, the
  stream bytes on stdout;
- ``decode <serdes>``: a stream on stdin, ``{"records":[...]}`` on stdout;
- exit status 1 and a message on stderr for bad input.

Records use the exact description of ``test/vectors/cases.json``. The build folder is
``$MLBRIDGE_BUILD_DIR`` or ``<repo>/build``. A missing tool is a failure, never a skip.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest
from _strategies import streams
from conftest import VECTORS, built
from hypothesis import HealthCheck, given, settings
from support.vectors import case_to_json, record_from_json

from mlbridge.errors import LimitExceededError, MalformedInputError, MLBridgeError
from mlbridge.serdes import SERDES_NAMES, Header, Message, get_serdes
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType, TensorSpec

sys.path.insert(0, str(VECTORS))
import generate  # noqa: E402

TOOL_NAME = "mlbridge-serdes-tool"


@pytest.fixture(scope="module")
def tool() -> Path:
    return built(f"bin/{TOOL_NAME}")


def run_tool(tool: Path, command: str, serdes: str, data: bytes) -> bytes:
    result = subprocess.run(
        [str(tool), command, serdes], input=data, capture_output=True, timeout=60
    )
    if result.returncode != 0:
        raise AssertionError(
            f"{TOOL_NAME} {command} {serdes} failed with status {result.returncode}: "
            f"{result.stderr.decode(errors='replace')}"
        )
    return result.stdout


def tool_encode(tool: Path, serdes: str, records: list, name: str = "generated") -> bytes:
    return run_tool(tool, "encode", serdes, orjson.dumps(case_to_json(name, records)))


def tool_decode(tool: Path, serdes: str, data: bytes) -> list:
    out = orjson.loads(run_tool(tool, "decode", serdes, data))
    return [record_from_json(r) for r in out["records"]]


@pytest.mark.parametrize("serdes", SERDES_NAMES)
def test_tool_encodes_every_vector_to_the_checked_in_bytes(tool, serdes):
    mismatches = [
        case.name
        for case in generate.load_cases()
        if serdes in case.serdes
        and tool_encode(tool, serdes, list(case.records), case.name)
        != (VECTORS / f"{case.name}.{serdes}").read_bytes()
    ]
    assert mismatches == []


@pytest.mark.parametrize("serdes", SERDES_NAMES)
def test_tool_decodes_every_vector_back_to_the_case(tool, serdes):
    mismatches = [
        case.name
        for case in generate.load_cases()
        if serdes in case.serdes
        and tuple(tool_decode(tool, serdes, (VECTORS / f"{case.name}.{serdes}").read_bytes()))
        != case.records
    ]
    assert mismatches == []


@pytest.mark.parametrize("serdes", SERDES_NAMES)
def test_tool_rejects_truncated_input_with_status_1(tool, serdes):
    data = (VECTORS / f"session.{serdes}").read_bytes()
    result = subprocess.run(
        [str(tool), "decode", serdes], input=data[:-2], capture_output=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr.strip()


CROSS = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


def check_both_ways(tool: Path, serdes: str, records: list) -> None:
    python_bytes = get_serdes(serdes).encode_stream(records)
    assert tool_decode(tool, serdes, python_bytes) == records
    assert tool_encode(tool, serdes, records) == python_bytes


@CROSS
@given(records=streams())
def test_bitstream_python_and_cpp_agree(tool, records):
    check_both_ways(tool, "bitstream", records)


@CROSS
@given(records=streams(utf8=True))
def test_json_python_and_cpp_agree(tool, records):
    check_both_ways(tool, "json", records)


@CROSS
@given(records=streams())
def test_protobuf_python_and_cpp_agree(tool, records):
    check_both_ways(tool, "protobuf", records)


@pytest.mark.parametrize("args", [["--help"], ["decode", "--help"], ["-h"]])
def test_tool_help_prints_usage_and_exits_0(tool, args):
    result = subprocess.run([str(tool), *args], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert b"usage: mlbridge-serdes-tool" in result.stdout
    assert b"decode-batch" in result.stdout


def test_tool_without_arguments_prints_usage_and_exits_1(tool):
    result = subprocess.run([str(tool)], capture_output=True, timeout=60)
    assert result.returncode == 1
    assert b"usage: mlbridge-serdes-tool" in result.stderr


# Advice constraints (docs/serialization.md) travel in the spec JSON of the bitstream and
# JSON headers, and in the `range` and `mask` fields of protobuf's TensorSpec message.
CONSTRAINED = [
    Header(
        (TensorSpec("mask", ElementType.INT64, (1, 33)), TensorSpec("w", ElementType.FLOAT, ())),
        TensorSpec(
            "index_to_evict", ElementType.INT64, (1,), valid_range=(0, 33), mask_feature="mask"
        ),  # fmt: skip
        TensorSpec("score", ElementType.FLOAT, (), valid_range=(-5, 9)),
    )
]


@pytest.mark.parametrize("serdes", SERDES_NAMES)
def test_constrained_specs_agree(tool, serdes):
    check_both_ways(tool, serdes, CONSTRAINED)


@pytest.mark.parametrize(
    "bad",
    [
        b'"range":[0]',
        b'"range":[0,1.5]',
        b'"range":[0,true]',
        b'"range":[33,0]',
        b'"range":null',
        b'"mask":""',
        b'"mask":7',
    ],
)
@pytest.mark.parametrize("serdes", ["bitstream", "json"])
def test_both_sides_reject_the_same_bad_constraints(tool, serdes, bad):
    data = get_serdes(serdes).encode_stream(CONSTRAINED)
    good = b'"range":[0,33],"mask":"mask"'
    assert data.count(good) == 1
    data = data.replace(good, bad)
    with pytest.raises(MLBridgeError):
        get_serdes(serdes).decode_stream(data)
    result = subprocess.run(
        [str(tool), "decode", serdes], input=data, capture_output=True, timeout=60
    )
    assert result.returncode == 1, result.stdout
    assert result.stderr.strip()


# A message line may hold its kind key and "shapes" (bitstream) or "tensors" (JSON),
# nothing else; the differential fuzzer found C++ accepting any other key.
@pytest.mark.parametrize(
    "serdes, line",
    [
        ("bitstream", b'{"observation":0,"extra":1}'),
        ("bitstream", b'{"observation":0,"tensors":[]}'),
        ("json", b'{"observation":0,"tensors":[],"tensorsx":1}'),
        ("json", b'{"observation":0,"tensors":[],"shapes":{}}'),
    ],
)
def test_both_sides_reject_a_message_line_with_an_unknown_key(tool, serdes, line):
    header = Header((), TensorSpec("a", ElementType.INT64, (1,)))
    data = get_serdes(serdes).encode_stream([header]) + line + b"\n"
    with pytest.raises(MalformedInputError, match="tensorsx|extra|tensors|shapes"):
        get_serdes(serdes).decode_stream(data)
    result = subprocess.run(
        [str(tool), "decode", serdes], input=data, capture_output=True, timeout=60
    )
    assert result.returncode == 1, result.stdout
    assert b"unknown keys" in result.stderr, result.stderr


# A zero dimension makes an empty tensor however large the other dimensions: C++
# refused [2147483648, 0] as too large while Python decoded zero elements.
@pytest.mark.parametrize(
    "serdes, line",
    [
        ("bitstream", b'{"observation":0,"shapes":{"t":[2147483648,0]}}\n'),
        (
            "json",
            b'{"observation":0,"tensors":[{"name":"t","type":"int64_t",'
            b'"shape":[2147483648,0],"data":[]}]}',
        ),
    ],
)
def test_both_sides_decode_a_huge_shape_with_a_zero_dimension_as_empty(tool, serdes, line):
    header = Header((TensorSpec("t", ElementType.INT64, (-1, -1)),), None)
    data = get_serdes(serdes).encode_stream([header]) + line + b"\n"
    message = get_serdes(serdes).decode_stream(data)[-1]
    assert message.tensors[0].shape == (2147483648, 0)
    result = subprocess.run(
        [str(tool), "decode", serdes], input=data, capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["records"][-1]["message"]["tensors"][0]["shape"] == [
        2147483648,
        0,
    ]


def empty_tensor_record(serdes: str, shape: list[int]) -> bytes:
    """A header (one dynamic int64 tensor of rank len(shape)) and a message of ``shape``."""
    header = Header((TensorSpec("t", ElementType.INT64, (-1,) * len(shape)),), None)
    if serdes == "protobuf":
        from mlbridge.serdes.protobuf import encode_varint, record_to_proto

        message = Message.observation(0, [Tensor("t", ElementType.INT64, np.zeros((0,)))])
        rec = record_to_proto(message)
        rec.message.tensors[0].shape[:] = shape  # what the Python encoder cannot make
        body = rec.SerializeToString()
        return get_serdes(serdes).encode_stream([header]) + encode_varint(len(body)) + body
    dims = ",".join(map(str, shape)).encode()
    line = (
        b'{"observation":0,"shapes":{"t":[' + dims + b"]}}\n\n"  # no values, then the newline
        if serdes == "bitstream"
        else b'{"observation":0,"tensors":[{"name":"t","type":"int64_t","shape":['
        + dims
        + b'],"data":[]}]}\n'
    )
    return get_serdes(serdes).encode_stream([header]) + line


@pytest.mark.parametrize("serdes", SERDES_NAMES)
def test_an_empty_tensor_whose_other_dimensions_no_array_can_take_is_refused(tool, serdes):
    # Found by the long run (seed 10): numpy cannot shape an empty array of [0, 2^40, 2^40]
    # and Python crashed; both refuse it now, as C++ refuses such a count.
    data = empty_tensor_record(serdes, [0, 2**40, 2**40])
    with pytest.raises(LimitExceededError, match="has a zero dimension, but its others"):
        get_serdes(serdes).decode_stream(data)
    result = decode_with_tool(tool, serdes, data)
    assert result.returncode == 1, result.stdout
    assert b"MaxMessageBytes" in result.stderr, result.stderr


@pytest.mark.parametrize("serdes", SERDES_NAMES)
def test_an_empty_tensor_with_huge_other_dimensions_within_the_bound_is_decoded(tool, serdes):
    data = empty_tensor_record(serdes, [0, 2**30, 2**30 - 1])
    assert get_serdes(serdes).decode_stream(data)[-1].tensors[0].shape == (0, 2**30, 2**30 - 1)
    result = decode_with_tool(tool, serdes, data)
    assert result.returncode == 0, result.stderr


# llvm::json takes "+1" as a number; JSON does not, nor Python (found by the
# differential fuzzer in a header's shape).
@pytest.mark.parametrize("serdes", ["bitstream", "json"])
def test_both_sides_reject_a_plus_sign_before_a_number(tool, serdes):
    header = Header((TensorSpec("t", ElementType.INT64, (1,)),), None)
    data = get_serdes(serdes).encode_stream([header]).replace(b'"shape":[1]', b'"shape":[+1]')
    assert b"[+1]" in data
    with pytest.raises(MalformedInputError):
        get_serdes(serdes).decode_stream(data)
    result = subprocess.run(
        [str(tool), "decode", serdes], input=data, capture_output=True, timeout=60
    )
    assert result.returncode == 1, result.stdout
    assert b"plus sign" in result.stderr, result.stderr


def decode_with_tool(tool: Path, serdes: str, data: bytes) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(tool), "decode", serdes], input=data, capture_output=True, timeout=60
    )


def header_bytes(serdes: str, header: Header, edit=None) -> bytes:
    """``header`` encoded by ``serdes``; ``edit(proto)`` may change the protobuf record
    first (a fault the Python encoder cannot make, such as an unknown type number)."""
    if serdes != "protobuf" or edit is None:
        return get_serdes(serdes).encode_stream([header])
    from mlbridge.serdes.protobuf import encode_varint, record_to_proto

    rec = record_to_proto(header)
    edit(rec)
    body = rec.SerializeToString()
    return encode_varint(len(body)) + body


def _set_range(low: int, high: int):
    def edit(rec) -> None:
        rec.header.advice.range.low, rec.header.advice.range.high = low, high

    return edit


def _set_mask(name: str):
    def edit(rec) -> None:
        rec.header.advice.mask = name

    return edit


def _advice_type(number: int):
    def edit(rec) -> None:
        rec.header.advice.type = number

    return edit


# The protobuf forms of the bad constraints above: what withConstraints() and
# TensorSpec(valid_range=, mask_feature=) refuse, both sides refuse on the wire.
@pytest.mark.parametrize(
    "edit, message",
    [
        (_set_range(33, 0), "empty range"),
        (_set_range(5, 5), "empty range"),
        (_set_mask(""), "empty mask feature name"),
        (_advice_type(12), "has a range, but its type"),  # string advice
        (_advice_type(9), "mask feature, but its"),  # float advice
    ],
    ids=["range-reversed", "range-empty", "mask-empty", "range-on-string", "mask-on-float"],
)
def test_both_sides_reject_the_same_bad_protobuf_constraints(tool, edit, message):
    data = header_bytes("protobuf", CONSTRAINED[0], edit)
    with pytest.raises(MalformedInputError, match=message):
        get_serdes("protobuf").decode_stream(data)
    result = decode_with_tool(tool, "protobuf", data)
    assert result.returncode == 1, result.stdout
    assert message.encode() in result.stderr, result.stderr


def test_a_protobuf_spec_without_constraints_has_no_constraint_bytes():
    # An unconstrained spec is written as before the fields existed (the checked-in
    # vectors stay valid); a constrained one carries both fields.
    from mlbridge.serdes.protobuf import record_to_proto

    plain = record_to_proto(Header((), TensorSpec("a", ElementType.INT64, (1,))))
    assert not plain.header.advice.HasField("range")
    assert not plain.header.advice.HasField("mask")
    rec = record_to_proto(CONSTRAINED[0])
    assert (rec.header.advice.range.low, rec.header.advice.range.high) == (0, 33)
    assert rec.header.advice.mask == "mask"
    assert rec.header.score.HasField("range") and not rec.header.score.HasField("mask")


# Each dimension within the limit, their product beyond an int64: C++ refused it
# ("too many elements") and Python accepted it (the differential fuzzer's one
# single-fault difference in a header).
@pytest.mark.parametrize("serdes", SERDES_NAMES)
def test_both_sides_reject_a_header_spec_whose_element_count_overflows(tool, serdes):
    header = Header((TensorSpec("a", ElementType.FLOAT, (2**40, 2**40)),), None)
    data = header_bytes(serdes, header)
    with pytest.raises(MalformedInputError, match="too many elements"):
        get_serdes(serdes).decode_stream(data)
    result = decode_with_tool(tool, serdes, data)
    assert result.returncode == 1, result.stdout
    assert b"too many elements" in result.stderr, result.stderr


# A header with a spec above the dimension limit and, after it, a malformed spec: both
# report the malformed one (every spec is read before any limit is checked). C++ used to
# check each spec's limits as it went and reported the limit.
@pytest.mark.parametrize("serdes", SERDES_NAMES)
def test_a_malformed_spec_outranks_an_earlier_spec_above_the_limits(tool, serdes):
    header = Header(
        (
            TensorSpec("huge", ElementType.FLOAT, (2**41,)),
            TensorSpec("bad", ElementType.FLOAT, (1,)),
        ),
        None,
    )

    def unknown_type(rec) -> None:
        rec.header.features[1].type = 99

    data = header_bytes(serdes, header, unknown_type)
    if serdes != "protobuf":
        data = data.replace(
            b'"type":"float","port":0,"shape":[1]', b'"type":"float9","port":0,"shape":[1]'
        )
        assert b"float9" in data
    with pytest.raises(MLBridgeError) as python_error:
        get_serdes(serdes).decode_stream(data)
    assert isinstance(python_error.value, MalformedInputError), python_error.value
    result = decode_with_tool(tool, serdes, data)
    assert result.returncode == 1, result.stdout
    assert b"limit" not in result.stderr and b"bad" in result.stderr, result.stderr


# Found by the differential fuzzer's million-input runs: four inputs each side read
# differently, now read alike.
@pytest.mark.parametrize(
    "serdes, line, words",
    [
        # A duplicate key: orjson and llvm::json keep the last, but C++ checked the first
        # (and still names what it meets first, here the bad port).
        ("bitstream", b'{"features":[{"name":"a","type":"int32_t","port":-1e39,"port":0,'
                      b'"shape":[2]}]}\n', b"'port'"),
        ("json", b'{"features":[{"name":"a","type":"int32_t","port":0,"shape":[2],'
                 b'"shape":[1]}]}\n', b"duplicate key 'shape'"),
        # A message line with a "context" key was a context in C++.
        ("json", b'{"observation":0,"context":"second"}\n', b"context record"),
        # llvm::json reads ".0" as a number.
        ("json", b'{"observation":.0,"tensors":[]}\n', b"starting with '.'"),
    ],
)  # fmt: skip
def test_both_sides_reject_what_the_long_fuzzer_run_found(tool, serdes, line, words):
    with pytest.raises(MalformedInputError):
        get_serdes(serdes).decode_stream(line)
    result = decode_with_tool(tool, serdes, line)
    assert result.returncode == 1, result.stdout
    assert words in result.stderr, result.stderr


def _tag_beyond_32_bits() -> bytes:
    # libprotobuf read the 5-byte tag f1 92 ff ff 7f (> 2^32) as its low 32 bits, an
    # unknown field; upb refuses it.
    message = b"\x08\x02\xf1\x92\xff\xff\x7f" + bytes(8)  # id 2, then the fixed64 field
    record = b"\x1a" + bytes([len(message)]) + message  # Record.observation
    return bytes([len(record)]) + record


def _dynamic_dimension_beyond_int64() -> bytes:
    header = Header(
        (TensorSpec("a", ElementType.INT32, (-1,)), TensorSpec("b", ElementType.FLOAT, (-1, 2))),
        None,
    )
    line = b'{"observation":0,"shapes":{"a":[5],"b":[9223372036854775808,2]}}\n'
    return get_serdes("bitstream").encode_stream([header]) + line + b"\x00" * 7  # a cut short


# Inputs wrong in two ways at once that the long differential runs (seeds 8-11) found the
# two decoders refusing with different error classes: the order of the checks is C++'s.
@pytest.mark.parametrize(
    "serdes, data, error, python_words, cpp_words",
    [
        # A huge dimension and a value beyond double in the same tensor: the shape first.
        ("json", b'{"observation":0,"tensors":[{"name":"t","type":"int64_t",'
                 b'"shape":[9223372036854775807],"data":[1e400]}]}\n',
         LimitExceededError, "dimension 9223372036854775807", b"(MaxDimension)"),
        # C++ reads the tensors in order, each one's shape before its values.
        ("json", b'{"observation":0,"tensors":[{"name":"a","type":"float","shape":[1],'
                 b'"data":[1e400]},{"name":"b","type":"string","shape":[2147483648],'
                 b'"data":[]}]}\n',
         MalformedInputError, "tensor 'a': element 0: value 1e400",
         b"element 0: value 1e400 is out of range"),
        # llvm::json refuses invalid UTF-8 as it parses, before any shape.
        ("json", b'{"observation":0,"tensors":[{"name":"t","type":"string",'
                 b'"shape":[2147483648],"data":["\xff"]}]}\n',
         MalformedInputError, "string element 0 is not valid UTF-8", b"Invalid UTF-8"),
        # C++'s lexical scan refuses a dimension beyond int64 before anything else.
        ("json", b'{"observation":1,"tensors":[{"name":"a","type":"int32_t",'
                 b'"shape":[1099511627777],"data":[]},{"name":"b","type":"int64_t",'
                 b'"shape":[18446744073709551616],"data":[1]}]}\n',
         MalformedInputError, "where an int64 integer is expected",
         b"outside the 64-bit range"),
        ("bitstream", _dynamic_dimension_beyond_int64(), MalformedInputError,
         "where an int64 integer is expected", b"outside the 64-bit range"),
        ("protobuf", _tag_beyond_32_bits(), MalformedInputError,
         "not a valid mlbridge.v1.Record", b"is not a valid mlbridge.v1.Record"),
    ],
    ids=["shape-before-value", "tensors-in-order", "utf8-first", "int64-literal-first",
         "bitstream-int64-literal-first", "protobuf-tag-beyond-32-bits"],
)  # fmt: skip
def test_both_sides_refuse_two_faults_with_the_same_error(
    tool, serdes, data, error, python_words, cpp_words
):
    with pytest.raises(error, match=re.escape(python_words)):
        get_serdes(serdes).decode_stream(data)
    result = decode_with_tool(tool, serdes, data)
    assert result.returncode == 1, result.stdout
    assert cpp_words in result.stderr, result.stderr


def test_an_integer_minus_zero_in_a_float_tensor_is_plus_zero_on_both_sides(tool):
    header = Header((TensorSpec("t", ElementType.FLOAT, (2,)),), None)
    data = get_serdes("json").encode_stream([header]) + (
        b'{"observation":0,"tensors":[{"name":"t","type":"float","shape":[2],"data":[-0,-0.0]}]}\n'
    )
    values = get_serdes("json").decode_stream(data)[-1].tensors[0].array
    assert values.tobytes() == b"\x00\x00\x00\x00\x00\x00\x00\x80"
    result = decode_with_tool(tool, "json", data)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["records"][-1]["message"]["tensors"][0]["raw"] == (
        "0000000000000080"
    )
