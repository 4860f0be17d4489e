"""`pip install .` gives the pure-Python model side: no LLVM, no build folder."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
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


# -- every command that works without LLVM, from the installed wheel -----------------

# The command paths of the installed package's argparse tree, one per line.
COMMAND_PATHS = r"""
import argparse
from mlbridge.cli import build_parser

def walk(parser, path):
    print(" ".join(path))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                walk(sub, [*path, name])

walk(build_parser(), [])
"""


@pytest.fixture(scope="module")
def full_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel, and the optional packages of this one.

    The wheel goes in with ``--no-deps``; a ``.pth`` file puts this environment's
    site-packages (onnx, onnxruntime, torch, grpcio, ...) after the venv's own, so that
    ``mlbridge`` is the installed copy and nothing is downloaded.
    """
    venv = tmp_path_factory.mktemp("installed-full") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
         str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    ours = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "zz-mlbridge-test-reuse.pth").write_text(f"{ours}\n")
    return venv


def user_env(tmp_path: Path) -> dict[str, str]:
    """No build folder, no checkout on the path; registry and caches in ``tmp_path``."""
    env = {
        k: v
        for k, v in without_build_dir().items()
        if k not in ("PYTHONPATH", "MLBRIDGE_TF_PYTHON")
    }
    env["MLBRIDGE_MODEL_REGISTRY"] = str(tmp_path / "registry")
    env["MLBRIDGE_CACHE_DIR"] = str(tmp_path / "cache")
    return env


def mlbridge(venv: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "mlbridge"), *args],
        cwd=tmp_path, env=user_env(tmp_path), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_wheel_holds_every_data_file_the_package_reads(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    package = REPO / "mlbridge"
    data = sorted(
        p.relative_to(REPO).as_posix()
        for p in package.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    )
    assert "mlbridge/inliner/models/inliner-oz.json" in data
    assert [name for name in data if name not in names] == []


def test_every_command_help_works_from_the_wheel(venv, tmp_path):
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-c", COMMAND_PATHS],
        cwd=tmp_path, env=user_env(tmp_path), capture_output=True, text=True, check=True,
    )  # fmt: skip
    paths = listed.stdout.splitlines()
    assert {"", "serve", "models", "models install-builtin", "train inliner"} <= set(paths)
    for path in paths:
        result = mlbridge(venv, tmp_path, *path.split(), "--help")
        assert result.returncode == 0, (path, result.stderr)
        assert result.stdout.startswith(f"usage: {' '.join(['mlbridge', *path.split()])}")
        assert result.stderr == "", (path, result.stderr)
    version = mlbridge(venv, tmp_path, "--version")
    assert version.returncode == 0 and version.stdout.startswith("mlbridge ")


def test_models_list_from_the_wheel_on_an_empty_registry(venv, tmp_path):
    result = mlbridge(venv, tmp_path, "models", "list")
    assert result.returncode == 0
    assert result.stdout == ""
    assert result.stderr == f"no models registered in {tmp_path / 'registry'}\n"
    assert mlbridge(venv, tmp_path, "models", "list", "--json").stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("models", "install-builtin", "--no-tfaot"),
         "this command needs the Python package 'onnx', which is not installed: "
         "pip install 'mlbridge[export]'"),
        (("serve", "policies:policy"), "`serve` needs grpcio (pip install 'mlbridge[grpc]')"),
        (("build",), "cannot find the mlbridge sources"),
        (("corpus", "info"), "no corpus manifest at"),
        (("train", "inliner", "-o", "p.json"), "cannot read the corpus in"),
        (("ir2vec", "vocab", "-o", "v.json"), "no INPUT given and no corpus bitcode"),
        (("aot", "no-saved-model", "--name", "m"), "no SavedModel at"),
    ],
)  # fmt: skip
def test_a_command_missing_what_it_needs_says_so_in_one_line(venv, tmp_path, args, error):
    # Only the package's own dependencies are installed: no onnx, no grpcio, no corpus.
    result = mlbridge(venv, tmp_path, *args)
    assert result.returncode == 1
    assert result.stderr.startswith(f"mlbridge: error: {error}"), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_install_builtin_from_the_wheel_registers_the_builtin_models(full_venv, tmp_path):
    result = mlbridge(full_venv, tmp_path, "models", "install-builtin", "--no-tfaot")
    assert result.returncode == 0, result.stderr
    registry = tmp_path / "registry"
    # The ONNX forms at least (other forms, e.g. native, come with what is installed).
    lines = result.stdout.splitlines()
    assert f"inliner-oz: onnx, task inliner, {registry / 'inliner-oz' / 'inliner-oz.onnx'}" in (
        lines
    )
    assert (
        f"phase-order-oz: onnx, task phase-order, "
        f"{registry / 'phase-order-oz' / 'phase-order-oz.onnx'}"
    ) in lines
    listed = json.loads(mlbridge(full_venv, tmp_path, "models", "list", "--json").stdout)
    names = [m["name"] for m in listed]
    assert {"inliner-oz", "phase-order-oz"} <= set(names) and len(names) == len(lines)
    show = mlbridge(full_venv, tmp_path, "models", "show", "inliner-oz", "--verify")
    assert show.returncode == 0 and "inlining_decision" in show.stdout, show.stderr
    path = mlbridge(full_venv, tmp_path, "models", "path", "phase-order-oz")
    assert Path(path.stdout.strip()).is_file()
    assert mlbridge(full_venv, tmp_path, "models", "remove", "inliner-oz").returncode == 0
    again = json.loads(mlbridge(full_venv, tmp_path, "models", "list", "--json").stdout)
    assert [m["name"] for m in again] == [n for n in names if n != "inliner-oz"]


def test_the_export_extra_does_not_pull_pytorch(wheel):
    # Exporting numpy or Keras models needs onnx and onnxruntime only; PyTorch (gigabytes
    # with CUDA) is its own extra.
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read("mlbridge-0.1.0.dist-info/METADATA").decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]

    def extra(name: str) -> list[str]:
        return sorted(
            line.split()[1].split(">")[0].split("=")[0].split(";")[0]
            for line in requires
            if f'extra == "{name}"' in line
        )

    assert extra("export") == ["onnx", "onnxruntime"]
    assert extra("torch") == ["torch"]
