"""Reading logged compiler traffic (mlbridge.logs) and capturing it (pipe capture=)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import LLVM_FIXTURE, VECTORS

from mlbridge.compiler.pipe import drive_compiler
from mlbridge.errors import MalformedInputError, TruncatedInputError
from mlbridge.logs import detect_serdes, iter_records, read_log
from mlbridge.serdes import Context, End, Header, Message, MessageKind, get_serdes
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType, TensorSpec

MODULE = VECTORS / "llvm22" / "inline-sample.ll"
BOUND = 60.0
KNOWN_BBS = [1, 1, 1, 13, 4, 1, 1]


def opt_command(tmp_path):
    return [
        "opt-22", "-S", "-passes=default<O2>", "-enable-ml-inliner=release",
        "-inliner-interactive-channel-base={base}", "-inliner-interactive-include-default",
        str(MODULE), "-o", str(tmp_path / "out.ll"),
    ]  # fmt: skip


def inline_small(obs):
    return int(obs["callee_basic_block_count"][0] <= 1)


def test_reads_the_llvm22_fixture_per_context():
    log = read_log(LLVM_FIXTURE)
    assert log.serdes == "bitstream" and not log.ended
    assert [c.name for c in log.contexts] == [""]
    ctx = log.context("")
    assert len(ctx) == 7 and [s.id for s in ctx.steps] == list(range(7))
    assert len(log.header.features) == 39
    stacked = ctx.stacked()
    assert list(stacked) == [s.name for s in log.header.features]
    assert all(a.shape == (7, 1) and a.dtype == np.int64 for a in stacked.values())
    assert stacked["callee_basic_block_count"].ravel().tolist() == KNOWN_BBS
    assert ctx.observations[3]["callee_basic_block_count"].tolist() == [13]
    # Stock LLVM's stream carries no replies.
    assert ctx.stacked_advice() is None and ctx.steps[0].advice is None
    np.testing.assert_array_equal(log.stacked()["inlining_default"], stacked["inlining_default"])


@pytest.mark.parametrize("name", ["session", "llvm_layout", "dynamic_shapes", "header_replaced"])
def test_the_three_formats_read_alike(name):
    logs = {s: read_log(VECTORS / f"{name}.{s}") for s in ("bitstream", "json", "protobuf")}
    assert {s: log.serdes for s, log in logs.items()} == {s: s for s in logs}
    ref = logs["bitstream"]
    for log in logs.values():
        assert [c.name for c in log.contexts] == [c.name for c in ref.contexts]
        assert log.ended == ref.ended
        for c, rc in zip(log.contexts, ref.contexts, strict=True):
            assert c.header == rc.header
            assert [s.id for s in c.steps] == [s.id for s in rc.steps]
            for s, rs in zip(c.steps, rc.steps, strict=True):
                assert s.observation.keys() == rs.observation.keys()
                for k in s.observation:
                    np.testing.assert_array_equal(s.observation[k], rs.observation[k])


def _stream(serdes: str) -> bytes:
    header = Header(
        (TensorSpec("a", ElementType.INT64, (2,)), TensorSpec("b", ElementType.FLOAT, (1,))),
        advice=TensorSpec("d", ElementType.INT64, (1,)),
        score=TensorSpec("reward", ElementType.FLOAT, (1,)),
    )

    def obs(i: int) -> Message:
        return Message.observation(
            i,
            [Tensor("a", ElementType.INT64, [i, 2 * i]), Tensor("b", ElementType.FLOAT, [i / 2])],
        )

    def msg(kind: MessageKind, i: int, name: str, t: ElementType, v: object) -> Message:
        return Message(kind, i, (Tensor(name, t, [v]),))

    records = [
        header,
        Context("f"),
        obs(0),
        msg(MessageKind.ADVICE, 0, "d", ElementType.INT64, 1),
        msg(MessageKind.OUTCOME, 0, "reward", ElementType.FLOAT, 0.5),
        obs(1),
        msg(MessageKind.ADVICE, 1, "d", ElementType.INT64, 0),
        msg(MessageKind.OUTCOME, 1, "reward", ElementType.FLOAT, -1.5),
        Context("g"),
        obs(0),
        Context("f"),
        obs(0),
        End(),
    ]
    return get_serdes(serdes).encode_stream(records)


@pytest.mark.parametrize("serdes", ["bitstream", "json", "protobuf"])
def test_advice_and_outcomes_attach_to_their_observation(serdes):
    data = _stream(serdes)
    assert detect_serdes(data) == serdes
    log = read_log(data)
    assert log.ended and [c.name for c in log.contexts] == ["f", "g", "f"]
    f = log.contexts[0]
    assert f.stacked()["a"].tolist() == [[0, 0], [1, 2]]
    assert f.stacked()["b"].dtype == np.float32
    assert f.stacked_advice().tolist() == [[1], [0]]
    assert f.stacked_outcomes().tolist() == [[0.5], [-1.5]]
    # A context named twice is merged on request; steps without advice stack to None.
    merged = log.context("f")
    assert [s.id for s in merged.steps] == [0, 1, 0]
    assert merged.stacked_advice() is None
    assert log.stacked()["a"].shape == (4, 2)
    with pytest.raises(KeyError):
        log.context("nope")


def test_advice_for_an_unknown_observation_is_an_error():
    header = Header(
        (TensorSpec("a", ElementType.INT64, (1,)),), advice=TensorSpec("d", ElementType.INT64, (1,))
    )
    data = get_serdes("bitstream").encode_stream(
        [
            header,
            Context("f"),
            Message(MessageKind.ADVICE, 4, (Tensor("d", ElementType.INT64, [1]),)),
        ]
    )
    with pytest.raises(MalformedInputError, match="advice message 4 in context 'f'"):
        read_log(data)


def test_a_truncated_log_names_the_offset():
    data = LLVM_FIXTURE.read_bytes()[:-100]
    with pytest.raises(TruncatedInputError, match="byte offset"):
        read_log(data)
    # The records before the damage can still be had one by one.
    it = iter_records(data)
    assert isinstance(next(it), Header)


def test_capturing_stock_opt_reproduces_the_fixture_byte_for_byte(tmp_path):
    capture = tmp_path / "opt.rawlog"
    result = drive_compiler(
        opt_command(tmp_path), inline_small, timeout=BOUND, connect_timeout=BOUND,
        exit_timeout=BOUND, capture=capture, capture_advice=False, parent=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0 and result.answered == 7
    assert capture.read_bytes() == LLVM_FIXTURE.read_bytes()


def test_a_capture_with_replies_reads_back_as_training_data(tmp_path):
    buf = io.BytesIO()  # a file object stays the caller's: flushed, not closed
    result = drive_compiler(
        opt_command(tmp_path), inline_small, timeout=BOUND, connect_timeout=BOUND,
        exit_timeout=BOUND, capture=buf, parent=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0 and not buf.closed
    log = read_log(buf.getvalue())
    assert log.serdes == "bitstream" and len(log) == 7
    assert log.stacked()["callee_basic_block_count"].ravel().tolist() == KNOWN_BBS
    assert log.stacked_advice().ravel().tolist() == [int(b <= 1) for b in KNOWN_BBS]
    # Without the advice records the same capture is exactly LLVM's stream.
    records = [r for r in iter_records(buf.getvalue()) if not (
        isinstance(r, Message) and r.kind is MessageKind.ADVICE)]  # fmt: skip
    assert get_serdes("bitstream").encode_stream(records) == LLVM_FIXTURE.read_bytes()


def test_capture_of_a_large_observation_is_byte_exact(tmp_path):
    """A tensor larger than the read chunk bypasses the line buffer; the capture still
    gets every byte in order. The compiler side is a thread on raw fds (LLVM's order)."""
    import os
    import threading
    import time

    from mlbridge.compiler.pipe import FifoChannel, PipeCompilerInterface

    n = 100_003  # floats: ~400 KB, several pipe buffers
    x = np.arange(n, dtype=np.float32) / 7
    header = Header(
        (TensorSpec("x", ElementType.FLOAT, (n,)),), advice=TensorSpec("y", ElementType.FLOAT, (1,))
    )
    sent = get_serdes("bitstream").encode_stream(
        [header, Context("big"), Message.observation(0, [Tensor("x", ElementType.FLOAT, x)])]
    )
    replies: list[bytes] = []
    errors: list[BaseException] = []

    def compiler(base):
        try:
            in_fd = os.open(f"{base}.in", os.O_RDONLY | os.O_NONBLOCK)
            deadline = time.monotonic() + BOUND
            while True:
                try:
                    out_fd = os.open(f"{base}.out", os.O_WRONLY)
                    break
                except OSError:
                    assert time.monotonic() < deadline
                    time.sleep(0.005)
            os.write(out_fd, sent)  # blocking: the model reads as it goes
            os.set_blocking(in_fd, True)
            replies.append(os.read(in_fd, 4))
            os.close(out_fd)
            os.close(in_fd)
        except BaseException as e:
            errors.append(e)

    capture = tmp_path / "big.bitstream"
    with FifoChannel(parent=tmp_path) as ch:
        t = threading.Thread(target=compiler, args=(ch.base,), daemon=True)
        t.start()
        with PipeCompilerInterface(
            ch.base, timeout=BOUND, connect_timeout=BOUND, capture=capture
        ) as ci:
            obs = ci.evaluate()
            np.testing.assert_array_equal(obs["x"], x)
            ci.respond(np.float32(1.5))
            t.join(BOUND)
            assert ci.evaluate() is None
    assert not errors and replies == [np.float32(1.5).tobytes()]
    advice = b'{"advice":0}\n' + np.float32(1.5).tobytes() + b"\n"
    assert capture.read_bytes() == sent + advice
    log = read_log(capture)
    np.testing.assert_array_equal(log.context("big").stacked()["x"][0], x)
    assert log.stacked_advice().tolist() == [[1.5]]
