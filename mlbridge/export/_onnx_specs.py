"""Mapping between mlbridge element types and ONNX's, shared by the exporters."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mlbridge.errors import SpecError
from mlbridge.tensor_spec import DYNAMIC, ElementType, TensorSpec

#: The ONNX ``TensorProto`` data type of each mlbridge element type.
ONNX_TYPES: dict[ElementType, int] = {
    ElementType.INT8: 3,
    ElementType.UINT8: 2,
    ElementType.INT16: 5,
    ElementType.UINT16: 4,
    ElementType.INT32: 6,
    ElementType.UINT32: 12,
    ElementType.INT64: 7,
    ElementType.UINT64: 13,
    ElementType.FLOAT: 1,
    ElementType.DOUBLE: 11,
    ElementType.BOOL: 9,
    ElementType.STRING: 8,
}
_BY_ONNX_TYPE = {v: k for k, v in ONNX_TYPES.items()}

#: Opset and IR version of exported models: read by every ONNX Runtime since 1.16.
OPSET = 17
IR_VERSION = 8


def check_unique_names(specs: Sequence[TensorSpec]) -> None:
    """Raise :class:`SpecError` if two specs share a name (the runner binds by name)."""
    seen: set[str] = set()
    for spec in specs:
        if not isinstance(spec, TensorSpec):
            raise SpecError(f"expected mlbridge.TensorSpec, got {type(spec).__name__}")
        if spec.name in seen:
            raise SpecError(f"feature {spec.name!r} is listed twice")
        seen.add(spec.name)


def model_input_specs(path: str | Path) -> list[TensorSpec]:
    """The inputs of the ONNX model at ``path`` as specs (symbolic dimensions are -1).

    Raises:
        SpecError: An input is not a tensor or has an element type mlbridge lacks.
    """
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type") or tensor.elem_type not in _BY_ONNX_TYPE:
            raise SpecError(f"model input {value.name!r} is not a tensor of an mlbridge type")
        shape = tuple(d.dim_value if d.HasField("dim_value") else DYNAMIC for d in tensor.shape.dim)
        specs.append(TensorSpec(value.name, _BY_ONNX_TYPE[tensor.elem_type], shape))
    return specs


def check_inputs_match(path: str | Path, specs: Sequence[TensorSpec]) -> None:
    """Raise :class:`SpecError` listing every model input that is not one of ``specs``.

    The C++ runner's rule: each model input must be a feature of the same name, element
    type and rank; the model may ignore features.
    """
    by_name = {s.name: s for s in specs}
    problems = []
    for inp in model_input_specs(path):
        spec = by_name.get(inp.name)
        if spec is None:
            problems.append(f"input {inp.name!r} is not one of the features")
        elif spec.type is not inp.type:
            problems.append(
                f"input {inp.name!r} is {inp.type.llvm_name} but the feature is "
                f"{spec.type.llvm_name}"
            )
        elif spec.rank != inp.rank:
            problems.append(
                f"input {inp.name!r} has shape {list(inp.shape)} but the feature has "
                f"shape {list(spec.shape)}"
            )
    if problems:
        raise SpecError(
            f"exported model {str(path)!r} does not fit the features: " + "; ".join(problems)
        )
