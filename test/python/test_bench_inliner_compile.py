"""The inliner compile-time benchmark's smoke mode: it runs and its runners agree.

bench/inliner_compile.py --smoke compiles two held-out corpus modules with stock opt-22 and
with the ML inline advisor on the built-in policy through ONNX Runtime, TF AOT and a Python
process over the pipe; the runners of one policy must give the same .text size (the script
fails otherwise). Timings are never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_smoke_mode_runs_every_configuration_and_runners_agree(tmp_path: Path):
    build = Path(os.environ.get("MLBRIDGE_BUILD_DIR", REPO / "build"))
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "inliner_compile.py"), "--smoke",
         "--build-dir", str(build), "--out", str(tmp_path), "--timeout", "120"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result_file,) = tmp_path.glob("inliner-compile-smoke-*.json")
    result = json.loads(result_file.read_text())
    names = [c["name"] for c in result["configurations"]]
    assert names[0] == "stock opt-22"
    assert any("ONNX Runtime" in n for n in names) and any("pipe" in n for n in names)
    assert any("TF AOT" in n for n in names) and any("native MLIR" in n for n in names)
    for c in result["configurations"]:
        assert len(c["seconds"]) == 2 and c["text_bytes"] > 0
    assert "| stock opt-22 |" in proc.stdout
