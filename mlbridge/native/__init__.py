"""Native compilation of ONNX models through MLIR 22 (``mlbridge compile``, docs/native.md).

:func:`compile_onnx` turns an ONNX graph into a shared object that exports mlbridge's
AOT C ABI (the one ``mlbridge aot`` models export, so ``TFAOTModelRunner`` loads it) and
needs nothing beyond libc and libm: no TensorFlow and no ONNX Runtime at run time.
"""

from __future__ import annotations

from mlbridge.native.compile import NativeOutputs, compile_onnx, compile_onnx_outputs
from mlbridge.native.importer import SUPPORTED_OPS, NativeCompileError, import_onnx

__all__ = [
    "SUPPORTED_OPS",
    "NativeCompileError",
    "NativeOutputs",
    "compile_onnx",
    "compile_onnx_outputs",
    "import_onnx",
]
