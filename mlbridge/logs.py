"""Reading logged compiler traffic into numpy arrays, per context, for training.

A *log* is any stream of mlbridge records (``docs/serialization.md``): what a compiler
wrote on an interactive pipe, captured to a file (e.g. LLVM 22's ``<base>.out`` bytes, as
in ``test/vectors/llvm22/llvm22-opt-inliner-interactive.rawlog``), a capture made by the
model side (:class:`mlbridge.compiler.pipe.PipeCompilerInterface` with ``capture=``,
which adds the replies as advice records), or any ``bitstream``, ``json`` or ``protobuf``
stream. LLVM's development-mode training log (``-training-log=``, not available in release
builds such as Debian's) uses the same bitstream layout, with ``outcome`` records for the
reward, and reads the same way.

    >>> log = read_log("capture.bitstream")
    >>> for ctx in log.contexts:
    ...     batch = ctx.stacked()          # feature name -> array of shape (steps, *shape)
    ...     advice = ctx.stacked_advice()  # shape (steps, *advice_shape), if captured

Each observation becomes a :class:`Step`; an advice or outcome record with the same id in
the same context is attached to it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlbridge.errors import MalformedInputError, UnknownFeatureError
from mlbridge.serdes import BytesReader, Context, End, Header, Message, MessageKind, get_serdes
from mlbridge.serdes.records import Record

__all__ = ["ContextLog", "Step", "TrainingLog", "detect_serdes", "iter_records", "read_log"]

Array = np.ndarray[Any, np.dtype[Any]]


class _Features(dict[str, Array]):
    """Feature name to array; a name it does not hold is an error listing the names."""

    def __missing__(self, name: str) -> Array:
        raise UnknownFeatureError(name, self)


@dataclass
class Step:
    """One decision: the observation, and the advice and outcome when the log has them.

    Attributes:
        id: The observation id (per context).
        observation: Feature name to array, in header order.
        advice: The advice tensor's array, or ``None``.
        outcome: The outcome (score) tensor's array, or ``None``.
    """

    id: int
    observation: dict[str, Array]
    advice: Array | None = None
    outcome: Array | None = None


@dataclass
class ContextLog:
    """The steps of one context (LLVM: a module or a function), in stream order.

    Attributes:
        name: The context name, or ``None`` for observations before any context record.
        header: The header in force for these steps.
        steps: The decisions.
    """

    name: str | None
    header: Header
    steps: list[Step] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def observations(self) -> list[dict[str, Array]]:
        """The observations, one dict per step."""
        return [s.observation for s in self.steps]

    def stacked(self) -> dict[str, Array]:
        """One array per feature: the steps' values stacked on a new first axis.

        Raises:
            ValueError: If a feature's shape changes between steps (dynamic shapes); use
                :attr:`observations` then.
        """
        return _stack_features(self.steps, self.header)

    def stacked_advice(self) -> Array | None:
        """The advice of every step stacked, or ``None`` if any step has none."""
        return _stack_optional([s.advice for s in self.steps], "advice")

    def stacked_outcomes(self) -> Array | None:
        """The outcome of every step stacked, or ``None`` if any step has none."""
        return _stack_optional([s.outcome for s in self.steps], "outcome")


@dataclass
class TrainingLog:
    """Everything read from one log.

    Attributes:
        serdes: The format it was read as.
        contexts: One entry per context record (a context named twice appears twice), in
            stream order.
        ended: Whether the stream had an end record.
    """

    serdes: str
    contexts: list[ContextLog] = field(default_factory=list)
    ended: bool = False

    @property
    def header(self) -> Header | None:
        """The first header of the stream (``None`` if the log has no observation)."""
        return self.contexts[0].header if self.contexts else None

    @property
    def steps(self) -> list[Step]:
        """Every step of every context, in stream order."""
        return [s for c in self.contexts for s in c.steps]

    def __len__(self) -> int:
        return sum(len(c) for c in self.contexts)

    def context(self, name: str | None) -> ContextLog:
        """The steps of every context called ``name``, merged in stream order.

        Raises:
            KeyError: If there is no such context.
        """
        found = [c for c in self.contexts if c.name == name]
        if not found:
            raise KeyError(name)
        merged = ContextLog(name, found[0].header)
        for c in found:
            if c.header != merged.header:
                raise ValueError(f"context {name!r} appears under different headers")
            merged.steps.extend(c.steps)
        return merged

    def stacked(self) -> dict[str, Array]:
        """One array per feature over every step of the log (see :meth:`ContextLog.stacked`).

        Raises:
            ValueError: If the header changes within the log, or shapes vary.
        """
        headers = {id(c.header): c.header for c in self.contexts}
        if len({h for h in headers.values()}) > 1:
            raise ValueError("the header changes within the log: stack per context instead")
        if not self.contexts:
            return _Features()
        return _stack_features(self.steps, self.contexts[0].header)

    def stacked_advice(self) -> Array | None:
        """The advice of every step of the log stacked, or ``None`` if any is missing."""
        return _stack_optional([s.advice for s in self.steps], "advice")


def _stack_features(steps: list[Step], header: Header) -> dict[str, Array]:
    out: dict[str, Array] = _Features()
    for spec in header.features:
        values = [s.observation[spec.name] for s in steps]
        if not values:
            shape = tuple(max(d, 0) for d in spec.shape)
            out[spec.name] = np.empty((0, *shape), dtype=spec.type.numpy_dtype)
            continue
        shapes = {v.shape for v in values}
        if len(shapes) > 1:
            raise ValueError(
                f"feature {spec.name!r} has different shapes in different steps "
                f"({sorted(shapes)[:3]}...): use the per-step observations"
            )
        out[spec.name] = np.stack(values)
    return out


def _stack_optional(values: list[Array | None], what: str) -> Array | None:
    if not values or any(v is None for v in values):
        return None
    shapes = {v.shape for v in values if v is not None}
    if len(shapes) > 1:
        raise ValueError(f"the {what} has different shapes in different steps")
    return np.stack([v for v in values if v is not None])


def detect_serdes(data: bytes | bytearray | memoryview) -> str:
    """Guess the format of a stream: ``bitstream``, ``json`` or ``protobuf``.

    Text formats start with the JSON header line; a message line with ``"tensors"`` is JSON
    Lines, one without is the bitstream. Anything else is taken for varint-delimited
    protobuf records.
    """
    view = bytes(data[:2])
    if view != b'{"':
        return "protobuf"
    start = 0
    data = bytes(data)
    while True:
        end = data.find(b"\n", start)
        line = data[start : end if end >= 0 else len(data)]
        if line.startswith((b'{"observation":', b'{"advice":', b'{"outcome":')):
            return "json" if b'"tensors":' in line else "bitstream"
        if not line.startswith((b'{"features":', b'{"context":', b'{"end":')) or end < 0:
            return "bitstream"  # no message at all: both read the same
        start = end + 1


def iter_records(
    source: str | os.PathLike[str] | bytes | bytearray | memoryview, serdes: str | None = None
) -> Iterator[Record]:
    """Yield the records of a log (a file path or the bytes), in stream order.

    Args:
        source: The file, or its contents.
        serdes: ``bitstream``, ``json`` or ``protobuf``; guessed when ``None``
            (:func:`detect_serdes`).
    """
    data = (
        source if isinstance(source, (bytes, bytearray, memoryview)) else Path(source).read_bytes()
    )
    name = serdes if serdes is not None else detect_serdes(data)
    yield from get_serdes(name).iter_decode(BytesReader(data))


def _build(records: Iterable[Record], serdes: str) -> TrainingLog:
    log = TrainingLog(serdes)
    header: Header | None = None
    context: str | None = None
    current: ContextLog | None = None
    by_id: dict[int, Step] = {}

    def open_context() -> ContextLog:
        assert header is not None
        ctx = ContextLog(context, header)
        log.contexts.append(ctx)
        by_id.clear()
        return ctx

    for record in records:
        if isinstance(record, Header):
            header = record
            current = None  # later steps belong under the new header
        elif isinstance(record, Context):
            context = record.name
            current = None
        elif isinstance(record, End):
            log.ended = True
            break
        elif isinstance(record, Message):
            if header is None:
                raise MalformedInputError(
                    f"{record.kind.value} message {record.id} comes before any header"
                )
            if current is None:
                current = open_context()
            if record.kind is MessageKind.OBSERVATION:
                step = Step(record.id, _Features((t.name, t.array) for t in record.tensors))
                current.steps.append(step)
                by_id[record.id] = step
                continue
            step_or_none = by_id.get(record.id)
            if step_or_none is None:
                raise MalformedInputError(
                    f"{record.kind.value} message {record.id} in context {context!r} has no "
                    "observation with that id"
                )
            value = record.tensors[0].array if record.tensors else None
            if record.kind is MessageKind.ADVICE:
                step_or_none.advice = value
            else:
                step_or_none.outcome = value
    return log


def read_log(
    source: str | os.PathLike[str] | bytes | bytearray | memoryview, serdes: str | None = None
) -> TrainingLog:
    """Read a whole log into per-context lists of steps.

    Args:
        source: The file, or its contents.
        serdes: ``bitstream``, ``json`` or ``protobuf``; guessed when ``None``.

    Raises:
        SerDesError: If the stream is malformed or truncated (the message names the byte
            offset).
        MalformedInputError: If an advice or outcome names an observation the context does
            not have.
    """
    data = (
        source if isinstance(source, (bytes, bytearray, memoryview)) else Path(source).read_bytes()
    )
    name = serdes if serdes is not None else detect_serdes(data)
    return _build(iter_records(data, name), name)
