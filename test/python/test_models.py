"""The model registry: ``mlbridge.models`` and ``mlbridge models ...``.

Every model here is real: ONNX models are built with the ``onnx`` package, TF AOT
stand-ins are real ELF shared objects compiled with the system C compiler (the registry
reads only their ELF header and their specs sidecar; loading them is the runner's job).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import onnx
import orjson
import pytest
from onnx import TensorProto, helper

from mlbridge.cli import main
from mlbridge.models import (
    REGISTRY_ENV,
    ModelFileError,
    Registry,
    RegistryError,
    check_compatible,
    default_registry_dir,
    read_onnx_specs,
)
from mlbridge.models.ort_format import (
    lacks_ort_format_copy,
    ort_format_copy_path,
    write_ort_format_copy,
)
from mlbridge.tensor_spec import ElementType, TensorSpec

F32, I64, I32 = ElementType.FLOAT, ElementType.INT64, ElementType.INT32


def make_onnx(path: Path, *, inputs=None, weight_as_input: bool = False, output: str = "y") -> Path:
    """An ONNX model: y = sum(b) * 1 + cast(a), inputs a:int64[1], b:float[batch,3].

    ``output`` names y (an advice name of a pass gives the model that pass's task).
    """
    a = helper.make_tensor_value_info("a", TensorProto.INT64, [1])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info(output, TensorProto.FLOAT, [1])
    w = helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])
    nodes = [
        helper.make_node("ReduceSum", ["b"], ["s"], keepdims=0),
        helper.make_node("Reshape", ["s", "one"], ["s1"]),
        helper.make_node("Cast", ["a"], ["af"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["s1", "w"], ["sw"]),
        helper.make_node("Add", ["sw", "af"], [output]),
    ]
    one = helper.make_tensor("one", TensorProto.INT64, [1], [1])
    graph_inputs = inputs if inputs is not None else [a, b]
    if weight_as_input:  # old exporters list weights as graph inputs too
        graph_inputs = [*graph_inputs, helper.make_tensor_value_info("w", TensorProto.FLOAT, [1])]
    graph = helper.make_graph(nodes, "policy", graph_inputs, [y], initializer=[w, one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


MODEL_FEATURES = (TensorSpec("a", I64, (1,)), TensorSpec("b", F32, (-1, 3)))
MODEL_ADVICE = (TensorSpec("y", F32, (1,)),)


@pytest.fixture
def registry_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    reg = tmp_path / "registry"
    monkeypatch.setenv(REGISTRY_ENV, str(reg))
    return reg


@pytest.fixture
def onnx_file(tmp_path: Path) -> Path:
    return make_onnx(tmp_path / "policy.onnx")


@pytest.fixture(scope="module")
def shared_object(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("aot")
    return compile_shared_object(
        folder / "policy.so", "int mlbridge_test_policy(int x) { return x + 1; }\n"
    )


# The specs half of the C ABI `mlbridge aot` gives a model (TFAOTFunctions in
# include/mlbridge/TFAOTModelRunner.h): arg "mask" int64_t[1,33], result "index" int32_t[1].
ABI_SOURCE = r"""
#include <stdint.h>
static const int64_t mask_shape[] = {1, 33}, index_shape[] = {1};
uint32_t mlbridge_aot_abi_version(void) { return ABI_VERSION; }
int32_t mlbridge_aot_num_args(void) { return 1; }
const char *mlbridge_aot_arg_name(int32_t i) { return "mask"; }
int32_t mlbridge_aot_arg_type(int32_t i) { return 6; }
int32_t mlbridge_aot_arg_rank(int32_t i) { return 2; }
const int64_t *mlbridge_aot_arg_shape(int32_t i) { return mask_shape; }
int32_t mlbridge_aot_num_results(void) { return 1; }
const char *mlbridge_aot_result_name(int32_t i) { return "index"; }
int32_t mlbridge_aot_result_type(int32_t i) { return 4; }
int32_t mlbridge_aot_result_rank(int32_t i) { return 1; }
const int64_t *mlbridge_aot_result_shape(int32_t i) { return index_shape; }
"""


def compile_shared_object(out: Path, source: str, *defines: str) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang-22")
    if cc is None:
        pytest.fail("no C compiler (cc, gcc, clang-22) to build a shared object", pytrace=False)
    src = out.with_suffix(".c")
    src.write_text(source)
    argv = [cc, "-shared", "-fPIC", *(f"-D{d}" for d in defines), "-o", str(out), str(src)]
    subprocess.run(argv, check=True, timeout=60)
    return out


def write_sidecar(so: Path, features: list[dict], advice: list[dict]) -> Path:
    sidecar = so.with_name(so.name[: -len(".so")] + ".specs.json")
    sidecar.write_bytes(
        orjson.dumps({"name": so.stem, "kind": "tfaot", "features": features, "advice": advice})
    )
    return sidecar


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["models", *argv])
    out, err = capsys.readouterr()
    return status, out, err


# -- reading specs ----------------------------------------------------------------------


def test_onnx_specs_map_types_and_symbolic_dims(tmp_path: Path) -> None:
    specs = read_onnx_specs(make_onnx(tmp_path / "m.onnx", weight_as_input=True))
    assert specs.features == MODEL_FEATURES  # the weight "w" is not a model input
    assert specs.advice == MODEL_ADVICE


def test_onnx_element_type_without_mlbridge_type_is_refused(tmp_path: Path) -> None:
    half = helper.make_tensor_value_info("h", TensorProto.FLOAT16, [1])
    out = helper.make_tensor_value_info("o", TensorProto.FLOAT16, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["h"], ["o"])], "g", [half], [out])
    path = tmp_path / "half.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(ModelFileError, match=r"input 'h' has ONNX element type FLOAT16"):
        read_onnx_specs(path)


def test_onnx_input_without_shape_is_refused(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    path = tmp_path / "noshape.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(ModelFileError, match=r"not a valid ONNX model: Field 'shape' .* missing"):
        read_onnx_specs(path)


# -- Python API -------------------------------------------------------------------------


def test_default_registry_dir_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "r"))
    assert default_registry_dir() == tmp_path / "r"
    monkeypatch.delenv(REGISTRY_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_registry_dir() == tmp_path / "xdg" / "mlbridge" / "models"
    monkeypatch.setenv("XDG_DATA_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_registry_dir() == tmp_path / "home" / ".local/share/mlbridge/models"


def test_register_get_list_path_remove_round_trip(registry_dir: Path, onnx_file: Path) -> None:
    reg = Registry()
    assert reg.root == registry_dir
    model = reg.register("inliner", onnx_file, description="test policy")
    assert model.kind == "onnx"
    assert model.features == MODEL_FEATURES and model.advice == MODEL_ADVICE
    assert model.path == registry_dir / "inliner" / "policy.onnx"
    # The registry owns a copy: changing the original changes nothing.
    original = onnx_file.read_bytes()
    onnx_file.write_bytes(b"changed")
    assert model.path.read_bytes() == original
    assert reg.verify("inliner") == model
    assert reg.get("inliner") == model
    assert reg.path("inliner") == model.path
    assert [m.name for m in reg.list()] == ["inliner"]
    stored = orjson.loads((registry_dir / "inliner" / "model.json").read_bytes())
    assert stored["file"] == "policy.onnx" and stored["description"] == "test policy"
    assert stored["features"][1] == {"name": "b", "type": "float", "port": 0, "shape": [-1, 3]}
    reg.remove("inliner")
    assert reg.list() == []
    assert not (registry_dir / "inliner").exists()
    with pytest.raises(RegistryError, match=r"no model named 'inliner' .* \(it is empty\)"):
        reg.get("inliner")


def test_overwrite_needs_force(registry_dir: Path, tmp_path: Path, onnx_file: Path) -> None:
    reg = Registry()
    reg.register("m", onnx_file)
    with pytest.raises(RegistryError, match=r"'m' is already registered .* pass --force"):
        reg.register("m", onnx_file)
    a = helper.make_tensor_value_info("a", TensorProto.INT64, [1])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])
    other = make_onnx(tmp_path / "other.onnx", inputs=[a, b])
    replaced = reg.register("m", other, force=True)
    assert replaced.features[1].shape == (2, 3)
    assert sorted(p.name for p in registry_dir.iterdir()) == [".lock", "m"]
    assert sorted(p.name for p in (registry_dir / "m").iterdir()) == ["model.json", "other.onnx"]


def test_files_that_are_not_models_are_refused(registry_dir: Path, tmp_path: Path) -> None:
    reg = Registry()
    text = tmp_path / "notes.onnx"
    text.write_bytes(b"this is not a protobuf \xff\xfe")
    with pytest.raises(RegistryError, match=r"notes.onnx is not a valid ONNX model"):
        reg.register("bad", text)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(RegistryError, match=r"empty.onnx is not a valid ONNX model"):
        reg.register("bad", empty)
    unknown = tmp_path / "weights.bin"
    unknown.write_bytes(b"\0" * 8)
    with pytest.raises(RegistryError, match=r"cannot tell what kind .* pass --kind"):
        reg.register("bad", unknown)
    with pytest.raises(RegistryError, match=r"does not exist"):
        reg.register("bad", tmp_path / "missing.onnx")
    assert reg.names() == []


def test_bad_names_are_refused(registry_dir: Path, onnx_file: Path) -> None:
    reg = Registry()
    for name in ("", ".hidden", "..", "a/b", "has space", "ü"):
        with pytest.raises(RegistryError, match=r"invalid model name"):
            reg.register(name, onnx_file)
    assert reg.register("A_b-9.v2", onnx_file).name == "A_b-9.v2"


def test_tfaot_model_with_sidecar(registry_dir: Path, shared_object: Path, tmp_path: Path) -> None:
    so = tmp_path / "evict.so"
    shutil.copyfile(shared_object, so)
    reg = Registry()
    with pytest.raises(RegistryError, match=r"no specs sidecar evict.specs.json .* ABI .* --specs"):
        reg.register("evict", so)
    write_sidecar(
        so,
        [{"name": "x", "type": "int32_t", "port": 0, "shape": [1, 33]}],
        [{"name": "index_to_evict", "type": "int64_t", "port": 0, "shape": [1]}],
    )
    model = reg.register("evict", so)
    assert model.kind == "tfaot"
    assert model.features == (TensorSpec("x", I32, (1, 33)),)
    assert model.advice == (TensorSpec("index_to_evict", I64, (1,)),)
    # The registered copy describes itself for whoever gets its path.
    sidecar = orjson.loads((registry_dir / "evict" / "evict.specs.json").read_bytes())
    assert sidecar["features"][0]["shape"] == [1, 33]
    # A .so that is not an ELF shared object is refused.
    fake = tmp_path / "fake.so"
    fake.write_bytes(b"#!/bin/sh\n")
    write_sidecar(fake, [], [])
    with pytest.raises(RegistryError, match=r"fake.so is not a TF AOT model: it is not an ELF"):
        reg.register("fake", fake)


def test_tfaot_specs_from_the_abi_without_sidecar(registry_dir: Path, tmp_path: Path) -> None:
    so = compile_shared_object(tmp_path / "abi.so", ABI_SOURCE, "ABI_VERSION=1")
    model = Registry().register("abi", so)
    assert model.features == (TensorSpec("mask", I64, (1, 33)),)
    assert model.advice == (TensorSpec("index", I32, (1,)),)
    assert (registry_dir / "abi" / "abi.specs.json").is_file()
    newer = compile_shared_object(tmp_path / "newer.so", ABI_SOURCE, "ABI_VERSION=2")
    with pytest.raises(RegistryError, match=r"newer.so has mlbridge AOT ABI version 2"):
        Registry().register("newer", newer)


def test_tfaot_specs_file_errors_name_the_key(
    registry_dir: Path, shared_object: Path, tmp_path: Path
) -> None:
    specs = tmp_path / "specs.json"
    specs.write_bytes(b'{"features":[{"name":"x","type":"int33_t","shape":[1]}],"advice":[]}')
    with pytest.raises(RegistryError, match=r"features\[0\]: unknown element type 'int33_t'"):
        Registry().register("m", shared_object, specs=specs)
    specs.write_bytes(b'{"features":[]}')
    with pytest.raises(RegistryError, match=r"has no 'advice' list"):
        Registry().register("m", shared_object, specs=specs)


def test_corrupt_model_json_is_named(registry_dir: Path, onnx_file: Path) -> None:
    reg = Registry()
    reg.register("m", onnx_file)
    (registry_dir / "m" / "model.json").write_bytes(b"{truncated")
    with pytest.raises(RegistryError, match=r"m/model.json is not valid JSON"):
        reg.get("m")
    reg.remove("m")  # a corrupt model can still be removed
    assert reg.names() == []


def test_readers_never_see_half_a_model(registry_dir: Path, tmp_path: Path) -> None:
    reg = Registry()
    a = helper.make_tensor_value_info("a", TensorProto.INT64, [1])
    variants = []
    for n in (2, 5):
        b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, 3])
        variants.append(make_onnx(tmp_path / f"v{n}.onnx", inputs=[a, b]))
    reg.register("m", variants[0])
    done = threading.Event()
    seen: list[tuple[int, ...]] = []
    errors: list[Exception] = []

    def read() -> None:
        while not done.is_set():
            try:
                seen.append(reg.get("m").features[1].shape)
            except Exception as e:  # noqa: BLE001 - any failure is a test failure
                errors.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(40):
            reg.register("m", variants[i % 2], force=True)
    finally:
        done.set()
        reader.join(timeout=60)
    assert not errors, errors[:3]
    assert seen and set(seen) <= {(2, 3), (5, 3)}


# -- the compatibility rule -------------------------------------------------------------


def test_extra_compiler_features_are_fine() -> None:
    compiler = [*MODEL_FEATURES, TensorSpec("extra", ElementType.DOUBLE, (4,))]
    assert check_compatible(compiler, MODEL_FEATURES) == []
    # A dynamic dimension matches any size; equal static element counts are compatible.
    concrete = [TensorSpec("a", I64, (1,)), TensorSpec("b", F32, (7, 3))]
    assert check_compatible(concrete, MODEL_FEATURES) == []
    assert check_compatible([TensorSpec("v", F32, (3,))], [TensorSpec("v", F32, (1, 3))]) == []


def test_every_difference_is_listed() -> None:
    compiler = [TensorSpec("a", I32, (1,)), TensorSpec("b", F32, (2,)), TensorSpec("c", F32, ())]
    model = [
        TensorSpec("a", I64, (1,)),
        TensorSpec("b", F32, (-1, 3)),
        TensorSpec("missing", F32, (1,)),
        TensorSpec("c", I64, (2,)),
        TensorSpec("a", I64, (1,)),
    ]
    assert check_compatible(compiler, model) == [
        "input 'a' is int64_t but the compiler sends int32_t",
        "input 'b' has shape [-1,3] but the compiler sends shape [2]",
        "input 'missing' is not a feature the compiler sends",
        "input 'c' is int64_t but the compiler sends float",
        "input 'c' has shape [2] but the compiler sends shape []",
        "input 'a' is declared more than once",
    ]


# -- the command line -------------------------------------------------------------------


def test_cli_round_trip(
    registry_dir: Path, onnx_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = cli(capsys, "register", "inliner", str(onnx_file), "--description", "d")
    assert status == 0 and "registered inliner (onnx, no task, 2 inputs, 1 output)" in out
    status, out, _ = cli(capsys, "list")
    assert status == 0
    header, row = out.splitlines()
    assert header.split() == ["NAME", "KIND", "TASK", "OPTION", "INPUTS", "OUTPUTS", "SIZE"]
    assert row.split()[:6] == ["inliner", "onnx", "-", "-", "2", "y:float[1]"]
    status, out, _ = cli(capsys, "list", "--json")
    listed = orjson.loads(out)
    assert [m["name"] for m in listed] == ["inliner"]
    assert listed[0]["path"] == str(registry_dir / "inliner" / "policy.onnx")
    status, out, _ = cli(capsys, "path", "inliner")
    assert (status, out) == (0, f"{registry_dir / 'inliner' / 'policy.onnx'}\n")
    status, out, _ = cli(capsys, "show", "inliner", "--verify")
    assert status == 0
    assert "kind:        onnx" in out and "(verified)" in out and "description: d" in out
    assert "  b  float     [-1,3]" in out
    status, out, _ = cli(capsys, "show", "inliner", "--json")
    assert orjson.loads(out)["features"][0]["name"] == "a"
    status, out, _ = cli(capsys, "remove", "inliner")
    assert status == 0 and out == f"removed inliner from {registry_dir}\n"
    status, out, err = cli(capsys, "list")
    assert (status, out) == (0, "") and "no models registered" in err


def test_cli_errors_exit_1_with_a_message(
    registry_dir: Path, onnx_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "register", "m", str(onnx_file))[0] == 0
    status, _, err = cli(capsys, "register", "m", str(onnx_file))
    assert status == 1
    assert err.startswith("mlbridge: error: a model named 'm' is already registered")
    assert cli(capsys, "register", "m", str(onnx_file), "--force")[0] == 0
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    status, _, err = cli(capsys, "register", "bad", str(bad))
    assert status == 1 and "bad.onnx is not a valid ONNX model" in err
    status, _, err = cli(capsys, "path", "nope")
    assert status == 1 and f"no model named 'nope' in the registry {registry_dir}" in err
    assert "(it has: m)" in err
    status, _, err = cli(capsys, "show", "bad name")
    assert status == 1 and "invalid model name 'bad name'" in err
    status, _, err = cli(capsys, "remove", "nope")
    assert status == 1 and "no model named 'nope'" in err
    status, _, err = cli(capsys, "register", "x", str(onnx_file), "--specs", str(onnx_file))
    assert status == 1 and "--specs is for TF AOT models" in err


def test_cli_check(
    registry_dir: Path, onnx_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Registry().register("m", onnx_file)
    fits = tmp_path / "fits.json"
    # The header form of the pipe protocol: extra features are fine.
    fits.write_bytes(
        orjson.dumps({"features": [*(s.to_dict() for s in MODEL_FEATURES),
                                   {"name": "extra", "type": "bool", "shape": [1]}]})
    )  # fmt: skip
    status, out, _ = cli(capsys, "check", "m", "--features", str(fits))
    assert status == 0 and "fits the features" in out and "reads 2 of 3" in out
    wrong = tmp_path / "wrong.json"
    wrong.write_bytes(b'[{"name":"a","type":"int32_t","shape":[1]}]')
    status, _, err = cli(capsys, "check", "m", "--features", str(wrong))
    assert status == 1
    assert "does not fit the features in" in err and "(2 differences)" in err
    assert "input 'a' is int64_t but the compiler sends int32_t" in err
    assert "input 'b' is not a feature the compiler sends" in err


def test_cli_in_a_shell_substitution(registry_dir: Path, onnx_file: Path) -> None:
    """`$(mlbridge models path NAME)`: only the path on stdout, exit status 0 or 1."""
    exe = [sys.executable, "-m", "mlbridge"]
    subprocess.run([*exe, "models", "register", "p", str(onnx_file)], check=True, timeout=60)
    ok = subprocess.run(
        [*exe, "models", "path", "p"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (ok.returncode, ok.stdout) == (0, f"{registry_dir / 'p' / 'policy.onnx'}\n")
    missing = subprocess.run(
        [*exe, "models", "path", "q"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (missing.returncode, missing.stdout) == (1, "")
    assert "no model named 'q'" in missing.stderr
    usage = subprocess.run(
        [*exe, "models", "frobnicate"], capture_output=True, text=True, timeout=60, check=False
    )
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


# -- tasks --------------------------------------------------------------------------------


def test_the_task_is_told_from_the_advice_name(registry_dir: Path, tmp_path: Path) -> None:
    registry = Registry(registry_dir)
    for output, task in (
        ("inlining_decision", "inliner"),
        ("action", "phase-order"),
        ("priority", "regalloc-priority"),
        ("regalloc_action", "regalloc"),
        ("unroll_factor", "mlir-loop-unroll"),
        ("y", None),
    ):
        model = make_onnx(tmp_path / f"{output}.onnx", output=output)
        assert registry.register(output, model).task == task, output
        assert registry.get(output).task == task, output


def test_an_explicit_task_is_recorded_and_checked_against_the_advice(
    registry_dir: Path, tmp_path: Path
) -> None:
    registry = Registry(registry_dir)
    untagged = make_onnx(tmp_path / "y.onnx")
    decision = make_onnx(tmp_path / "decision.onnx", output="inlining_decision")
    with pytest.raises(RegistryError, match="its advice is 'y', and the inliner pass asks for one"):
        registry.register("m", untagged, task="inliner")
    with pytest.raises(RegistryError, match="asks for one output named 'action'"):
        registry.register("m", decision, task="phase-order")
    with pytest.raises(RegistryError, match="unknown task 'inlining' .*inliner, phase-order"):
        registry.register("m", decision, task="inlining")
    assert registry.register("m", decision, task="inliner").task == "inliner"
    obj = orjson.loads((registry_dir / "m" / "model.json").read_bytes())
    assert obj["task"] == "inliner"


def test_a_model_json_without_task_reads_as_none_and_a_bad_one_is_named(
    registry_dir: Path, onnx_file: Path
) -> None:
    registry = Registry(registry_dir)
    registry.register("m", onnx_file)
    path = registry_dir / "m" / "model.json"
    obj = orjson.loads(path.read_bytes())
    del obj["task"]
    path.write_bytes(orjson.dumps(obj))
    assert registry.get("m").task is None
    obj["task"] = 3
    path.write_bytes(orjson.dumps(obj))
    with pytest.raises(RegistryError, match="'task' must be a task name or null, not 3"):
        registry.get("m")


def test_cli_lists_the_task_and_its_option_and_filters_by_task(
    registry_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decision = make_onnx(tmp_path / "decision.onnx", output="inlining_decision")
    action = make_onnx(tmp_path / "action.onnx", output="action")
    status, out, err = cli(capsys, "register", "inl", str(decision))
    assert status == 0 and "task inliner, for -mlbridge-inline-model (opt)" in out and not err
    assert cli(capsys, "register", "po", str(action))[0] == 0
    status, out, _ = cli(capsys, "list")
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [r[:5] for r in rows] == [
        ["inl", "onnx", "inliner", "-mlbridge-inline-model", "(opt)"],
        ["po", "onnx", "phase-order", "-mlbridge-phase-order-model", "(opt)"],
    ]
    status, out, _ = cli(capsys, "list", "--task", "phase-order")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["po"]
    status, out, _ = cli(capsys, "list", "--task", "phase-order", "--json")
    assert [m["task"] for m in orjson.loads(out)] == ["phase-order"]
    status, out, err = cli(capsys, "list", "--task", "regalloc-priority")
    assert (status, out) == (0, "") and "no regalloc-priority models registered" in err
    status, out, _ = cli(capsys, "show", "po")
    assert "task:        phase-order: pass ordering (mlbridge-phase-order), " in out


def test_cli_notes_a_model_registered_without_a_task(
    registry_dir: Path, onnx_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = cli(capsys, "register", "m", str(onnx_file))
    assert status == 0
    assert "advice of 'm' (y) names no mlbridge pass" in err and "--task" in err


def test_an_onnx_model_with_external_weights_is_registered_with_them(
    registry_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_model_specs import external_weights_model

    source = external_weights_model(tmp_path / "model")
    weights = (source.parent / "m.onnx.data").read_bytes()
    model = Registry().register("with-weights", source)
    assert (model.path.parent / "m.onnx.data").read_bytes() == weights
    shutil.rmtree(source.parent)  # the registered copy stands alone
    monkeypatch.chdir(tmp_path)
    assert read_onnx_specs(model.path).advice == (TensorSpec("y", ElementType.FLOAT, (4,)),)
    loaded = onnx.load(str(model.path))  # reads the weights from beside the copy
    assert onnx.numpy_helper.to_array(loaded.graph.initializer[0]).tolist() == [0, 1, 2, 3]


def test_an_onnx_model_is_registered_with_its_ort_format_copy(
    registry_dir: Path, onnx_file: Path
) -> None:
    import numpy as np
    import onnxruntime as ort

    loadable = onnx.load(str(onnx_file))
    loadable.ir_version = 8  # make_onnx's is the onnx package's, newer than ONNX Runtime's
    onnx.save(loadable, str(onnx_file))
    model = Registry().register("inliner", onnx_file)
    copy = ort_format_copy_path(model.path, ort.__version__)
    assert copy == registry_dir / "inliner" / f"policy.onnxruntime-{ort.__version__}.ort"
    assert copy.is_file()
    # Not older than the model: the C++ runner reads it (OnnxModel::load).
    assert copy.stat().st_mtime_ns >= model.path.stat().st_mtime_ns
    assert not lacks_ort_format_copy(model.path)
    feeds = {"a": np.array([3], np.int64), "b": np.arange(6, dtype=np.float32).reshape(2, 3)}
    answers = [
        ort.InferenceSession(str(f), providers=["CPUExecutionProvider"]).run(None, feeds)
        for f in (model.path, copy)
    ]
    np.testing.assert_array_equal(answers[0][0], answers[1][0])


def test_an_onnx_model_onnx_runtime_cannot_load_gets_no_copy(tmp_path: Path) -> None:
    # The onnx checker passes it; ONNX Runtime has no kernel for the operator.
    graph = helper.make_graph(
        [helper.make_node("NoSuchOperator", ["x"], ["y"], domain="mlbridge.test")],
        "unknown",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("mlbridge.test", 1)],
    )
    path = tmp_path / "unknown.onnx"
    onnx.save(model, str(path))
    assert write_ort_format_copy(path) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unknown.onnx"]


def test_registering_an_onnx_model_leaves_no_onnx_runtime_telemetry(
    registry_dir: Path, onnx_file: Path, tmp_path: Path
) -> None:
    """ONNX Runtime's session for the ORT-format copy runs with its telemetry off.

    Its PyPI builds otherwise write a device id and an event store under
    ``~/.cache/Microsoft`` and a session file into ``$TMPDIR`` (outside CI, which turns
    it off by itself: the variables saying so are removed here).
    """
    home, tmp, cwd = (tmp_path / name for name in ("home", "tmp", "cwd"))
    for folder in (home, tmp, cwd):
        folder.mkdir()
    quiet = ("CI", "ORT_DISABLE_TELEMETRY", "ORT_RUNNING_UNIT_TESTS")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    env |= {"HOME": str(home), "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(home / ".cache")}
    subprocess.run(
        [sys.executable, "-m", "mlbridge", "models", "register", "p", str(onnx_file)],
        check=True, timeout=120, cwd=cwd, env=env, capture_output=True,
    )  # fmt: skip
    assert (registry_dir / "p" / "policy.onnx").is_file()
    assert [sorted(p.relative_to(tmp_path) for p in f.rglob("*")) for f in (home, tmp, cwd)] == [
        [],
        [],
        [],
    ]
