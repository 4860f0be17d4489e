"""`pip install .` gives the pure-Python model side: no LLVM, no build folder."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

USE_INSTALLED = r"""
import numpy as np
import mlbridge
from mlbridge.serdes import Message, MessageKind, get_serdes
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType

x = Tensor("x", ElementType.FLOAT, np.array([2.0], np.float32))
msg = Message(MessageKind.OBSERVATION, 0, [x])
for kind in ("bitstream", "json", "protobuf"):
    serdes = get_serdes(kind)
    if kind == "bitstream":
        from mlbridge.serdes import Header
        from mlbridge.tensor_spec import TensorSpec
        data = serdes.encode_stream([Header([TensorSpec("x", ElementType.FLOAT, (1,))]), msg])
    else:
        data = serdes.encode_stream([msg])
    assert serdes.decode_stream(data)[-1] == msg, kind
print(mlbridge.__file__)
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel`` builds from the package."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    # Build from a copy of what the package is made of: setuptools writes its
    # build tree and egg-info next to the sources, which must not race with
    # another run in the checkout.
    source = tmp_path / "source"
    shutil.copytree(
        REPO / "mlbridge", source / "mlbridge", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "setup.cfg", "README.md"):
        shutil.copy(REPO / name, source / name)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
    )
    (built,) = wheels.glob("mlbridge-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed, as a user would."""
    venv = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # Dependencies come from the package's own metadata, as for any user.
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
         "--disable-pip-version-check", str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return venv


def without_build_dir() -> dict[str, str]:
    """The environment without MLBRIDGE_BUILD_DIR (run_tests.py sets it for pytest)."""
    return {k: v for k, v in os.environ.items() if k != "MLBRIDGE_BUILD_DIR"}


def test_wheel_is_pure_python_and_works_in_a_fresh_environment(wheel, venv, tmp_path):
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith((".so", ".dylib", ".dll"))]
    assert "mlbridge/serdes/_proto/mlbridge/v1/tensor_pb2.py" in names

    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", USE_INSTALLED],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert str(venv) in result.stdout  # the installed copy, not the checkout

    cli = subprocess.run(
        [str(venv / "bin" / "mlbridge"), "plugin-path", "llvm"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=without_build_dir(),
    )
    assert cli.returncode == 1
    assert "mlbridge: error:" in cli.stderr


def test_wheel_ships_no_test_only_modules(wheel):
    # They live in test/python/support/ (issue 14).
    names = set(zipfile.ZipFile(wheel).namelist())
    for gone in ("serdes/vectors.py", "mlir/kernels.py", "mlir/lowering.py",
                 "aot/testmodels.py", "aot/_tf_testmodels.py"):  # fmt: skip
        assert f"mlbridge/{gone}" not in names
    assert not [n for n in names if n.startswith(("test/", "support/", "bench/"))]


def test_bench_from_an_installed_package_says_it_needs_a_source_checkout(venv, tmp_path):
    result = subprocess.run(
        [str(venv / "bin" / "mlbridge"), "bench", "--smoke"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=without_build_dir(),
        timeout=120,
    )
    assert result.returncode == 1
    assert "mlbridge: error: mlbridge bench needs a source checkout" in result.stderr
    assert not list(tmp_path.iterdir())  # no report folder either
