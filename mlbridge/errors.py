"""The exception hierarchy of mlbridge.

Every error raised on purpose by the package derives from :class:`MLBridgeError`, so a
caller can catch one type. Messages name what went wrong: the tensor, the byte offset,
the expected and the actual value.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

__all__ = [
    "AdviceConstraintError",
    "CLIError",
    "GrpcError",
    "GrpcTimeoutError",
    "HeaderMismatchError",
    "InvalidTensorError",
    "LimitExceededError",
    "MLBridgeError",
    "MalformedInputError",
    "PipeClosedError",
    "PipeError",
    "PipeTimeoutError",
    "SerDesError",
    "SpecError",
    "TruncatedInputError",
    "UnknownFeatureError",
    "UnsupportedValueError",
    "UntrustedFileError",
]


class MLBridgeError(Exception):
    """Base class of every error raised by mlbridge."""


class CLIError(MLBridgeError):
    """A command of ``mlbridge`` failed: reported as ``mlbridge: error: ...``, exit status 1.

    Raised by the sub-commands (``mlbridge.<x>.cli``); :func:`mlbridge.cli.main` catches it.
    It lives here, beside the other errors, so that a sub-command never imports the command
    line itself (``mlbridge.cli`` re-exports it for older code).
    """


class SpecError(MLBridgeError, ValueError):
    """A tensor spec is invalid (empty name, unknown type, bad dimension, ...)."""


class AdviceConstraintError(MLBridgeError, ValueError):
    """An advice value violates its spec's constraints (range or mask feature)."""


class InvalidTensorError(MLBridgeError, ValueError):
    """A tensor value cannot be built as asked (wrong dtype, out-of-range value, ...)."""


class SerDesError(MLBridgeError):
    """Encoding or decoding a record failed."""


class MalformedInputError(SerDesError):
    """The input bytes do not follow the wire format."""


class TruncatedInputError(MalformedInputError):
    """The input ended in the middle of a record."""


class LimitExceededError(SerDesError):
    """The input asks for more than a decoder limit allows (see ``DecodeLimits``)."""


class UnsupportedValueError(SerDesError):
    """A record cannot be written in the chosen format (e.g. non-UTF-8 string in JSON)."""


class HeaderMismatchError(SerDesError):
    """A message does not match the stream header (names, order, types, shapes)."""


class UntrustedFileError(MLBridgeError, PermissionError):
    """A file or folder another user controls, where only the user's own will do.

    The message names the owner or the mode, and the fix (a private folder, ``chmod``).
    """


class PipeError(MLBridgeError):
    """A named-pipe channel to a compiler failed (see :mod:`mlbridge.compiler.pipe`)."""


class PipeTimeoutError(PipeError, TimeoutError):
    """A bounded wait on a named pipe ran out: the message names the FIFO and the bound."""


class PipeClosedError(PipeError, ConnectionError):
    """The peer closed its end of a named pipe where more was expected."""


class GrpcError(MLBridgeError):
    """A gRPC channel to a compiler or from it failed (see :mod:`mlbridge.compiler.grpc`).

    Attributes:
        code: The gRPC status code's name (``"UNAVAILABLE"``, ...), or ``None`` when the
            error is not a gRPC status.
    """

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class GrpcTimeoutError(GrpcError, TimeoutError):
    """A bounded wait on a gRPC channel ran out: the message names the address and the bound."""


class UnknownFeatureError(MLBridgeError, KeyError):
    """An observation has no feature of the name asked for (``obs["calee_users"]``).

    A ``KeyError``, so that ``except KeyError`` still catches it; the message lists the
    features there are and the closest name.

    Attributes:
        name: The name asked for.
        valid: The observation's feature names, in the compiler's order.
    """

    def __init__(self, name: object, valid: Iterable[str]) -> None:
        self.name = name
        self.valid = tuple(valid)
        asked = str(name)
        close = (
            difflib.get_close_matches(asked, self.valid, n=1)
            or [v for v in self.valid if v.lower() == asked.lower()][:1]
        )
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        names = ", ".join(self.valid) if self.valid else "none"
        super().__init__(
            f"no feature named {name!r}{hint}; the {len(self.valid)} features are: {names}"
        )

    def __str__(self) -> str:
        # KeyError's own str() would show the message quoted, as a key.
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.name, self.valid)
