"""``mlbridge bench --smoke``: the one-command report runs and every answer is right.

Tiny sizes, one repetition, every host (the C++ and C API benchmark programs, the
``mlbridge-roundtrip`` passes in opt-22 and mlir-opt-22, the in-process runners) and every
runner; the report's JSON, Markdown and PNG plots must be written. Correctness only:
timings are never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, build_dir, built, built_plugin

from mlbridge.bench.cli import README_BEGIN, README_END, update_readme
from mlbridge.bench.hosts import MLIR_RUNNERS, OPT_RUNNERS
from mlbridge.bench.report import ONE_CORE_HOST
from mlbridge.llvm import find_llvm_tool

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    built("bin/mlbridge-bench-roundtrip")
    built("bin/mlbridge-bench-roundtrip-c")
    built_plugin("llvm")
    built_plugin("mlir")
    # No --out: the report goes to bench-results/ in the current folder.
    cwd = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [sys.executable, "-m", "mlbridge", "bench", "--smoke",
         "--build-dir", str(build_dir()), "--timeout", "120"],
        cwd=cwd, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = cwd / "bench-results"
    (json_file,) = out.glob("report-smoke-*.json")
    return out, json.loads(json_file.read_text())


def test_writes_into_bench_results_of_the_current_folder_by_default(smoke_report):
    out, _ = smoke_report
    assert out.name == "bench-results" and len(list(out.glob("report-smoke-*"))) == 4
    # Nothing lands in the checkout.
    assert not list((REPO / "bench" / "results").glob("report-smoke-*"))


def test_update_readme_refuses_a_report_outside_the_checkout(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "mlbridge", "bench", "--quick", "--update-readme",
         "--out", str(tmp_path), "--build-dir", str(build_dir())],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "--update-readme needs a quick or full run whose report stays in the checkout" in (
        proc.stderr
    )
    assert not list(tmp_path.iterdir())


def test_writes_json_markdown_and_plots(smoke_report):
    out, report = smoke_report
    (md,) = out.glob("report-smoke-*.md")
    text = md.read_text()
    assert "## Round trip" in text and "| opt | pipe + json |" in text
    pngs = sorted(out.glob("report-smoke-*.png"))
    assert [p.name.rsplit("-", 1)[1] for p in pngs] == ["sweep.png", "totals.png"]
    for p in pngs:
        assert p.read_bytes()[:8] == PNG_MAGIC
    # A smoke run leaves the checked-in "latest" files alone.
    assert not list(out.glob("report-latest*"))
    machine = report["machine"]
    assert machine["cores"] >= 1 and machine["cpu_model"] and machine["kernel"]
    assert "opt" in machine["versions"] and "numpy" in machine["versions"]


def test_every_host_and_runner_checked_every_answer(smoke_report):
    _, report = smoke_report
    rows = {(r["host"], r["runner"]): r for r in report["roundtrip"]}
    want = {("C++", m) for m in ("bitstream", "json", "protobuf", "fifo", "grpc", "grpc-floor")}
    want |= {("C API", m) for m in ("bitstream", "json", "protobuf", "grpc")}
    want |= {(ONE_CORE_HOST, m) for m in ("bitstream", "json", "protobuf", "fifo", "grpc")}
    want |= {("opt", r) for r in OPT_RUNNERS} | {("mlir-opt", r) for r in MLIR_RUNNERS}
    assert want <= rows.keys()
    for key in want:
        # Smoke sizes: C++ / C API 3 queries + 3 warm-up; opt / mlir-opt 2 sizes x 3 queries.
        assert rows[key]["checked"] >= 3, key
    assert report["answers"]["mismatches"] == 0
    assert report["answers"]["checked"] == sum(r["checked"] for r in report["roundtrip"])
    # The ratios to the floors are computed in the same run.
    assert rows[("C API", "bitstream")]["floor"] == "fifo"
    assert rows[("C API", "bitstream")]["ratio"] > 0
    # The one-core rows are to the one-core floors.
    one_core_fifo = rows[(ONE_CORE_HOST, "fifo")]["total_ms"]
    assert rows[(ONE_CORE_HOST, "bitstream")]["floor_ms"] == one_core_fifo


def test_in_process_runners_and_compile_time(smoke_report):
    _, report = smoke_report
    inproc = report["inprocess"]
    if (REPO / "bench" / "inprocess_roundtrip.py").is_file():
        assert inproc["available"]
        runners = {r["runner"] for r in report["roundtrip"] if r["host"] == "C++ (in-process)"}
        assert {"onnx", "onnx-floor", "tfaot", "tfaot-floor"} <= runners
        for r in report["roundtrip"]:
            if r["host"] == "C++ (in-process)":
                assert r["checked"] >= 1, r["runner"]
    else:
        assert not inproc["available"] and "not present" in inproc["reason"]
    inliner = report["compile_time"]["inliner"]
    assert inliner["available"] and inliner["configurations"][0]["name"] == "stock opt-22"
    assert "available" in report["compile_time"]["phase_order"]


def test_update_readme_replaces_only_the_marked_section(tmp_path: Path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{README_BEGIN}\nold table\n{README_END}\nrest\n")
    update_readme(readme, "new table\n")
    assert readme.read_text() == f"intro\n{README_BEGIN}\nnew table\n{README_END}\nrest\n"
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="mlbridge-bench:begin"):
        update_readme(readme, "x")


@pytest.mark.parametrize(("expect", "ok"), [("sum", True), ("dense", False), ("bogus", False)])
def test_mlir_pass_checks_answers_when_asked(expect: str, ok: bool):
    # The MLIR pass's callback model is the sum of the inputs (its floor): 'expect=sum'
    # passes, 'expect=dense' must find every answer wrong, a bad value is refused.
    plugin = built_plugin("mlir")
    pipeline = f"builtin.module(mlbridge-roundtrip{{length=5 queries=2 expect={expect}}})"
    proc = subprocess.run(
        [find_llvm_tool("mlir-opt"), f"--load-pass-plugin={plugin}",
         f"--pass-pipeline={pipeline}", "-"],
        input="module {}\n", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if ok:
        assert proc.returncode == 0, proc.stderr
        assert "mlbridge.roundtrip_seconds = array<f64:" in proc.stdout
    elif expect == "dense":
        assert proc.returncode != 0
        assert "2 of 2 answers are wrong; the first: query 0 (L=5)" in proc.stderr
    else:
        assert proc.returncode != 0
        assert "expect must be none, dense or sum, got 'bogus'" in proc.stderr
