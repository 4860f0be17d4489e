from conftest import LLVM_FIXTURE

from mlbridge import ElementType
from mlbridge.serdes import Context, Header, Message, MessageKind, get_serdes

DATA = LLVM_FIXTURE.read_bytes()


def decode():
    return get_serdes("bitstream").decode_stream(DATA)


def test_llvm22_log_has_header_context_and_seven_observations():
    records = decode()
    assert isinstance(records[0], Header)
    assert records[1] == Context("")
    assert [type(r) for r in records[2:]] == [Message] * 7
    assert [r.id for r in records[2:]] == list(range(7))
    assert all(r.kind is MessageKind.OBSERVATION for r in records[2:])


def test_llvm22_header_lists_39_int64_features_and_the_advice():
    header = decode()[0]
    assert len(header.features) == 39
    assert all(s.type is ElementType.INT64 and s.shape == (1,) for s in header.features)
    assert header.features[-1].name == "inlining_default"
    assert header.advice is not None and header.advice.name == "inlining_decision"
    assert header.score is None


def test_llvm22_observations_hold_the_features_the_model_answered():
    # The model answered 1,1,1,0,0,1,1: inline iff callee_basic_block_count <= 1.
    answers = [int(m["callee_basic_block_count"].array[0] <= 1) for m in decode()[2:]]
    assert answers == [1, 1, 1, 0, 0, 1, 1]


def test_llvm22_log_re_encodes_to_the_identical_bytes():
    assert get_serdes("bitstream").encode_stream(decode()) == DATA
