"""The registry across languages: models registered by Python, found by C++.

``mlbridge-model-tool`` (built into ``<build>/bin``) calls ``mlbridge::findModel`` the
way a plugin does and ``mlbridge::listInputDifferences`` the way an in-process runner
does. The build folder is ``$MLBRIDGE_BUILD_DIR`` or ``<repo>/build``; a missing tool is
a failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import built
from onnx import TensorProto, helper
from test_models import make_onnx, shared_object, write_sidecar  # noqa: F401 - a fixture

from mlbridge.models import REGISTRY_ENV, Registry, check_compatible
from mlbridge.tensor_spec import ElementType, TensorSpec

TOOL_NAME = "mlbridge-model-tool"


@pytest.fixture(scope="module")
def tool() -> Path:
    return built(f"bin/{TOOL_NAME}")


def run_tool(tool: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = subprocess.run(
        [str(tool), *args], capture_output=True, timeout=120, env=env, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"{TOOL_NAME} {' '.join(args)}: {result.stderr.decode()}")
    return orjson.loads(result.stdout)


def tool_error(tool: Path, *args: str) -> str:
    result = subprocess.run([str(tool), *args], capture_output=True, timeout=120, check=False)
    assert result.returncode == 1, result.stdout
    return result.stderr.decode()


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "registry")


def test_cpp_finds_a_model_registered_by_python(
    tool: Path, registry: Registry, tmp_path: Path
) -> None:
    model = registry.register("inliner", make_onnx(tmp_path / "policy.onnx"))
    found = run_tool(tool, "find", "inliner", "--registry", str(registry.root))
    assert found == {
        "name": "inliner",
        "kind": "onnx",
        "path": str(model.path),
        "inputs": [s.to_dict() for s in model.features],
        "outputs": [s.to_dict() for s in model.advice],
    }
    # The same registry through the environment, as a plugin finds it.
    env = {**os.environ, REGISTRY_ENV: str(registry.root)}
    assert run_tool(tool, "find", "inliner", env=env) == found


def test_cpp_finds_a_tfaot_model_and_paths(
    tool: Path,
    registry: Registry,
    tmp_path: Path,
    shared_object: Path,  # noqa: F811
) -> None:
    so = tmp_path / "evict.so"
    shutil.copyfile(shared_object, so)
    write_sidecar(
        so,
        [{"name": "mask", "type": "int64_t", "port": 0, "shape": [1, 33]}],
        [{"name": "index_to_evict", "type": "int64_t", "port": 0, "shape": [1]}],
    )
    model = registry.register("evict", so)
    found = run_tool(tool, "find", "evict", "--registry", str(registry.root))
    assert (found["kind"], found["path"]) == ("tfaot", str(model.path))
    assert found["inputs"] == [s.to_dict() for s in model.features]
    # The registered copy found by path reads the sidecar the registry wrote beside it.
    by_path = run_tool(tool, "find", str(model.path), "--registry", str(registry.root))
    assert by_path["inputs"] == found["inputs"] and by_path["outputs"] == found["outputs"]
    onnx_path = make_onnx(tmp_path / "direct.onnx")
    direct = run_tool(tool, "find", str(onnx_path), "--registry", str(registry.root))
    assert (direct["kind"], direct["path"], direct["inputs"]) == ("onnx", str(onnx_path), [])


def test_cpp_errors_list_the_registry_and_its_names(
    tool: Path, registry: Registry, tmp_path: Path
) -> None:
    registry.register("b", make_onnx(tmp_path / "b.onnx"))
    registry.register("a", make_onnx(tmp_path / "a.onnx"))
    err = tool_error(tool, "find", "c", "--registry", str(registry.root))
    assert f"no model named 'c' in the registry {registry.root} (it has: a, b)" in err
    (registry.root / "a" / "model.json").write_bytes(b'{"name":"a"')
    err = tool_error(tool, "find", "a", "--registry", str(registry.root))
    assert f"{registry.root / 'a' / 'model.json'} is not valid JSON" in err


I64, I32, F32 = ElementType.INT64, ElementType.INT32, ElementType.FLOAT


@pytest.mark.parametrize(
    "features",
    [
        [("a", I64, (1,)), ("b", F32, (4, 3)), ("x", ElementType.BOOL, ())],
        [("a", I32, (2,)), ("b", F32, (3,))],
        [("b", ElementType.DOUBLE, (-1, 3, 1))],
        [],
    ],
)
def test_cpp_and_python_list_the_same_differences(
    tool: Path, registry: Registry, tmp_path: Path, features: list[tuple[Any, ...]]
) -> None:
    model = registry.register("m", make_onnx(tmp_path / "m.onnx"))
    specs = [TensorSpec(*f) for f in features]
    path = tmp_path / "features.json"
    path.write_bytes(orjson.dumps({"features": [s.to_dict() for s in specs]}))
    cpp = run_tool(tool, "fit", "m", "--features", str(path), "--registry", str(registry.root))
    assert cpp["differences"] == check_compatible(specs, model.features)


def test_cpp_reader_never_sees_half_a_model(tool: Path, registry: Registry, tmp_path: Path) -> None:
    a = helper.make_tensor_value_info("a", TensorProto.INT64, [1])
    variants = []
    for n in (2, 5):
        b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, 3])
        variants.append(make_onnx(tmp_path / f"v{n}.onnx", inputs=[a, b]))
    registry.register("m", variants[0])
    done = threading.Event()
    replaced = threading.Event()
    replacements = 0

    def replace() -> None:
        nonlocal replacements
        while not done.is_set():
            replacements += 1
            registry.register("m", variants[replacements % 2], force=True)
            replaced.set()

    writer = threading.Thread(target=replace)
    writer.start()
    try:
        assert replaced.wait(timeout=60), "the writer thread did not replace the model"
        found = run_tool(tool, "find", "m", "--registry", str(registry.root), "--repeat", "2000")
    finally:
        done.set()
        writer.join(timeout=60)
    assert found["inputs"][1]["shape"] in ([2, 3], [5, 3])
    assert replacements >= 1


def test_cpp_finds_an_ir2vec_vocabulary_only_where_one_is_expected(
    tool: Path, registry: Registry, tmp_path: Path
) -> None:
    """Kind ir2vec-vocab: the tool (any kind) finds it without specs; a runner would not."""
    vocab = tmp_path / "vocab.json"
    vocab.write_bytes(
        orjson.dumps({"Opcodes": {"Ret": [1.0, 0.5]}, "Types": {"VoidTy": [0.0, 1.0]},
                      "Arguments": {"Constant": [0.25, 0.0]}})
    )  # fmt: skip
    model = registry.register("vocab", vocab, kind="ir2vec-vocab")
    found = run_tool(tool, "find", "vocab", "--registry", str(registry.root))
    assert found == {
        "name": "vocab",
        "kind": "ir2vec-vocab",
        "path": str(model.path),
        "inputs": [],
        "outputs": [],
    }
    # By path, a .json file is a vocabulary too.
    direct = run_tool(tool, "find", str(vocab))
    assert (direct["kind"], direct["path"]) == ("ir2vec-vocab", str(vocab))
    # `fit` asks for a model's inputs: the vocabulary has none to compare.
    features = tmp_path / "features.json"
    features.write_bytes(orjson.dumps([TensorSpec("a", ElementType.INT64, (1,)).to_dict()]))
    fit = run_tool(tool, "fit", "vocab", "--registry", str(registry.root), "--features",
                   str(features))  # fmt: skip
    assert fit == {"differences": []}
