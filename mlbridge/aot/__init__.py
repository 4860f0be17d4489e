"""Ahead-of-time compilation of TensorFlow models for mlbridge's compiled-in runner.

``mlbridge aot SAVED_MODEL --name NAME`` (:func:`compile_saved_model`) turns a SavedModel
signature into a shared object the C++ ``TFAOTModelRunner`` loads by path, and a static
library plus header to link the model into a plugin (docs/tfaot.md). TensorFlow itself
runs in an environment of its own (:mod:`mlbridge.aot.tfenv`), never imported here.

The names below are loaded on first use, so that ``python -m mlbridge.aot.tfenv`` runs
its module fresh.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ABI_VERSION",
    "TF_PACKAGES",
    "TF_VERSION",
    "AOTBuildError",
    "AOTError",
    "AOTOutputs",
    "TFEnvironmentError",
    "compile_saved_model",
    "create_tf_env",
    "find_tf_python",
    "inspect_saved_model",
]

_HOMES = {
    "ABI_VERSION": "abi",
    "TF_PACKAGES": "tfenv",
    "TF_VERSION": "tfenv",
    "AOTBuildError": "runtime",
    "AOTError": "compile",
    "AOTOutputs": "compile",
    "TFEnvironmentError": "tfenv",
    "compile_saved_model": "compile",
    "create_tf_env": "tfenv",
    "find_tf_python": "tfenv",
    "inspect_saved_model": "compile",
}


def __getattr__(name: str) -> Any:  # noqa: ANN401
    """Load a public name from its submodule on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mlbridge.aot' has no attribute {name!r}")
    return getattr(importlib.import_module(f"mlbridge.aot.{home}"), name)
