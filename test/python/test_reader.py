import io
import os
import threading

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
