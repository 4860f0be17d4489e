"""Progress of long work: a bar with an estimate on a terminal, plain lines elsewhere.

:func:`track` wraps an iterable. When standard error is a terminal it draws a
`rich <https://rich.readthedocs.io>`_ progress bar there (done/total, elapsed time and
the estimated time left); when it is not (a log file, CI, a pipe) it writes plain lines
``"<description>: <done>/<total>"`` about every 10% of the work and at the end, never a
carriage return. Bars opened while another is drawn (a corpus build inside a training
run) are drawn below it in the same display.

The environment variable ``MLBRIDGE_PROGRESS`` overrides the terminal test:
``MLBRIDGE_PROGRESS=0`` always writes plain lines, ``MLBRIDGE_PROGRESS=1`` always draws
the bar.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Generator, Iterable
from typing import TYPE_CHECKING, TypeVar

from mlbridge.errors import MLBridgeError

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = ["PROGRESS_ENV", "ProgressError", "track", "use_bar"]

T = TypeVar("T")

#: The environment variable that overrides whether a bar is drawn (``0`` or ``1``).
PROGRESS_ENV = "MLBRIDGE_PROGRESS"

#: Without a known total, a plain line at most this often (seconds), and at the end.
_UNKNOWN_TOTAL_INTERVAL = 10.0

_lock = threading.Lock()
_shared: Progress | None = None  # the bar display drawn now (rich is imported lazily)
_users = 0


class ProgressError(MLBridgeError, ValueError):
    """``MLBRIDGE_PROGRESS`` has a value other than ``0`` or ``1``."""


def use_bar() -> bool:
    """Whether :func:`track` draws a bar: ``$MLBRIDGE_PROGRESS``, else is stderr a terminal.

    Raises:
        ProgressError: If ``MLBRIDGE_PROGRESS`` is set to something other than ``0``/``1``.
    """
    env = os.environ.get(PROGRESS_ENV, "").strip()
    if env == "1":
        return True
    if env == "0":
        return False
    if env:
        raise ProgressError(
            f"{PROGRESS_ENV}={env!r} is not understood; set it to 1 (always draw a progress "
            "bar), 0 (plain lines), or unset it (a bar when stderr is a terminal)"
        )
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def track(
    iterable: Iterable[T],
    *,
    total: int | None = None,
    description: str,
    unit: str = "it",
) -> Generator[T, None, None]:
    """Yield the items of ``iterable`` and show how far along they are on stderr.

    On a terminal (or with ``MLBRIDGE_PROGRESS=1``): a progress bar with done/total,
    elapsed time and the estimated time left. Otherwise: plain lines
    ``"<description>: <done>/<total>"`` at about every 10% of ``total`` and at the end
    (without a known total, ``"<description>: <done>"`` at most every 10 seconds and at
    the end). Nothing is written to stdout.

    Args:
        iterable: The work items.
        total: How many items there are; ``len(iterable)`` when omitted and available.
        description: What is being done, e.g. ``"corpus: compiling"``.
        unit: What one item is, e.g. ``"module"`` (shown beside the bar).

    Yields:
        The items of ``iterable``, unchanged. Closing the generator early (``close()``,
        or dropping it) takes the bar off the screen.

    Raises:
        ProgressError: If ``MLBRIDGE_PROGRESS`` is set to something other than ``0``/``1``.
    """
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    if total is not None and total < 0:
        raise ProgressError(f"track({description!r}): total must be >= 0, got {total}")
    if use_bar():
        return _bar(iterable, total, description, unit)
    return _lines(iterable, total, description)


def _checkpoints(total: int) -> set[int]:
    """The counts after which a plain line is written: every tenth of ``total``, rounded up."""
    return {math.ceil(total * k / 10) for k in range(1, 11)} - {0}


def _lines(iterable: Iterable[T], total: int | None, description: str) -> Generator[T, None, None]:
    def say(text: str) -> None:
        stream = sys.stderr
        stream.write(f"{description}: {text}\n")
        stream.flush()

    done = 0
    if total is None:
        last = time.monotonic()
        for item in iterable:
            yield item
            done += 1
            now = time.monotonic()
            if now - last >= _UNKNOWN_TOTAL_INTERVAL:
                say(str(done))
                last = now
        say(str(done))
        return
    marks = _checkpoints(total)
    said = -1
    for item in iterable:
        yield item
        done += 1
        if done in marks:
            say(f"{done}/{total}")
            said = done
    if said != done:
        say(f"{done}/{total}")


def _acquire() -> tuple[Progress, bool]:
    """The shared rich Progress, started on first use, and whether it was already drawn."""
    global _shared, _users
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with _lock:
        nested = _shared is not None
        if _shared is None:
            _shared = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(stderr=True, force_terminal=True),
                # stdout may be a pipe the caller reads; only stderr goes above the bar.
                redirect_stdout=False,
            )
            _shared.start()
        _users += 1
        return _shared, nested


def _release() -> None:
    global _shared, _users
    with _lock:
        _users -= 1
        if _users == 0 and _shared is not None:
            _shared.stop()
            _shared = None


def _bar(
    iterable: Iterable[T], total: int | None, description: str, unit: str
) -> Generator[T, None, None]:
    from rich.markup import escape

    progress, nested = _acquire()
    task = progress.add_task(escape(description), total=total, unit=escape(unit))
    done = 0
    try:
        for item in iterable:
            yield item
            done += 1
            progress.advance(task)
        if total is None:
            progress.update(task, total=done)
        progress.refresh()
    finally:
        if nested:  # an inner bar goes when done; the outermost stays on the screen
            progress.remove_task(task)
        _release()
