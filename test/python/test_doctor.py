"""mlbridge doctor: passes on this set-up machine; each missing piece is named with its fix."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from conftest import build_dir

from mlbridge import doctor
from mlbridge.cli import main
from mlbridge.models import Registry
from mlbridge.models.builtin import ensure_builtin_models
from mlbridge.problems import builtin_models

BUILTIN_MODELS = builtin_models()

CHECKS = {
    "LLVM 22 tools",
    "pass plugins",
    "runner modules",
    "ONNX Runtime",
    "TensorFlow environment",
    "built-in models",
    "model registry",
    "corpus",
    "Python extras",
    "Ray",
}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A registry holding the built-in models (their ONNX forms)."""
    root = tmp_path_factory.mktemp("doctor-registry")
    ensure_builtin_models(BUILTIN_MODELS, Registry(root), tfaot=False)
    return root


@pytest.fixture
def set_up(monkeypatch: pytest.MonkeyPatch, registry: Path) -> None:
    """This machine as the set-up left it, with the built-in models registered."""
    monkeypatch.setenv("MLBRIDGE_BUILD_DIR", str(build_dir()))
    monkeypatch.setenv("MLBRIDGE_MODEL_REGISTRY", str(registry))
    for name in ("MLBRIDGE_LLVM_TOOLS_DIR", "MLBRIDGE_CACHE_DIR", "MLBRIDGE_TF_PYTHON"):
        monkeypatch.delenv(name, raising=False)


def _doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["doctor", *args])
    return rc, capsys.readouterr().out


def _line(out: str, check: str) -> str:
    return next(line for line in out.splitlines() if f" {check} " in line)


def test_doctor_passes_on_the_set_up_machine(set_up, capsys) -> None:
    rc, out = _doctor(capsys)
    assert rc == 0, out
    lines = out.splitlines()
    assert len(lines) == len(CHECKS) + 1
    assert all(line.startswith("ok ") for line in lines[:-1]), out
    assert lines[-1].startswith(f"mlbridge doctor: all {len(CHECKS)} required checks ok")
    for model in BUILTIN_MODELS:
        assert f"{model.name} ({model.task})" in _line(out, "built-in models")


def test_json_lists_every_check_with_its_status(set_up, capsys) -> None:
    rc, out = _doctor(capsys, "--json")
    data = orjson.loads(out)
    assert rc == 0 and data["ok"] is True
    assert {c["name"] for c in data["checks"]} == CHECKS
    assert all(c["status"] == "ok" and c["fix"] is None for c in data["checks"])
    assert data["seconds"] < 20  # "a few seconds" on a loaded two-core machine


def test_missing_build_is_reported_with_its_fix(set_up, monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("MLBRIDGE_BUILD_DIR", str(tmp_path))
    rc, out = _doctor(capsys)
    assert rc == 1
    assert _line(out, "pass plugins").startswith("missing ")
    assert f"fix: mlbridge build --build-dir {tmp_path}" in out
    assert _line(out, "runner modules").startswith("missing ")
    assert f"2 of {len(CHECKS)} checks failed (pass plugins, runner modules)" in out


def test_empty_registry_is_reported_with_its_fix(set_up, monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("MLBRIDGE_MODEL_REGISTRY", str(tmp_path))
    rc, out = _doctor(capsys, "--json")
    assert rc == 1
    (check,) = [c for c in orjson.loads(out)["checks"] if c["status"] != "ok"]
    assert check["name"] == "built-in models"
    assert check["fix"] == "mlbridge models install-builtin"
    assert f"{BUILTIN_MODELS[0].name} is not registered" in check["detail"]


def test_empty_llvm_tools_dir_is_reported_with_its_fix(
    set_up, monkeypatch, tmp_path, capsys
) -> None:
    monkeypatch.setenv("MLBRIDGE_LLVM_TOOLS_DIR", str(tmp_path))
    rc, out = _doctor(capsys)
    assert rc == 1
    line = _line(out, "LLVM 22 tools")
    assert line.startswith("missing ") and f"looked in {tmp_path}" in line
    assert "fix: point $MLBRIDGE_LLVM_TOOLS_DIR at LLVM 22's bin folder (or unset it)" in out


def test_missing_corpus_is_reported_with_its_fix(set_up, monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("MLBRIDGE_CACHE_DIR", str(tmp_path))
    rc, out = _doctor(capsys, "--json")
    assert rc == 1
    (check,) = [c for c in orjson.loads(out)["checks"] if c["status"] != "ok"]
    assert check["name"] == "corpus" and check["fix"] == "mlbridge corpus build"
    assert str(tmp_path / "corpus") in check["detail"]


def test_python_extras_names_a_missing_submodules_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # RLlib is looked up as ray.rllib: without ray, the check names it instead of failing.
    monkeypatch.setattr(doctor, "_EXTRAS", (("rllib", "mlbridge_no_such_package.rllib"),))
    check = doctor.check_python_extras()
    assert not check.ok and "mlbridge_no_such_package.rllib" in check.detail
    assert "rllib" in check.fix or check.fix == "make setup"
