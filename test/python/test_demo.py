"""The demo driver: stock -Oz against the ML inline advisor, totals per configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import built

from mlbridge.demo import DemoError, _table, compile_module, run_demo
from mlbridge.train.linear_policy import LinearPolicy


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
            ("stock", ["-passes=default<Oz>"]),
            (
                "never",
                [
                    f"-load-pass-plugin={plugin}",
                    "-passes=default<Oz>",
                    f"-mlbridge-inline-model={never}",
                ],
            ),
        ],
        progress=False,
    )
    assert [s.modules for s in stats] == [2, 2]
    assert stats[1].text_bytes > stats[0].text_bytes > 0
    table = _table(stats)
    assert "| stock | 2 |" in table and "| never | 2 |" in table


def test_a_failing_compiler_names_the_command(sample_bc: Path, tmp_path: Path):
    with pytest.raises(DemoError, match="-no-such-option"):
        compile_module(sample_bc, ["-no-such-option"], tmp_path)
