"""bench/inliner_headroom.py: the smoke run flips decisions of a real compilation and reports.

Sizes are never asserted against targets; the test checks the report's consistency: a
helping flip is one that made the object smaller, and the combined compilation is a real
size no larger than stock's (Lua's first held-out module; the policy already beats stock
there).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_smoke_run_reports_the_flips_that_make_the_object_smaller(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "inliner_headroom.py"), "--smoke", "--out",
         str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result_file,) = tmp_path.glob("inliner-headroom-smoke-*.json")
    assert not (tmp_path / "inliner-headroom-latest.md").exists()
    result = json.loads(result_file.read_text())
    (module,) = result["modules"]
    assert module["decisions"] > 0
    for answer, size in module["helping"].values():
        assert answer in (0, 1) and size < module["policy"]
    overall = result["rows"][-1]
    assert overall["project"] == "all" and overall["flips"] == min(8, module["decisions"])
    assert overall["policy"] - overall["one_step_saving"] <= overall["policy"]
    assert "| all | 1 |" in proc.stdout


def test_reuse_measures_the_combined_flips_of_an_earlier_run_again(tmp_path: Path) -> None:
    script = str(REPO / "bench" / "inliner_headroom.py")
    first = subprocess.run(
        [sys.executable, script, "--smoke", "--out", str(tmp_path / "a")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    (earlier,) = (tmp_path / "a").glob("inliner-headroom-smoke-*.json")
    again = subprocess.run(
        [sys.executable, script, "--reuse", str(earlier), "--out", str(tmp_path / "b")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    (later,) = (tmp_path / "b").glob("inliner-headroom-*.json")
    a, b = (json.loads(f.read_text()) for f in (earlier, later))
    keep = ("project", "stock", "policy", "decisions", "flips", "helping")
    assert [{k: m[k] for k in keep} for m in a["modules"]] == [
        {k: m[k] for k in keep} for m in b["modules"]
    ]
    assert b["modules"][0]["combined"] == a["modules"][0]["combined"]
