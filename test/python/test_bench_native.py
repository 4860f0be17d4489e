"""bench/native_roundtrip.py: the smoke run measures every mode and checks every answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_smoke_run_measures_native_beside_its_floor_and_onnx(tmp_path: Path) -> None:
    build = Path(os.environ.get("MLBRIDGE_BUILD_DIR", REPO / "build"))
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "native_roundtrip.py"), "--smoke", "--no-tfaot",
         "--build-dir", str(build), "--models-dir", str(tmp_path / "models"),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result_file,) = (tmp_path / "out").glob("native-roundtrip-*.json")
    result = json.loads(result_file.read_text())
    rows = {row["runner"]: row for row in result["sweep"]}
    assert set(rows) == {"native", "native-floor", "onnx"}
    for row in rows.values():
        assert row["checked"] > 0 and row["median_ms"] > 0
    (paired,) = result["paired"]
    assert paired["checked"] > 0 and paired["low"] <= paired["median_ratio"] <= paired["high"]
    assert (tmp_path / "models" / "native-v1" / "dense40.so").is_file()
    assert "| native (TFAOTModelRunner over mlbridge compile) |" in proc.stdout
    assert "native runner within 1.05x of the direct call (paired runs" in proc.stdout


def test_paired_interval_brackets_the_median_ratio() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from native_roundtrip import median_ratio_interval

    floor = [1.0, 1.1, 0.9, 1.0, 1.2, 1.0, 0.95]
    mode = [f * 1.04 for f in floor]
    median, low, high = median_ratio_interval(mode, floor)
    assert abs(median - 1.04) < 1e-12 and abs(low - 1.04) < 1e-12 and abs(high - 1.04) < 1e-12
    median, low, high = median_ratio_interval([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    assert median == 2.0 and low < median < high
