"""The package's layers (``.importlinter``): checked with import-linter on every run.

Generic layers (serdes, tensors, compiler interfaces, registry, export, AOT, corpus, gym
base, bench, ...) never import a problem package (phase_order, train, mlir), the command
line or the demo, and mlbridge's sub-packages import each other without cycles. Lazy
imports inside functions count. The last two tests plant a violation in a copy of the
package and check that the same command fails on it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the ``mlbridge`` package in ``root`` with its ``.importlinter``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / ".importlinter"), "--no-cache"],
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def copy_of_the_package(tmp_path: Path) -> Path:
    shutil.copytree(
        REPO / "mlbridge", tmp_path / "mlbridge", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def add_lazy_import(module: Path, statement: str) -> None:
    """Append a function to ``module`` whose body is ``statement`` (a lazy import)."""
    with module.open("a") as f:
        f.write(f"\n\ndef _planted() -> None:\n    {statement}  # noqa\n")


def test_the_package_keeps_its_layers_and_has_no_cycles():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_a_lazy_import_of_the_command_line_from_a_generic_layer_fails(tmp_path):
    root = copy_of_the_package(tmp_path)
    add_lazy_import(root / "mlbridge" / "serdes" / "base.py", "from mlbridge.cli import main")
    result = lint_imports(root)
    assert result.returncode == 1
    assert "mlbridge.serdes is not allowed to import mlbridge.cli" in result.stdout
    assert "mlbridge.serdes.base -> mlbridge.cli" in result.stdout


def test_an_import_of_a_problem_package_from_a_generic_layer_fails(tmp_path):
    root = copy_of_the_package(tmp_path)
    add_lazy_import(root / "mlbridge" / "gym" / "env.py", "import mlbridge.phase_order.env")
    result = lint_imports(root)
    assert result.returncode == 1
    assert "mlbridge.gym is not allowed to import mlbridge.phase_order" in result.stdout


def test_a_cycle_between_sub_packages_fails(tmp_path):
    # corpus imports paths; paths importing corpus back closes a cycle between two
    # generic modules, which only the cycle contract sees.
    root = copy_of_the_package(tmp_path)
    add_lazy_import(root / "mlbridge" / "paths.py", "import mlbridge.corpus")
    result = lint_imports(root)
    assert result.returncode == 1
    assert "Contracts: 1 kept, 1 broken." in result.stdout
    assert "No cycles are allowed in mlbridge." in result.stdout
    assert ".paths -> .corpus" in result.stdout
