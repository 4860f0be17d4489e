"""Export trained models to ONNX for mlbridge's in-process ``OnnxModelRunner``.

The exported model's inputs carry the names, element types and shapes of the compiler's
features (a list of :class:`mlbridge.TensorSpec`), so that the C++ runner binds each input
to the feature of the same name (see docs/onnx.md). Every helper is checked by
:func:`check_export`, which runs the exported file with ONNX Runtime and compares its
answers with the original model's.

* :func:`export_numpy_dense`: a multilayer perceptron from numpy weights (no framework).
* :func:`export_torch`: a ``torch.nn.Module`` (needs PyTorch: the ``torch`` extra).
* :func:`export_keras`: a Keras multilayer perceptron, through its weights (any backend).
* :func:`check_export`: the exported file answers like the original, within a tolerance.

Needs the ``onnx`` and ``onnxruntime`` packages (extra ``onnx`` or ``export``). Only
:func:`export_torch` and :func:`torch_callable` import PyTorch, when called.
"""

from __future__ import annotations

from mlbridge.export.check import ExportMismatchError, check_export
from mlbridge.export.keras_export import export_keras, keras_dense_layers
from mlbridge.export.numpy_dense import Dense, export_numpy_dense, numpy_dense_forward
from mlbridge.export.torch_export import export_torch, torch_callable

__all__ = [
    "Dense",
    "ExportMismatchError",
    "check_export",
    "export_keras",
    "export_numpy_dense",
    "export_torch",
    "keras_dense_layers",
    "numpy_dense_forward",
    "torch_callable",
]
