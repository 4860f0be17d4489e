"""The ML register allocator in-process through ONNX Runtime.

The basic policy's ONNX graph (mlbridge.regalloc.onnx_policy) makes the built-in policy's
allocation, byte for byte, and agrees with the Python policy on every observation of a real
session; a model that answers an illegal action is refused by llc naming the mask and the
function, or, with the fallback option, reported once while the built-in policy finishes
the allocation.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import built_plugin
from onnx import TensorProto, helper

from mlbridge.compiler.pipe import drive_compiler
from mlbridge.corpus.fetch import default_corpus_dir
from mlbridge.regalloc import ADVICE, basic_policy, feature_specs
from mlbridge.regalloc.onnx_policy import IR_VERSION, OPSET, write_basic_policy_onnx
from mlbridge.tensor_spec import ElementType

#: Corpus modules with many spills and evictions under the basic policy.
MODULES = ("lua/src/lvm.bc", "bzip2/compress.bc", "zstd/lib/compress/zstd_compress.bc")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("regalloc-onnx")
    write_basic_policy_onnx(folder / "basic.onnx")
    for rel in MODULES:
        out = folder / (rel.replace("/", "_"))
        bc = default_corpus_dir() / "bc" / rel
        subprocess.run(["opt-22", "-O2", str(bc), "-o", str(out)], check=True)
    return folder


def _llc(module: Path, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["llc-22", "-O2", "-filetype=obj", f"-load-pass-plugin={built_plugin('llc')}",
         "-regalloc=mlbridge", "-verify-machineinstrs", *options, str(module), "-o", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("rel", MODULES)
def test_onnx_basic_policy_makes_the_builtin_policys_allocation(
    rel: str, work: Path, tmp_path: Path
) -> None:
    module = work / rel.replace("/", "_")
    builtin = _llc(module, tmp_path / "builtin.o")
    onnx_run = _llc(module, tmp_path / "onnx.o", f"-mlbridge-regalloc-model={work / 'basic.onnx'}")
    assert builtin.returncode == 0 and onnx_run.returncode == 0, onnx_run.stderr
    assert onnx_run.stderr == ""
    assert (tmp_path / "onnx.o").read_bytes() == (tmp_path / "builtin.o").read_bytes()


def test_onnx_graph_agrees_with_the_python_policy_on_every_observation(
    work: Path, tmp_path: Path
) -> None:
    session = ort.InferenceSession(str(work / "basic.onnx"), providers=["CPUExecutionProvider"])
    checked = []

    def policy(obs: dict[str, np.ndarray]) -> np.ndarray:
        feeds = {s.name: np.asarray(obs[s.name]) for s in feature_specs()}
        feeds["function_name"] = np.array(obs["function_name"], dtype=object)
        (graph,) = session.run([ADVICE], feeds)
        python = basic_policy(obs)
        assert graph.tolist() == python.tolist(), (obs.context, int(obs["agent"][0]))
        checked.append(int(obs["agent"][0]))
        return python

    drive_compiler(
        ["llc-22", "-O2", "-filetype=obj", f"-load-pass-plugin={built_plugin('llc')}",
         "-regalloc=mlbridge", "-mlbridge-regalloc-runner=pipe",
         "-mlbridge-regalloc-channel={base}", str(work / "bzip2_compress.bc"),
         "-o", str(tmp_path / "out.o")],
        policy, serdes="bitstream", timeout=120, require_end=True,
    )  # fmt: skip
    assert len(checked) > 1000 and set(checked) == {0, 1}


def _constant_model(path: Path, action: int) -> Path:
    """A model over the allocator's interface that always answers ``action``."""
    types = {ElementType.INT64: TensorProto.INT64, ElementType.FLOAT: TensorProto.FLOAT,
             ElementType.STRING: TensorProto.STRING}  # fmt: skip
    inputs = [
        helper.make_tensor_value_info(
            s.name, types[s.type], [d if d >= 0 else f"{s.name}_{i}" for i, d in enumerate(s.shape)]
        )
        for s in feature_specs()
    ]
    value = helper.make_tensor(ADVICE, TensorProto.INT64, (1,), [action])
    graph = helper.make_graph(
        [helper.make_node("Constant", [], [ADVICE], value=value)],
        "constant",
        inputs,
        [helper.make_tensor_value_info(ADVICE, TensorProto.INT64, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.save(model, str(path))
    return path


def test_illegal_advice_is_an_error_naming_the_mask_and_the_function(
    work: Path, tmp_path: Path
) -> None:
    model = _constant_model(tmp_path / "liar.onnx", 100000)
    run = _llc(work / "bzip2_compress.bc", tmp_path / "out.o", f"-mlbridge-regalloc-model={model}")
    assert run.returncode != 0
    assert "mlbridge-regalloc: no allocation in '" in run.stderr
    assert "action_mask" in run.stderr and "100000" in run.stderr
    assert run.stderr.count("error:") == 1, run.stderr
    assert "Stack dump" not in run.stderr


def test_fallback_reports_the_failure_once_and_allocates_with_the_builtin_policy(
    work: Path, tmp_path: Path
) -> None:
    model = _constant_model(tmp_path / "liar.onnx", -1)
    module = work / "bzip2_compress.bc"
    run = _llc(module, tmp_path / "fallback.o", f"-mlbridge-regalloc-model={model}",
               "-mlbridge-regalloc-on-model-failure=fallback")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("warning:") == 1 and "built-in policy" in run.stderr
    assert _llc(module, tmp_path / "builtin.o").returncode == 0
    # The model failed on its first decision: the allocation is the built-in policy's.
    assert (tmp_path / "fallback.o").read_bytes() == (tmp_path / "builtin.o").read_bytes()
