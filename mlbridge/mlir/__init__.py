"""The model side of mlbridge's MLIR passes (``docs/mlir.md``).

- :mod:`mlbridge.mlir.features`: the loop features of ``mlbridge-loop-unroll``, computed
  with the real MLIR Python bindings (extra ``mlir``), e.g. to train on MLIR files;
- :mod:`mlbridge.mlir.policy`: policies that serve the passes over pipes and gRPC.

The MLIR test kernels and their lowering (to check that unrolled kernels still compute
the right results) are test code: ``test/python/support/mlir_kernels.py`` and
``mlir_lowering.py``.
"""

from __future__ import annotations

__all__ = ["features", "policy"]
