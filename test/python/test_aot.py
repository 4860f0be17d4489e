"""`mlbridge aot`: real SavedModels compiled in the TensorFlow venv, run through the C ABI.

The models come from support.aot_testmodels (TensorFlow's own answers beside them);
the shared object is called with ctypes exactly as TFAOTModelRunner::load calls it.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from support.aot_testmodels import generate

from mlbridge.aot import ABI_VERSION, AOTError, TFEnvironmentError, compile_saved_model, tfenv
from mlbridge.cli import main
from mlbridge.tensor_spec import ElementType, TensorSpec


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("aot-models"))


@pytest.fixture(scope="module")
def mixed(models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("aot-mixed")
    rc = main([
        "aot", str(models / "mixed"), "--name", "mixed", "--output-dir", str(out)
    ])  # fmt: skip
    assert rc == 0
    return out


def _tf_python() -> Path:
    return tfenv.find_tf_python()


def _save_model(tmp_path: Path, body: str) -> Path:
    """Write a SavedModel with a `serve` signature defined by ``body`` (TF venv)."""
    script = tmp_path / "make.py"
    script.write_text(
        textwrap.dedent(
            """\
            import os, sys
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
            import tensorflow as tf
            class M(tf.Module):
            {body}
            m = M()
            tf.saved_model.save(m, sys.argv[1], signatures={{"serving_default": m.serve}})
            """
        ).format(body=textwrap.indent(textwrap.dedent(body), "    "))
    )
    out = tmp_path / "sm"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(_tf_python()), str(script), str(out)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


class _ABI:
    """The C ABI of an AOT shared object, through ctypes."""

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
        self.lib = lib
        for fn, res, args in [
            ("abi_version", ctypes.c_uint32, []),
            ("model_name", ctypes.c_char_p, []),
            ("num_args", ctypes.c_int32, []),
            ("arg_name", ctypes.c_char_p, [ctypes.c_int32]),
            ("arg_type", ctypes.c_int32, [ctypes.c_int32]),
            ("arg_rank", ctypes.c_int32, [ctypes.c_int32]),
            ("arg_shape", ctypes.POINTER(ctypes.c_int64), [ctypes.c_int32]),
            ("num_results", ctypes.c_int32, []),
            ("result_name", ctypes.c_char_p, [ctypes.c_int32]),
            ("result_type", ctypes.c_int32, [ctypes.c_int32]),
            ("result_rank", ctypes.c_int32, [ctypes.c_int32]),
            ("result_shape", ctypes.POINTER(ctypes.c_int64), [ctypes.c_int32]),
            ("create", ctypes.c_void_p, []),
            ("destroy", None, [ctypes.c_void_p]),
            ("arg_data", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int32]),
            ("result_data", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int32]),
            ("run", ctypes.c_int32, [ctypes.c_void_p]),
        ]:
            f = getattr(lib, f"mlbridge_aot_{fn}")
            f.restype, f.argtypes = res, args
            setattr(self, fn, f)

    def specs(self, role: str) -> list[TensorSpec]:
        n = getattr(self, f"num_{role}s")()
        result = []
        for i in range(n):
            rank = getattr(self, f"{role}_rank")(i)
            shape = getattr(self, f"{role}_shape")(i)
            result.append(
                TensorSpec(
                    getattr(self, f"{role}_name")(i).decode(),
                    ElementType(getattr(self, f"{role}_type")(i) + 1),
                    tuple(shape[d] for d in range(rank)),
                )
            )
        return result


def test_outputs_and_specs_sidecar(mixed: Path) -> None:
    for name in ("mixed.so", "libmixed_aot.a", "mixed.h", "mixed.o", "mixed_mlbridge.h",
                 "mixed.cmake", "mixed.specs.json"):  # fmt: skip
        assert (mixed / name).is_file(), name
    specs = json.loads((mixed / "mixed.specs.json").read_text())
    assert specs["name"] == "mixed" and specs["kind"] == "tfaot"
    assert [TensorSpec.from_dict(s) for s in specs["features"]] == [
        TensorSpec("count", ElementType.INT64, (1,)),
        TensorSpec("flags", ElementType.INT32, (2,)),
        TensorSpec("x", ElementType.FLOAT, (1, 4)),
    ]
    assert [s["name"] for s in specs["advice"]] == ["doubled", "score"]


def test_shared_object_exports_only_the_versioned_abi(mixed: Path) -> None:
    nm = shutil.which("nm") or "llvm-nm-22"
    out = subprocess.run(
        [nm, "-D", "--defined-only", str(mixed / "mixed.so")], capture_output=True, text=True
    ).stdout
    symbols = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert "mlbridge_aot_run@@MLBRIDGE_AOT_1" in symbols
    others = {s for s in symbols if not s.startswith("mlbridge_aot_") and s != "MLBRIDGE_AOT_1"}
    assert others == set()


def test_shared_object_answers_like_tensorflow(mixed: Path, models: Path) -> None:
    abi = _ABI(mixed / "mixed.so")
    assert abi.abi_version() == ABI_VERSION
    assert abi.model_name() == b"mixed"
    args = abi.specs("arg")
    results = abi.specs("result")
    assert [a.name for a in args] == ["count", "flags", "x"]
    answers = json.loads((models / "mixed.answers.json").read_text())["cases"]
    inst = abi.create()
    assert inst
    try:
        for case in answers:
            for i, spec in enumerate(args):
                value = np.asarray(case["inputs"][spec.name], dtype=spec.type.numpy_dtype)
                ctypes.memmove(abi.arg_data(inst, i), value.ctypes.data, value.nbytes)
            assert abi.run(inst) == 0
            for i, spec in enumerate(results):
                n = spec.element_count
                buf = (ctypes.c_char * (n * spec.type.itemsize)).from_address(
                    abi.result_data(inst, i)
                )
                got = np.frombuffer(bytes(buf), dtype=spec.type.numpy_dtype)
                np.testing.assert_allclose(got, case["outputs"][spec.name], rtol=1e-6)
    finally:
        abi.destroy(inst)
    assert abi.arg_name(7) is None and abi.arg_type(-1) == -1


def test_runtime_is_built_once(mixed: Path, models: Path, tmp_path: Path, capfd) -> None:
    # `mixed` built the runtime subset; another model reuses it from the cache.
    capfd.readouterr()
    again = compile_saved_model(models / "mixed", "again", tmp_path)
    assert "compiling XLA runtime" not in capfd.readouterr().err
    assert again.shared_object is not None and again.shared_object.is_file()


def test_missing_saved_model(tmp_path: Path) -> None:
    with pytest.raises(AOTError, match=r"no SavedModel at .*saved_model\.pb"):
        compile_saved_model(tmp_path / "nope", "m", tmp_path / "out")


def test_bad_name(models: Path, tmp_path: Path) -> None:
    with pytest.raises(AOTError, match="must be a C identifier"):
        compile_saved_model(models / "mixed", "my-model", tmp_path)


def test_wrong_signature_and_tag_list_what_exists(models: Path, tmp_path: Path) -> None:
    with pytest.raises(AOTError, match=r"no signature 'nope' \(it has: .*serving_default\)"):
        compile_saved_model(models / "mixed", "m", tmp_path, signature="nope")
    with pytest.raises(AOTError, match=r"no meta graph tagged 'train' \(it has: serve\)"):
        compile_saved_model(models / "mixed", "m", tmp_path, tag="train")


def test_cli_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["aot", str(tmp_path), "--name", "m"]) == 1
    assert "mlbridge: error: no SavedModel at" in capsys.readouterr().err


def test_missing_tf_python_names_the_fix(models: Path, tmp_path: Path) -> None:
    with pytest.raises(TFEnvironmentError, match=r"python -m mlbridge\.aot\.tfenv DIR"):
        compile_saved_model(models / "mixed", "m", tmp_path, tf_python=tmp_path / "python")


def test_no_tf_env_found_says_how_to_create(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLBRIDGE_TF_PYTHON", raising=False)
    monkeypatch.setenv("MLBRIDGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tfenv, "find_source_dir", lambda: None)
    with pytest.raises(TFEnvironmentError, match=r"python -m mlbridge\.aot\.tfenv .*tf-2\.19\.1"):
        tfenv.find_tf_python(create=False)


def test_dynamic_shapes_are_refused(tmp_path: Path) -> None:
    saved = _save_model(
        tmp_path,
        """
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.reduce_sum(x, axis=1)}
        """,
    )
    with pytest.raises(AOTError, match=r"input 'x' has the shape \[-1, 4\]: AOT .*static"):
        compile_saved_model(saved, "dyn", tmp_path / "out")


def test_compile_failure_shows_saved_model_cli_output(tmp_path: Path) -> None:
    # A string op has no XLA CPU kernel: saved_model_cli fails.
    saved = _save_model(
        tmp_path,
        """
        @tf.function(input_signature=[tf.TensorSpec([2], tf.int64, name="x")])
        def serve(self, x):
            s = tf.strings.as_string(x)
            return {"y": tf.strings.length(tf.strings.reduce_join(s))}
        """,
    )
    with pytest.raises(AOTError, match=r"saved_model_cli aot_compile_cpu failed") as info:
        compile_saved_model(saved, "strs", tmp_path / "out")
    # The tail of saved_model_cli's stderr follows the first line.
    assert len(str(info.value).splitlines()) > 1
    assert not (tmp_path / "out" / "strs.so").exists()


def test_tfenv_main_usage() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mlbridge.aot.tfenv", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_signature_is_counted_in_one_line_unless_verbose(
    models: Path, tmp_path: Path, capfd
) -> None:
    # Another architecture: saved_model_cli runs, nothing is linked (quick).
    triple = "aarch64-unknown-linux-gnu"
    compile_saved_model(models / "mixed", "quiet", tmp_path / "q", target_triple=triple)
    quiet = capfd.readouterr().err
    assert "  feature {" not in quiet
    assert "features, advice: " in quiet
    compile_saved_model(
        models / "mixed", "loud", tmp_path / "l", target_triple=triple, verbose=True
    )
    loud = capfd.readouterr().err
    assert loud.count("  feature {") >= 2 and "  advice  {" in loud
