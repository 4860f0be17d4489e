"""A mixin for objects that own an OS resource and are used in ``with`` blocks."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

_Self = TypeVar("_Self", bound="Closing")


class Closing:
    """``with obj:`` closes ``obj`` when the block ends, however it ends."""

    def close(self) -> None:
        """Release what the object holds; subclasses make this idempotent."""
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
