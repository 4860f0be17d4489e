"""Byte sources for the decoders.

A decoder reads through the :class:`ByteReader` protocol: exact-size reads, bounded line
reads, and :meth:`ByteReader.at_end`, the end-of-stream signal that lets a decoder tell a
clean end (between records) from input that stops in the middle of a record.
"""

from __future__ import annotations

from typing import BinaryIO, Protocol, runtime_checkable

from mlbridge.errors import LimitExceededError, TruncatedInputError

__all__ = ["ByteReader", "BytesReader", "StreamReader"]


@runtime_checkable
class ByteReader(Protocol):
    """What a decoder reads from."""

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
