"""Where the source checkout, the C++ build and its plugins are.

Nothing here runs at import time: every function looks at the file system only when
called, so ``import mlbridge`` never depends on a build.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

__all__ = [
    "BUILD_DIR_ENV",
    "PLUGIN_FILES",
    "PluginKind",
    "default_build_dir",
    "find_source_dir",
    "plugin_path",
]

#: The environment variable that overrides the default build folder.
BUILD_DIR_ENV = "MLBRIDGE_BUILD_DIR"

#: The kinds of pass plugin, named by the tool that loads them.
PluginKind = Literal["llvm", "llc", "mlir"]

#: The file name of each plugin inside ``<build>/lib``.
PLUGIN_FILES: dict[str, str] = {
    "llvm": "MLBridgeLLVMPlugin.so",
    "llc": "MLBridgeLLCPlugin.so",
    "mlir": "MLBridgeMLIRPlugin.so",
}


def find_source_dir() -> Path | None:
    """Return the source checkout this package runs from, or ``None`` if installed.

    The checkout is the parent of the package folder when it holds ``CMakeLists.txt``
    and ``proto/`` (an editable install or a run from the repository).
    """
    root = Path(__file__).resolve().parent.parent
    if (root / "CMakeLists.txt").is_file() and (root / "proto").is_dir():
        return root
    return None


def default_build_dir() -> Path | None:
    """Return ``$MLBRIDGE_BUILD_DIR`` if set, else ``<checkout>/build``, else ``None``."""
    env = os.environ.get(BUILD_DIR_ENV)
    if env:
        return Path(env).resolve()
    source = find_source_dir()
    return None if source is None else source / "build"


def plugin_path(kind: PluginKind | str, build_dir: Path) -> Path:
    """Return the absolute path the ``kind`` plugin has in ``build_dir`` (built or not).

    Raises:
        ValueError: If ``kind`` is not ``llvm``, ``llc`` or ``mlir``.
    """
    try:
        name = PLUGIN_FILES[kind]
    except KeyError:
        raise ValueError(
            f"unknown plugin kind {kind!r} (expected one of: {', '.join(PLUGIN_FILES)})"
        ) from None
    return (Path(build_dir) / "lib" / name).resolve()
