"""bench/regalloc_compile.py: the smoke run times every runner and measures every allocator.

Every basic-policy runner decides with the basic policy, and the script refuses to report
when their objects differ; the graph policy's runners (PyTorch over the pipe and gRPC, its
ONNX export in-process) must make the same objects too on the smoke modules; the quality
rows cover greedy, LLVM's basic allocator and the ML allocator with the basic, the split and
a random policy and with the built-in agents, on each held-out project. Timings are never
asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

BASIC_RUNNERS = {
    "greedy (stock llc)",
    "in-process (callback)",
    "in-process (ONNX Runtime)",
    "pipe (bitstream, Python)",
    "gRPC (Python server)",
}
GNN_RUNNERS = {
    "split policy, no model (callback)",
    "GNN in-process (ONNX Runtime)",
    "GNN in-process, .onnx only (ONNX Runtime)",
    "GNN in-process, every edge (ONNX Runtime)",
    "GNN in-process (native, MLIR)",
    "GNN pipe (bitstream, PyTorch)",
    "GNN gRPC (PyTorch server)",
}
ALLOCATORS = {
    "greedy",
    "LLVM basic",
    "mlbridge, basic policy",
    "mlbridge, split policy",
    "mlbridge, regalloc-split (ONNX Runtime)",
    "mlbridge, random policy",
}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any], Path]:
    """One smoke run of both models: its printed report, its JSON and its output folder."""
    out = tmp_path_factory.mktemp("regalloc-bench")
    build = Path(os.environ.get("MLBRIDGE_BUILD_DIR", REPO / "build"))
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "regalloc_compile.py"), "--smoke",
         "--build-dir", str(build), "--out", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result_file,) = out.glob("regalloc-smoke-*.json")
    return proc.stdout, json.loads(result_file.read_text()), out


def test_smoke_run_times_every_runner_and_measures_every_allocator(
    smoke: tuple[str, dict[str, Any], Path],
) -> None:
    report, result, out = smoke
    assert not (out / "regalloc-latest.md").exists()
    projects = set(result["meta"]["modules"])
    assert projects == {"lua", "cmark-gfm"}
    timed = {(r["runner"], r["project"]) for r in result["compile_time"] if r["jobs"] == 1}
    assert timed == {(r, p) for r in BASIC_RUNNERS | GNN_RUNNERS for p in projects}
    assert all(r["median_s"] > 0 for r in result["compile_time"])
    rows = {(r["allocator"], r["project"]): r for r in result["quality"]}
    assert set(rows) == {(a, p) for a in ALLOCATORS for p in projects}
    for row in rows.values():
        assert row["allocated_bytes"] > row["text_bytes"] > 0
        assert row["spill_reload_cost"] >= 0 and row["copies"] >= 0
    # A random policy spills on Lua's first module, where the others do not.
    assert rows["mlbridge, random policy", "lua"]["spills"] > rows["greedy", "lua"]["spills"]
    assert "| lua | gRPC (Python server) | 1 |" in report


def test_smoke_run_times_the_graph_policy_with_the_same_decisions_on_every_runner(
    smoke: tuple[str, dict[str, Any], Path],
) -> None:
    report, result, _ = smoke
    assert result["meta"]["models"] == ["basic policy", "GNN"]
    assert result["meta"]["gnn"]["parameters"] > 0
    rows = {(r["runner"], r["project"]): r for r in result["compile_time"] if r["jobs"] == 1}
    for project, agreed in result["object_agreement"]["GNN"].items():
        # PyTorch and ONNX Runtime made the same objects: the same decisions.
        assert agreed["modules"] == 1 and agreed["differing"] == [], project
        # Both Python runners were asked the same number of decisions, and some were asked.
        pipe = rows["GNN pipe (bitstream, PyTorch)", project]["decisions_per_round"]
        grpc = rows["GNN gRPC (PyTorch server)", project]["decisions_per_round"]
        assert pipe == grpc and pipe[0] > 0
        assert rows["GNN gRPC (PyTorch server)", project]["policy_s_median"] > 0
    assert "## Compile time with the graph policy (GNN)" in report
    assert "| lua | GNN gRPC (PyTorch server) |" in report
    assert "byte-identical on 2 of 2 modules" in report


def test_smoke_run_times_the_graph_policy_on_two_parallel_jobs_too(
    smoke: tuple[str, dict[str, Any], Path],
) -> None:
    # The 1 and 2 threads: the parallel compilers share the pipe's Python process
    # and the gRPC model server, and are asked the same decisions as one compiler is.
    report, result, _ = smoke
    rows = {(r["runner"], r["jobs"], r["project"]): r for r in result["compile_time"]}
    parallel = {(name, project) for name, jobs, project in rows if jobs == 2}
    for project in result["meta"]["modules"]:
        for name in ("greedy (stock llc)", "GNN in-process (ONNX Runtime)",
                     "GNN pipe (bitstream, PyTorch)", "GNN gRPC (PyTorch server)"):  # fmt: skip
            assert (name, project) in parallel, (name, project)
        for name in ("GNN pipe (bitstream, PyTorch)", "GNN gRPC (PyTorch server)"):
            one, two = rows[name, 1, project], rows[name, 2, project]
            assert two["decisions_per_round"] == one["decisions_per_round"], (name, project)
    # The objects of the 2-job runs are compared with the others too.
    assert all(a["differing"] == [] for a in result["object_agreement"]["GNN"].values())
    assert "| lua | GNN gRPC (PyTorch server) | 2 |" in report
    assert "- lua, 2 jobs, ONNX Runtime: gRPC / in-process = " in report


def test_smoke_run_times_the_allocator_without_a_model_on_both_job_counts(
    smoke: tuple[str, dict[str, Any], Path],
) -> None:
    # The floor under every form of the model: the same allocator deciding in C++.
    report, result, _ = smoke
    rows = {(r["runner"], r["jobs"], r["project"]): r for r in result["compile_time"]}
    for project in result["meta"]["modules"]:
        for jobs in (1, 2):
            row = rows["split policy, no model (callback)", jobs, project]
            assert row["model"] is None and row["median_s"] > 0
    assert "| lua | split policy, no model (callback) | 2 |" in report
    assert "The allocator without a model, deciding with the split policy" in report
    assert "lua, 1 job: " in report


def test_smoke_run_measures_onnx_runtime_start_up_per_llc_process(
    smoke: tuple[str, dict[str, Any], Path],
) -> None:
    # The floor of every in-process row: what an llc process costs before it decides
    # anything, with the model loaded against the plugin's built-in policy.
    report, result, _ = smoke
    startup = result["meta"]["gnn"]["startup"]
    medians = startup["median_s"]
    assert set(medians) == {"stock llc", "plugin, built-in policy",
                            "plugin, model in ONNX Runtime", "plugin, native model"}  # fmt: skip
    assert all(v > 0 for v in medians.values())
    assert startup["onnxruntime_startup_s"] == pytest.approx(
        medians["plugin, model in ONNX Runtime"] - medians["plugin, built-in policy"]
    )
    # Loading ONNX Runtime and a session of the model is never free.
    assert startup["onnxruntime_startup_s"] > 0
    assert "ONNX Runtime's start-up (its library, environment and the model's session)" in report


def test_smoke_run_times_the_native_agents_and_they_allocate_as_the_others(
    smoke: tuple[str, dict[str, Any], Path],
) -> None:
    # The agents compiled through MLIR: in-process without ONNX Runtime, the same objects.
    report, result, _ = smoke
    rows = {(r["runner"], r["jobs"], r["project"]): r for r in result["compile_time"]}
    for project in result["meta"]["modules"]:
        for jobs in (1, 2):
            row = rows["GNN in-process (native, MLIR)", jobs, project]
            assert row["model"] == "GNN" and row["median_s"] > 0
        # Counted among the GNN's runners: the same objects as ONNX Runtime and PyTorch.
        assert result["object_agreement"]["GNN"][project]["differing_modules"] == []
    assert "| lua | GNN in-process (native, MLIR) | 1 |" in report
    assert "- lua, 1 job, native: gRPC / in-process = " in report
    assert "With the native model: " in report
