"""The round-trip benchmark's smoke mode: both processes run and every answer is right.

It covers every transport: the pipes, the FIFO floor, gRPC (``GrpcModelRunner`` against
``mlbridge.compiler.grpc.serve``) and the bare gRPC floor.

Correctness only (bench/roundtrip.py --smoke); timings are never asserted. The compiler
side is built by ``make build`` into ``$MLBRIDGE_BUILD_DIR`` or ``<repo>/build``; a
missing binary is a failure, never a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

BINARY = "mlbridge-bench-roundtrip"


def build_dir() -> Path:
    env = os.environ.get("MLBRIDGE_BUILD_DIR")
    return Path(env) if env else REPO / "build"


def test_smoke_mode_checks_every_answer(tmp_path):
    binary = build_dir() / "bin" / BINARY
    assert binary.is_file(), f"{binary} is not built: run `make build` first"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "roundtrip.py"), "--smoke",
         "--build-dir", str(build_dir()), "--out", str(tmp_path), "--timeout", "60"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result_file,) = tmp_path.glob("roundtrip-smoke-*.json")
    result = json.loads(result_file.read_text())
    # Every transport, gRPC and its floor included (gRPC is on in the default build).
    assert set(result["sweep"]) == {"bitstream", "json", "protobuf", "fifo", "grpc", "grpc-floor"}
    for mode, r in result["sweep"].items():
        # 3 warm-up queries and 3 sizes, each answer checked by the C++ side (which exits
        # non-zero on any mismatch, so the run above would have failed).
        assert r["checked"] == 6, mode
        assert len(r["median_per_size_seconds"]) == 3, mode
    # The same sessions again with both processes pinned to one core.
    assert result["sweep_one_core"].keys() == result["sweep"].keys()
    assert all(r["checked"] == 6 for r in result["sweep_one_core"].values())
    md = (tmp_path / result_file.with_suffix(".md").name).read_text()
    assert "Both processes on one core" in md
    assert "| pipe + bitstream |" in md
    assert "| gRPC (GrpcModelRunner + serve) |" in md
    assert "gRPC within 1.3x of the gRPC floor" in md
    # Nothing is left behind: no FIFO folder of this run, no latest table in a smoke run.
    assert not (tmp_path / "roundtrip-latest.md").exists()


def test_missing_binary_is_reported_with_the_fix(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "roundtrip.py"), "--smoke",
         "--build-dir", str(tmp_path), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "make build" in proc.stderr
