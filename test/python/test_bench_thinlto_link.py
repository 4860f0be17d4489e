"""bench/thinlto_link.py: the smoke run links cmark-gfm with ThinLTO through ld.lld-22.

Four links (stock and with the ML inliner in lld's backends, 1 and 2 backend threads): the
model must have decided inside the link (its remarks), with no fallback to LLVM's advisor
on either thread count, and every linked program must print what the stock link prints.
Timings are never asserted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from conftest import REPO

BENCH = REPO / "bench" / "thinlto_link.py"


def _bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("thinlto_link", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_smoke_run_links_with_the_plugin_deciding_and_programs_agree(tmp_path: Path) -> None:
    build = Path(os.environ.get("MLBRIDGE_BUILD_DIR", REPO / "build"))
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", "--build-dir", str(build),
         "--out", str(tmp_path), "--timeout", "300"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result_file,) = tmp_path.glob("thinlto-link-smoke-*.json")
    assert not (tmp_path / "thinlto-link-latest.md").exists()
    report = json.loads(result_file.read_text())
    (program,) = report["programs"]
    assert program["program"] == "cmark-gfm" and program["modules"] > 1
    configs = program["configurations"]
    assert {(c["ml"], c["jobs"]) for c in configs} == {
        (m, j) for m in (False, True) for j in (1, 2)
    }
    for c in configs:
        assert len(c["seconds"]) == len(c["cpu_seconds"]) == 1
        assert c["wall"]["median"] > 0
        linked = c["program"]
        assert linked["allocated_bytes"] > linked["text_bytes"] > 0
        if c["ml"]:
            # The model answered in the link, on 1 and on 2 backend threads alike.
            assert linked["decisions"] > 0 and 0 <= linked["inlined"] <= linked["decisions"]
        else:
            assert linked["decisions"] == 0
    by_key = {(c["ml"], c["jobs"]): c["program"] for c in configs}
    assert by_key[True, 1]["decisions"] == by_key[True, 2]["decisions"]
    assert len({c["program"]["output_sha256"] for c in configs}) == 1
    # The GitHub extensions ran: a table, struck text, a task list.
    output = program["check_output"]
    assert "<table>" in output and "<del>struck</del>" in output and 'type="checkbox"' in output
    summary = program["summary"]
    assert set(summary["speedup"]) == {"stock", "ml"} and set(summary["ml_over_stock"]) == {
        "1",
        "2",
    }
    assert "| cmark-gfm | ML inliner (plugin) |" in proc.stdout


def test_decisions_are_counted_from_lld_remark_files(tmp_path: Path) -> None:
    bench = _bench_module()
    remark = """--- !Passed
Pass:            mlbridge-inline
Name:            InliningAdvice
Function:        caller
Args:
  - String:          'model advice for '
  - Callee:          callee
  - Advice:          {advice}
  - String:          ' (default: '
  - Default:         {default}
  - String:          ')'
"""
    other = "--- !Passed\nPass:            inline\nName:            Inlined\n"
    (tmp_path / "r.yaml.thin.1.").write_text(
        remark.format(advice="inline", default="no-inline")
        + other
        + remark.format(advice="no-inline", default="no-inline")
    )
    (tmp_path / "r.yaml.thin.2.").write_text(remark.format(advice="inline", default="inline"))
    files = sorted(tmp_path.glob("r.yaml*"))
    assert bench.count_decisions(files) == (3, 2, 1)
