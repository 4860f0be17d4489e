"""bench/regalloc_compile.py: the smoke run times every runner and measures every allocator.

Every ML runner decides with the basic policy, and the script refuses to report when
their objects differ; the quality rows cover greedy, LLVM's basic allocator and the ML
allocator with the basic and a random policy on each held-out project. Timings are never
asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

RUNNERS = {
    "greedy (stock llc)",
    "in-process (callback)",
    "in-process (ONNX Runtime)",
    "pipe (bitstream, Python)",
    "gRPC (Python server)",
}
ALLOCATORS = {"greedy", "LLVM basic", "mlbridge, basic policy", "mlbridge, random policy"}


def test_smoke_run_times_every_runner_and_measures_every_allocator(tmp_path: Path) -> None:
    build = Path(os.environ.get("MLBRIDGE_BUILD_DIR", REPO / "build"))
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "regalloc_compile.py"), "--smoke",
         "--build-dir", str(build), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result_file,) = tmp_path.glob("regalloc-smoke-*.json")
    assert not (tmp_path / "regalloc-latest.md").exists()
    result = json.loads(result_file.read_text())
    projects = set(result["meta"]["modules"])
    assert projects == {"lua", "cmark-gfm"}
    timed = {(r["runner"], r["project"]) for r in result["compile_time"] if r["jobs"] == 1}
    assert timed == {(r, p) for r in RUNNERS for p in projects}
    assert all(r["median_s"] > 0 for r in result["compile_time"])
    rows = {(r["allocator"], r["project"]): r for r in result["quality"]}
    assert set(rows) == {(a, p) for a in ALLOCATORS for p in projects}
    for row in rows.values():
        assert row["allocated_bytes"] > row["text_bytes"] > 0
        assert row["spill_reload_cost"] >= 0 and row["copies"] >= 0
    # A random policy spills on Lua's first module, where the others do not.
    assert rows["mlbridge, random policy", "lua"]["spills"] > rows["greedy", "lua"]["spills"]
    assert "| lua | gRPC (Python server) | 1 |" in proc.stdout
