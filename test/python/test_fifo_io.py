"""mlbridge.compiler.fifo's raw I/O on real pipes: write_all and FifoReader.read_exact.

The model side writes replies with ``write_all`` (non-blocking, each wait bounded) and
reads records with ``FifoReader``; these tests drive both over ``os.pipe()`` at the
edges the compiler sessions rarely reach: a reply larger than the pipe, a reader that
stops reading or closes mid-write, a record cut short.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from mlbridge.compiler.fifo import FifoReader, write_all
from mlbridge.errors import (
    LimitExceededError,
    PipeClosedError,
    PipeError,
    PipeTimeoutError,
    TruncatedInputError,
)

PATH = Path("channel.in")


def nonblocking_pipe() -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    return read_fd, write_fd


def test_write_all_writes_more_than_the_pipe_holds_as_the_reader_drains_it():
    read_fd, write_fd = nonblocking_pipe()
    data = bytes(range(256)) * 4096  # 1 MiB: sixteen default pipe buffers
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(read_fd, 1 << 16):
            got.extend(chunk)
            time.sleep(0.001)  # a slow reader: the writer must wait, not spin or drop

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        write_all(write_fd, data, PATH, 30.0, "the reply")
    finally:
        os.close(write_fd)
        reader.join(30)
        os.close(read_fd)
    assert bytes(got) == data


def test_write_all_to_a_reader_that_stops_reading_times_out_naming_the_data():
    read_fd, write_fd = nonblocking_pipe()
    try:
        start, cpu = time.monotonic(), time.thread_time()
        with pytest.raises(
            PipeTimeoutError,
            match=r"channel\.in: the compiler did not read the reply within 0\.3 s",
        ):
            write_all(write_fd, b"x" * (1 << 20), PATH, 0.3, lambda: "the reply")
        assert time.monotonic() - start >= 0.3
        # It waited in poll(), not in a loop of failed writes.
        assert time.thread_time() - cpu < 0.15
    finally:
        os.close(write_fd)
        os.close(read_fd)


def test_write_all_to_a_reader_that_closes_mid_write_names_the_data():
    read_fd, write_fd = nonblocking_pipe()
    os.write(write_fd, b"y" * 1000)  # part of the pipe is taken: the next write is partial

    def close_soon() -> None:
        time.sleep(0.2)
        os.close(read_fd)

    closer = threading.Thread(target=close_soon)
    closer.start()
    try:
        with pytest.raises(
            PipeClosedError,
            match=r"channel\.in: the compiler closed its end while mlbridge was writing "
            r"the advice for observation 3",
        ):
            write_all(write_fd, b"x" * (1 << 20), PATH, 30.0, "the advice for observation 3")
    finally:
        closer.join(30)
        os.close(write_fd)


def test_write_all_to_a_closed_reader_says_so_at_once():
    read_fd, write_fd = nonblocking_pipe()
    os.close(read_fd)
    try:
        with pytest.raises(PipeClosedError, match="while mlbridge was writing the reply"):
            write_all(write_fd, b"z", PATH, 30.0, lambda: "the reply")
    finally:
        os.close(write_fd)


def test_write_all_to_a_bad_descriptor_is_a_pipe_error_naming_the_path():
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    os.close(write_fd)
    with pytest.raises(PipeError, match=r"channel\.in: write failed: Bad file descriptor"):
        write_all(write_fd, b"z", PATH, 1.0, "the reply")


def reader_over(data: bytes, close: bool = True) -> tuple[FifoReader, int]:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    if close:
        os.close(write_fd)
    os.set_blocking(read_fd, False)
    return FifoReader(read_fd, Path("channel.out"), 0.3), write_fd


def test_read_exact_cut_short_names_what_was_needed_and_what_arrived():
    reader, _ = reader_over(b"abc\nde")
    assert reader.read_line(10) == b"abc"
    with pytest.raises(
        TruncatedInputError,
        match=r"^input ends at byte offset 6: needed 5 bytes from offset 4, only 2 arrived$",
    ):
        reader.read_exact(5)


def test_read_exact_of_a_stalled_writer_times_out_naming_the_bytes_and_offset():
    reader, write_fd = reader_over(b"abcd", close=False)
    try:
        assert reader.read_exact(1) == b"a"
        with pytest.raises(PipeTimeoutError, match=r"waiting for 9 bytes at stream offset 1"):
            reader.read_exact(9)
    finally:
        os.close(write_fd)


def test_a_fifo_others_may_write_is_refused_with_the_fix(tmp_path):
    from mlbridge.compiler.fifo import open_fifo_reader
    from mlbridge.errors import UntrustedFileError

    fifo = tmp_path / "channel.out"
    os.mkfifo(fifo)
    os.chmod(fifo, 0o622)
    with pytest.raises(UntrustedFileError) as error:
        open_fifo_reader(fifo, time.monotonic() + 5, 5.0, lambda: None)
    assert str(error.value) == (
        f"refusing the channel FIFO {fifo}: its group or others may write it (mode 0622); "
        "make the channel in a private folder (FifoChannel() makes one, mode 0700; or "
        "mkdir -m 700 DIR and use DIR/channel)"
    )


def test_a_file_that_is_not_a_fifo_is_refused(tmp_path):
    from mlbridge.compiler.fifo import open_fifo_reader

    plain = tmp_path / "channel.out"
    plain.write_bytes(b"")
    os.chmod(plain, 0o600)
    with pytest.raises(PipeError, match=rf"^{re.escape(str(plain))} is not a FIFO$"):
        open_fifo_reader(plain, time.monotonic() + 5, 5.0, lambda: None)


# -- what was opened, not the name: the descriptor checks -----------------------------


def test_an_opened_fifo_others_may_write_is_refused_by_its_descriptor(tmp_path):
    # The name was checked before open(); a FIFO swapped in between is caught on the fd.
    from mlbridge.compiler.fifo import _check_fifo_fd
    from mlbridge.errors import UntrustedFileError

    fifo = tmp_path / "channel.out"
    os.mkfifo(fifo)
    os.chmod(fifo, 0o622)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(UntrustedFileError) as error:
            _check_fifo_fd(fd, fifo)
    finally:
        os.close(fd)
    assert str(error.value) == (
        f"refusing the channel FIFO {fifo}: its group or others may write it (mode 0622); "
        "make the channel in a private folder (FifoChannel() makes one, mode 0700; or "
        "mkdir -m 700 DIR and use DIR/channel)"
    )


def test_an_opened_file_that_is_not_a_fifo_is_refused_naming_it_and_closed(tmp_path):
    from mlbridge.compiler.fifo import _checked

    plain = tmp_path / "channel.out"
    plain.write_bytes(b"")
    fd = os.open(plain, os.O_RDONLY)
    with pytest.raises(PipeError, match=rf"^{re.escape(str(plain))} is not a FIFO$"):
        _checked(fd, plain)
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)  # closed: a refused descriptor does not leak


def test_the_read_end_opens_at_once_without_a_writer_and_never_blocks(tmp_path):
    from mlbridge.compiler.fifo import open_fifo_reader

    fifo = tmp_path / "channel.out"
    os.mkfifo(fifo, 0o600)
    opened: list[int] = []

    def open_it() -> None:
        opened.append(open_fifo_reader(fifo, time.monotonic() + 5, 5.0, lambda: None))

    opener = threading.Thread(target=open_it)
    opener.start()
    opener.join(10)
    if opener.is_alive():  # a blocking open waits for a writer: release it, then fail
        os.close(os.open(fifo, os.O_WRONLY))
        opener.join(10)
        pytest.fail("opening the read end waited for a writer")
    try:
        assert not os.get_blocking(opened[0])
    finally:
        os.close(opened[0])


# -- FifoReader at the edges of its buffer --------------------------------------------


def test_an_empty_line_at_the_start_of_the_stream_is_a_line():
    reader, _ = reader_over(b"\nabc\n")
    assert reader.read_line(10) == b""
    assert reader.read_line(10) == b"abc"
    assert reader.offset == 5


def test_a_line_arriving_in_two_pieces_after_another_line_is_read_whole():
    reader, write_fd = reader_over(b"ab\ncdef", close=False)

    def rest() -> None:
        time.sleep(0.1)
        os.write(write_fd, b"gh\n")
        os.close(write_fd)

    writer = threading.Thread(target=rest)
    writer.start()
    try:
        assert reader.read_line(8) == b"ab"
        assert reader.read_line(8) == b"cdefgh"
    finally:
        writer.join(10)


def test_a_line_cut_off_by_a_stalled_writer_times_out_naming_where_it_started():
    reader, write_fd = reader_over(b"ab\ncdef", close=False)
    try:
        assert reader.read_line(100) == b"ab"
        with pytest.raises(
            PipeTimeoutError,
            match=r"waiting for the end of the line at stream offset 3 \(stream offset 7\)$",
        ):
            reader.read_line(100)
    finally:
        os.close(write_fd)


def test_a_negotiation_line_is_recognised_after_consumed_records():
    reader, _ = reader_over(b"first\nACK yes\n")
    assert reader.read_line(100) == b"first"
    assert reader.take_line_if(b"ACK", 100) == b"ACK yes"


def framed_reader(data: bytes) -> tuple[FifoReader, list[bytes]]:
    reader, _ = reader_over(data)
    reader.at_end()  # the bytes are now in the reader's buffer
    return reader, []


def test_read_framed_hands_over_a_line_of_exactly_the_limit():
    reader, seen = framed_reader(b"abcd\nXY")
    out = bytearray(2)

    def frame(line, offset):
        seen.append(bytes(line))
        return [memoryview(out)]

    assert reader.read_framed(4, frame) is True
    assert seen == [b"abcd"] and out == b"XY" and reader.offset == 7


def test_read_framed_declines_a_line_longer_than_the_limit_consuming_nothing():
    reader, seen = framed_reader(b"abcde\nXY")

    def frame(line, offset):
        seen.append(bytes(line))
        return []

    assert reader.read_framed(4, frame) is False
    assert seen == [] and reader.offset == 0
    with pytest.raises(LimitExceededError, match="longer than the limit of 4 bytes"):
        reader.read_line(4)


def test_read_into_past_the_end_of_input_names_what_was_needed_and_what_arrived():
    reader, _ = reader_over(b"0123456789")
    with pytest.raises(TruncatedInputError):
        reader.read_line(100)  # no newline: the reader has seen the end of input
    view = memoryview(bytearray(20))
    with pytest.raises(
        TruncatedInputError,
        match=r"^input ends at byte offset 10: needed 20 bytes from offset 0, only 10 arrived$",
    ):
        reader.read_into(view)


def test_read_into_waits_for_bytes_that_come_later_within_the_timeout():
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    reader = FifoReader(read_fd, PATH, 5.0)
    data = bytes(range(200))

    def send() -> None:
        time.sleep(0.2)
        os.write(write_fd, data[:100])
        time.sleep(0.2)  # the view is filled in two pieces
        os.write(write_fd, data[100:])
        os.close(write_fd)

    writer = threading.Thread(target=send)
    writer.start()
    out = bytearray(200)
    try:
        reader.read_into(memoryview(out))
    finally:
        writer.join(10)
        os.close(read_fd)
    assert out == data and reader.offset == 200
