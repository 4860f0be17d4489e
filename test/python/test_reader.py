import io
import os
import re
import threading
from pathlib import Path

import numpy as np
import pytest

from mlbridge.errors import LimitExceededError, MLBridgeError, TruncatedInputError
from mlbridge.serdes import (
    ByteReader,
    BytesReader,
    Context,
    End,
    Header,
    Message,
    MessageKind,
    StreamReader,
    get_serdes,
)
from mlbridge.serdes.reader import RecyclingBuffer
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType, TensorSpec


@pytest.mark.parametrize("make", [BytesReader, lambda d: StreamReader(io.BytesIO(d))])
def test_readers_track_offsets_and_signal_the_end(make):
    reader = make(b"ab\ncdef")
    assert isinstance(reader, ByteReader)
    assert not reader.at_end()
    assert reader.read_line(10) == b"ab"
    assert reader.offset == 3
    assert reader.read_exact(2) == b"cd"
    with pytest.raises(TruncatedInputError, match="needed 3 bytes"):
        reader.read_exact(3)


@pytest.mark.parametrize("make", [BytesReader, lambda d: StreamReader(io.BytesIO(d))])
def test_read_line_refuses_lines_longer_than_the_limit(make):
    with pytest.raises(LimitExceededError, match="limit of 4 bytes"):
        make(b"0123456789\n").read_line(4)


@pytest.mark.parametrize("make", [BytesReader, lambda d: StreamReader(io.BytesIO(d))])
def test_read_line_without_newline_is_truncated(make):
    with pytest.raises(TruncatedInputError, match="no terminating newline"):
        make(b"abc").read_line(10)


def test_stream_reader_decodes_records_from_a_pipe():
    serdes = get_serdes("json")
    data = serdes.encode_stream([Context("a"), Context(""), End()])
    read_fd, write_fd = os.pipe()

    def writer():
        with os.fdopen(write_fd, "wb") as w:
            for i in range(0, len(data), 5):
                w.write(data[i : i + 5])
                w.flush()

    thread = threading.Thread(target=writer)
    thread.start()
    with os.fdopen(read_fd, "rb") as r:
        records = list(get_serdes("json").iter_decode(StreamReader(r)))
    thread.join(timeout=10)
    assert records == [Context("a"), Context(""), End()]


@pytest.mark.parametrize("make", [BytesReader, lambda d: StreamReader(io.BytesIO(d))])
def test_read_into_fills_the_view_or_says_it_is_truncated(make):
    reader = make(b"abcdef")
    out = bytearray(4)
    reader.read_into(memoryview(out))
    assert out == b"abcd" and reader.offset == 4
    with pytest.raises(TruncatedInputError, match="needed 3 bytes"):
        reader.read_into(memoryview(bytearray(3)))


def test_recycling_buffer_reuses_only_memory_nothing_refers_to():
    pool = RecyclingBuffer()
    pool.start_message(100_000)
    first = pool.take(100_000)
    first[:] = 1
    base = first.base.ctypes.data  # an address: holding the block would keep it in use
    # `first` is alive: the next message goes after it, never over it.
    pool.start_message(100_000)
    second = pool.take(100_000)
    second[:] = 2
    assert (first == 1).all()
    assert first.ctypes.data + first.size <= second.ctypes.data
    # A third does not fit beside them: new memory.
    pool.start_message(100_000)
    third = pool.take(100_000)
    assert third.base.ctypes.data != base
    # Once nothing refers to a block, it is reused from its start.
    del first, second
    pool.start_message(50_000)
    fourth = pool.take(40_000)
    assert fourth.ctypes.data == base
    assert pool.take(8).ctypes.data % 8 == 0  # slices are 8-byte aligned
    with pytest.raises(ValueError, match="beyond"):
        pool.take(200_000)
    del third, fourth


def test_bitstream_observations_kept_by_the_caller_are_never_overwritten():
    # Large tensors are read into recycled memory: what a trainer keeps must stay intact.
    sd = get_serdes("bitstream")
    spec = TensorSpec("x", ElementType.FLOAT, (-1,))
    stream = [sd.encode(Header((spec,)))]
    values = [np.full(5000 + i, float(i), dtype=np.float32) for i in range(6)]
    stream += [
        sd.encode(Message(MessageKind.OBSERVATION, i, (Tensor("x", ElementType.FLOAT, v),)))
        for i, v in enumerate(values)
    ]
    decoder = get_serdes("bitstream")
    records = list(decoder.iter_decode(BytesReader(b"".join(stream))))
    kept = [r["x"].array for r in records[1:]]
    assert all(np.array_equal(k, v) for k, v in zip(kept, values, strict=True))


@pytest.mark.parametrize(
    "shapes",
    [b'{"x":["5"]}', b'{"x":[true]}', b'{"x":[-1]}', b'{"y":[5]}', b"[5]", b'{"x":5}'],
)
def test_bitstream_bad_dynamic_shapes_get_the_generic_errors(shapes):
    sd = get_serdes("bitstream")
    header = sd.encode(Header((TensorSpec("x", ElementType.FLOAT, (-1,)),)))
    data = header + b'{"observation":0,"shapes":' + shapes + b"}\n" + bytes(20) + b"\n"
    with pytest.raises(MLBridgeError):
        list(get_serdes("bitstream").iter_decode(BytesReader(data)))


def _fifo_reader(data: bytes):
    """A pipe reader of mlbridge's model side over ``data`` (the writer then closes)."""
    import fcntl

    from mlbridge.compiler.fifo import FifoReader

    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    os.write(write_fd, data)
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    return FifoReader(read_fd, Path("test.out"), 10.0)


FRAMED_READERS = [BytesReader, _fifo_reader]


@pytest.mark.parametrize("make", FRAMED_READERS)
def test_read_framed_fills_the_views_the_frame_asks_for(make):
    reader = make(b"3\nabcdef\nrest")
    out, tail = bytearray(3), bytearray(4)
    seen = []

    def frame(line: bytes, offset: int) -> list[memoryview]:
        seen.append((bytes(line), offset))
        return [memoryview(out), memoryview(tail)]

    assert reader.read_framed(100, frame) is True
    assert seen == [(b"3", 0)] and out == b"abc" and tail == b"def\n"
    assert reader.offset == 9
    assert reader.read_exact(4) == b"rest"
    assert reader.read_framed(100, frame) is None  # the end of input


@pytest.mark.parametrize("make", FRAMED_READERS)
def test_read_framed_that_is_declined_consumes_nothing(make):
    reader = make(b"header\nvalues")
    assert reader.read_framed(100, lambda line, offset: None) is False
    assert reader.offset == 0 and reader.read_line(100) == b"header"


@pytest.mark.parametrize("make", FRAMED_READERS)
def test_read_framed_truncated_consumes_what_arrived(make):
    reader = make(b"x\nabc")
    with pytest.raises(TruncatedInputError, match="needed 5 bytes from offset 2, only 3 arrived"):
        reader.read_framed(100, lambda line, offset: [memoryview(bytearray(5))])
    assert reader.offset == 5


def test_bitstream_values_packed_off_their_alignment_decode_as_aligned_arrays():
    # The stream packs values without padding: a float after three int8 starts at an odd
    # offset, and its array must still be a correct, aligned float array.
    sd = get_serdes("bitstream")
    specs = (
        TensorSpec("b", ElementType.INT8, (3,)),
        TensorSpec("f", ElementType.FLOAT, (2,)),
        TensorSpec("d", ElementType.DOUBLE, (-1,)),
    )
    message = Message(
        MessageKind.OBSERVATION,
        7,
        (
            Tensor("b", ElementType.INT8, [1, -2, 3]),
            Tensor("f", ElementType.FLOAT, [0.5, -1.25]),
            Tensor("d", ElementType.DOUBLE, [1e300, -2.5, 3.0]),
        ),
    )
    data = sd.encode(Header(specs)) + sd.encode(message)
    for reader in (BytesReader(data), _fifo_reader(data)):
        decoded = list(get_serdes("bitstream").iter_decode(reader))[1]
        assert decoded == message
        assert all(t.array.flags.aligned for t in decoded.tensors)


def test_fifo_reader_buffer_grows_for_long_lines_and_keeps_what_follows():
    # Lines longer than the read-ahead buffer, between short ones: the buffer grows
    # (keeping the unconsumed bytes) and every byte comes out once, in order.
    lines = [b"a" * 100, bytes(range(256)).replace(b"\n", b"") * 800, b"z" * 10, b"q" * 70_000]
    reader = _fifo_reader(b"".join(line + b"\n" for line in lines) + b"tail")
    for line in lines:
        assert reader.read_line(1 << 20) == line
    assert reader.read_exact(4) == b"tail" and reader.at_end()
    assert reader.offset == sum(len(line) + 1 for line in lines) + 4


def test_fifo_reader_grows_after_values_were_read_straight_into_arrays():
    # A direct read views the buffer for what follows the values; the buffer must be free
    # to grow afterwards (for a longer line).
    reader = _fifo_reader(b"x\n" + bytes(200_000) + b"L" * 300_000 + b"\nend")
    out = bytearray(200_000)
    assert reader.read_framed(100, lambda line, offset: [memoryview(out)]) is True
    assert reader.read_line(1 << 20) == b"L" * 300_000
    assert reader.read_exact(3) == b"end"


def test_fifo_reader_allocates_what_arrives_not_what_a_record_claims():
    # A 5-byte protobuf length prefix claiming 200 MiB and one byte of body: the model
    # side reports the truncation having allocated about what arrived.
    import tracemalloc

    claimed = 200 << 20
    prefix = bytearray()
    value = claimed
    while value >= 0x80:
        prefix.append(value & 0x7F | 0x80)
        value >>= 7
    prefix.append(value)
    reader = _fifo_reader(bytes(prefix) + b"\x0a")
    tracemalloc.start()
    try:
        with pytest.raises(TruncatedInputError, match=f"needed {claimed} bytes"):
            get_serdes("protobuf").decode(reader)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak} bytes allocated for a 6-byte record"


def test_fifo_reader_reads_a_record_larger_than_its_first_allocation():
    # The same path with every byte there: a record of 900 KiB (many first
    # allocations, within the test pipe's 1 MiB) comes out whole, in order.
    body = bytes(range(256)) * 3600
    reader = _fifo_reader(body + b"end")
    assert reader.read_exact(len(body)) == body
    assert reader.read_exact(3) == b"end" and reader.at_end()


# -- a stream that trickles: the StreamReader against the BytesReader -------------------

VECTOR_STREAMS = sorted(
    p
    for p in (Path(__file__).resolve().parents[1] / "vectors").iterdir()
    if p.suffix in (".bitstream", ".json", ".protobuf") and p.name != "cases.json"
)


class Trickle(io.RawIOBase):
    """A pipe that hands out at most ``chunk`` bytes per read, as a slow writer's does."""

    def __init__(self, data: bytes, chunk: int) -> None:
        self._data, self._pos, self._chunk = data, 0, chunk

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self._chunk, len(self._data) - self._pos)
        buffer[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


def decode_all(serdes: str, reader: ByteReader) -> tuple[list, str | None, int]:
    """The records, the error (class, and its message up to where the input ended), and
    the offset reached."""
    s, records = get_serdes(serdes), []
    try:
        while (record := s.decode(reader)) is not None:
            records.append(record)
    except MLBridgeError as e:
        # Up to where the input ended: the rest is worded by the path that read it (the
        # framed bitstream path counts "N of its M bytes", the generic one "needed M").
        message = re.sub(r"(input ends at byte offset \d+).*", r"\1", str(e))
        return records, f"{type(e).__name__}: {message}", reader.offset
    return records, None, reader.offset


@pytest.mark.parametrize("path", VECTOR_STREAMS, ids=lambda p: p.name)
def test_a_trickling_stream_decodes_as_the_bytes_do_at_every_cut(path):
    serdes = path.suffix[1:]
    data = path.read_bytes()
    step = max(1, len(data) // 97)  # every cut of small vectors, ~100 of large ones
    for cut in [*range(0, len(data), step), len(data)]:
        head = data[:cut]
        expected = decode_all(serdes, BytesReader(head))
        for chunk in (1, 7):
            got = decode_all(serdes, StreamReader(Trickle(head, chunk)))
            assert got[:2] == expected[:2], (cut, chunk)
            if expected[1] is None:
                assert got[2] == expected[2] == cut, (cut, chunk)


def test_stream_read_line_admits_a_line_of_exactly_the_limit():
    reader = StreamReader(Trickle(b"abcd\nabcde\n", 2))
    assert reader.read_line(4) == b"abcd"
    assert reader.offset == 5
    with pytest.raises(
        LimitExceededError, match="line at byte offset 5 is longer than the limit of 4"
    ):
        reader.read_line(4)


def test_stream_empty_lines_after_a_peek_keep_the_offset():
    reader = StreamReader(Trickle(b"\n\nab\n", 1))
    assert not reader.at_end()  # peeks the first newline
    assert reader.read_line(8) == b""
    assert reader.offset == 1
    assert not reader.at_end()
    assert reader.read_line(8) == b""
    assert reader.offset == 2
    assert not reader.at_end()
    assert reader.read_line(8) == b"ab"
    assert reader.offset == 5
    assert reader.at_end()


def test_stream_read_exact_after_a_peek_joins_the_peeked_byte():
    reader = StreamReader(Trickle(b"abcdef", 2))
    assert not reader.at_end()
    assert reader.read_exact(5) == b"abcde"
    assert reader.offset == 5
    assert not reader.at_end()
    with pytest.raises(
        TruncatedInputError, match="offset 6: needed 3 bytes from offset 5, only 1 arrived"
    ):
        reader.read_exact(3)
    assert reader.offset == 6


class MinimalReader:
    """A ByteReader with only the required methods (no read_into, no read_framed)."""

    def __init__(self, data: bytes) -> None:
        self._inner = BytesReader(data)

    @property
    def offset(self) -> int:
        return self._inner.offset

    def at_end(self) -> bool:
        return self._inner.at_end()

    def read_exact(self, n: int) -> bytes:
        return self._inner.read_exact(n)

    def read_line(self, max_len: int) -> bytes:
        return self._inner.read_line(max_len)


@pytest.mark.parametrize("path", VECTOR_STREAMS, ids=lambda p: p.name)
def test_a_reader_with_only_the_required_methods_decodes_every_vector(path):
    serdes = path.suffix[1:]
    data = path.read_bytes()
    assert decode_all(serdes, MinimalReader(data)) == decode_all(serdes, BytesReader(data))


def test_read_exact_of_a_negative_size_is_a_value_error():
    with pytest.raises(ValueError, match="^read_exact: negative size -1$"):
        BytesReader(b"ab").read_exact(-1)


def test_recycling_buffer_take_beyond_the_message_is_a_value_error():
    buffer = RecyclingBuffer()
    buffer.start_message(RecyclingBuffer.MIN_BLOCK * 4)
    buffer.take(RecyclingBuffer.MIN_BLOCK * 4)
    with pytest.raises(
        ValueError, match="^RecyclingBuffer.take beyond the size given to start_message$"
    ):
        buffer.take(RecyclingBuffer.MIN_BLOCK * 5)


def test_recycling_buffer_grows_a_free_block_for_a_larger_message_and_turns_when_kept():
    buffer = RecyclingBuffer()
    kept = []
    for size in (8, RecyclingBuffer.MIN_BLOCK * 3, 16, RecyclingBuffer.MIN_BLOCK * 5, 24):
        buffer.start_message(buffer.padded(size))
        view = buffer.take(size)
        view[:] = len(kept) + 1
        kept.append(view)  # every array stays alive: no block may be overwritten
    assert [int(v[0]) for v in kept] == [1, 2, 3, 4, 5]
    assert all((v == i + 1).all() for i, v in enumerate(kept))
    kept.clear()
    buffer.start_message(RecyclingBuffer.MIN_BLOCK * 9)  # a free block, grown in place
    assert buffer.take(RecyclingBuffer.MIN_BLOCK * 9).size == RecyclingBuffer.MIN_BLOCK * 9


@pytest.mark.parametrize("make", FRAMED_READERS)
def test_read_framed_never_hands_frame_a_line_longer_than_max_len(make):
    seen: list[bytes] = []

    def frame(line: bytes, offset: int) -> list[memoryview]:
        seen.append(bytes(line))
        return []

    assert make(b"abcd\n").read_framed(4, frame) is True  # exactly max_len: framed
    assert make(b"abcde\n").read_framed(4, frame) is False  # one more: the generic path
    assert seen == [b"abcd"]


@pytest.mark.parametrize("make", FRAMED_READERS)
def test_read_framed_hands_frame_an_empty_first_line(make):
    seen: list[tuple[bytes, int]] = []

    def frame(line: bytes, offset: int) -> list[memoryview]:
        seen.append((bytes(line), offset))
        return []

    reader = make(b"\nrest")
    assert reader.read_framed(4, frame) is True
    assert seen == [(b"", 0)] and reader.offset == 1


def test_stream_read_line_after_a_peek_counts_the_peeked_byte_against_the_limit():
    # at_end() peeks one byte; the line it starts may still be at most max_len long.
    fits = StreamReader(io.BytesIO(b"abcd\n"))
    assert not fits.at_end()
    assert fits.read_line(4) == b"abcd"
    too_long = StreamReader(io.BytesIO(b"abcde\n"))
    assert not too_long.at_end()
    with pytest.raises(
        LimitExceededError, match="^line at byte offset 0 is longer than the limit of 4 bytes$"
    ):
        too_long.read_line(4)


def test_recycling_buffer_reuses_a_free_block_exactly_the_size_of_the_message():
    buffer = RecyclingBuffer()
    buffer.start_message(RecyclingBuffer.MIN_BLOCK)  # a new block of twice that
    first = buffer.take(8)
    base = first.ctypes.data  # an address: holding the array would keep the block in use
    del first
    buffer.start_message(2 * RecyclingBuffer.MIN_BLOCK)
    assert buffer.take(2 * RecyclingBuffer.MIN_BLOCK).ctypes.data == base


class RecordingReader(MinimalReader):
    """A ByteReader with read_into (but no read_framed) that records how it is read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.exact: list[int] = []
        self.into: list[int] = []

    def read_exact(self, n: int) -> bytes:
        self.exact.append(n)
        return super().read_exact(n)

    def read_into(self, view: memoryview) -> None:
        self.into.append(len(view))
        self._inner.read_into(view)


def test_bitstream_reads_numeric_values_through_read_into_when_the_reader_has_it():
    sd = get_serdes("bitstream")
    specs = (TensorSpec("f", ElementType.FLOAT, (3,)), TensorSpec("i", ElementType.INT64, (2,)))
    message = Message(
        MessageKind.OBSERVATION,
        1,
        (Tensor("f", ElementType.FLOAT, [1.0, 2.0, 3.0]), Tensor("i", ElementType.INT64, [4, 5])),
    )
    reader = RecordingReader(sd.encode(Header(specs)) + sd.encode(message))
    assert list(get_serdes("bitstream").iter_decode(reader))[1] == message
    assert reader.into == [12, 16]
    assert reader.exact == [1]  # only the final newline


def test_bitstream_generic_path_reads_large_values_after_a_bool_tensor():
    # Values beyond RecyclingBuffer.MIN_BLOCK after a bool (read the plain way): the
    # room made for the message must count the float tensor.
    sd = get_serdes("bitstream")
    specs = (TensorSpec("b", ElementType.BOOL, (1,)), TensorSpec("f", ElementType.FLOAT, (-1,)))
    values = np.arange(RecyclingBuffer.MIN_BLOCK, dtype=np.float32)
    message = Message(
        MessageKind.OBSERVATION,
        1,
        (Tensor("b", ElementType.BOOL, [True]), Tensor("f", ElementType.FLOAT, values)),
    )
    data = sd.encode(Header(specs)) + sd.encode(message)
    assert list(get_serdes("bitstream").iter_decode(StreamReader(io.BytesIO(data))))[1] == message
