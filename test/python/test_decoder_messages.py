"""The Python decoders' error messages on a fixed set of near-valid inputs are as recorded.

The differential check (``test_differential.py``) compares accept/reject, records and the
error class with C++, but not the words: an error message is what a user reads to find
what went wrong and where (the record, the byte offset, the tensor, the limit), so the
messages of the generator's first inputs per format (``differential.py``, seed 23) are
recorded in ``test/python/support/decoder_messages.json``. A change of wording, of the offset or
tensor a message names, or of which fault is reported shows here as a diff to review;
when it is intended, record the new messages with::

    .venv/bin/python test/python/test_decoder_messages.py --update
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from differential import FORMATS, batches, python_decode

# Not in test/vectors/: the generator takes every *.json there as a seed stream.
GOLDEN = Path(__file__).resolve().parent / "support" / "decoder_messages.json"
COUNT = 400
SEED = 23


def outcome_line(fmt: str, data: bytes) -> str:
    """``error class: message``, or ``accepted: <digest of the records>``."""
    outcome = python_decode(fmt, data)
    if outcome.error is None:
        digest = hashlib.sha256(repr(outcome.records).encode()).hexdigest()[:16]
        return f"accepted {len(outcome.records or ())} records: {digest}"
    return f"{outcome.error}: {outcome.message}"


def current(fmt: str) -> list[dict[str, str]]:
    """The outcome of each of the ``COUNT`` inputs, with the input's digest."""
    inputs = [data for batch in batches(fmt, COUNT, SEED) for data in batch]
    return [
        {"input": hashlib.sha256(data).hexdigest()[:16], "outcome": outcome_line(fmt, data)}
        for data in inputs
    ]


@pytest.fixture(scope="module")
def golden() -> dict[str, list[dict[str, str]]]:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("fmt", FORMATS)
def test_decoder_messages_are_as_recorded(golden, fmt):
    recorded = golden[fmt]
    got = current(fmt)
    assert [g["input"] for g in got] == [r["input"] for r in recorded], (
        "the generator of differential.py makes other inputs now: record the messages "
        "again (python test/python/test_decoder_messages.py --update) and review the diff"
    )
    changed = [
        f"input {i}: recorded {r['outcome']!r}\n          now {g['outcome']!r}"
        for i, (r, g) in enumerate(zip(recorded, got, strict=True))
        if r["outcome"] != g["outcome"]
    ]
    assert not changed, f"{len(changed)} of {len(got)} outcomes changed:\n" + "\n".join(
        changed[:10]
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_recorded_inputs_reach_every_error_class(golden, fmt):
    # Messages of only one kind of fault would pin little.
    kinds = {entry["outcome"].split(":", 1)[0] for entry in golden[fmt]}
    assert {"truncated", "limit", "malformed"} <= {k.split()[0] for k in kinds}, kinds


def main(argv: list[str]) -> int:
    """``--update``: record the current messages in ``GOLDEN``."""
    if argv != ["--update"]:
        print(__doc__, file=sys.stderr)
        return 2
    data = {fmt: current(fmt) for fmt in FORMATS}
    GOLDEN.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"recorded {sum(len(v) for v in data.values())} outcomes in {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
