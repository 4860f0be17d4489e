"""Byte sources for the decoders.

A decoder reads through the :class:`ByteReader` protocol: exact-size reads, bounded line
reads, and :meth:`ByteReader.at_end`, the end-of-stream signal that lets a decoder tell a
clean end (between records) from input that stops in the middle of a record.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, BinaryIO, Protocol, runtime_checkable

import numpy as np

from mlbridge.errors import LimitExceededError, TruncatedInputError

__all__ = ["ByteReader", "BytesReader", "RecyclingBuffer", "StreamReader"]


@runtime_checkable
class ByteReader(Protocol):
    """What a decoder reads from.

    A reader may also offer ``read_into(view: memoryview) -> None``, which fills ``view``
    with exactly the next ``len(view)`` bytes (or raises :class:`TruncatedInputError`):
    decoders use it, when present, to read tensor values straight into their arrays.

    And for line-framed records (the bitstream layout), ``read_framed(max_len, frame)``:
    it reads the next line, asks ``frame(line, offset)`` for the views the bytes after it
    go to, and fills them, all in one call (see :meth:`BytesReader.read_framed`).
    """

    @property
    def offset(self) -> int:
        """The number of bytes consumed so far."""
        ...

    def at_end(self) -> bool:
        """Whether the stream has ended (no more bytes will come); may wait for input."""
        ...

    def read_exact(self, n: int) -> bytes:
        """Read exactly ``n`` bytes; :class:`TruncatedInputError` if the stream ends first."""
        ...

    def read_line(self, max_len: int) -> bytes:
        """Read up to and including the next newline; return the line without it.

        Raises:
            TruncatedInputError: If the stream ends before the newline.
            LimitExceededError: If no newline is found within ``max_len`` bytes.
        """
        ...


class BytesReader:
    """A :class:`ByteReader` over bytes in memory, tracking the offset."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._data = bytes(data)
        self._pos = 0

    @property
    def offset(self) -> int:
        """The number of bytes consumed so far."""
        return self._pos

    @property
    def remaining(self) -> int:
        """The number of bytes not yet consumed."""
        return len(self._data) - self._pos

    def at_end(self) -> bool:
        """Whether every byte has been consumed."""
        return self._pos >= len(self._data)

    def read_exact(self, n: int) -> bytes:
        """Read exactly ``n`` bytes; :class:`TruncatedInputError` if fewer remain."""
        if n < 0:
            raise ValueError(f"read_exact: negative size {n}")
        if n > len(self._data) - self._pos:
            raise TruncatedInputError(
                f"input ends at byte offset {len(self._data)}: needed {n} bytes "
                f"from offset {self._pos}, only {len(self._data) - self._pos} left"
            )
        start = self._pos
        self._pos += n
        return self._data[start : self._pos]

    def read_into(self, view: memoryview) -> None:
        """Fill ``view`` with the next ``len(view)`` bytes (or :class:`TruncatedInputError`)."""
        n = len(view)
        if n > len(self._data) - self._pos:
            self.read_exact(n)  # raises, with the message
        view[:] = memoryview(self._data)[self._pos : self._pos + n]
        self._pos += n

    def read_framed(
        self, max_len: int, frame: Callable[[bytes | bytearray, int], list[memoryview] | None]
    ) -> bool | None:
        """Read a line and the bytes it announces, if ``frame`` knows how many follow.

        ``frame(line, offset)`` gets the next line (without its newline, at most
        ``max_len`` bytes) and its stream offset, and returns the views to fill with the
        bytes that follow the line, or ``None`` to decline.

        Returns:
            ``True`` once the views are filled; ``None`` at the end of input; ``False``,
            having consumed nothing, if ``frame`` declines or there is no complete line:
            the caller then reads the record the generic way.

        Raises:
            TruncatedInputError: If the input ends before the views are full; the bytes
                that are there are consumed, so :attr:`offset` is where the input ended.
        """
        data, pos = self._data, self._pos
        if pos >= len(data):
            return None
        end = data.find(b"\n", pos, pos + max_len + 1)
        if end < 0:
            return False
        views = frame(data[pos:end], pos)
        if views is None:
            return False
        pos = end + 1
        with memoryview(data) as source:
            for view in views:
                n = len(view)
                if n > len(data) - pos:
                    self._pos = len(data)
                    raise TruncatedInputError(
                        f"input ends at byte offset {len(data)}: needed {n} bytes from "
                        f"offset {pos}, only {len(data) - pos} arrived"
                    )
                view[:] = source[pos : pos + n]
                pos += n
        self._pos = pos
        return True

    def read_line(self, max_len: int) -> bytes:
        """Read a line terminated by newline and return it without the newline."""
        end = self._data.find(b"\n", self._pos, self._pos + max_len + 1)
        if end < 0:
            if len(self._data) - self._pos > max_len:
                raise LimitExceededError(
                    f"line at byte offset {self._pos} is longer than the limit of {max_len} bytes"
                )
            raise TruncatedInputError(
                f"input ends at byte offset {len(self._data)} in a line that started at "
                f"offset {self._pos} (no terminating newline)"
            )
        line = self._data[self._pos : end]
        self._pos = end + 1
        return line


class StreamReader:
    """A :class:`ByteReader` over a binary file object (a pipe, a socket file, a file)."""

    __slots__ = ("_file", "_peeked", "_pos")

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._pos = 0
        self._peeked = b""

    @property
    def offset(self) -> int:
        """The number of bytes consumed so far."""
        return self._pos

    def at_end(self) -> bool:
        """Whether the stream has ended; waits until a byte arrives or the writer closes."""
        if self._peeked:
            return False
        self._peeked = self._file.read(1)
        return not self._peeked

    def read_exact(self, n: int) -> bytes:
        """Read exactly ``n`` bytes; :class:`TruncatedInputError` if the stream ends first."""
        parts = [self._peeked] if self._peeked else []
        have = len(self._peeked)
        self._peeked = b""
        while have < n:
            chunk = self._file.read(n - have)
            if not chunk:
                self._pos += have
                raise TruncatedInputError(
                    f"input ends at byte offset {self._pos}: needed {n} bytes "
                    f"from offset {self._pos - have}, only {have} arrived"
                )
            parts.append(chunk)
            have += len(chunk)
        data = b"".join(parts)
        self._pos += n
        return data

    def read_into(self, view: memoryview) -> None:
        """Fill ``view`` with the next ``len(view)`` bytes (or :class:`TruncatedInputError`)."""
        view[:] = self.read_exact(len(view))

    def read_line(self, max_len: int) -> bytes:
        """Read a line terminated by newline and return it without the newline."""
        start = self._pos
        if self._peeked == b"\n":
            self._peeked = b""
            self._pos += 1
            return b""
        line = self._peeked + self._file.readline(max_len + 1 - len(self._peeked))
        self._peeked = b""
        self._pos += len(line)
        if line.endswith(b"\n"):
            return line[:-1]
        if len(line) > max_len:
            raise LimitExceededError(
                f"line at byte offset {start} is longer than the limit of {max_len} bytes"
            )
        raise TruncatedInputError(
            f"input ends at byte offset {self._pos} in a line that started at offset {start} "
            "(no terminating newline)"
        )


class RecyclingBuffer:
    """Memory for decoded tensor values that is reused once nothing refers to it.

    Decoders carve each message's arrays out of a block (8-byte aligned slices of a
    ``uint8`` numpy array). When a message starts, a block from which no array is alive
    any more (CPython's reference count says so) is reused from its start, so a loop
    that drops its observations reads every message into memory that is already mapped.
    Two blocks take turns, because the previous observation is usually still referenced
    while the next one is read (``while (obs := ci.evaluate())``). Arrays that are kept
    (e.g. a trainer's trajectory) keep their block alive and are never overwritten: the
    message then goes to the rest of the current block or to a new one of at most twice
    its own size (or ``MIN_BLOCK``), so a kept array pins little memory.
    """

    __slots__ = ("_blocks", "_current", "_used")

    #: The smallest block, bytes.
    MIN_BLOCK = 1 << 16
    #: Blocks kept for reuse.
    KEEP = 2

    def __init__(self) -> None:
        self._blocks: list[np.ndarray[Any, np.dtype[np.uint8]]] = []
        self._current = -1
        self._used = 0

    @staticmethod
    def padded(nbytes: int) -> int:
        """``nbytes`` rounded up to the 8-byte alignment of every slice."""
        return (nbytes + 7) & ~7

    def start_message(self, nbytes: int) -> None:
        """Make room for a message of ``nbytes`` (the sum of its :meth:`padded` sizes)."""
        blocks = self._blocks
        for i in range(len(blocks)):
            block = blocks[i]
            # References: the list, the local and getrefcount's argument; any more are
            # arrays that still use the block.
            if sys.getrefcount(block) <= 3:
                if nbytes > block.size:
                    blocks[i] = np.empty(max(nbytes, 2 * block.size), dtype=np.uint8)
                self._current, self._used = i, 0
                return
        if self._current >= 0 and self._used + nbytes <= blocks[self._current].size:
            return
        block = np.empty(max(2 * nbytes, self.MIN_BLOCK), dtype=np.uint8)
        if len(blocks) < self.KEEP:
            blocks.append(block)
            self._current = len(blocks) - 1
        else:  # every block is in use: the arrays keep the old one alive
            self._current = (self._current + 1) % self.KEEP
            blocks[self._current] = block
        self._used = 0

    def message_block(self, nbytes: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """:meth:`start_message` and :meth:`take` of a message that is one slice."""
        self.start_message(self.padded(nbytes))
        return self.take(nbytes)

    def take(self, nbytes: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """The next ``nbytes`` slice of the message started by :meth:`start_message`."""
        start = self._used
        if self._current < 0 or start + nbytes > self._blocks[self._current].size:
            raise ValueError("RecyclingBuffer.take beyond the size given to start_message")
        self._used = start + self.padded(nbytes)
        return self._blocks[self._current][start : start + nbytes]
