"""Shared fixtures and paths for the Python tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Before any test imports onnxruntime: its PyPI builds collect telemetry by default.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "test" / "vectors"
LLVM_FIXTURE = VECTORS / "llvm22" / "llvm22-opt-inliner-interactive.rawlog"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
