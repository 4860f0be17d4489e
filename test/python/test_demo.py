"""The demo: every shipped model with the pass of its task, against stock -Oz."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from conftest import build_dir, built

from mlbridge.demo import (
    Configuration,
    DemoError,
    compile_module,
    configurations,
    count_decisions,
    run_demo,
    table,
)
from mlbridge.inliner.policy import LinearPolicy
from mlbridge.models import Registry
from mlbridge.models.builtin import ensure_builtin_models
from mlbridge.problems import builtin_models

BUILTIN_MODELS = builtin_models()

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plugin() -> Path:
    return built("lib/MLBridgeLLVMPlugin.so")


@pytest.fixture(scope="module")
def sample_bc(inline_sample_bc: Path) -> Path:
    return inline_sample_bc


def test_never_inlining_model_is_larger_than_stock(plugin: Path, sample_bc: Path, tmp_path: Path):
    never = tmp_path / "never.onnx"
    LinearPolicy(["inlining_default"], [0.0], -1.0).to_onnx(never)
    stats = run_demo(
        [sample_bc, sample_bc],
        [
            Configuration("stock", ("-passes=default<Oz>",)),
            Configuration(
                "never",
                (
                    f"-load-pass-plugin={plugin}",
                    "-passes=default<Oz>",
                    f"-mlbridge-inline-model={never}",
                ),
                task="inliner",
                model=str(never),
            ),
        ],
        progress=False,
    )
    assert [s.modules for s in stats] == [2, 2]
    assert stats[1].text_bytes > stats[0].text_bytes > 0
    assert stats[0].allocated_bytes > stats[0].text_bytes
    assert stats[0].decisions is None and stats[1].decisions and stats[1].decisions > 0
    rows = table(stats).splitlines()
    assert rows[2].startswith("| stock | 2 | ") and "| +0.00% |" in rows[2]
    assert rows[3].startswith("| never | 2 | ")


def test_a_failing_compiler_names_the_command(sample_bc: Path, tmp_path: Path):
    with pytest.raises(DemoError, match="-no-such-option"):
        compile_module(sample_bc, ["-no-such-option"], tmp_path)


def test_a_model_its_pass_never_asks_is_an_error(plugin: Path, sample_bc: Path, tmp_path: Path):
    # The inliner's model given with a pass that never inlines: no decision, no table.
    never = tmp_path / "never.onnx"
    LinearPolicy(["inlining_default"], [0.0], -1.0).to_onnx(never)
    config = Configuration(
        "unused",
        (f"-load-pass-plugin={plugin}", "-passes=instcombine", f"-mlbridge-inline-model={never}"),
        task="inliner",
        model=str(never),
    )
    assert count_decisions(config, [sample_bc], tmp_path) == 0
    with pytest.raises(DemoError, match="reported no decision of model"):
        run_demo([sample_bc], [Configuration("stock", ("-passes=default<Oz>",)), config],
                 progress=False)  # fmt: skip


def test_each_builtin_model_goes_to_the_pass_of_its_task(plugin: Path, tmp_path: Path):
    models = ensure_builtin_models(BUILTIN_MODELS, Registry(tmp_path / "registry"), tfaot=False)
    # The register allocator's models act in llc: a section of their own, not opt rows.
    in_opt = [m for m in models if m.task != "regalloc"]
    assert {m.name for m in models if m.task == "regalloc"} == {
        "regalloc-split",
        "regalloc-split-native",
    }
    configs = configurations(plugin, in_opt)
    assert configs[0].model is None
    by_model = {c.model: c for c in configs[1:]}
    assert set(by_model) == {m.name for m in in_opt}  # each with its -native form
    for m in BUILTIN_MODELS:
        if m.task == "regalloc":
            continue
        args = " ".join(by_model[m.name].opt_args)
        option = {"inliner": "-mlbridge-inline-model", "phase-order": "-mlbridge-phase-order-model"}
        assert f"{option[m.task]}={m.name}" in args, args
        assert by_model[m.name].task == m.task


def test_a_builtin_model_of_a_task_the_demo_cannot_run_is_refused(plugin: Path):
    from mlbridge.models.registry import RegisteredModel

    odd = RegisteredModel("odd", "onnx", Path("/x.onnx"), "00", 1, task="regalloc-priority")
    with pytest.raises(DemoError, match="task 'regalloc-priority', which the demo does not run"):
        configurations(plugin, [odd])


def test_demo_smoke_two_modules_prints_the_table_and_writes_the_plot(tmp_path: Path):
    """`make demo` itself, on two held-out modules: one row per shipped model, each used."""
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "mlbridge.demo", "--build-dir", str(build_dir()), "--modules", "2",
         "--out", str(out)],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    first = lines.index(next(line for line in lines if line.startswith("| configuration")))
    rows = []
    for line in lines[first:]:
        if not line.startswith("| "):
            break
        rows.append(line)
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header == [
        "configuration", "modules", "allocated bytes", "vs stock", ".text bytes", "vs stock",
        "opt time (s)", "vs stock", "model decisions checked",
    ]  # fmt: skip
    body = [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]
    assert body[0][0] == "stock opt-22 -Oz" and body[0][8] == "-"
    registered = ensure_builtin_models(BUILTIN_MODELS, tfaot=True)
    named = {re.search(r"'([^']+)'$", r[0]).group(1) for r in body[1:]}
    # Every shipped opt model, inliner ones in both in-process forms.
    assert named == {m.name for m in registered if m.task != "regalloc"}
    # The register allocator's model: its own table, beside greedy, per project.
    regalloc = [line for line in lines if "'regalloc-split' (ONNX Runtime)" in line]
    assert len(regalloc) == 3, proc.stdout  # the two modules' projects, then all
    greedy = [line for line in lines if re.match(r"\| all \| greedy \| \d+ ", line)]
    assert len(greedy) == 1, proc.stdout
    for row in body:
        assert row[1] == "2"
        assert int(row[2]) > int(row[4]) > 0  # allocated > .text
        assert re.fullmatch(r"[+-]\d+\.\d\d%", row[3]) and re.fullmatch(r"\d+\.\d\dx", row[7])
    for row in body[1:]:
        assert int(row[8]) > 0, row  # its pass used the model
    png = out / "demo.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"Plot (size change per module): {png}" in proc.stdout
    data = orjson.loads((out / "demo.json").read_bytes())
    assert [len(r["per_module"]) for r in data["results"]] == [2] * len(body)
    assert len(data["projects"]) >= 2
    assert "Where to go next:" in proc.stdout
