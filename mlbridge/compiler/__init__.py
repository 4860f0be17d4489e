"""Compiler interfaces: the model side of a channel to a running compiler.

:mod:`mlbridge.compiler.pipe` speaks LLVM's interactive named-pipe protocol (and
mlbridge's superset of it).
"""

from __future__ import annotations

from mlbridge.compiler.pipe import (
    DriveResult,
    FifoChannel,
    Observation,
    PipeCompilerInterface,
    drive_compiler,
)

__all__ = [
    "DriveResult",
    "FifoChannel",
    "Observation",
    "PipeCompilerInterface",
    "drive_compiler",
]
