import io
import os
import threading

import pytest

from mlbridge.errors import LimitExceededError, TruncatedInputError
from mlbridge.serdes import ByteReader, BytesReader, Context, End, StreamReader, get_serdes


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
