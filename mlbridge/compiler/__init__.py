"""Compiler interfaces: the model side of a channel to a running compiler.

:mod:`mlbridge.compiler.pipe` speaks LLVM's interactive named-pipe protocol (and
mlbridge's superset of it) over the FIFOs of :mod:`mlbridge.compiler.fifo`;
:mod:`mlbridge.compiler.grpc` serves a policy to compilers and drives a compiler's training
server over gRPC. Both hand a policy the same :class:`Observation`
(:mod:`mlbridge.compiler.observation`; the pipe's subclass adds the stream header and the
outcome) and take its answer the same way (:data:`Policy`).
"""

from __future__ import annotations

from mlbridge.compiler.fifo import FifoChannel
from mlbridge.compiler.observation import Observation, Policy
from mlbridge.compiler.pipe import DriveResult, PipeCompilerInterface, drive_compiler

__all__ = [
    "DriveResult",
    "FifoChannel",
    "Observation",
    "PipeCompilerInterface",
    "Policy",
    "drive_compiler",
]
