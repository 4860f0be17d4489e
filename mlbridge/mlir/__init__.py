"""The model side of mlbridge's MLIR passes (``docs/mlir.md``).

- :mod:`mlbridge.mlir.features`: the loop features of ``mlbridge-loop-unroll``, computed
  with the real MLIR Python bindings (extra ``mlir``), e.g. to train on MLIR files;
- :mod:`mlbridge.mlir.kernels`: MLIR test kernels (``(index) -> i64`` functions);
- :mod:`mlbridge.mlir.lowering`: lower a kernel to LLVM IR with the LLVM 22 tools, run it;
- :mod:`mlbridge.mlir.policy`: policies that serve the passes over pipes and gRPC.
"""

from __future__ import annotations

__all__ = ["features", "kernels", "lowering", "policy"]
