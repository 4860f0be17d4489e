"""The records every SerDes carries: header, context, message and end."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import TensorSpec

__all__ = ["Context", "End", "Header", "Message", "MessageKind", "Record"]


@dataclass(frozen=True)
class Header:
    """The specs of a stream: features (in order), and the optional advice and score specs.

    Sent once at the start of a stream; a later header replaces the earlier one.
    """

    features: tuple[TensorSpec, ...]
    advice: TensorSpec | None = None
    score: TensorSpec | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", tuple(self.features))

    def specs_for(self, kind: MessageKind) -> tuple[TensorSpec, ...] | None:
        """The specs of the tensors a message of ``kind`` carries, or ``None`` if unset."""
        if kind is MessageKind.OBSERVATION:
            return self.features
        spec = self.score if kind is MessageKind.OUTCOME else self.advice
        return None if spec is None else (spec,)


@dataclass(frozen=True)
class Context:
    """What the following messages are about (LLVM sends the function or module name)."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"context name must be a str, got {type(self.name).__name__}")
        try:
            self.name.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"context name {self.name!r} is not valid UTF-8: {e}") from None


class MessageKind(enum.Enum):
    """The kind of a message; the value is its wire name."""

    OBSERVATION = "observation"
    OUTCOME = "outcome"
    ADVICE = "advice"


@dataclass(frozen=True)
class Message:
    """A set of named tensors: an observation, an outcome (score) or an advice (reply).

    Attributes:
        kind: What the message is.
        id: The observation index within the current context.
        tensors: The tensors, in order.
    """

    kind: MessageKind
    id: int
    tensors: tuple[Tensor, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.kind, MessageKind):
            object.__setattr__(self, "kind", MessageKind(self.kind))
        if isinstance(self.id, bool) or not isinstance(self.id, int):
            raise TypeError(f"message id must be an int, got {self.id!r}")
        if not -(2**63) <= self.id < 2**63:
            raise ValueError(f"message id {self.id} is out of the int64 range")
        tensors = tuple(self.tensors)
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"message tensors must be Tensor objects, got {t!r}")
        object.__setattr__(self, "tensors", tensors)

    @classmethod
    def _trusted(cls, kind: MessageKind, id: int, tensors: tuple[Tensor, ...]) -> Message:
        """Build a message from parts already checked (used by the decoders)."""
        self = cls.__new__(cls)
        # One dict update instead of three frozen-dataclass assignments: this runs
        # for every decoded message.
        self.__dict__.update(kind=kind, id=id, tensors=tensors)
        return self

    @classmethod
    def observation(cls, id: int, tensors: Iterable[Tensor]) -> Message:
        """An observation message."""
        return cls(MessageKind.OBSERVATION, id, tuple(tensors))

    def __getitem__(self, name: str) -> Tensor:
        """The tensor called ``name``; :class:`KeyError` if there is none."""
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)


@dataclass(frozen=True)
class End:
    """The session is over."""


#: Any record of a stream.
Record = Header | Context | Message | End
