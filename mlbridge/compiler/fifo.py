"""The transport under the pipe protocol: named pipes (FIFOs), their folders, bounded I/O.

:mod:`mlbridge.compiler.pipe` speaks LLVM's interactive protocol over two FIFOs; this
module moves its bytes and knows nothing of records or SerDes:

- :class:`FifoChannel` makes ``<base>.in`` and ``<base>.out`` (by default in a private
  folder) and removes them on every exit path; :func:`remove_stale_channels` removes the
  folders crashed processes left (``mlbridge pipe clean``);
- :func:`open_fifo_writer` and :func:`open_fifo_reader` open a FIFO without blocking,
  waiting (bounded) for it to exist and for the other side, and refuse one that another
  user could have put or written there;
- :class:`FifoReader` (a :class:`~mlbridge.serdes.ByteReader`) and :func:`write_all`
  read and write a non-blocking FIFO, each wait bounded by a timeout.
"""

from __future__ import annotations

import errno
import math
import os
import re
import select
import shutil
import stat
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mlbridge._closing import Closing
from mlbridge._files import check_private
from mlbridge.errors import (
    LimitExceededError,
    PipeClosedError,
    PipeError,
    PipeTimeoutError,
    TruncatedInputError,
    UntrustedFileError,
)

__all__ = [
    "GYM_PREFIX",
    "FifoChannel",
    "FifoReader",
    "check_channel_folder",
    "open_fifo_reader",
    "open_fifo_writer",
    "remove_stale_channels",
    "write_all",
]

_READ_CHUNK = 1 << 16
_LINE_CHUNK = 1 << 12
# Back-off of the open() polls: from 1 ms up to 50 ms between attempts.
_POLL_MIN = 0.001
_POLL_MAX = 0.05
_PRIVATE_PREFIX = "mlbridge-pipe-"
_PRIVATE_FIX = (
    "make the channel in a private folder (FifoChannel() makes one, mode 0700; or "
    "mkdir -m 700 DIR and use DIR/channel)"
)


def _poll_ms(deadline: float) -> int:
    """Milliseconds until ``deadline`` for ``poll``, at least 1 while time remains."""
    return max(1, math.ceil((deadline - time.monotonic()) * 1000))


# -- FIFO creation -------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _channel_file(path: Path) -> bool:
    """Whether ``path`` is what a channel folder holds: a FIFO, or an announcement."""
    mode = path.lstat().st_mode
    return stat.S_ISFIFO(mode) or (stat.S_ISREG(mode) and path.name.endswith(".ext"))


#: The name prefix of the gym environments' working folders (``mlbridge.gym``).
GYM_PREFIX = "mlbridge-gym-"


def remove_stale_channels(
    parent: str | os.PathLike[str] | None = None, *, prefix: str = _PRIVATE_PREFIX
) -> list[Path]:
    """Remove private channel folders left in ``parent`` by crashed processes.

    With ``prefix=GYM_PREFIX``, the gym environments' working folders
    (``mlbridge-gym-<pid>-*``, whatever they hold) of dead processes instead.

    A folder qualifies if its name is ``mlbridge-pipe-<pid>-*``, it belongs to the
    current user, process ``<pid>`` no longer exists, and it holds nothing but FIFOs
    (and ``<base>.ext`` announcements). ``mlbridge pipe clean`` runs it. Returns the
    folders removed.
    """
    root = Path(parent if parent is not None else tempfile.gettempdir())
    removed = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    pattern = re.compile(re.escape(prefix) + r"(\d+)-[^/]+")
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        try:
            st = entry.lstat()
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            if prefix != _PRIVATE_PREFIX:
                shutil.rmtree(entry)  # never follows links
                removed.append(entry)
                continue
            children = list(entry.iterdir())
            if not all(_channel_file(c) for c in children):
                continue
            for c in children:
                c.unlink()
            entry.rmdir()
            removed.append(entry)
        except OSError:
            continue  # another process is cleaning up, or it is not ours after all
    return removed


def check_channel_folder(base: Path) -> None:
    """Refuse the folder of channel ``base`` if it is another user's or others may write it.

    Raises:
        UntrustedFileError: If so; the message says how to make a private one.
    """
    check_private(base.parent, "the channel folder", _PRIVATE_FIX, folder=True)


def _remove_paths(paths: Sequence[Path], directory: Path | None) -> None:
    for p in paths:
        try:
            p.unlink()
        except FileNotFoundError:
            pass
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


class FifoChannel(Closing):
    """Creates ``<base>.in`` and ``<base>.out`` and removes them on every exit path.

    By default the FIFOs live in a new private folder (mode 0700) under ``parent``
    (default: the temporary folder), named ``mlbridge-pipe-<pid>-*``; the FIFOs are mode
    0600. Folders of that name left by crashed processes are removed first (see
    :func:`remove_stale_channels`). Given ``base``, the FIFOs are made there instead: a
    stale FIFO at either path (from a crashed run) is replaced, any other kind of file is
    refused, and so is a folder that belongs to another user or that others may write
    (:class:`~mlbridge.errors.UntrustedFileError`). Use it as a context manager;
    :meth:`close` is also called when the object is collected or the interpreter exits.

    Args:
        base: The channel base path, or ``None`` for a private folder.
        parent: Where to make the private folder (``base`` must be ``None``).
        name: The base file name inside the private folder.
    """

    def __init__(
        self,
        base: str | os.PathLike[str] | None = None,
        *,
        parent: str | os.PathLike[str] | None = None,
        name: str = "channel",
    ) -> None:
        if base is not None and parent is not None:
            raise ValueError("give either base or parent, not both")
        if "/" in name or not name:
            raise ValueError(f"name must be a plain file name, got {name!r}")
        self.directory: Path | None = None
        if base is None:
            remove_stale_channels(parent)
            self.directory = Path(
                tempfile.mkdtemp(prefix=f"{_PRIVATE_PREFIX}{os.getpid()}-", dir=parent)
            )
            os.chmod(self.directory, 0o700)
            self.base = self.directory / name
        else:
            self.base = Path(base)
            # Nobody else may put or replace a FIFO there.
            check_channel_folder(self.base)
        self.in_path = Path(f"{self.base}.in")
        self.out_path = Path(f"{self.base}.out")
        created: list[Path] = []
        self._finalizer = weakref.finalize(self, _remove_paths, created, self.directory)
        try:
            for path in (self.in_path, self.out_path):
                self._make_fifo(path)
                created.append(path)
        except BaseException:
            self._finalizer()
            raise

    @staticmethod
    def _make_fifo(path: Path) -> None:
        try:
            try:
                st = path.lstat()
            except FileNotFoundError:
                pass
            else:
                if not stat.S_ISFIFO(st.st_mode):
                    raise PipeError(f"{path} exists and is not a FIFO: refusing to replace it")
                path.unlink()  # a stale FIFO from a crashed run
            os.mkfifo(path, 0o600)
            os.chmod(path, 0o600)  # whatever the umask
        except OSError as e:  # e.g. a name too long
            raise PipeError(f"cannot create FIFO {path}: {e.strerror}") from None

    @property
    def closed(self) -> bool:
        """Whether the FIFOs (and the private folder) have been removed."""
        return not self._finalizer.alive

    def close(self) -> None:
        """Remove the FIFOs and the private folder (idempotent)."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"FifoChannel({str(self.base)!r})"


# -- bounded I/O on a FIFO ------------------------------------------------------------


def _wait_for_fifo(path: Path, deadline: float, timeout: float, abort: Callable[[], None]) -> None:
    """Wait until ``path`` exists (the compiler may create it); refuse a non-FIFO."""
    delay = _POLL_MIN
    while True:
        try:
            st = path.stat()
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISFIFO(st.st_mode):
                raise PipeError(f"{path} is not a FIFO")
            check_private(path, "the channel FIFO", _PRIVATE_FIX, folder=False)
            return
        abort()
        if time.monotonic() >= deadline:
            raise PipeTimeoutError(f"{path} did not appear within {timeout:g} s")
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, _POLL_MAX)


def _check_fifo_fd(fd: int, path: Path) -> None:
    """Check what was opened (not the name): this user's FIFO, not writable by others."""
    st = os.fstat(fd)
    if not stat.S_ISFIFO(st.st_mode):
        raise PipeError(f"{path} is not a FIFO")
    if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        check_private(path, "the channel FIFO", _PRIVATE_FIX, folder=False)
        raise UntrustedFileError(f"refusing the channel FIFO {path}: {_PRIVATE_FIX}")


def _checked(fd: int, path: Path) -> int:
    """``fd``, once :func:`_check_fifo_fd` accepts it (closed if it does not)."""
    try:
        _check_fifo_fd(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_fifo_writer(path: Path, deadline: float, timeout: float, abort: Callable[[], None]) -> int:
    """Open the FIFO ``path`` for writing without blocking, retrying until a reader appears.

    Waits (until ``deadline``, a :func:`time.monotonic` time) for ``path`` to exist, then
    for a reader; ``abort`` is called between attempts (raise from it to give up early).
    What was opened must be this user's FIFO that others may not write.

    Returns:
        The non-blocking file descriptor.

    Raises:
        PipeTimeoutError: If the deadline passes first (``timeout`` words the error).
        PipeError: If ``path`` is not a FIFO or cannot be opened.
        UntrustedFileError: If it belongs to another user or others may write it.
    """
    _wait_for_fifo(path, deadline, timeout, abort)
    delay = _POLL_MIN
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise PipeError(f"cannot open {path} for writing: {e.strerror}") from None
        else:
            return _checked(fd, path)
        abort()
        if time.monotonic() >= deadline:
            raise PipeTimeoutError(
                f"no compiler opened {path} for reading within {timeout:g} s (is it running "
                "with this channel base?)"
            )
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, _POLL_MAX)


def open_fifo_reader(path: Path, deadline: float, timeout: float, abort: Callable[[], None]) -> int:
    """Open the FIFO ``path`` for reading without blocking, once it exists.

    Opening the read end does not wait for the writer; reads wait (bounded) for its data.
    The wait for ``path`` and the checks are those of :func:`open_fifo_writer`.

    Returns:
        The non-blocking file descriptor.
    """
    _wait_for_fifo(path, deadline, timeout, abort)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as e:
        raise PipeError(f"cannot open {path} for reading: {e.strerror}") from None
    return _checked(fd, path)


def _next_record() -> str:
    return "the next record"


class FifoReader:
    """A :class:`~mlbridge.serdes.ByteReader` over a non-blocking FIFO, with deadlines.

    Each call waits at most ``timeout`` seconds for each chunk it needs. The end of input
    is the writer closing its end (``read`` returns no bytes after ``poll`` reports it).

    This is the model's per-decision hot path, so it keeps system calls to what the
    bytes need (a record line and small tensors come in one ``read``; a large tensor is
    read straight into its array together with whatever follows it, e.g. the record's
    final newline) and formats the wording of an error only when raising it. The bytes
    read ahead live in one buffer that is reused and only ever grows (geometrically, to
    the longest line seen): reads go straight into it, so a session of growing records
    does not map fresh memory for every one.
    """

    def __init__(
        self, fd: int, path: Path, timeout: float, sink: Callable[[bytes], Any] | None = None
    ) -> None:
        self._fd = fd
        self._sink = sink  # gets every consumed byte, in order (capture)
        self._path = path
        self._timeout = timeout
        self._timeout_ms = max(1, math.ceil(timeout * 1000))
        self._buf = bytearray(_READ_CHUNK)
        self._start = 0  # index in _buf of the first unconsumed byte
        self._end = 0  # index in _buf after the last byte read
        self._offset = 0  # stream offset of _buf[_start]
        self._eof = False
        self._poller = select.poll()
        self._poller.register(fd, select.POLLIN)

    @property
    def offset(self) -> int:
        """The number of bytes consumed so far."""
        return self._offset

    def _available(self) -> int:
        return self._end - self._start

    def _timed_out(self, what: str) -> PipeTimeoutError:
        return PipeTimeoutError(
            f"{self._path}: nothing from the compiler within {self._timeout:g} s while "
            f"waiting for {what} (stream offset {self._offset + self._available()})"
        )

    def _room(self, size: int) -> None:
        """Make room for ``size`` more bytes after the unconsumed ones."""
        buf, start, end = self._buf, self._start, self._end
        if start == end:
            start = end = self._start = self._end = 0
        if end + size <= len(buf):
            return
        held = end - start
        if held + size > len(buf):  # grow, as a list does: rarely, and never shrink
            grown = bytearray(max(2 * len(buf), held + size))
            grown[:held] = memoryview(buf)[start:end]
            self._buf = grown
        elif held:
            buf[:held] = bytes(memoryview(buf)[start:end])  # the two may overlap
        self._start, self._end = 0, held

    def _fill(self, what: Callable[[], str], size: int = _READ_CHUNK) -> bool:
        """Read one more chunk (at most ``size`` bytes); False at the end of input.

        Waits at most the timeout; ``what`` words the timeout error.
        """
        if self._eof:
            return False
        self._room(size)
        fd, poll = self._fd, self._poller.poll
        ms = self._timeout_ms
        deadline = time.monotonic() + self._timeout
        while True:
            # poll() first: the compiler usually has not written the record yet.
            if poll(ms):
                end = self._end
                try:
                    with memoryview(self._buf) as buf:
                        got = os.readv(fd, [buf[end : end + size]])
                except BlockingIOError:
                    got = -1
                except OSError as e:
                    raise PipeError(f"{self._path}: read failed: {e.strerror}") from None
                if got == 0:
                    self._eof = True
                    return False
                if got > 0:
                    self._end = end + got
                    return True
            if time.monotonic() >= deadline:
                raise self._timed_out(what())
            ms = _poll_ms(deadline)

    def _take(self, n: int) -> bytes:
        start = self._start
        with memoryview(self._buf) as view:  # one copy, not two
            data = bytes(view[start : start + n])
        self._start = start + n
        self._offset += n
        if self._sink is not None:
            self._sink(data)
        return data

    def at_end(self) -> bool:
        """Whether the writer closed its end with nothing left unread; waits (bounded)."""
        if self._end > self._start:
            return False
        return not self._fill(_next_record, _LINE_CHUNK)

    def read_exact(self, n: int) -> bytes:
        """The next ``n`` bytes.

        Raises:
            TruncatedInputError: If the input ends before ``n`` bytes arrive.
            PipeTimeoutError: If a read waits longer than the timeout.
        """
        if n < 0:
            raise ValueError(f"read_exact: negative size {n}")
        have = self._end - self._start
        if have >= n:
            return self._take(n)
        if n - have > _READ_CHUNK and not self._eof:
            return self._read_large(n)
        offset = self._offset
        while have < n:
            if not self._fill(lambda: f"{n} bytes at stream offset {offset}"):
                raise self._truncated(n, have)
            have = self._end - self._start
        return self._take(n)

    def read_into(self, view: memoryview) -> None:
        """Fill ``view`` (bytes) with the next ``len(view)`` bytes, waiting as ``read_exact``.

        What the buffer holds is copied; the rest is read straight from the FIFO into
        ``view``, each read also taking what follows (up to a chunk) into the buffer.
        """
        self._read_views([view], len(view))

    def read_framed(
        self, max_len: int, frame: Callable[[bytes | bytearray, int], list[memoryview] | None]
    ) -> bool | None:
        """Read a line and the values it announces, if ``frame`` knows how many follow.

        The fast path of line-framed records (the bitstream layout): one call reads the
        next line (at most ``max_len`` bytes), hands it and its stream offset to
        ``frame``, which returns the views to fill with the bytes that follow it (or
        ``None``), and fills them.

        Returns:
            ``True`` once the views are filled; ``None`` at a clean end of input; ``False``,
            having consumed nothing, if ``frame`` declines the line, the line is not
            complete in the bytes at hand, or the traffic is being captured: the caller
            then reads the record the generic way.

        Raises:
            TruncatedInputError: If the input ends before the views are full; every byte
                that arrived is consumed, so :attr:`offset` is where the input ended.
            PipeTimeoutError: If a read waits longer than the timeout.
        """
        if self._sink is not None:
            return False
        start = self._start
        if start == self._end:  # the usual case: the record has not arrived yet
            if not self._fill(_next_record, _LINE_CHUNK):
                return None
            start = self._start
        buf = self._buf
        end = buf.find(b"\n", start, min(self._end, start + max_len + 1))
        if end < 0:
            return False
        views = frame(buf[start:end], self._offset)
        if views is None:
            return False
        self._start = end + 1
        self._offset += end + 1 - start
        total = 0
        for view in views:
            total += len(view)
        self._read_views(views, total)
        return True

    def _read_views(self, views: list[memoryview], n: int) -> None:
        """Fill ``views`` (``n`` bytes in all) in order: from the buffer, then the FIFO."""
        start = self._start
        have = self._end - start
        sink = self._sink
        offset = self._offset  # where this read starts
        rest = list(views)  # what is still to fill (the caller's list stays as it was)
        if have:
            rest = []
            with memoryview(self._buf) as buf:
                for view in views:
                    size = len(view)
                    take = size if size < have else have
                    if take:
                        view[:take] = buf[start : start + take]
                        if sink is not None:
                            sink(bytes(view[:take]))
                        start += take
                        have -= take
                        self._offset += take
                    if take < size:
                        rest.append(view[take:])
            self._start = start
            if not rest:
                return
        # The buffer is used up: what follows the views goes to its start.
        self._start = self._end = 0
        if self._eof:
            raise self._truncated_read(n, offset)
        fd, poll = self._fd, self._poller.poll
        deadline = 0.0
        with memoryview(self._buf)[:_READ_CHUNK] as ahead:
            while rest:
                try:
                    got = os.readv(fd, [*rest, ahead])
                except BlockingIOError:
                    if not deadline:
                        deadline = time.monotonic() + self._timeout
                    elif time.monotonic() >= deadline:
                        raise self._timed_out(f"{n} bytes at stream offset {offset}") from None
                    poll(_poll_ms(deadline))
                    continue
                except OSError as e:
                    raise PipeError(f"{self._path}: read failed: {e.strerror}") from None
                if not got:
                    self._eof = True
                    raise self._truncated_read(n, offset)
                deadline = 0.0  # progress: the bound applies to each chunk
                while rest and got:
                    view = rest[0]
                    size = len(view)
                    mine = size if size < got else got
                    if sink is not None:
                        sink(bytes(view[:mine]))
                    self._offset += mine
                    got -= mine
                    if mine < size:
                        rest[0] = view[mine:]
                    else:
                        del rest[0]
                self._end = got  # read ahead into the buffer (once the views are full)

    def _truncated_read(self, n: int, offset: int) -> TruncatedInputError:
        """The error of a read of ``n`` bytes from ``offset`` that ended at :attr:`offset`."""
        return TruncatedInputError(
            f"input ends at byte offset {self._offset}: needed {n} bytes from offset "
            f"{offset}, only {self._offset - offset} arrived"
        )

    def _truncated(self, n: int, have: int) -> TruncatedInputError:
        """The error of a read of ``n`` bytes from the current offset that got ``have``."""
        return TruncatedInputError(
            f"input ends at byte offset {self._offset + have}: needed {n} bytes from offset "
            f"{self._offset}, only {have} arrived"
        )

    def _read_large(self, n: int) -> bytes:
        """``read_exact`` of a large record or tensor, without staging it in the line buffer.

        The FIFO is read straight into the result (a ``bytearray``), which grows as the
        bytes arrive, doubling from one chunk: a message that only claims a large size
        costs about what it sent, never what it claimed.
        """
        start = self._offset
        out = bytearray()
        while len(out) < n:
            have = len(out)
            out.extend(bytes(min(n - have, max(_READ_CHUNK, have))))
            try:
                self.read_into(memoryview(out)[have:])
            except TruncatedInputError:
                raise self._truncated_read(n, start) from None
        return out  # type: ignore[return-value]  # bytes-like, and no third copy

    def take_line_if(self, prefix: bytes, max_len: int) -> bytes | None:
        """The next line if it starts with ``prefix``, else ``None`` (nothing consumed).

        The line is consumed without going to the sink: it is the pipe's own
        negotiation (mlbridge's runner acknowledging extensions), not a record.

        Raises:
            LimitExceededError: If the line is longer than ``max_len`` bytes.
            TruncatedInputError: If the input ends in the line.
            PipeTimeoutError: If a read waits longer than the timeout.
        """
        while self._available() < len(prefix):
            if not self._fill(_next_record, _LINE_CHUNK):
                return None
        if not self._buf.startswith(prefix, self._start):
            return None
        sink, self._sink = self._sink, None
        try:
            return self.read_line(max_len)
        finally:
            self._sink = sink

    def read_line(self, max_len: int) -> bytes:
        """The next line, without its newline.

        Raises:
            LimitExceededError: If it is longer than ``max_len`` bytes.
            TruncatedInputError: If the input ends before the newline.
            PipeTimeoutError: If a read waits longer than the timeout.
        """
        scanned = 0
        while True:
            start = self._start
            end = self._buf.find(b"\n", start + scanned, min(self._end, start + max_len + 1))
            if end >= 0:
                with memoryview(self._buf) as view:
                    line = bytes(view[start:end])
                self._start = end + 1
                self._offset += end + 1 - start
                if self._sink is not None:
                    self._sink(line)
                    self._sink(b"\n")
                return line
            scanned = self._end - start
            if scanned > max_len:
                raise LimitExceededError(
                    f"line at byte offset {self._offset} is longer than the limit of "
                    f"{max_len} bytes"
                )
            # A record line is usually short and followed by tensor values, which
            # read_into() reads straight into their arrays: stage little of them here.
            # A long line (JSON) is read in chunks that grow with it.
            size = _LINE_CHUNK if scanned == 0 else max(_READ_CHUNK, scanned)
            what = lambda o=self._offset: f"the end of the line at stream offset {o}"  # noqa: E731
            if not self._fill(what, size):
                raise TruncatedInputError(
                    f"input ends at byte offset {self._offset + self._available()} in a line "
                    f"that started at offset {self._offset} (no terminating newline)"
                )


def write_all(
    fd: int, data: bytes, path: Path, timeout: float, what: str | Callable[[], str]
) -> None:
    """Write all of ``data`` to a non-blocking FIFO, each wait bounded by ``timeout``.

    ``what`` (or what it returns: worded only for an error) names the data in errors.
    """
    try:  # the usual case: all of it fits in the pipe at once
        written = os.write(fd, data)
        if written == len(data):
            return
        view = memoryview(data)[written:]
    except BlockingIOError:
        view = memoryview(data)
    except BrokenPipeError:
        what = what if isinstance(what, str) else what()
        raise PipeClosedError(
            f"{path}: the compiler closed its end while mlbridge was writing {what}"
        ) from None
    except OSError as e:
        raise PipeError(f"{path}: write failed: {e.strerror}") from None
    what = what if isinstance(what, str) else what()
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        deadline = time.monotonic() + timeout
        while True:
            try:
                n = os.write(fd, view)
                break
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise PipeClosedError(
                    f"{path}: the compiler closed its end while mlbridge was writing {what}"
                ) from None
            except OSError as e:
                raise PipeError(f"{path}: write failed: {e.strerror}") from None
            if time.monotonic() >= deadline:
                raise PipeTimeoutError(
                    f"{path}: the compiler did not read {what} within {timeout:g} s"
                )
            poller.poll(_poll_ms(deadline))
        view = view[n:]
