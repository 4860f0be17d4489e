#!/usr/bin/env python3
"""Write the SerDes test vectors: ``<case>.<serdes>`` for every case in cases.json.

    python test/vectors/generate.py           # (re)write every vector file
    python test/vectors/generate.py --check   # exit 1 if a file is missing, stale or orphaned

The bytes come from the Python implementation (``mlbridge.serdes``); the C++ unit tests and
the Python tests check that both sides produce exactly these bytes and decode them back.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from mlbridge.serdes import SERDES_NAMES, get_serdes

HERE = Path(__file__).resolve().parent
# The JSON form of the records is test code: test/python/support/vectors.py.
sys.path.insert(0, str(HERE.parent / "python"))
from support.vectors import Case, case_from_json  # noqa: E402

CASES = HERE / "cases.json"


def load_cases(path: Path = CASES) -> list[Case]:
    """The cases of ``cases.json``, in file order."""
    return [case_from_json(c) for c in orjson.loads(path.read_bytes())["cases"]]


def expected_files(cases: list[Case]) -> dict[str, bytes]:
    """Map each vector file name to the bytes it must hold."""
    files: dict[str, bytes] = {}
    for case in cases:
        for name in case.serdes:
            files[f"{case.name}.{name}"] = get_serdes(name).encode_stream(case.records)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify instead of writing")
    parser.add_argument("--dir", type=Path, default=HERE, help="vector folder (default: here)")
    args = parser.parse_args(argv)

    files = expected_files(load_cases())
    existing = {
        p.name
        for p in args.dir.iterdir()
        if p.is_file() and p.suffix.lstrip(".") in SERDES_NAMES and p.name != CASES.name
    }
    if args.check:
        problems = [f"missing: {n}" for n in sorted(files) if n not in existing]
        problems += [
            f"stale: {n}"
            for n in sorted(files)
            if n in existing and (args.dir / n).read_bytes() != files[n]
        ]
        problems += [f"orphaned (no such case): {n}" for n in sorted(existing - set(files))]
        for p in problems:
            print(f"generate.py: {p}", file=sys.stderr)
        if problems:
            print("generate.py: run `python test/vectors/generate.py` to update", file=sys.stderr)
            return 1
        print(f"generate.py: {len(files)} vector files are current", file=sys.stderr)
        return 0
    for name, data in files.items():
        path = args.dir / name
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
    for name in sorted(existing - set(files)):
        print(f"generate.py: note: {name} belongs to no case (delete it?)", file=sys.stderr)
    print(f"generate.py: wrote {len(files)} vector files to {args.dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
