"""The MLIR loop-unroll problem: ``mlbridge-loop-unroll`` asks a model for each loop's factor.

The pass is the MLIR plugin's ``mlbridge-loop-unroll`` (docs/mlir.md): one ``int64 [1]``
tensor per loop feature, an ``int64 [1]`` advice ``unroll_factor``; MLIR's utilities do
the unrolling.

* :mod:`mlbridge.loop_unroll.features`: the pass's loop features, computed with the real
  MLIR Python bindings (extra ``mlir``), e.g. to train on MLIR files;
* :mod:`mlbridge.loop_unroll.policy`: policies that serve the pass over pipes and gRPC.

It has no trainer and no built-in model yet. The MLIR test kernels and their lowering (to
check that unrolled kernels still compute the right results) are test code:
``test/python/support/mlir_kernels.py`` and ``mlir_lowering.py``.
"""

from __future__ import annotations

#: The task the loop-unroll models answer (:data:`mlbridge.models.tasks.TASKS`).
TASK = "mlir-loop-unroll"

__all__ = ["TASK"]
