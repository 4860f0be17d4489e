"""The C++ and Python decoders agree on generated near-valid inputs (``differential.py``).

A bounded run per format (seconds); ``python test/python/differential.py --count 1000000``
is the long run (docs/serialization.md).
"""

import pytest
from conftest import built
from differential import FORMATS, cpp_decode, python_decode, run

COUNT = 3000


@pytest.fixture(scope="module")
def tool():
    return built("bin/mlbridge-serdes-tool")


@pytest.mark.parametrize("fmt", FORMATS)
def test_generated_inputs_decode_the_same_in_cpp_and_python(tool, fmt):
    report = run(tool, fmt, COUNT, seed=19)
    assert report.inputs == COUNT
    shown = [
        f"{data[:160]!r}\n  python: {py.describe()}\n  c++: {cpp.describe()}"
        for data, py, cpp in report.differences[:5]
    ]
    assert report.differences == [], report.summary() + "\n" + "\n".join(shown)


def test_generator_reaches_every_outcome_class(tool):
    # A generator that only produced garbage (or only valid streams) would prove little.
    report = run(tool, "bitstream", COUNT, seed=19)
    assert report.accepted > 0
    assert set(report.rejected) == {"truncated", "limit", "malformed"}


@pytest.mark.parametrize(
    ("fmt", "data"),
    [
        ("json", b'{"observation":0,"tensors":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"),
        ("bitstream", b'{"features":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"),
        ("json", b'{"observation":0,"tensors":[{"name":"f","type":"float","shape":[1],'
                 b'"data":[1e400]}]}\n'),
        ("json", b'{"features":[{"name":"x","type":"int64_t","port":0,'
                 b'"shape":[9223372036854775807]}]}\n'),
        ("protobuf", b"\xff\xff\xff\x7f\x0a\x00"),
    ],
    ids=["json-deep", "bitstream-deep-header", "json-1e400", "json-header-dim", "pb-claim"],
)  # fmt: skip
def test_issue_19_inputs_are_rejected_alike(tool, fmt, data):
    (cpp,) = cpp_decode(tool, fmt, [data])
    py = python_decode(fmt, data)
    assert py.error is not None and py.error == cpp.error, (py.describe(), cpp.describe())
