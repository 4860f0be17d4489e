"""The MLIR model side against the real mlbridge-loop-unroll pass in mlir-opt-22.

- the loop features computed in Python with the MLIR bindings (mlbridge.loop_unroll.features)
  equal the ones the pass sends over the pipe, feature by feature, in the same order;
- generated kernels unrolled by a policy whose factor does not divide the trip count (and
  with dynamic trip counts) still compute the right results once lowered and run;
- the MLIR round-trip benchmark's smoke mode runs every runner and checks every answer.

The plugin comes from ``$MLBRIDGE_BUILD_DIR`` or ``<repo>/build``; a missing plugin is a
failure, never a skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, built_plugin
from support.mlir_kernels import expected_hash, kernel_module, reduction_kernel
from support.mlir_lowering import run_kernels

from mlbridge.bench.roundtrip_model import roundtrip_inputs
from mlbridge.compiler.pipe import drive_compiler
from mlbridge.llvm import find_llvm_tool
from mlbridge.loop_unroll.features import LOOP_FEATURE_NAMES, loop_features, parse_module
from mlbridge.loop_unroll.policy import unroll_by_trip_count

INPUTS = REPO / "test" / "lit" / "Inputs"


def plugin() -> Path:
    return built_plugin("mlir")


def unroll(text: str, tmp_path: Path, policy, *, threading: bool = False) -> tuple[str, list]:
    """Runs mlbridge-loop-unroll over the pipe with ``policy``; the output and observations."""
    src = tmp_path / "in.mlir"
    src.write_text(text)
    out = tmp_path / "out.mlir"
    seen = []

    def recorder(obs):
        seen.append(obs)
        return policy(obs)

    argv = [
        find_llvm_tool("mlir-opt"), f"--load-pass-plugin={plugin()}",
        "--pass-pipeline=builtin.module(func.func(mlbridge-loop-unroll"
        "{runner=pipe channel={base} timeout-ms=30000}))",
        str(src), "-o", str(out),
    ]  # fmt: skip
    if not threading:
        argv.insert(2, "--mlir-disable-threading")
    result = drive_compiler(argv, recorder, timeout=60, require_end=True, parent=tmp_path)
    assert result.returncode == 0
    return out.read_text(), seen


GENERATED = kernel_module(
    [
        reduction_kernel("affine_const", "affine", 0, 37, 2),
        reduction_kernel("affine_dyn", "affine", 3, None, 1),
        reduction_kernel("scf_const", "scf", 5, 40, 3),
        reduction_kernel("scf_dyn", "scf", 0, None, 2),
    ]
)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param((INPUTS / "mlir_kernels.mlir").read_text(), id="mlir_kernels"),
        pytest.param((INPUTS / "loops.mlir").read_text(), id="loops"),
        pytest.param(GENERATED, id="generated"),
    ],
)
def test_python_features_equal_the_pass(text, tmp_path):
    # Advice 1 everywhere: the IR is left as it is.
    out, seen = unroll(text, tmp_path, lambda obs: 1)
    assert out.strip()
    want = loop_features(text)
    assert len(seen) == len(want) > 0
    for obs, info in zip(seen, want, strict=True):
        assert (obs.context, obs.id) == (info.function, info.index)
        assert list(obs.keys()) == list(LOOP_FEATURE_NAMES)
        got = {name: int(obs[name].reshape(-1)[0]) for name in LOOP_FEATURE_NAMES}
        assert got == info.features, info
        assert all(obs[name].dtype == np.int64 for name in LOOP_FEATURE_NAMES)


def test_unrolled_kernels_compute_the_same(tmp_path):
    # Factor 3 divides none of these trip counts; two are dynamic.
    out, seen = unroll(GENERATED, tmp_path, lambda obs: 3, threading=True)
    assert len(seen) == 4
    module = parse_module(out)
    assert "step 6" in out  # affine: step 2 * 3
    assert "arith.constant 9 : index" in out  # scf: step 3 * 3
    assert len(loop_features(module)) > 4  # cleanup loops were added
    calls = {"affine_const": [0], "affine_dyn": [0, 3, 4, 5, 9, 20], "scf_const": [0]}
    calls["scf_dyn"] = [0, 1, 2, 5, 6, 7, 19]
    got = run_kernels(out, calls)
    assert got[("affine_const", 0)] == expected_hash(0, 37, 2)
    assert got[("scf_const", 0)] == expected_hash(5, 40, 3)
    for n in calls["affine_dyn"]:
        assert got[("affine_dyn", n)] == expected_hash(3, n, 1)
    for n in calls["scf_dyn"]:
        assert got[("scf_dyn", n)] == expected_hash(0, n, 2)


def test_trip_count_policy():
    assert unroll_by_trip_count({"trip_count": np.array([16])}) == 4
    assert unroll_by_trip_count({"trip_count": np.array([10])}) == 2
    assert unroll_by_trip_count({"trip_count": np.array([-1])}) == 2


def test_roundtrip_inputs_match_the_pass(tmp_path):
    # The callback runner answers the sum of the inputs the pass sent.
    proc = subprocess.run(
        [find_llvm_tool("mlir-opt"), f"--load-pass-plugin={plugin()}",
         "--pass-pipeline=builtin.module(mlbridge-roundtrip{length=7 queries=4})", "-"],
        input="module {}\n", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    values = proc.stdout.split("array<f32:")[1].split(">")[0].split(",")
    want = [float(roundtrip_inputs(q, 7).sum()) for q in range(4)]
    assert np.allclose([float(v) for v in values], want, rtol=1e-6)


def test_bench_smoke_checks_every_answer():
    env = dict(os.environ, MLBRIDGE_BUILD_DIR=str(plugin().parent.parent))
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "mlir_roundtrip.py"), "--smoke", "--timeout", "60"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for mode in ("callback", "pipe-bitstream", "pipe-json", "grpc", "onnx"):
        assert f"{mode}" in proc.stdout
    assert "every answer correct" in proc.stdout
