"""The demo driver: stock -Oz against the ML inline advisor, totals per configuration."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mlbridge.demo import DemoError, _table, compile_module, run_demo
from mlbridge.train.linear_policy import LinearPolicy

REPO = Path(__file__).resolve().parents[2]
SAMPLE_C = REPO / "test" / "vectors" / "llvm22" / "inline-sample.c"


@pytest.fixture(scope="module")
def plugin() -> Path:
    env = os.environ.get("MLBRIDGE_BUILD_DIR")
    path = (Path(env) if env else REPO / "build") / "lib" / "MLBridgeLLVMPlugin.so"
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `make build` first", pytrace=False)
    return path


@pytest.fixture(scope="module")
def sample_bc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "inline-sample.bc"
    subprocess.run(
        [
            "clang-22",
            "-O2",
            "-Xclang",
            "-disable-llvm-passes",
            "-emit-llvm",
            "-c",
            str(SAMPLE_C),
            "-o",
            str(out),
        ],
        check=True,
    )
    return out


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
