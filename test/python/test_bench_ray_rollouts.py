"""bench/ray_rollouts.py: the smoke run makes the same rollouts on every pool configuration.

The inliner's rollouts on a local pool and on a local Ray instance, on 1 and 2 workers; the
script refuses to report when their sizes differ, and reports the ratios within each round.
Timings are never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_smoke_run_measures_every_pool_configuration(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "ray_rollouts.py"), "--smoke", "--out",
         str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result_file,) = tmp_path.glob("ray-rollouts-smoke-*.json")
    assert not (tmp_path / "ray-rollouts-latest.md").exists()
    result = json.loads(result_file.read_text())
    rows = result["rows"]
    assert {(r["backend"], r["workers"]) for r in rows} == {
        (b, w) for b in ("local", "ray") for w in (1, 2)
    }
    assert all(r["rollouts"] == 2 and r["median_s"] > 0 and r["idle_ms"] >= 0 for r in rows)
    assert "| ray | 2 |" in proc.stdout
    # The ratios within the round: Ray against local on 1 and 2 workers, Ray 1 against 2.
    assert [len(q["per_round"]) for q in result["ratios"]] == [1, 1, 1]
    assert "| ray 1 worker / ray 2 workers |" in proc.stdout
