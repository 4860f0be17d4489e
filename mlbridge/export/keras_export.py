"""Keras multilayer perceptrons to ONNX, through their weights (no TensorFlow needed).

TensorFlow cannot share mlbridge's environment (it pins protobuf below 6), so Keras 3's
own ONNX export (which goes through TensorFlow or PyTorch tracing) is not used here.
A Keras model made of ``Dense`` layers (with ``relu``, ``tanh``, ``sigmoid`` or linear
activations; ``InputLayer`` and ``Flatten`` are allowed) is the usual shape of a compiler
policy: its weights are read with ``get_weights()`` and written with
:func:`~mlbridge.export.export_numpy_dense`, whatever Keras backend trained it. Any other
layer is refused with its name, rather than exported wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mlbridge.errors import SpecError
from mlbridge.export.numpy_dense import Dense, export_numpy_dense
from mlbridge.tensor_spec import TensorSpec

__all__ = ["export_keras", "keras_dense_layers"]

_PASS_THROUGH = {"InputLayer", "Flatten"}
_ACTIVATIONS = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "linear": None}


def keras_dense_layers(model: Any) -> list[Dense]:
    """The model's dense layers as :class:`~mlbridge.export.Dense`, first to last.

    Raises:
        SpecError: If the model has a layer other than ``Dense``, ``InputLayer`` or
            ``Flatten``, or an activation other than relu, tanh, sigmoid or linear.
    """
    layers: list[Dense] = []
    for layer in model.layers:
        kind = type(layer).__name__
        if kind in _PASS_THROUGH:
            continue
        if kind != "Dense":
            raise SpecError(
                f"layer {layer.name!r} is a {kind}: only Dense layers (with InputLayer and "
                "Flatten) can be exported; export other models with export_torch"
            )
        activation = getattr(layer.activation, "__name__", str(layer.activation))
        if activation not in _ACTIVATIONS:
            raise SpecError(
                f"layer {layer.name!r} has activation {activation!r}: supported are "
                f"{', '.join(_ACTIVATIONS)}"
            )
        weights = layer.get_weights()
        bias = weights[1] if len(weights) > 1 else None
        layers.append(Dense(weights[0], bias, _ACTIVATIONS[activation]))
    if not layers:
        raise SpecError("the model has no Dense layer")
    return layers


def export_keras(
    model: Any,
    specs: Sequence[TensorSpec],
    path: str | Path,
    *,
    output: TensorSpec | None = None,
    argmax: bool = False,
) -> Path:
    """Writes a Keras MLP over the compiler's features as an ONNX file.

    The features are concatenated (cast to float32, flattened, in the order of ``specs``)
    into the model's input row, as :func:`~mlbridge.export.export_numpy_dense` does; train
    the Keras model on the same layout.

    Args:
        model: A Keras model of Dense layers (see :func:`keras_dense_layers`).
        specs: The compiler's features, in the order of the model's input columns.
        path: Where to write the ``.onnx`` file.
        output: The advice spec (see :func:`~mlbridge.export.export_numpy_dense`).
        argmax: Answer the index of the largest output.

    Returns:
        The path written.

    Raises:
        SpecError: If the model cannot be exported or does not fit the specs.
    """
    return export_numpy_dense(specs, keras_dense_layers(model), path, output=output, argmax=argmax)
