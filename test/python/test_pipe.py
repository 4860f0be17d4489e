"""The model side of the named-pipe protocol (mlbridge.compiler.pipe).

The compiler side here is a thread that speaks only LLVM's protocol with raw fds, in
LLVM's order (open <base>.in for reading, then <base>.out for writing; header once;
raw advice bytes back). The real opt/llc runs are the lit tests (test/lit/*/*-pipe.test).
"""

from __future__ import annotations

import errno
import io
import os
import select
import shutil
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import orjson
import pytest
from conftest import LLVM_FIXTURE

from mlbridge import InvalidTensorError, MLBridgeError
from mlbridge.compiler.observation import Observation as SharedObservation
from mlbridge.compiler.pipe import (
    FifoChannel,
    Observation,
    Outcome,
    PipeCompilerInterface,
    remove_stale_channels,
)
from mlbridge.errors import PipeClosedError, PipeError, PipeTimeoutError, UntrustedFileError
from mlbridge.serdes import BytesReader, Context, End, Header, Message, MessageKind, get_serdes
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType, TensorSpec

BOUND = 20.0  # generous bound of every wait in these tests (never reached when green)


class FakeCompiler:
    """A compiler side on raw fds: LLVM's open order, bounded waits, run in a thread."""

    def __init__(self, base: Path, script) -> None:
        self.base = base
        self.script = script
        self.error: BaseException | None = None
        self.replies: list[bytes] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.in_fd = -1
        self.out_fd = -1

    def _run(self) -> None:
        try:
            self.in_fd = os.open(f"{self.base}.in", os.O_RDONLY | os.O_NONBLOCK)
            deadline = time.monotonic() + BOUND
            while True:
                try:
                    self.out_fd = os.open(f"{self.base}.out", os.O_WRONLY | os.O_NONBLOCK)
                    break
                except OSError as e:
                    assert e.errno == errno.ENXIO
                    assert time.monotonic() < deadline, "model never opened .out"
                    time.sleep(0.005)
            os.set_blocking(self.out_fd, True)
            self.script(self)
        except BaseException as e:  # reported by join()
            self.error = e
        finally:
            self.close()

    def close(self) -> None:
        for attr in ("in_fd", "out_fd"):
            fd = getattr(self, attr)
            if fd >= 0:
                setattr(self, attr, -1)
                os.close(fd)

    def write(self, data: bytes) -> None:
        os.write(self.out_fd, data)

    def read_reply(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            ready, _, _ = select.select([self.in_fd], [], [], BOUND)
            assert ready, "no reply from the model"
            chunk = os.read(self.in_fd, n - len(data))
            assert chunk, "model closed .in"
            data += chunk
        self.replies.append(data)
        return data

    def start(self) -> FakeCompiler:
        self.thread.start()
        return self

    def join(self) -> None:
        self.thread.join(BOUND)
        assert not self.thread.is_alive(), "fake compiler hung"
        if self.error is not None:
            raise self.error


def split_records(data: bytes, serdes: str = "bitstream") -> list[bytes]:
    """The bytes of each record of a stream."""
    s = get_serdes(serdes)
    reader = BytesReader(data)
    chunks = []
    start = 0
    while s.decode(reader) is not None:
        chunks.append(data[start : reader.offset])
        start = reader.offset
    return chunks


INT = TensorSpec("x", ElementType.INT64, (1,))
VEC = TensorSpec("v", ElementType.FLOAT, (1, 3))
ADVICE = TensorSpec("decision", ElementType.INT64, (1,))
HEADER = Header((INT, VEC), ADVICE)


def observation(i: int) -> Message:
    return Message.observation(
        i,
        [Tensor("x", ElementType.INT64, [i]), Tensor("v", ElementType.FLOAT, [[i, 0.5, -1.0]])],
    )


def stream(*records, serdes: str = "bitstream") -> list[bytes]:
    s = get_serdes(serdes)
    return [s.encode(r) for r in records]


@pytest.fixture
def channel(tmp_path: Path):
    with FifoChannel(parent=tmp_path) as ch:
        yield ch
    assert list(tmp_path.iterdir()) == [], "the private FIFO folder is left behind"


# -- FIFO creation and cleanup ----------------------------------------------------------


def test_channel_makes_private_folder_and_fifos(tmp_path: Path) -> None:
    with FifoChannel(parent=tmp_path) as ch:
        assert ch.directory is not None and ch.directory.parent == tmp_path
        assert stat.S_IMODE(ch.directory.stat().st_mode) == 0o700
        for p in (ch.in_path, ch.out_path):
            st = p.stat()
            assert stat.S_ISFIFO(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        assert ch.in_path.name == "channel.in" and ch.out_path.name == "channel.out"
    assert ch.closed and list(tmp_path.iterdir()) == []


def test_channel_is_removed_when_the_body_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), FifoChannel(parent=tmp_path):
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_channel_close_is_idempotent_and_runs_on_collection(tmp_path: Path) -> None:
    ch = FifoChannel(parent=tmp_path)
    ch.close()
    ch.close()
    FifoChannel(parent=tmp_path)  # dropped at once: the finalizer removes it
    assert list(tmp_path.iterdir()) == []


def test_channel_replaces_stale_fifos_at_an_explicit_base(tmp_path: Path) -> None:
    base = tmp_path / "ch"
    os.mkfifo(f"{base}.in", 0o644)  # left by a crashed run
    with FifoChannel(base) as ch:
        assert stat.S_IMODE(ch.in_path.stat().st_mode) == 0o600
        assert ch.directory is None
    assert list(tmp_path.iterdir()) == []


def test_channel_refuses_to_replace_a_regular_file(tmp_path: Path) -> None:
    base = tmp_path / "ch"
    Path(f"{base}.out").write_text("precious")
    with pytest.raises(PipeError, match=r"ch\.out exists and is not a FIFO"):
        FifoChannel(base)
    assert Path(f"{base}.out").read_text() == "precious"
    assert not Path(f"{base}.in").exists()


def test_channel_folder_is_named_for_its_process(tmp_path: Path) -> None:
    # remove_stale_channels() recognises a crashed process's folder by this name.
    with FifoChannel(parent=tmp_path) as ch:
        assert ch.directory is not None
        assert ch.directory.name.startswith(f"mlbridge-pipe-{os.getpid()}-")
        assert repr(ch) == f"FifoChannel({str(ch.base)!r})"


def test_channel_close_after_its_folder_is_gone_is_quiet(tmp_path: Path) -> None:
    ch = FifoChannel(parent=tmp_path)
    assert ch.directory is not None
    shutil.rmtree(ch.directory)  # e.g. `mlbridge pipe clean` or a tmp cleaner got there first
    ch.close()
    assert ch.closed


@pytest.mark.parametrize("name", ["a/b", ""])
def test_channel_name_must_be_a_plain_file_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^name must be a plain file name, got {name!r}$"):
        FifoChannel(parent=tmp_path, name=name)
    assert list(tmp_path.iterdir()) == []


def test_a_fifo_that_cannot_be_made_is_an_error_naming_it(tmp_path: Path) -> None:
    name = "c" * 300  # longer than a file name may be
    with pytest.raises(PipeError, match=rf"^cannot create FIFO .*/{name}\.in: File name too long$"):
        FifoChannel(parent=tmp_path, name=name)
    assert list(tmp_path.iterdir()) == []


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_private_folders_of_dead_processes_are_removed(tmp_path: Path) -> None:
    stale = tmp_path / f"mlbridge-pipe-{dead_pid()}-abc"
    stale.mkdir(mode=0o700)
    os.mkfifo(stale / "channel.in")
    os.mkfifo(stale / "channel.out")
    alive = tmp_path / f"mlbridge-pipe-{os.getpid()}-xyz"
    alive.mkdir()
    not_only_fifos = tmp_path / f"mlbridge-pipe-{dead_pid()}-keep"
    not_only_fifos.mkdir()
    (not_only_fifos / "data.txt").write_text("x")
    with FifoChannel(parent=tmp_path) as ch:
        assert not stale.exists()
        assert alive.exists() and not_only_fifos.exists()
        assert ch.directory is not None and ch.directory.exists()
    assert remove_stale_channels(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, not_only_fifos.name])


# -- bounded waits ------------------------------------------------------------------------


def test_no_compiler_times_out_naming_the_fifo(channel: FifoChannel) -> None:
    ci = PipeCompilerInterface(channel.base, connect_timeout=0.2, timeout=BOUND)
    with pytest.raises(PipeTimeoutError) as info:
        ci.evaluate()
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, MLBridgeError)
    assert str(channel.in_path) in str(info.value) and "0.2 s" in str(info.value)
    assert not ci.connected


def test_missing_fifo_times_out(tmp_path: Path) -> None:
    with pytest.raises(PipeTimeoutError, match=r"nothere\.in did not appear within 0\.1 s"):
        PipeCompilerInterface(tmp_path / "nothere", connect_timeout=0.1).connect()


def test_a_regular_file_is_not_a_fifo(tmp_path: Path) -> None:
    (tmp_path / "x.in").write_bytes(b"")
    with pytest.raises(PipeError, match=r"x\.in is not a FIFO"):
        PipeCompilerInterface(tmp_path / "x", connect_timeout=BOUND).connect()


def test_abort_callback_stops_the_connect_wait(channel: FifoChannel) -> None:
    def abort() -> None:
        raise PipeClosedError("compiler gone")

    with pytest.raises(PipeClosedError, match="compiler gone"):
        PipeCompilerInterface(channel.base, connect_timeout=BOUND).connect(abort)


def test_stalled_compiler_times_out_naming_what_was_awaited(channel: FifoChannel) -> None:
    release = threading.Event()

    def script(c: FakeCompiler) -> None:
        c.write(stream(HEADER)[0])
        release.wait(BOUND)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=0.2, connect_timeout=BOUND) as ci:
        with pytest.raises(PipeTimeoutError) as info:
            ci.evaluate()
    release.set()
    fake.join()
    msg = str(info.value)
    assert str(channel.out_path) in msg and "0.2 s" in msg and "the next record" in msg
    assert ci.header == HEADER


@pytest.mark.parametrize(
    "timeout", [0, -1, float("nan"), float("inf")], ids=["zero", "negative", "nan", "inf"]
)
def test_timeouts_must_be_positive_and_finite(tmp_path: Path, timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        PipeCompilerInterface(tmp_path / "x", timeout=timeout)


# -- the protocol -----------------------------------------------------------------------


def test_session_with_llvm_layout_and_raw_replies(channel: FifoChannel) -> None:
    def script(c: FakeCompiler) -> None:
        header, ctx, *obs = stream(HEADER, Context("f"), observation(0), observation(1))
        c.write(header + ctx)
        for o in obs:
            c.write(o)
            c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    seen: list[Observation] = []

    def policy(obs: Observation) -> int:
        seen.append(obs)
        return int(obs["x"][0]) + 40

    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.run(policy) == 2
        assert ci.evaluate() is None  # stays finished
    fake.join()
    assert fake.replies == [np.int64(40).tobytes(), np.int64(41).tobytes()]
    assert [o.id for o in seen] == [0, 1] and {o.context for o in seen} == {"f"}
    assert list(seen[1]) == ["x", "v"]
    np.testing.assert_array_equal(seen[1]["v"], np.array([[1, 0.5, -1]], dtype=np.float32))
    assert seen[0].header == HEADER and seen[0].message["x"].type is ElementType.INT64


def test_observations_are_the_one_observation_type_of_every_interface(
    channel: FifoChannel,
) -> None:
    # A policy written against mlbridge.compiler.Observation (what gRPC hands it too) gets
    # the same fields here: id, context, advice, tensors; the pipe adds header and outcome.
    def script(c: FakeCompiler) -> None:
        header, ctx, obs = stream(HEADER, Context("f"), observation(3))
        c.write(header + ctx + obs)
        c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    seen: list[SharedObservation] = []

    def policy(obs: SharedObservation) -> int:
        seen.append(obs)
        return 0

    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.run(policy) == 1
    fake.join()
    (obs,) = seen
    assert isinstance(obs, SharedObservation) and isinstance(obs, Observation)
    assert (obs.id, obs.context, obs.advice) == (3, "f", ADVICE)
    assert [t.name for t in obs.tensors] == ["x", "v"] and obs.tensors[0] is obs.message["x"]
    assert repr(obs) == "Observation(id=3, context='f', features=2, advice='decision')"


def test_llvm22_fixture_replayed_through_a_fifo(channel: FifoChannel) -> None:
    # The bytes stock opt-22 wrote; the replies must be 1,1,1,0,0,1,1 (inline iff
    # callee_basic_block_count <= 1), each the raw int64 with no framing.
    records = split_records(LLVM_FIXTURE.read_bytes())

    def script(c: FakeCompiler) -> None:
        c.write(records[0] + records[1])
        for r in records[2:]:
            c.write(r)
            c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        n = ci.run(lambda obs: int(obs["callee_basic_block_count"][0] <= 1))
        assert ci.header is not None and len(ci.header.features) == 39
        assert ci.context == ""
    fake.join()
    assert n == 7
    assert b"".join(fake.replies) == np.array([1, 1, 1, 0, 0, 1, 1], dtype="<i8").tobytes()


def test_compiler_exiting_mid_observation_names_the_tensor(channel: FifoChannel) -> None:
    def script(c: FakeCompiler) -> None:
        header, obs = stream(HEADER, observation(0))
        c.write(header + obs[: len(obs) - 7])  # inside tensor "v"

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        with pytest.raises(PipeClosedError) as info:
            ci.evaluate()
    fake.join()
    msg = str(info.value)
    assert str(channel.out_path) in msg and "in the middle of a record" in msg
    assert "'v'" in msg


def test_compiler_exiting_mid_header_line(channel: FifoChannel) -> None:
    fake = FakeCompiler(channel.base, lambda c: c.write(b'{"features":[')).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        with pytest.raises(PipeClosedError, match="no terminating newline"):
            ci.evaluate()
    fake.join()


def test_compiler_closing_between_records_ends_the_session(channel: FifoChannel) -> None:
    fake = FakeCompiler(channel.base, lambda c: c.write(stream(HEADER)[0])).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.evaluate() is None
        assert ci.header == HEADER
    fake.join()


def test_compiler_gone_before_the_reply(channel: FifoChannel) -> None:
    def script(c: FakeCompiler) -> None:
        header, obs = stream(HEADER, observation(0))
        c.write(header + obs)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.evaluate() is not None
        fake.join()  # the compiler has closed both ends
        with pytest.raises(PipeClosedError, match=r"advice for observation 0"):
            ci.respond(1)


def test_call_order_is_checked(channel: FifoChannel) -> None:
    def script(c: FakeCompiler) -> None:
        header, obs = stream(HEADER, observation(0))
        c.write(header + obs)
        c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        with pytest.raises(PipeError, match="without an observation"):
            ci.respond(1)
        assert ci.evaluate() is not None
        with pytest.raises(PipeError, match="observation 0 has not been answered"):
            ci.evaluate()
        with pytest.raises(InvalidTensorError, match="expected integer values"):
            ci.respond(1.5)  # a float for int64 advice: never silently truncated
        with pytest.raises(PipeError, match=r"shape \[2\]"):
            ci.respond([1, 2])
        with pytest.raises(PipeError, match="does not match the advice spec"):
            ci.respond(Tensor("other", ElementType.INT64, [1]))
        ci.respond(np.array([[7]]))  # one element, reshaped to [1]
    fake.join()
    assert fake.replies == [np.int64(7).tobytes()]


def test_string_and_bool_features_and_an_end_record(channel: FifoChannel) -> None:
    header = Header(
        (TensorSpec("s", ElementType.STRING, (2,)), TensorSpec("b", ElementType.BOOL, (1,))),
        TensorSpec("p", ElementType.FLOAT, (1,)),
    )
    msg = Message.observation(
        0, [Tensor("s", ElementType.STRING, [b"a\n", b""]), Tensor("b", ElementType.BOOL, [True])]
    )

    def script(c: FakeCompiler) -> None:
        h, o, e = stream(header, msg, End())
        c.write(h + o)
        c.read_reply(4)
        c.write(e)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        obs = ci.evaluate()
        assert obs is not None and list(obs["s"]) == [b"a\n", b""] and obs["b"][0]
        ci.respond(np.float64(0.25))
        assert ci.evaluate() is None
    fake.join()
    assert fake.replies == [np.float32(0.25).tobytes()]


@pytest.mark.parametrize("serdes", ["json", "protobuf"])
def test_self_describing_serdes_reply_with_an_advice_record(
    channel: FifoChannel, serdes: str
) -> None:
    got: list[object] = []

    def script(c: FakeCompiler) -> None:
        header, ctx, obs = stream(HEADER, Context("m"), observation(3), serdes=serdes)
        c.write(header + ctx + obs)
        # Read the reply record (bounded), then close.
        data = b""
        s = get_serdes(serdes)
        while True:
            data += c.read_reply(1)
            try:
                got.append(s.decode(BytesReader(data)))
                break
            except MLBridgeError:
                continue
        c.write(stream(End(), serdes=serdes)[0])  # mlbridge's runner ends the session

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, serdes, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.run(lambda obs: int(obs["x"][0]) * 2) == 1
    fake.join()
    assert got == [Message(MessageKind.ADVICE, 3, (Tensor("decision", ElementType.INT64, [6]),))]


def test_dynamic_advice_cannot_be_a_raw_reply(channel: FifoChannel) -> None:
    header = Header((INT,), TensorSpec("a", ElementType.INT64, (-1,)))

    def script(c: FakeCompiler) -> None:
        h, o = stream(header, Message.observation(0, [Tensor("x", ElementType.INT64, [1])]))
        c.write(h + o)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.evaluate() is not None
        with pytest.raises(PipeError, match="dynamic shape"):
            ci.respond([1, 2])
    fake.join()


# -- mlbridge's extensions: end of session, outcomes, per-request specs ------------------


@pytest.mark.parametrize("serdes", ["json", "protobuf"])
def test_record_serdes_require_an_end_record(channel: FifoChannel, serdes: str) -> None:
    # Only mlbridge's runner speaks json/protobuf, and it always ends with an end record:
    # the end of input without one means the compiler stopped early (crashed).
    fake = FakeCompiler(channel.base, lambda c: c.write(stream(HEADER, serdes=serdes)[0]))
    fake.start()
    with PipeCompilerInterface(channel.base, serdes, timeout=BOUND, connect_timeout=BOUND) as ci:
        with pytest.raises(PipeClosedError, match="without ending the session"):
            ci.evaluate()
        assert not ci.ended
    fake.join()


def test_bitstream_end_record_on_request_and_eof_after_it(channel: FifoChannel) -> None:
    # Stock LLVM never sends an end record: by default a clean EOF ends the session
    # (test_compiler_closing_between_records_ends_the_session); require_end=True is for
    # mlbridge's runner speaking bitstream.
    def script(c: FakeCompiler) -> None:
        header, obs, end = stream(HEADER, observation(0), End())
        c.write(header + obs)
        c.read_reply(8)
        c.write(end)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(
        channel.base, timeout=BOUND, connect_timeout=BOUND, require_end=True
    ) as ci:
        assert ci.run(lambda obs: 1) == 1
        assert ci.ended
        fake.join()  # the compiler has closed: EOF after the end record is fine
        assert ci.evaluate() is None
    fake.join()

    fake = FakeCompiler(channel.base, lambda c: c.write(stream(HEADER)[0])).start()
    with PipeCompilerInterface(
        channel.base, timeout=BOUND, connect_timeout=BOUND, require_end=True
    ) as ci:
        with pytest.raises(PipeClosedError, match=r"channel\.out: .*no end record"):
            ci.evaluate()
    fake.join()


SCORE = TensorSpec("reward", ElementType.FLOAT, (1,))


def outcome(i: int, value: float) -> Message:
    return Message(MessageKind.OUTCOME, i, (Tensor("reward", ElementType.FLOAT, [value]),))


@pytest.mark.parametrize("serdes", ["bitstream", "json"])
def test_outcomes_reach_their_observations(channel: FifoChannel, serdes: str) -> None:
    header = Header((INT, VEC), ADVICE, score=SCORE)

    def script(c: FakeCompiler) -> None:
        s = get_serdes(serdes)
        reply = 8 if serdes == "bitstream" else None
        c.write(s.encode(header) + s.encode(Context("f")) + s.encode(observation(0)))
        read_reply(c, s, reply)
        c.write(s.encode(observation(1)))
        read_reply(c, s, reply)
        # The rewards come once the compiler knows them, here at the end of the context.
        c.write(s.encode(outcome(1, -0.5)) + s.encode(outcome(0, 2.0)))
        c.write(s.encode(Context("g")) + s.encode(observation(0)))
        read_reply(c, s, reply)
        c.write(s.encode(outcome(0, 1.0)) + s.encode(End()))

    seen: list[Outcome] = []
    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(
        channel.base, serdes, timeout=BOUND, connect_timeout=BOUND, on_outcome=seen.append
    ) as ci:
        trajectory = []
        while (obs := ci.evaluate()) is not None:
            assert obs.outcome is None  # not known yet when the decision is made
            ci.respond(int(obs["x"][0]))
            trajectory.append(obs)
        assert ci.ended
        assert [(o.context, o.id, float(o.outcome[0])) for o in trajectory] == [
            ("f", 0, 2.0),
            ("f", 1, -0.5),
            ("g", 0, 1.0),
        ]
        taken = ci.outcomes()
        assert [(o.context, o.id, float(o.score[0])) for o in taken] == [
            ("f", 1, -0.5),
            ("f", 0, 2.0),
            ("g", 0, 1.0),
        ]
        assert taken[0].observation is trajectory[1]
        assert ci.outcomes() == []
        assert seen == taken
    fake.join()


def read_reply(c: FakeCompiler, s, size: int | None) -> None:
    """Read one reply: ``size`` raw bytes, or one record of ``s``."""
    if size is not None:
        c.read_reply(size)
        return
    data = b""
    while True:
        data += c.read_reply(1)
        try:
            if s.decode(BytesReader(data)) is not None:
                return
        except MLBridgeError:
            continue


def test_outcome_for_an_unknown_observation_is_an_error(channel: FifoChannel) -> None:
    header = Header((INT, VEC), ADVICE, score=SCORE)

    def script(c: FakeCompiler) -> None:
        h, o, bad = stream(header, observation(0), outcome(5, 1.0))
        c.write(h + o)
        c.read_reply(8)
        c.write(bad)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.evaluate() is not None
        ci.respond(0)
        with pytest.raises(PipeError, match="outcome for observation 5"):
            ci.evaluate()
    fake.join()


def test_outcome_of_two_tensors_is_an_error_naming_the_count(channel: FifoChannel) -> None:
    header = Header((INT, VEC), ADVICE, score=SCORE)
    two = Message(
        MessageKind.OUTCOME,
        0,
        (Tensor("reward", ElementType.FLOAT, [1.0]), Tensor("extra", ElementType.FLOAT, [2.0])),
    )

    def script(c: FakeCompiler) -> None:
        s = get_serdes("json")
        c.write(s.encode(header) + s.encode(observation(0)))
        read_reply(c, s, None)
        c.write(s.encode(two))

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, "json", timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.evaluate() is not None
        ci.respond(0)
        with pytest.raises(
            PipeError, match=r"outcome of observation 0 holds 2 tensors, expected one \(the score\)"
        ):
            ci.evaluate()
    fake.join()


def test_a_new_header_mid_stream_changes_the_specs(channel: FifoChannel) -> None:
    other = Header((TensorSpec("y", ElementType.INT32, (2,)),), ADVICE)

    def script(c: FakeCompiler) -> None:
        o2 = Message.observation(1, [Tensor("y", ElementType.INT32, [3, 4])])
        h1, o1, h2, o2 = stream(HEADER, observation(0), other, o2)
        c.write(h1 + o1)
        c.read_reply(8)
        c.write(h2 + o2)
        c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        first = ci.evaluate()
        assert first is not None and list(first) == ["x", "v"]
        ci.respond(0)
        second = ci.evaluate()
        assert second is not None and second.header == other
        assert list(second) == ["y"] and list(second["y"]) == [3, 4]
        ci.respond(int(second["y"].sum()))
        assert ci.evaluate() is None
    fake.join()
    assert fake.replies[1] == np.int64(7).tobytes()


# -- trust: nothing another user controls ----------------------------------------------------


def _nobody() -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def test_channel_refuses_an_explicit_base_in_a_folder_others_may_write(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp
    with pytest.raises(UntrustedFileError, match=r"others may write it \(mode 1777\).*private"):
        FifoChannel(shared / "ch")
    assert list(shared.iterdir()) == []


def test_interface_refuses_fifos_of_another_user(channel: FifoChannel) -> None:
    assert os.geteuid() == 0, "chown needs root"
    uid, gid = _nobody()
    for fifo in (channel.in_path, channel.out_path):
        os.chown(fifo, uid, gid)  # made by a process of user nobody
        ci = PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND)
        with pytest.raises(UntrustedFileError, match=r"channel\.in: it belongs to user 'nobody'"):
            ci.connect()
        assert not ci.ext_path.exists()


def test_interface_refuses_a_channel_folder_of_another_user(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.mkfifo(folder / "ch.in", 0o600)
    os.mkfifo(folder / "ch.out", 0o600)
    uid, gid = _nobody()
    os.chown(folder, uid, gid)
    ci = PipeCompilerInterface(folder / "ch", timeout=BOUND, connect_timeout=0.2)
    with pytest.raises(UntrustedFileError, match=r"theirs: it belongs to user 'nobody'"):
        ci.connect()


def test_interface_announces_its_extensions_until_closed(channel: FifoChannel) -> None:
    seen: list[str] = []

    def script(c: FakeCompiler) -> None:
        # The announcement exists once the model has opened <base>.out.
        seen.append(Path(f"{c.base}.ext").read_text())
        c.write(b"".join(stream(HEADER, observation(0))))
        c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.evaluate() is not None
        ci.respond(1)
        assert ci.evaluate() is None
        assert stat.S_IMODE(ci.ext_path.stat().st_mode) == 0o600
    fake.join()
    assert seen == ["end\ntyped-reply\n"]
    assert not Path(f"{channel.base}.ext").exists()


def typed_frame(i: int, raw: bytes) -> bytes:
    """A typed-reply frame for the advice spec ``ADVICE``: what the C++ runner reads."""
    return b'{"advice":%d,"spec":%s}\n%s\n' % (i, ADVICE.to_json(), raw)


def test_typed_replies_once_the_compiler_acknowledges_them(channel: FifoChannel) -> None:
    ack = b'{"extensions":["end","typed-reply"]}\n'
    records = stream(HEADER, Context("f"), observation(0), observation(1), End())

    def script(c: FakeCompiler) -> None:
        c.write(ack + records[0] + records[1] + records[2])
        c.read_reply(len(typed_frame(0, bytes(8))))
        c.write(records[3])
        c.read_reply(len(typed_frame(1, bytes(8))))
        c.write(records[4])

    fake = FakeCompiler(channel.base, script).start()
    capture = io.BytesIO()
    with PipeCompilerInterface(
        channel.base, timeout=BOUND, connect_timeout=BOUND, capture=capture
    ) as ci:
        obs = ci.evaluate()
        assert obs is not None and ci.typed_replies
        assert ci.compiler_extensions == ("end", "typed-reply")
        ci.respond(np.int64(7))  # the raw fast path, framed too
        assert ci.evaluate() is not None
        ci.respond(8)
        assert ci.evaluate() is None and ci.ended
    fake.join()
    assert fake.replies == [
        typed_frame(0, np.int64(7).tobytes()),
        typed_frame(1, np.int64(8).tobytes()),
    ]
    # The acknowledgement is the pipe's negotiation, not a record: never captured;
    # the replies are captured as the SerDes' advice messages.
    data = capture.getvalue()
    assert not data.startswith(b'{"extensions"')
    assert b'{"advice":0}\n' + np.int64(7).tobytes() + b"\n" in data
    s, reader, kinds = get_serdes("bitstream"), BytesReader(data), []
    while (record := s.decode(reader)) is not None:
        kinds.append(getattr(record, "kind", type(record).__name__))
    assert kinds == [
        "Header", "Context", MessageKind.OBSERVATION, MessageKind.ADVICE,
        MessageKind.OBSERVATION, MessageKind.ADVICE, "End",
    ]  # fmt: skip


def test_raw_replies_without_an_acknowledgement(channel: FifoChannel) -> None:
    # Stock LLVM sends no acknowledgement: its header comes first, replies stay raw.
    def script(c: FakeCompiler) -> None:
        c.write(b"".join(stream(HEADER, observation(0))))
        c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.evaluate() is not None
        assert not ci.typed_replies and ci.compiler_extensions == ()
        ci.respond(5)
        assert ci.evaluate() is None
    fake.join()
    assert fake.replies == [np.int64(5).tobytes()]


def test_typed_replies_can_be_left_unannounced(channel: FifoChannel) -> None:
    seen: list[str] = []

    def script(c: FakeCompiler) -> None:
        seen.append(Path(f"{c.base}.ext").read_text())
        c.write(b"".join(stream(HEADER, observation(0))))
        c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(
        channel.base, timeout=BOUND, connect_timeout=BOUND, typed_replies=False
    ) as ci:
        assert ci.evaluate() is not None
        ci.respond(5)
        assert ci.evaluate() is None
    fake.join()
    assert seen == ["end\n"]


def test_a_malformed_acknowledgement_is_an_error(channel: FifoChannel) -> None:
    def script(c: FakeCompiler) -> None:
        c.write(b'{"extensions":"typed-reply"}\n' + b"".join(stream(HEADER, observation(0))))

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        with pytest.raises(PipeError, match="acknowledgement of the extensions"):
            ci.evaluate()
    fake.join()


def test_stale_folders_with_an_announcement_are_removed(tmp_path: Path) -> None:
    stale = tmp_path / f"mlbridge-pipe-{dead_pid()}-ext"
    stale.mkdir(mode=0o700)
    os.mkfifo(stale / "channel.in")
    (stale / "channel.ext").write_text("end\n")
    assert remove_stale_channels(tmp_path) == [stale]


def test_poll_timeouts_are_whole_milliseconds_and_at_least_one():
    from mlbridge.compiler.fifo import _poll_ms

    now = time.monotonic()
    assert 1990 <= _poll_ms(now + 2.0) <= 2000
    assert _poll_ms(now + 1e-7) == 1  # a partial millisecond is waited, not skipped
    assert _poll_ms(now - 10.0) == 1


# -- the forms advice may take ---------------------------------------------------------


def one_reply(channel: FifoChannel, serdes: str, header: Header, advice) -> bytes:
    """The bytes the compiler reads after one observation answered with ``advice``."""
    got: list[bytes] = []

    def script(c: FakeCompiler) -> None:
        s = get_serdes(serdes)
        c.write(s.encode(header) + s.encode(observation(0)))
        if serdes == "bitstream":
            got.append(c.read_reply(8))
        else:
            data = b""
            while not data.endswith(b"\n"):
                data += c.read_reply(1)
            got.append(data)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(
        channel.base, serdes, timeout=BOUND, connect_timeout=BOUND, typed_replies=False
    ) as ci:
        assert ci.evaluate() is not None
        ci.respond(advice)
    fake.join()
    return got[0]


@pytest.mark.parametrize(
    "advice",
    [
        Tensor("decision", ElementType.INT64, [7]),
        np.array([7], dtype=np.int64),
        np.int64(7),
        7,
    ],
    ids=["tensor", "exact-array", "exact-scalar", "int"],
)
def test_each_form_of_advice_sends_the_specs_name_type_and_value(channel, advice):
    reply = one_reply(channel, "json", HEADER, advice)
    assert orjson.loads(reply) == {
        "advice": 0,
        "tensors": [{"name": "decision", "type": "int64_t", "shape": [1], "data": [7]}],
    }


def test_a_raw_reply_is_the_values_bytes(channel):
    assert one_reply(channel, "bitstream", HEADER, Tensor("decision", "int64_t", [7])) == (
        struct.pack("<q", 7)
    )


@pytest.mark.parametrize(
    "advice",
    [Tensor("other", ElementType.INT64, [7]), Tensor("decision", ElementType.INT32, [7])],
    ids=["name", "type"],
)
def test_an_advice_tensor_that_is_not_the_specs_is_an_error_naming_both(channel, advice):
    def script(c: FakeCompiler) -> None:
        c.write(b"".join(stream(HEADER, observation(0))))

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.evaluate() is not None
        with pytest.raises(
            PipeError,
            match=rf"^advice tensor '{advice.name}' \({advice.type.llvm_name}\) does not match "
            r"the advice spec 'decision' \(int64_t\)$",
        ):
            ci.respond(advice)
    fake.join()


def test_a_dynamic_advice_cannot_go_as_a_raw_reply(channel):
    header = Header((INT, VEC), TensorSpec("decision", ElementType.INT64, (-1,)))

    def script(c: FakeCompiler) -> None:
        c.write(b"".join(stream(header, observation(0))))

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(
        channel.base, timeout=BOUND, connect_timeout=BOUND, typed_replies=False
    ) as ci:
        assert ci.evaluate() is not None
        with pytest.raises(
            PipeError,
            match=r"^advice 'decision' has a dynamic shape \[-1\]: LLVM's raw reply cannot "
            r"carry it \(use the json or protobuf SerDes\)$",
        ):
            ci.respond([1, 2])
    fake.join()


def test_an_observation_carries_its_context_and_the_constrained_advice_spec(channel):
    stock = Header((INT, VEC), TensorSpec("inlining_decision", ElementType.INT64, (1,)))

    def script(c: FakeCompiler) -> None:
        c.write(b"".join(stream(stock, Context("f"), observation(0))))
        c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(
        channel.base, timeout=BOUND, connect_timeout=BOUND, typed_replies=False
    ) as ci:
        obs = ci.evaluate()
        assert obs.context == "f"
        assert obs.advice.name == "inlining_decision"
        assert obs.advice.valid_range == (0, 2)  # the stock inliner's, not in its header
        assert obs.header.advice.valid_range is None
        ci.respond(1)
    fake.join()


# -- what a session leaves: counts, captures, errors that say where ---------------------


def test_answered_counts_each_reply_once(channel: FifoChannel) -> None:
    def script(c: FakeCompiler) -> None:
        header, first, second = stream(HEADER, observation(0), observation(1))
        c.write(header + first)
        c.read_reply(8)
        c.write(second)
        c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.answered == 0
        assert ci.evaluate() is not None
        ci.respond(1)
        assert ci.answered == 1
        assert ci.evaluate() is not None
        ci.respond(1)
        assert ci.answered == 2
    fake.join()


def test_a_record_cut_short_names_the_offset_it_started_at(channel: FifoChannel) -> None:
    header, first, second = stream(HEADER, observation(0), observation(1))

    def script(c: FakeCompiler) -> None:
        c.write(header + first)
        c.read_reply(8)
        c.write(second[:-5])

    fake = FakeCompiler(channel.base, script).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        ci.evaluate()
        ci.respond(1)
        with pytest.raises(
            PipeClosedError,
            match=rf"the compiler closed the pipe in the middle of a record that started at "
            rf"byte offset {len(header) + len(first)}: ",
        ):
            ci.evaluate()
    fake.join()


def test_an_end_without_an_end_record_says_the_compiler_stopped_early(channel) -> None:
    fake = FakeCompiler(channel.base, lambda c: c.write(stream(HEADER, serdes="json")[0]))
    fake.start()
    with PipeCompilerInterface(channel.base, "json", timeout=BOUND, connect_timeout=BOUND) as ci:
        with pytest.raises(PipeClosedError) as error:
            ci.evaluate()
    fake.join()
    assert str(error.value) == (
        f"{channel.out_path}: the compiler closed the pipe without ending the session (no end "
        "record): it stopped before finishing, e.g. it crashed or was killed"
    )


def test_an_observation_before_any_header_is_an_error(channel: FifoChannel) -> None:
    fake = FakeCompiler(channel.base, lambda c: c.write(stream(observation(3), serdes="json")[0]))
    fake.start()
    with PipeCompilerInterface(channel.base, "json", timeout=BOUND, connect_timeout=BOUND) as ci:
        with pytest.raises(PipeError, match=r"observation 3 came before any header$"):
            ci.evaluate()
    fake.join()


def test_a_header_without_an_advice_spec_is_taken_and_advice_to_it_refused(channel) -> None:
    fake = FakeCompiler(
        channel.base, lambda c: c.write(b"".join(stream(Header((INT, VEC), None), observation(0))))
    ).start()
    with PipeCompilerInterface(channel.base, timeout=BOUND, connect_timeout=BOUND) as ci:
        assert ci.evaluate() is not None
        with pytest.raises(PipeError, match="the compiler's header has no advice spec"):
            ci.respond(1)
    fake.join()


def captured_session(channel: FifoChannel, capture) -> bytes:
    """Run a one-query session capturing into ``capture``, close twice; the bytes sent."""
    records = b"".join(stream(HEADER, observation(0)))

    def script(c: FakeCompiler) -> None:
        c.write(records)
        c.read_reply(8)

    fake = FakeCompiler(channel.base, script).start()
    ci = PipeCompilerInterface(
        channel.base, timeout=BOUND, connect_timeout=BOUND, capture=capture, typed_replies=False
    )
    ci.evaluate()
    ci.respond(1)
    ci.close()
    ci.close()  # idempotent
    fake.join()
    return records + b'{"advice":0}\n' + struct.pack("<q", 1) + b"\n"


def test_a_capture_file_is_complete_once_the_interface_is_closed(channel, tmp_path_factory):
    path = tmp_path_factory.mktemp("capture") / "session.log"
    expected = captured_session(channel, path)
    assert path.read_bytes() == expected


def test_a_callers_capture_stream_is_flushed_not_closed(channel, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("capture") / "session.log"
    raw = io.FileIO(path, "w")
    buffered = io.BufferedWriter(raw, buffer_size=1 << 20)
    expected = captured_session(channel, buffered)
    assert not buffered.closed  # the caller's, to close
    assert path.read_bytes() == expected
    buffered.close()


def test_a_compilers_stderr_tail_drops_trailing_blank_lines_and_keeps_indentation() -> None:
    from mlbridge.compiler.pipe import _StderrTee

    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"  indented\nlast\n\n\n")
    os.close(write_fd)
    with open(read_fd, "rb", buffering=0) as pipe:
        tee = _StderrTee(pipe)
        assert tee.tail(wait=BOUND) == "  indented\nlast"
        assert tee.tail(lines=1) == "last"
        tee.close()
