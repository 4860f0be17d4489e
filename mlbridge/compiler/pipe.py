"""The model side of LLVM's interactive named-pipe protocol (and mlbridge's superset).

A compiler started with, e.g., ``opt -enable-ml-inliner=release
-inliner-interactive-channel-base=<base>`` (or ``llc -regalloc-enable-priority-advisor=release
-regalloc-priority-interactive-channel-base=<base>``, or mlbridge's ``PipeModelRunner``)
talks to a model through two FIFOs (``docs/pipe-protocol.md``):

- ``<base>.out``, compiler to model: a header line naming every feature and the advice,
  ``{"context":...}`` lines, and one observation record per decision;
- ``<base>.in``, model to compiler: the advice for each observation. With the
  ``bitstream`` SerDes (LLVM's protocol) this is the advice tensor's raw bytes, nothing
  else, unless mlbridge's runner acknowledged ``typed-reply``: then each reply is framed
  with the advice spec, so that the compiler can check it; with ``json`` or
  ``protobuf`` it is an advice message record.

The model opens ``<base>.in`` for writing first, then ``<base>.out`` for reading (the
compiler opens them in the same order, the other way round). Every wait here is bounded:
opening the FIFOs, each read, each write::

    with FifoChannel() as channel, PipeCompilerInterface(channel.base, timeout=30) as ci:
        ...  # start the compiler with channel.base
        while (obs := ci.evaluate()) is not None:
            ci.respond(int(obs["callee_basic_block_count"][0] <= 1))

Nothing here knows a particular advisor: names, types and shapes come from the header.
The FIFOs themselves (making them, opening them, bounded reads and writes) are
:mod:`mlbridge.compiler.fifo`; :class:`FifoChannel` and :func:`remove_stale_channels` are
also importable from here.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from mlbridge._closing import Closing
from mlbridge._files import write_atomically
from mlbridge._process import die_with_parent, killed_by_signal
from mlbridge.compiler.advice_constraints import with_stock_constraints
from mlbridge.compiler.fifo import (
    GYM_PREFIX,
    FifoChannel,
    FifoReader,
    check_channel_folder,
    open_fifo_reader,
    open_fifo_writer,
    remove_stale_channels,
    write_all,
)
from mlbridge.compiler.observation import Observation as SharedObservation
from mlbridge.errors import (
    MLBridgeError,
    PipeClosedError,
    PipeError,
    PipeTimeoutError,
    TruncatedInputError,
)
from mlbridge.serdes import Context, End, Header, Message, MessageKind, SerDes, get_serdes
from mlbridge.serdes.bitstream import encode_values
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import TensorSpec

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "EXTENSIONS",
    "DriveResult",
    "FifoChannel",
    "GYM_PREFIX",
    "Observation",
    "Outcome",
    "PipeCompilerInterface",
    "drive_compiler",
    "remove_stale_channels",
]

#: Seconds to wait for the compiler to open its ends of the FIFOs.
DEFAULT_CONNECT_TIMEOUT = 60.0
#: Seconds to wait for each read (the next record, the rest of a record) or write.
DEFAULT_TIMEOUT = 300.0

#: The extensions of LLVM's protocol this model side understands, announced to the
#: compiler in ``<base>.ext`` (mlbridge's runner then uses them; stock LLVM ignores the
#: file): ``end``, the end-of-session record; ``typed-reply`` (bitstream only), replies
#: framed with their spec so that the compiler can check them.
EXTENSIONS = ("end", "typed-reply")

#: The first bytes of mlbridge's runner's acknowledgement of ``typed-reply``, sent
#: before the header: ``{"extensions":["end","typed-reply"]}``.
_ACK_PREFIX = b'{"extensions":'
#: The longest acknowledgement line read.
_ACK_MAX = 4096

#: The shared policy protocol (:data:`mlbridge.compiler.observation.Policy`), given the
#: pipe's observations (which also carry the header and the outcome).
Policy = Callable[["Observation"], Any]


def _check_timeout(value: float, what: str) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, got {value!r}")
    return value


# -- the compiler interface -------------------------------------------------------------


class Observation(SharedObservation):
    """One observation from the compiler over a pipe: feature name to numpy array.

    The shared :class:`mlbridge.compiler.observation.Observation` (``id``, ``context``,
    ``advice``, ``tensors``, the features in header order), so that one policy serves
    every interface, plus what only the pipe protocol has: the stream header, the decoded
    message and the outcome reported later.

    Attributes:
        id: The observation index the compiler sent (per context).
        context: The current context (LLVM sends the module or function name), or ``None``.
        advice: The header's advice spec, with a stock LLVM advisor's constraints when it is
            one's (:mod:`mlbridge.compiler.advice_constraints`): what answers are checked
            against; ``None`` if the header has none.
        tensors: The features as :class:`~mlbridge.Tensor` objects (``message.tensors``).
        header: The header in force, as the compiler sent it (feature and advice specs).
        message: The decoded message, with its :class:`~mlbridge.Tensor` objects.
        outcome: The score the compiler reported for this observation (the header's
            ``score`` spec, e.g. a reward), once its outcome message has arrived; ``None``
            before that and with compilers that send none (stock LLVM).
    """

    def __init__(
        self,
        message: Message,
        context: str | None,
        header: Header,
        advice: TensorSpec | None = None,
    ) -> None:
        super().__init__(
            message.id, context, header.advice if advice is None else advice, message.tensors
        )
        self.header = header
        self.message = message
        self.outcome: np.ndarray[Any, np.dtype[Any]] | None = None


@dataclass(frozen=True)
class Outcome:
    """The outcome (score, reward) the compiler reported for an earlier observation.

    Attributes:
        context: The context of the observation.
        id: The observation's id within that context.
        score: The score tensor's values (the header's ``score`` spec).
        observation: The observation it belongs to.
    """

    context: str | None
    id: int
    score: np.ndarray[Any, np.dtype[Any]]
    observation: Observation


class PipeCompilerInterface(Closing):
    """The model side of a named-pipe channel to a compiler.

    Args:
        base: The channel base path: the compiler's ``-*-interactive-channel-base``.
        serdes: ``"bitstream"`` (LLVM's protocol: observations in the bitstream layout,
            replies as raw advice bytes), ``"json"`` or ``"protobuf"`` (mlbridge's
            ``PipeModelRunner`` only: records both ways).
        timeout: Seconds each read or write may wait.
        connect_timeout: Seconds to wait for the compiler to open the FIFOs (and for
            them to exist).
        require_end: Whether the compiler ends the session with an end record, so that
            the end of input without one is an error (the compiler crashed) rather than
            the end of the session. mlbridge's ``PipeModelRunner`` sends one; stock
            LLVM never does. ``None`` (default): required with ``json`` and
            ``protobuf``, which only mlbridge's runner speaks, not with ``bitstream``.
        on_outcome: Called with each :class:`Outcome` as it arrives (while
            :meth:`evaluate` waits for the next observation).
        capture: A file (path, or a binary file object that stays the caller's) to tee the
            traffic into: every record the compiler sends, byte for byte, and (with
            ``capture_advice``) each reply as an advice record of the same SerDes (for
            ``bitstream``: ``{"advice":<id>}`` + the raw advice bytes + newline). The
            result is a stream :func:`mlbridge.logs.read_log` reads.
        capture_advice: Whether to capture the replies too; without them a ``bitstream``
            capture is byte-identical to what the compiler wrote.
        typed_replies: With ``bitstream``, announce ``typed-reply``: a compiler that
            acknowledges it (mlbridge's runner; the acknowledgement line precedes the
            header and is not captured) gets each reply framed as
            ``{"advice":<id>,"spec":<advice spec>}`` + the raw bytes + newline, and
            checks it against its advice spec. Stock LLVM ignores the announcement and
            gets raw replies. :attr:`typed_replies` says what was agreed.

    For training, the compiler may report the outcome of an observation later (an
    outcome message with the header's ``score`` spec): it is attached to the observation
    (:attr:`Observation.outcome`), queued for :meth:`outcomes`, and passed to
    ``on_outcome``::

        trajectory = []
        while (obs := ci.evaluate()) is not None:
            action = agent.act(obs)
            ci.respond(action)
            trajectory.append((obs, action))
        rewards = [obs.outcome for obs, _ in trajectory]

    The FIFOs are opened on the first :meth:`evaluate` (or :meth:`connect`); :meth:`close`
    closes them (the owner of the files, e.g. :class:`FifoChannel`, removes them).
    """

    def __init__(
        self,
        base: str | os.PathLike[str],
        serdes: str = "bitstream",
        *,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        capture: str | os.PathLike[str] | BinaryIO | None = None,
        capture_advice: bool = True,
        require_end: bool | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
        typed_replies: bool = True,
    ) -> None:
        self._in_fd = -1
        self._out_fd = -1
        self._reader: FifoReader | None = None
        self._capture: BinaryIO | None = None
        self._own_capture = False
        self.base = Path(base)
        self.in_path = Path(f"{self.base}.in")
        self.out_path = Path(f"{self.base}.out")
        #: Where the extensions this side understands are announced to the compiler.
        self.ext_path = Path(f"{self.base}.ext")
        self._wrote_ext = False
        self.timeout = _check_timeout(timeout, "timeout")
        self.connect_timeout = _check_timeout(connect_timeout, "connect_timeout")
        self._serdes: SerDes = get_serdes(serdes)
        self._raw_replies = self._serdes.name == "bitstream"
        self._announce_typed = self._raw_replies and typed_replies
        self._ack_pending = False
        #: Whether replies are framed (``typed-reply`` announced and acknowledged).
        self.typed_replies = False
        #: The extensions the compiler acknowledged (mlbridge's runner, with
        #: ``typed-reply``); empty for stock LLVM.
        self.compiler_extensions: tuple[str, ...] = ()
        self._spec_json = b""
        self.header: Header | None = None
        self._advice: TensorSpec | None = None
        self.context: str | None = None
        self._pending: Observation | None = None
        self._finished = False
        #: Whether the compiler sent an end record.
        self.ended = False
        self.require_end = self._serdes.name != "bitstream" if require_end is None else require_end
        self._on_outcome = on_outcome
        self._raw_scalar_type: type | None = None
        self._outcomes: list[Outcome] = []
        # Observations of the current context that may still get an outcome (only kept
        # when the header has a score spec).
        self._sent: dict[int, Observation] = {}
        #: Number of observations answered so far.
        self.answered = 0
        self._capture_advice = capture_advice
        if isinstance(capture, (str, os.PathLike)):
            self._capture = open(capture, "wb")  # closed by close()
            self._own_capture = True
        else:
            self._capture = capture

    @property
    def serdes(self) -> str:
        """The SerDes name."""
        return self._serdes.name

    @property
    def connected(self) -> bool:
        """Whether both FIFOs are open."""
        return self._reader is not None

    def connect(self, abort: Callable[[], None] | None = None) -> None:
        """Open ``<base>.in`` for writing, then ``<base>.out`` for reading (bounded).

        Args:
            abort: Called while waiting; raise from it to give up early (e.g. when the
                compiler process has exited).

        Before that it checks that the FIFOs and their folder belong to this user and
        that others may not write them, and announces the extensions it understands in
        ``<base>.ext`` (:data:`EXTENSIONS`; removed by :meth:`close`).

        Raises:
            PipeTimeoutError: If the compiler does not open the FIFOs within
                ``connect_timeout``; the message names the FIFO.
            UntrustedFileError: If a FIFO or the folder belongs to another user or
                others may write it.
        """
        if self._reader is not None:
            return
        check = abort if abort is not None else (lambda: None)
        deadline = time.monotonic() + self.connect_timeout
        try:
            # Only this user's FIFOs, in a folder nobody else may write: another user's
            # process could otherwise pose as the compiler.
            check_channel_folder(self.base)
            # Before opening <base>.out, which the compiler waits for: it reads the
            # announcement once it has opened <base>.out (docs/pipe-protocol.md).
            words = [e for e in EXTENSIONS if e != "typed-reply" or self._announce_typed]
            write_atomically(self.ext_path, ("\n".join(words) + "\n").encode(), 0o600)
            self._wrote_ext = True
            self._ack_pending = self._announce_typed
            self._in_fd = open_fifo_writer(self.in_path, deadline, self.connect_timeout, check)
            # The compiler has opened <base>.in; it opens <base>.out next.
            self._out_fd = open_fifo_reader(self.out_path, deadline, self.connect_timeout, check)
        except BaseException:
            self.close()
            raise
        sink = self._capture.write if self._capture is not None else None
        self._reader = FifoReader(self._out_fd, self.out_path, self.timeout, sink)

    def evaluate(self) -> Observation | None:
        """Wait for the next observation; ``None`` when the compiler ends the session.

        The session ends when the compiler sends an end record, or closes ``<base>.out``
        between records (unless an end record is required: see ``require_end``). Header,
        context and outcome records are absorbed (:attr:`header`, :attr:`context`,
        :attr:`Observation.outcome`).

        Raises:
            PipeTimeoutError: If a read waits longer than ``timeout``.
            PipeClosedError: If the compiler closes the pipe in the middle of a record, or
                without an end record when one is required.
            PipeError: If called while an observation is still unanswered.
            SerDesError: If the compiler sends malformed records.
        """
        if self._pending is not None:
            raise PipeError(
                f"{self.out_path}: observation {self._pending.id} has not been answered; call "
                "respond() before evaluate() (the compiler waits for the advice)"
            )
        if self._finished:
            return None
        if self._reader is None:
            self.connect()
        reader = self._reader
        assert reader is not None
        if self._ack_pending:
            self._ack_pending = False
            self._read_ack(reader)
        decode = self._serdes.decode
        while True:
            start = reader._offset  # noqa: SLF001 (the property's value, without the call)
            try:
                record = decode(reader)
            except TruncatedInputError as e:
                raise PipeClosedError(
                    f"{self.out_path}: the compiler closed the pipe in the middle of a record "
                    f"that started at byte offset {start}: {e}"
                ) from e
            header = self.header
            if (
                type(record) is Message
                and record.kind is MessageKind.OBSERVATION
                and header is not None
            ):  # the usual case first
                obs = self._pending = Observation(record, self.context, header, self._advice)
                if header.score is not None:
                    self._sent[record.id] = obs
                return obs
            if isinstance(record, End):
                self._finished = True
                self.ended = True
                return None
            if record is None:
                self._finished = True
                if self.require_end:
                    raise PipeClosedError(
                        f"{self.out_path}: the compiler closed the pipe without ending the "
                        "session (no end record): it stopped before finishing, e.g. it "
                        "crashed or was killed"
                    )
                return None
            if isinstance(record, Header):
                self._set_header(record)
            elif isinstance(record, Context):
                self.context = record.name
                self._sent.clear()
            elif record.kind is MessageKind.OBSERVATION:
                # Every observation after a header took the usual path above; a
                # self-describing SerDes (json, protobuf) can decode one without it.
                raise PipeError(f"{self.out_path}: observation {record.id} came before any header")
            elif record.kind is MessageKind.OUTCOME:
                self._take_outcome(record)
            else:
                raise PipeError(
                    f"{self.out_path}: unexpected {record.kind.value} message {record.id} from "
                    "the compiler (expected an observation)"
                )

    def _take_outcome(self, record: Message) -> None:
        obs = self._sent.get(record.id)
        if obs is None:
            raise PipeError(
                f"{self.out_path}: an outcome for observation {record.id} of context "
                f"{self.context!r}, which the compiler did not send in this context"
            )
        if len(record.tensors) != 1:
            raise PipeError(
                f"{self.out_path}: the outcome of observation {record.id} holds "
                f"{len(record.tensors)} tensors, expected one (the score)"
            )
        score = record.tensors[0].array
        obs.outcome = score
        outcome = Outcome(self.context, record.id, score, obs)
        self._outcomes.append(outcome)
        if self._on_outcome is not None:
            self._on_outcome(outcome)

    def outcomes(self) -> list[Outcome]:
        """The outcomes that arrived since the last call, in order (and forget them)."""
        taken, self._outcomes = self._outcomes, []
        return taken

    def _read_ack(self, reader: FifoReader) -> None:
        """Read mlbridge's runner's acknowledgement of ``typed-reply``, if it sent one."""
        line = reader.take_line_if(_ACK_PREFIX, _ACK_MAX)
        if line is None:
            return  # stock LLVM: its header comes first, replies stay raw
        try:
            words = json.loads(line)["extensions"]
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise PipeError(
                f"{self.out_path}: the compiler's acknowledgement of the extensions is not "
                f'{{"extensions":[<names>]}}: {line[:200]!r}'
            ) from None
        self.compiler_extensions = tuple(words)
        self.typed_replies = "typed-reply" in words

    def _set_header(self, header: Header) -> None:
        self.header = header
        spec = header.advice
        # A typed reply names the advice as the compiler's header did (no constraints:
        # the compiler compares name, type and shape).
        self._spec_json = spec.to_json() if spec is not None else b""
        if spec is not None:
            # A stock advisor's header does not say what its advice may be; answers
            # outside it crash the compiler or corrupt its output.
            spec = with_stock_constraints(spec, (f.name for f in header.features))
        self._advice = spec
        # respond()'s shortcut: with raw replies, a one-element numeric advice given as
        # its exact numpy scalar type needs no conversion.
        self._raw_scalar_type = None
        if (
            self._raw_replies
            and spec is not None
            and spec.type.itemsize
            and not spec.is_dynamic
            and spec.element_count == 1
            and not spec.has_constraints
        ):
            self._raw_scalar_type = spec.type.numpy_dtype.type

    def _advice_tensor(self, advice: object) -> Tensor:
        assert self.header is not None
        spec = self.header.advice
        if spec is None:
            raise PipeError(f"{self.out_path}: the compiler's header has no advice spec")
        if isinstance(advice, Tensor):
            if advice.name != spec.name or advice.type is not spec.type:
                raise PipeError(
                    f"advice tensor {advice.name!r} ({advice.type.llvm_name}) does not match "
                    f"the advice spec {spec.name!r} ({spec.type.llvm_name})"
                )
            tensor = advice
        elif (
            spec.type.itemsize  # not a string
            and (type(advice) is spec.type.numpy_dtype.type or type(advice) is np.ndarray)
            and advice.dtype == spec.type.numpy_dtype  # type: ignore[attr-defined]
        ):
            # Already exactly the advice type (np.float32(y), an int64 array): no checks
            # to make, and a contiguous copy only if needed.
            tensor = Tensor._trusted(spec.name, spec.type, np.asarray(advice, order="C"))
        else:
            tensor = Tensor(spec.name, spec.type, advice)
        if not spec.matches(tensor.shape):
            if spec.is_dynamic or tensor.size != spec.element_count:
                raise PipeError(
                    f"advice {spec.name!r} has shape {list(tensor.shape)}, the compiler expects "
                    f"{list(spec.shape)}"
                )
            tensor = Tensor._trusted(spec.name, spec.type, tensor.array.reshape(spec.shape))
        if self._raw_replies and spec.is_dynamic:
            raise PipeError(
                f"advice {spec.name!r} has a dynamic shape {list(spec.shape)}: LLVM's raw "
                "reply cannot carry it (use the json or protobuf SerDes)"
            )
        return tensor

    def respond(self, advice: object) -> None:
        """Send the advice for the last observation.

        Args:
            advice: A :class:`~mlbridge.Tensor` named and typed as the header's advice
                spec, or values convertible exactly to its type (a scalar is fine for a
                one-element advice), e.g. ``1`` for the inliner, ``np.float32(w)`` for the
                regalloc priority.

        Raises:
            PipeError: If there is no observation to answer, or the advice does not fit.
            InvalidTensorError: If the values cannot be converted exactly.
            AdviceConstraintError: If the advice violates its spec's constraints (range,
                mask feature: see :mod:`mlbridge.compiler.advice_constraints`); nothing is
                sent.
            PipeClosedError: If the compiler has closed ``<base>.in``.
            PipeTimeoutError: If the compiler does not read it within ``timeout``.
        """
        obs = self._pending
        if obs is None:
            raise PipeError("respond() without an observation: call evaluate() first")
        if type(advice) is self._raw_scalar_type and obs.header is self.header:
            # LLVM's raw reply of a one-element advice given as exactly its numpy type
            # (np.float32(y)): its bytes are the reply, there is nothing to check.
            data = advice.tobytes()  # type: ignore[attr-defined]
        else:
            tensor = self._advice_tensor(advice)
            assert self._advice is not None  # _advice_tensor() checked there is one
            self._advice.check_value(tensor.array, obs)
            if self._raw_replies:
                data = encode_values(tensor)
            else:
                data = self._serdes.encode(Message(MessageKind.ADVICE, obs.id, (tensor,)))
        raw = data
        if self.typed_replies:
            # What the runner checks against its advice spec: see typed_replies.
            data = b'{"advice":%d,"spec":%s}\n%s\n' % (obs.id, self._spec_json, raw)
        write_all(
            self._in_fd, data, self.in_path, self.timeout,
            lambda: f"the advice for observation {obs.id}",
        )  # fmt: skip
        self._pending = None
        self.answered += 1
        if self._capture is not None and self._capture_advice:
            if self._raw_replies:
                data = b'{"advice":%d}\n%s\n' % (obs.id, raw)
            self._capture.write(data)

    def run(self, policy: Policy) -> int:
        """Answer every observation with ``policy(observation)`` until the session ends.

        Returns:
            The number of observations answered.
        """
        count = 0
        while (obs := self.evaluate()) is not None:
            self.respond(policy(obs))
            count += 1
        return count

    def close(self) -> None:
        """Close both FIFOs (idempotent). The compiler then sees the end of its input."""
        for attr in ("_in_fd", "_out_fd"):
            fd = getattr(self, attr)
            if fd >= 0:
                setattr(self, attr, -1)
                os.close(fd)
        if getattr(self, "_wrote_ext", False):
            self._wrote_ext = False
            try:
                self.ext_path.unlink()
            except FileNotFoundError:
                pass
        self._reader = None
        capture = getattr(self, "_capture", None)
        if capture is not None:
            self._capture = None
            if self._own_capture:
                capture.close()
            else:
                capture.flush()

    def __del__(self) -> None:
        self.close()


# -- running a compiler against a policy ----------------------------------------------


@dataclass
class DriveResult:
    """What :func:`drive_compiler` saw.

    Attributes:
        returncode: The compiler's exit code.
        answered: The number of observations answered.
        contexts: The contexts seen, in order of first appearance.
        header: The compiler's header, if it sent one.
    """

    returncode: int
    answered: int
    contexts: list[str] = field(default_factory=list)
    header: Header | None = None


class _NoSession(Exception):
    """The compiler exited with status 0 before opening the channel (``require_session``)."""


def _stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _StderrTee:
    """Copies a compiler's stderr to ours as it arrives, keeping the last bytes for errors."""

    _KEEP = 8192
    _CHUNK = 1 << 16

    def __init__(self, pipe: BinaryIO) -> None:
        self._pipe = pipe
        self._tail = bytearray()
        self._lock = threading.Lock()
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._thread = threading.Thread(
            target=self._run, name="mlbridge-compiler-stderr", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            fd = self._pipe.fileno()
            while chunk := os.read(fd, self._CHUNK):
                with self._lock:
                    self._tail += chunk
                    del self._tail[: -self._KEEP]
                self._forward(chunk)
        except OSError:
            pass
        finally:
            self._pipe.close()

    def _forward(self, chunk: bytes) -> None:
        err = sys.stderr  # looked up each time: a caller may redirect it
        if err is None:
            return
        try:
            err.write(self._decode.decode(chunk))
            err.flush()
        except (OSError, ValueError):
            pass  # our stderr is gone; the tail is still kept for the error message

    def tail(self, lines: int = 20, wait: float = 1.0) -> str:
        """The last ``lines`` lines (after waiting up to ``wait`` s for the end of input)."""
        self._thread.join(wait)
        with self._lock:
            text = bytes(self._tail).decode("utf-8", errors="replace")
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def close(self, wait: float = 5.0) -> None:
        """Wait (bounded) until everything the compiler wrote has been copied."""
        self._thread.join(wait)


def _exited_early(argv0: str, code: int, in_path: Path, has_base: bool, tail: str) -> str:
    """The error of a compiler that exited before opening the channel: the usual causes."""
    causes = []
    if not has_base:
        causes.append(
            "the command has no {base}, so the compiler was never told the channel: put "
            "{base} where its channel option takes the base (e.g. "
            "-inliner-interactive-channel-base={base}, -mlbridge-inline-channel={base})"
        )
    if code == 0:
        causes.append(
            "it finished without asking the model anything: the pipeline has no ML pass "
            "using this channel (check -passes=... and that the ML advisor is enabled, "
            "e.g. -enable-ml-inliner=release or -mlbridge-inline-runner=pipe)"
        )
    else:
        causes.append(
            "the pass plugin did not load or does not define an option "
            "(-load-pass-plugin=$(mlbridge plugin-path llvm) must come first)"
        )
        causes.append("the pipeline has no ML pass using this channel")
        causes.append("an input file is missing or unreadable")
    said = f"; the compiler's stderr ends with:\n{tail}" if tail else "; it wrote nothing on stderr"
    return (
        f"the compiler ({argv0}) exited with code {code} before opening {in_path}. Usual "
        f"causes: {'; '.join(causes)}{said}"
    )


def drive_compiler(
    command: Sequence[str],
    policy: Policy,
    *,
    serdes: str = "bitstream",
    timeout: float = DEFAULT_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    exit_timeout: float = DEFAULT_TIMEOUT,
    deadline: float | None = None,
    max_queries: int | None = None,
    parent: str | os.PathLike[str] | None = None,
    capture: str | os.PathLike[str] | BinaryIO | None = None,
    capture_advice: bool = True,
    require_end: bool | None = None,
    require_session: bool = True,
) -> DriveResult:
    """Run a compiler on a fresh private channel and answer it with ``policy``.

    Every ``{base}`` in ``command`` is replaced by the channel base. The compiler's
    standard input and output are inherited; its stderr is copied to ``sys.stderr`` as it
    comes (and its end quoted if it exits before opening the channel). On any error the
    compiler is terminated (then killed), and the FIFOs and their folder are removed in
    every case. The compiler gets SIGKILL if the thread that calls this dies (Linux's
    parent-death signal, :func:`mlbridge._process.die_with_parent`): a driver that is
    killed leaves no compiler behind.

    Args:
        command: The compiler command line, e.g. ``["opt-22", ...,
            "-inliner-interactive-channel-base={base}", "in.ll"]``.
        policy: Called with each :class:`Observation`; returns the advice.
        serdes: See :class:`PipeCompilerInterface`.
        timeout: Bound of each read and write.
        connect_timeout: Bound of the wait for the compiler to open the FIFOs.
        exit_timeout: Bound of the wait for the compiler to exit after the session.
        parent: Where to make the private channel folder.
        capture: Tee the traffic into this file (see :class:`PipeCompilerInterface`).
        capture_advice: Whether the capture includes the replies.
        require_end: See :class:`PipeCompilerInterface`.
        require_session: With ``False``, a compiler that exits with status 0 without
            opening the channel (its pass had nothing to ask about this input, e.g. a
            module with no function to allocate) is a session of no queries, not an
            error.
        deadline: Bound, in seconds, of the whole session from the compiler's start to
            its exit (``None``: no bound beyond each wait's own); when it runs out the
            compiler is killed, however quick each read was.
        max_queries: The most observations to answer (``None``: no limit); one more
            ends the session, the compiler is killed.

    Raises:
        PipeClosedError: If the compiler exits before opening the FIFOs, or a signal
            kills it (the message names the signal and ends with its stderr).
        PipeTimeoutError: If any wait runs out (including the compiler's exit), or the
            session outlasts ``deadline``.
        PipeError: If the compiler asks more than ``max_queries`` queries.
    """
    exit_timeout = _check_timeout(exit_timeout, "exit_timeout")
    if deadline is not None:
        deadline = _check_timeout(deadline, "deadline")
    if max_queries is not None and max_queries < 0:
        raise ValueError(f"max_queries must be >= 0, got {max_queries}")
    with FifoChannel(parent=parent) as channel:
        argv = [a.replace("{base}", str(channel.base)) for a in command]
        has_base = any("{base}" in a for a in command)
        # The compiler dies with this thread: a driver that is killed would otherwise
        # leave it spinning on the closed FIFOs (stock LLVM's interactive mode
        # busy-loops there) for ever.
        proc = subprocess.Popen(die_with_parent(argv), stderr=subprocess.PIPE)
        assert proc.stderr is not None
        stderr = _StderrTee(proc.stderr)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            if proc.poll() is None:
                proc.kill()

        watchdog = threading.Timer(deadline, expire) if deadline is not None else None
        if watchdog is not None:
            watchdog.daemon = True
            watchdog.start()
        answered = 0
        try:

            def abort() -> None:
                code = proc.poll()
                if code == 0 and not require_session:
                    raise _NoSession
                if code is not None:
                    raise PipeClosedError(
                        _exited_early(argv[0], code, channel.in_path, has_base, stderr.tail())
                    )

            contexts: list[str] = []

            def traced(obs: Observation) -> Any:
                nonlocal answered
                if max_queries is not None and answered >= max_queries:
                    raise PipeError(
                        f"the compiler ({argv[0]}) asked more than max_queries={max_queries} "
                        "queries; the session was ended (raise max_queries if it needs more)"
                    )
                if obs.context is not None and obs.context not in contexts:
                    contexts.append(obs.context)
                advice = policy(obs)
                answered += 1
                return advice

            def ended(error: BaseException | None) -> BaseException | None:
                """The error that explains the end: the deadline, or a signal."""
                if expired.is_set():
                    return PipeTimeoutError(
                        f"the session with the compiler ({argv[0]}) outlasted its deadline of "
                        f"{deadline:g} s after {answered} answered queries; the compiler was "
                        "killed"
                    )
                code = proc.poll()
                if code is None and error is not None:
                    try:  # the read failed as the compiler died: let it finish dying
                        code = proc.wait(1.0)
                    except subprocess.TimeoutExpired:
                        code = None
                if code is not None and code < 0:
                    return PipeClosedError(killed_by_signal(argv[0], code, answered, stderr.tail()))
                return None

            try:
                with PipeCompilerInterface(
                    channel.base,
                    serdes,
                    timeout=timeout,
                    connect_timeout=connect_timeout,
                    capture=capture,
                    capture_advice=capture_advice,
                    require_end=require_end,
                ) as ci:
                    ci.connect(abort)
                    answered = ci.run(traced)
                    header = ci.header
                code = proc.wait(exit_timeout)
            except _NoSession:
                return DriveResult(0, 0)
            except subprocess.TimeoutExpired:
                if (why := ended(None)) is not None:
                    raise why from None
                raise PipeTimeoutError(
                    f"the compiler ({argv[0]}) did not exit within {exit_timeout:g} s after "
                    "the session ended"
                ) from None
            except MLBridgeError as e:
                if (why := ended(e)) is not None:
                    raise why from e
                raise
            if (why := ended(None)) is not None:
                raise why
        finally:
            if watchdog is not None:
                watchdog.cancel()
            _stop(proc, grace=5.0)
            stderr.close()
    return DriveResult(code, answered, contexts, header)
