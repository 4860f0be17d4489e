"""mlbridge's plugins stay drop-ins for a model host written only to LLVM's protocol.

The host below knows nothing of mlbridge: it follows LLVM's own reference host
(llvm/lib/Analysis/models/interactive_host.py and log_reader.py) as documented in
docs/pipe-protocol.md, with the standard library only, and fails on any record LLVM's
reader would not parse (as LLVM's reader does: ``KeyError: 'observation'``). It makes
the FIFOs itself in a private folder and writes no ``<base>.ext``, so it announces no
extension: every byte mlbridge's runner sends must be LLVM's.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import REPO, built_plugin

BOUND = 60.0
INPUTS = REPO / "test" / "lit" / "Inputs"

# LLVM's type names and their struct formats (log_reader.py's table).
_FORMATS = {
    "int8_t": "b", "uint8_t": "B", "int16_t": "h", "uint16_t": "H", "int32_t": "i",
    "uint32_t": "I", "int64_t": "q", "uint64_t": "Q", "float": "f", "double": "d",
}  # fmt: skip


def _size(spec: dict) -> int:
    count = 1
    for d in spec["shape"]:
        count *= d
    return count * struct.calcsize(_FORMATS[spec["type"]])


def llvm_host(base: Path, advice: int, records: list[dict]) -> None:
    """Answer every observation with ``advice`` until the compiler closes the pipe."""
    to_compiler = os.open(f"{base}.in", os.O_WRONLY)  # LLVM's order: .in first
    with os.fdopen(to_compiler, "wb", buffering=0) as out, open(f"{base}.out", "rb") as inp:
        header = json.loads(inp.readline())
        features, advice_spec = header["features"], header["advice"]
        records.append({"header": header})
        while line := inp.readline():
            record = json.loads(line)
            if "context" in record:
                records.append(record)
                continue
            obs = record["observation"]  # LLVM's reader: KeyError on anything else
            for spec in features:
                inp.read(_size(spec))
            assert inp.read(1) == b"\n"
            records.append({"observation": obs})
            out.write(struct.pack(_FORMATS[advice_spec["type"]], advice))


def run_against_llvm_host(argv: list[str], advice: int) -> list[dict]:
    records: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="llvm-host-") as d:  # mode 0700
        base = Path(d) / "channel"
        os.mkfifo(f"{base}.in", 0o600)
        os.mkfifo(f"{base}.out", 0o600)
        compiler = subprocess.Popen(
            [a.replace("{base}", str(base)) for a in argv], stderr=subprocess.PIPE
        )
        try:
            llvm_host(base, advice, records)
            _, err = compiler.communicate(timeout=BOUND)
        finally:
            if compiler.poll() is None:
                compiler.kill()
                compiler.communicate(timeout=BOUND)
        assert compiler.returncode == 0, err.decode(errors="replace")
        assert sorted(os.listdir(d)) == ["channel.in", "channel.out"]
    return records


@pytest.fixture(scope="module")
def llvm_plugin() -> Path:
    return built_plugin("llvm")


def test_opt_inliner_over_the_pipe_speaks_only_llvms_protocol(
    llvm_plugin: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.ll"
    records = run_against_llvm_host(
        ["opt-22", f"-load-pass-plugin={llvm_plugin}", "-passes=default<O2>",
         "-mlbridge-inline-runner=pipe", "-mlbridge-inline-channel={base}",
         "-mlbridge-inline-timeout-ms=60000", "-S", str(INPUTS / "inline.ll"),
         "-o", str(out)],
        advice=1,
    )  # fmt: skip
    observations = [r for r in records if "observation" in r]
    assert observations, "the inliner asked nothing"
    assert records[0]["header"]["advice"]["type"] == "int64_t"
    assert out.is_file()


def test_llc_priority_advisor_over_the_pipe_speaks_only_llvms_protocol(tmp_path: Path) -> None:
    ll = tmp_path / "pressure.ll"
    subprocess.run(
        ["clang-22", "-O2", "-S", "-emit-llvm", str(INPUTS / "regalloc-pressure.c"), "-o",
         str(ll)],
        check=True, timeout=BOUND,
    )  # fmt: skip
    records = run_against_llvm_host(
        ["llc-22", f"-load-pass-plugin={built_plugin('llc')}", "-O2",
         "-mlbridge-regalloc-priority-runner=pipe", "-mlbridge-regalloc-priority-channel={base}",
         str(ll), "-o", str(tmp_path / "out.s")],
        advice=1,
    )  # fmt: skip
    assert any("observation" in r for r in records), "the advisor asked nothing"
    assert records[0]["header"]["advice"]["type"] == "double"
