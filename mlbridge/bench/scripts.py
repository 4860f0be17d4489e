"""The benchmark scripts of ``bench/`` (measurement code), loaded as modules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from mlbridge.paths import find_source_dir

__all__ = ["bench_dir", "load_script"]


def bench_dir() -> Path:
    """The checkout's ``bench/`` folder.

    Raises:
        FileNotFoundError: mlbridge is not running from a source checkout.
    """
    source = find_source_dir()
    if source is None or not (source / "bench").is_dir():
        raise FileNotFoundError(
            "mlbridge bench needs the source checkout's bench/ folder (its measurement "
            "scripts): run it from a clone installed with `pip install -e .`"
        )
    return source / "bench"


def load_script(name: str) -> ModuleType:
    """Import ``bench/<name>.py`` (once) as the module ``mlbridge_bench_<name>``."""
    module_name = f"mlbridge_bench_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = bench_dir() / f"{name}.py"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
