"""Differential check of the C++ and Python decoders on near-valid messages.

The same inputs go through the Python decoder (``get_serdes(fmt).decode_stream``) and the
C++ one (``mlbridge-serdes-tool decode-batch``); any difference in accept or reject, in the
decoded records (bit for bit) or in the error class (truncated, limit, malformed) is a
failure, and so is any Python exception that is not a :class:`SerDesError`.

Inputs are mutations of valid streams (the test vectors of ``test/vectors``): truncation,
byte flips, insertions and deletions, lines whose JSON values are replaced by wrong types,
huge or out-of-range numbers, deep nesting, lying shapes, huge length claims (bitstream
string lengths, protobuf length prefixes) and protobuf fields under the wrong wire type.
The generator is seeded: a run is reproducible from ``--seed``.

Usage::

    python test/python/differential.py --count 1000000 --format bitstream
    python test/python/differential.py --count 20000 --format all --seed 7

``test_differential.py`` runs a bounded number of inputs per format under pytest. The
build folder is ``--build-dir``, ``$MLBRIDGE_BUILD_DIR`` or ``<repo>/build``.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VECTORS = ROOT / "test" / "vectors"
sys.path.insert(0, str(HERE))

from support.vectors import record_from_json  # noqa: E402

from mlbridge.errors import LimitExceededError, SerDesError, TruncatedInputError  # noqa: E402
from mlbridge.serdes import SERDES_NAMES, get_serdes  # noqa: E402
from mlbridge.serdes.protobuf import encode_varint  # noqa: E402

FORMATS = tuple(SERDES_NAMES)
#: Inputs per decode-batch process.
BATCH = 2000


def error_class_of_python(error: BaseException) -> str:
    """The error class of a Python decoder exception: truncated, limit or malformed."""
    if isinstance(error, TruncatedInputError):
        return "truncated"
    if isinstance(error, LimitExceededError):
        return "limit"
    if isinstance(error, SerDesError):
        return "malformed"
    return f"crash:{type(error).__name__}"


_CPP_LIMIT = re.compile(r"\(Max[A-Za-z]+\)|above the limit|message limit")


def error_class_of_cpp(message: str) -> str:
    """The error class of a C++ decoder message (the C++ errors name their class in words)."""
    if _CPP_LIMIT.search(message):
        return "limit"
    if "truncated" in message:
        return "truncated"
    return "malformed"


@dataclass(frozen=True)
class Outcome:
    """What a decoder made of one input: records (as comparable objects) or an error class."""

    records: tuple[object, ...] | None
    error: str | None = None
    message: str = ""

    def same_as(self, other: Outcome) -> bool:
        """Equal accept/reject, equal records, equal error class."""
        return (self.records, self.error) == (other.records, other.error)

    def describe(self) -> str:
        """One line for a report."""
        if self.error is None:
            return f"accepted {len(self.records or ())} records"
        return f"{self.error}: {self.message[:300]}"


def python_decode(fmt: str, data: bytes) -> Outcome:
    """Decode ``data`` as a whole stream with a fresh Python SerDes."""
    try:
        records = get_serdes(fmt).decode_stream(data)
    except Exception as e:  # noqa: BLE001 - a non-SerDesError is reported as a crash
        return Outcome(None, error_class_of_python(e), str(e))
    return Outcome(tuple(records))


def cpp_decode(tool: Path, fmt: str, inputs: list[bytes]) -> list[Outcome]:
    """Decode each input with a fresh C++ SerDes (``mlbridge-serdes-tool decode-batch``)."""
    framed = b"".join(struct.pack("<I", len(d)) + d for d in inputs)
    proc = subprocess.run(
        [str(tool), "decode-batch", fmt], input=framed, capture_output=True, timeout=600
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{tool.name} decode-batch {fmt} died with status {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace')[-2000:]}"
        )
    lines = proc.stdout.splitlines()
    if len(lines) != len(inputs):
        raise RuntimeError(f"decode-batch gave {len(lines)} results for {len(inputs)} inputs")
    out = []
    for line in lines:
        obj = orjson.loads(line)
        if "error" in obj:
            out.append(Outcome(None, error_class_of_cpp(obj["error"]), obj["error"]))
        else:
            out.append(Outcome(tuple(record_from_json(r) for r in obj["records"])))
    return out


# -- the generator ---------------------------------------------------------------------

_HUGE = [2**31, 2**32 - 1, 2**40, 2**40 + 1, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1]
_NUMBERS = [0, 1, -1, 2, 3, 7, 33, 255, 256, 65536, *_HUGE]
_LITERALS = [
    b"1e400", b"-1e400", b"1e39", b"-1e39", b"1e-400", b"3.4028235e38", b"3.4028236e38",
    b"1.5", b"1.0", b"-0.0", b"1e3", b"true", b"false", b"null", b'"NaN"', b'"Infinity"',
    b'"-Infinity"', b'"nan"', b'"x"', b'""', b"[]", b"{}", b"[1]", b'{"a":1}',
    b'"\\ud800"', b'"\\u00e9"', b"0x10", b"01", b"-", b"1e", b"NaN", b"Infinity",
]  # fmt: skip
_TYPES = [b"int8_t", b"uint8_t", b"int16_t", b"uint16_t", b"int32_t", b"uint32_t",
          b"int64_t", b"uint64_t", b"float", b"double", b"bool", b"string", b"int128_t",
          b"complex", b""]  # fmt: skip
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null')


def _literal(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.4:
        return str(rng.choice(_NUMBERS)).encode()
    if r < 0.55:
        return b'"' + rng.choice(_TYPES) + b'"'
    if r < 0.65:
        depth = rng.choice([2, 31, 32, 33, 40, 1000, 5000])
        return b"[" * depth + b"]" * depth
    return rng.choice(_LITERALS)


def _mutate_json_line(rng: random.Random, line: bytes) -> bytes:
    """Replace, drop or duplicate one JSON token or bracket of a line."""
    tokens = list(_TOKEN.finditer(line))
    r = rng.random()
    if tokens and r < 0.7:
        m = rng.choice(tokens)
        return line[: m.start()] + _literal(rng) + line[m.end() :]
    if tokens and r < 0.8:  # a dimension or a number off by one
        nums = [m for m in tokens if m.group()[:1] in b"-0123456789"]
        if nums:
            m = rng.choice(nums)
            try:
                v = int(m.group()) + rng.choice([-1, 1, -2, 2])
                return line[: m.start()] + str(v).encode() + line[m.end() :]
            except ValueError:
                pass
    if r < 0.9:  # drop or duplicate a comma-separated piece
        parts = line.split(b",")
        i = rng.randrange(len(parts))
        if rng.random() < 0.5 and len(parts) > 1:
            del parts[i]
        else:
            parts.insert(i, parts[i])
        return b",".join(parts)
    pos = rng.randrange(len(line) + 1)
    return line[:pos] + rng.choice([b"[", b"]", b"{", b"}", b'"', b"\\", b",", b":"]) + line[pos:]


def _split_lines(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every line that parses as a JSON object (record lines)."""
    spans, pos = [], 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break
        line = data[pos:end]
        if line.startswith(b"{"):
            try:
                if isinstance(orjson.loads(line), dict):
                    spans.append((pos, end))
            except orjson.JSONDecodeError:
                pass
        pos = end + 1
    return spans


def _mutate_line_format(rng: random.Random, data: bytes) -> bytes:
    spans = _split_lines(data)
    if not spans:
        return data
    start, end = rng.choice(spans)
    return data[:start] + _mutate_json_line(rng, data[start:end]) + data[end:]


def _mutate_bitstream_lengths(rng: random.Random, data: bytes) -> bytes:
    """Overwrite 4 bytes after a line with a (possibly huge) little-endian length."""
    spans = _split_lines(data)
    if not spans:
        return data
    _, end = rng.choice(spans)
    pos = end + 1 + rng.choice([0, 0, 4, 8])
    value = rng.choice([0, 1, 5, 2**16, 2**24, 2**28 - 1, 2**31, 2**32 - 1])
    return data[:pos] + struct.pack("<I", value) + data[pos + 4 :]


def _varint_at(data: bytes, pos: int) -> tuple[int, int] | None:
    value, shift = 0, 0
    for i in range(pos, min(pos + 10, len(data))):
        value |= (data[i] & 0x7F) << shift
        shift += 7
        if not data[i] & 0x80:
            return value, i + 1
    return None


def _mutate_protobuf(rng: random.Random, data: bytes) -> bytes:
    """Mutate a length prefix, a tag's wire type or an inner length of a delimited stream."""
    r = rng.random()
    if r < 0.3:  # a record's length prefix: a huge claim or off by one
        v = _varint_at(data, 0)
        if v is None:
            return data
        length, body = v
        new = rng.choice([length - 1, length + 1, 2**27, 2**28 - 1, 2**28, 2**35, 2**63])
        return encode_varint(max(new, 0)) + data[body:]
    pos = rng.randrange(len(data)) if data else 0
    if r < 0.7 and data:  # a byte that may be a tag: another wire type, same field number
        tag = (data[pos] & ~7) | rng.choice([0, 1, 2, 5, 3, 4, 6, 7])
        return data[:pos] + bytes([tag]) + data[pos + 1 :]
    # an inner length-delimited size (or any varint) replaced by a larger or smaller one
    v = _varint_at(data, pos)
    if v is None:
        return data
    value, end = v
    new = max(0, value + rng.choice([-1, 1, 2, 100, 2**20, 2**31]))
    return data[:pos] + encode_varint(new) + data[end:]


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    r = rng.random()
    if not data:
        return bytes([rng.randrange(256)])
    pos = rng.randrange(len(data))
    if r < 0.4:
        return data[:pos] + bytes([data[pos] ^ (1 << rng.randrange(8))]) + data[pos + 1 :]
    if r < 0.6:
        return data[:pos] + data[pos + rng.randrange(1, 9) :]
    if r < 0.8:
        noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5)))
        return data[:pos] + noise + data[pos:]
    return data[:pos] + bytes([rng.choice([0x00, 0x0A, 0x7B, 0x22, 0xFF, 0x80])]) + data[pos + 1 :]


def seeds(fmt: str) -> list[bytes]:
    """The valid streams the generator mutates: the test vectors of the format."""
    found = sorted(VECTORS.glob(f"*.{fmt}"))
    if not found:
        raise RuntimeError(f"no test vectors *.{fmt} in {VECTORS}")
    return [p.read_bytes() for p in found]


def generate(fmt: str, rng: random.Random, pool: list[bytes]) -> bytes:
    """One near-valid input: a seed under one to three mutations."""
    data = rng.choice(pool)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        r = rng.random()
        if r < 0.12:
            data = data[: rng.randrange(len(data) + 1)]
        elif r < 0.2:
            other = rng.choice(pool)
            data = data[: rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1) :]
        elif fmt == "protobuf":
            data = _mutate_protobuf(rng, data) if r < 0.7 else _mutate_bytes(rng, data)
        elif fmt == "bitstream" and r < 0.3:
            data = _mutate_bitstream_lengths(rng, data)
        elif r < 0.8:
            data = _mutate_line_format(rng, data)
        else:
            data = _mutate_bytes(rng, data)
    return data


# -- the run ---------------------------------------------------------------------------


@dataclass
class Report:
    """Figures of a run and the first differences found."""

    fmt: str
    inputs: int = 0
    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    differences: list[tuple[bytes, Outcome, Outcome]] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        """One line of figures."""
        rate = self.inputs / self.seconds if self.seconds else 0.0
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected.items()))
        return (
            f"{self.fmt}: {self.inputs} inputs in {self.seconds:.1f} s ({rate:.0f}/s), "
            f"{self.accepted} accepted by both, rejected: {kinds or 'none'}; "
            f"{len(self.differences)} differences"
        )


def batches(fmt: str, count: int, seed: int) -> Iterator[list[bytes]]:
    """The inputs of a run, ``BATCH`` at a time (deterministic in ``seed``)."""
    rng = random.Random(f"{fmt}:{seed}")
    pool = seeds(fmt)
    done = 0
    while done < count:
        n = min(BATCH, count - done)
        yield [generate(fmt, rng, pool) for _ in range(n)]
        done += n


def run(
    tool: Path,
    fmt: str,
    count: int,
    seed: int = 0,
    max_differences: int = 20,
    progress: Callable[[Report], None] | None = None,
) -> Report:
    """Run ``count`` generated inputs of ``fmt`` through both decoders."""
    report = Report(fmt)
    start = time.monotonic()
    for inputs in batches(fmt, count, seed):
        for data, cpp in zip(inputs, cpp_decode(tool, fmt, inputs), strict=True):
            py = python_decode(fmt, data)
            report.inputs += 1
            if not py.same_as(cpp) or (py.error or "").startswith("crash"):
                if len(report.differences) < max_differences:
                    report.differences.append((data, py, cpp))
                else:
                    report.differences.append((b"", py, cpp))  # counted, not kept
            elif py.error is None:
                report.accepted += 1
            else:
                report.rejected[py.error] = report.rejected.get(py.error, 0) + 1
        report.seconds = time.monotonic() - start
        if progress is not None:
            progress(report)
    return report


def default_tool(build_dir: str | None = None) -> Path:
    """``<build>/bin/mlbridge-serdes-tool``."""
    build = Path(build_dir or os.environ.get("MLBRIDGE_BUILD_DIR") or ROOT / "build")
    return build / "bin" / "mlbridge-serdes-tool"


def main(argv: list[str] | None = None) -> int:
    """Command line: run the check, print figures and differences; status 1 on any."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10000, help="inputs per format")
    parser.add_argument("--format", choices=[*FORMATS, "all"], default="all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--build-dir", default=None)
    parser.add_argument("--save", type=Path, default=None, help="folder for differing inputs")
    args = parser.parse_args(argv)
    tool = default_tool(args.build_dir)
    if not tool.exists():
        print(f"differential: {tool} is missing; build it first (make build)", file=sys.stderr)
        return 2
    failed = False
    for fmt in FORMATS if args.format == "all" else (args.format,):
        last = [0.0]

        def progress(r: Report, last: list[float] = last) -> None:
            if r.seconds - last[0] >= 30:
                last[0] = r.seconds
                print(r.summary(), flush=True)

        report = run(tool, fmt, args.count, args.seed, progress=progress)
        print(report.summary(), flush=True)
        for i, (data, py, cpp) in enumerate(d for d in report.differences if d[0]):
            print(f"  difference {i}: input {data[:200]!r}", flush=True)
            print(f"    python: {py.describe()}\n    c++:    {cpp.describe()}", flush=True)
            if args.save is not None:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / f"{fmt}-{args.seed}-{i}.{fmt}").write_bytes(data)
        failed |= bool(report.differences)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
