"""A multilayer perceptron from numpy weights, exported to ONNX without any framework.

The model concatenates every feature (cast to float32 and flattened, in the order of the
specs) into one row, applies dense layers ``h = act(h @ weight + bias)``, and answers either
the last layer's values (a float advice) or the index of the largest one (an integer
advice, ``argmax=True``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mlbridge.errors import SpecError
from mlbridge.export._onnx_specs import IR_VERSION, ONNX_TYPES, OPSET, check_unique_names
from mlbridge.tensor_spec import ElementType, TensorSpec

__all__ = ["Dense", "export_numpy_dense", "numpy_dense_forward"]

_ACTIVATIONS = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid"}


@dataclass(frozen=True)
class Dense:
    """One dense layer: ``activation(x @ weight + bias)``.

    Attributes:
        weight: Array of shape ``(inputs, outputs)``.
        bias: Array of shape ``(outputs,)``, or ``None`` for no bias.
        activation: ``"relu"``, ``"tanh"``, ``"sigmoid"`` or ``None`` (linear).
    """

    weight: npt.ArrayLike
    bias: npt.ArrayLike | None = None
    activation: str | None = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The weight and bias as float32 arrays, checked for shape."""
        weight = np.asarray(self.weight, dtype=np.float32)
        if weight.ndim != 2:
            raise SpecError(f"dense weight must be 2-D (inputs, outputs), got shape {weight.shape}")
        bias = None
        if self.bias is not None:
            bias = np.asarray(self.bias, dtype=np.float32)
            if bias.shape != (weight.shape[1],):
                raise SpecError(
                    f"dense bias has shape {bias.shape}, expected ({weight.shape[1]},) "
                    "to match the weight's outputs"
                )
        if self.activation is not None and self.activation not in _ACTIVATIONS:
            raise SpecError(
                f"unknown activation {self.activation!r} (expected one of: "
                f"{', '.join(_ACTIVATIONS)} or None)"
            )
        return weight, bias


def _feature_width(specs: Sequence[TensorSpec]) -> int:
    check_unique_names(specs)
    if not specs:
        raise SpecError("a dense model needs at least one feature")
    width = 0
    for spec in specs:
        if spec.is_dynamic:
            raise SpecError(
                f"feature {spec.name!r} has a dynamic shape {list(spec.shape)}: a dense "
                "layer needs a fixed number of inputs"
            )
        if spec.type is ElementType.STRING:
            raise SpecError(f"feature {spec.name!r} is a string: a dense layer needs numbers")
        width += spec.element_count
    return width


_LayerArrays = list[tuple[np.ndarray, np.ndarray | None]]


def _check_layers(width: int, layers: Sequence[Dense]) -> _LayerArrays:
    if not layers:
        raise SpecError("a dense model needs at least one layer")
    arrays = []
    for i, layer in enumerate(layers):
        weight, bias = layer.arrays()
        if weight.shape[0] != width:
            source = "the features' total element count" if i == 0 else f"layer {i - 1}'s outputs"
            raise SpecError(
                f"layer {i} takes {weight.shape[0]} inputs but receives {width} ({source})"
            )
        width = weight.shape[1]
        arrays.append((weight, bias))
    return arrays


def _default_output(width: int, argmax: bool) -> TensorSpec:
    if argmax:
        return TensorSpec("advice", ElementType.INT64, (1,))
    return TensorSpec("advice", ElementType.FLOAT, (width,))


def _check_output(output: TensorSpec, width: int, argmax: bool) -> None:
    if output.is_dynamic:
        raise SpecError(f"output {output.name!r} must have a static shape")
    if argmax:
        if not output.type.is_integer or output.element_count != 1:
            raise SpecError(
                f"with argmax=True the output {output.name!r} must be one integer, got "
                f"{output.type.llvm_name}{list(output.shape)}"
            )
    elif not output.type.is_floating or output.element_count != width:
        raise SpecError(
            f"output {output.name!r} must be float or double with {width} elements (the last "
            f"layer's outputs), got {output.type.llvm_name}{list(output.shape)}"
        )


def numpy_dense_forward(
    specs: Sequence[TensorSpec],
    layers: Sequence[Dense],
    features: Mapping[str, npt.ArrayLike],
    *,
    argmax: bool = False,
) -> np.ndarray:
    """Computes what :func:`export_numpy_dense`'s model answers, in numpy.

    Args:
        specs: The features, in the order the model concatenates them.
        layers: The dense layers.
        features: A value for each spec, by name (others are ignored).
        argmax: Answer the index of the largest output instead of the outputs.

    Returns:
        The last layer's outputs (float32, shape ``(outputs,)``), or with ``argmax`` the
        index of the largest as an int64 array of shape ``(1,)``.

    Raises:
        SpecError: A feature is missing or has the wrong element count.
    """
    width = _feature_width(specs)
    arrays = _check_layers(width, layers)
    parts = []
    for spec in specs:
        if spec.name not in features:
            raise SpecError(f"no value for feature {spec.name!r}")
        value = np.asarray(features[spec.name]).astype(np.float32).reshape(-1)
        if value.size != spec.element_count:
            raise SpecError(
                f"feature {spec.name!r} has {value.size} elements, expected {spec.element_count}"
            )
        parts.append(value)
    h = np.concatenate(parts)[np.newaxis, :]
    for (weight, bias), layer in zip(arrays, layers, strict=True):
        h = h @ weight
        if bias is not None:
            h = h + bias
        if layer.activation == "relu":
            h = np.maximum(h, np.float32(0))
        elif layer.activation == "tanh":
            h = np.tanh(h)
        elif layer.activation == "sigmoid":
            h = np.float32(1) / (np.float32(1) + np.exp(-h))
    if argmax:
        return np.argmax(h, axis=1).astype(np.int64)
    return h.reshape(-1).astype(np.float32)


def export_numpy_dense(
    specs: Sequence[TensorSpec],
    layers: Sequence[Dense],
    path: str | Path,
    *,
    output: TensorSpec | None = None,
    argmax: bool = False,
) -> Path:
    """Writes a dense model over the compiler's features as an ONNX file.

    Args:
        specs: The compiler's features the model reads; each becomes a model input of the
            same name, element type and shape (numeric or bool, static shape).
        layers: The dense layers, first to last; the first takes the features' total
            element count.
        path: Where to write the ``.onnx`` file.
        output: The advice spec; by default ``advice`` float ``[outputs]`` (or int64 ``[1]``
            with ``argmax``). Its name must be the advice name the pass asks for.
        argmax: Answer the index of the largest output (a discrete decision).

    Returns:
        The path written.

    Raises:
        SpecError: The specs, the layers and the output do not fit together.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    width = _feature_width(specs)
    arrays = _check_layers(width, layers)
    last = arrays[-1][0].shape[1]
    output = output or _default_output(last, argmax)
    _check_output(output, last, argmax)
    if output.name in {s.name for s in specs}:
        raise SpecError(f"output {output.name!r} has the name of a feature")

    nodes: list[onnx.NodeProto] = []
    inits = [numpy_helper.from_array(np.array([-1], dtype=np.int64), "mlb_flat")]
    flat = []
    for spec in specs:
        src = spec.name
        if spec.type is not ElementType.FLOAT:
            nodes.append(helper.make_node("Cast", [src], [f"{src}__f"], to=TensorProto.FLOAT))
            src = f"{src}__f"
        nodes.append(helper.make_node("Reshape", [src, "mlb_flat"], [f"{spec.name}__flat"]))
        flat.append(f"{spec.name}__flat")
    nodes.append(helper.make_node("Concat", flat, ["mlb_features"], axis=0))
    inits.append(numpy_helper.from_array(np.array([0], dtype=np.int64), "mlb_axis0"))
    nodes.append(helper.make_node("Unsqueeze", ["mlb_features", "mlb_axis0"], ["mlb_h0"]))
    h = "mlb_h0"
    for i, ((weight, bias), layer) in enumerate(zip(arrays, layers, strict=True)):
        inits.append(numpy_helper.from_array(weight, f"mlb_w{i}"))
        nodes.append(helper.make_node("MatMul", [h, f"mlb_w{i}"], [f"mlb_mm{i}"]))
        h = f"mlb_mm{i}"
        if bias is not None:
            inits.append(numpy_helper.from_array(bias, f"mlb_b{i}"))
            nodes.append(helper.make_node("Add", [h, f"mlb_b{i}"], [f"mlb_add{i}"]))
            h = f"mlb_add{i}"
        if layer.activation is not None:
            nodes.append(helper.make_node(_ACTIVATIONS[layer.activation], [h], [f"mlb_act{i}"]))
            h = f"mlb_act{i}"
    if argmax:
        nodes.append(helper.make_node("ArgMax", [h], ["mlb_argmax"], axis=1, keepdims=0))
        h = "mlb_argmax"
        source_type = ElementType.INT64
    else:
        source_type = ElementType.FLOAT
    shape = np.array(output.shape, dtype=np.int64)
    inits.append(numpy_helper.from_array(shape, "mlb_out_shape"))
    reshaped = output.name if output.type is source_type else "mlb_out"
    nodes.append(helper.make_node("Reshape", [h, "mlb_out_shape"], [reshaped]))
    if output.type is not source_type:
        cast = helper.make_node("Cast", [reshaped], [output.name], to=ONNX_TYPES[output.type])
        nodes.append(cast)

    graph = helper.make_graph(
        nodes,
        "mlbridge_dense",
        [helper.make_tensor_value_info(s.name, ONNX_TYPES[s.type], list(s.shape)) for s in specs],
        [helper.make_tensor_value_info(output.name, ONNX_TYPES[output.type], list(output.shape))],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    model.producer_name = "mlbridge.export"
    onnx.checker.check_model(model, full_check=True)
    path = Path(path)
    onnx.save(model, str(path))
    return path
