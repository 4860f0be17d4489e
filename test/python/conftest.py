"""Shared fixtures and paths for the Python tests."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from mlbridge.paths import plugin_path

# Before any test imports onnxruntime: its PyPI builds collect telemetry by default.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

# Ray keeps each local instance's session folder (logs, sockets) under its temp folder,
# /tmp/ray by default, after the instance ends; the suite starts dozens (in this process
# and in the commands it runs), so they go into one folder removed when it ends.
if "RAY_TMPDIR" not in os.environ:
    os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="mlbridge-tests-ray-")
    atexit.register(shutil.rmtree, os.environ["RAY_TMPDIR"], ignore_errors=True)

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "test" / "vectors"
LLVM_FIXTURE = VECTORS / "llvm22" / "llvm22-opt-inliner-interactive.rawlog"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def build_dir() -> Path:
    """The build folder the tests use: ``$MLBRIDGE_BUILD_DIR`` or ``<repo>/build``."""
    env = os.environ.get("MLBRIDGE_BUILD_DIR")
    return Path(env) if env else REPO / "build"


def built(relative: str) -> Path:
    """A file ``make build`` makes (e.g. ``bin/mlbridge-grpc-tool``); a missing one fails
    the test (never a skip)."""
    return _require_built(build_dir() / relative)


def built_plugin(kind: str) -> Path:
    """The built pass plugin for ``kind`` (llvm: opt, llc, mlir: mlir-opt), where
    ``mlbridge.paths.plugin_path`` puts it; a missing one fails the test."""
    return _require_built(plugin_path(kind, build_dir()))


def _require_built(path: Path) -> Path:
    if not path.is_file():
        pytest.fail(
            f"{path} is not built: run `make build` (or `mlbridge build`) first, or point "
            "MLBRIDGE_BUILD_DIR at a build folder that has it",
            pytrace=False,
        )
    return path


def compile_to_bitcode(source: Path, out: Path) -> Path:
    """``clang-22 -O2 -Xclang -disable-llvm-passes``: bitcode the inliner has work in."""
    subprocess.run(
        ["clang-22", "-O2", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
         str(source), "-o", str(out)],
        check=True,
    )  # fmt: skip
    return out


@pytest.fixture(scope="session")
def inline_sample_bc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """test/vectors/llvm22/inline-sample.c as bitcode (calls with known inlining)."""
    out = tmp_path_factory.mktemp("inline-sample") / "inline-sample.bc"
    return compile_to_bitcode(VECTORS / "llvm22" / "inline-sample.c", out)
