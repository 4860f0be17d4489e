"""Export a PyTorch module to ONNX with the input names the compiler pass expects."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlbridge.errors import MLBridgeError, SpecError
from mlbridge.export._onnx_specs import OPSET, check_inputs_match, check_unique_names
from mlbridge.export.check import Sample
from mlbridge.tensor_spec import DYNAMIC, ElementType, TensorSpec

__all__ = ["export_torch", "torch_callable"]

# Unsigned types wider than 8 bits have almost no operator support in PyTorch.
_TORCH_DTYPES = {
    ElementType.INT8: "int8",
    ElementType.UINT8: "uint8",
    ElementType.INT16: "int16",
    ElementType.INT32: "int32",
    ElementType.INT64: "int64",
    ElementType.FLOAT: "float32",
    ElementType.DOUBLE: "float64",
    ElementType.BOOL: "bool",
}


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise MLBridgeError(
            "export_torch needs PyTorch: pip install 'mlbridge[export,torch]' (the CPU "
            "build of PyTorch is enough: see docs/onnx.md)"
        ) from e
    return torch


def _dtype(torch: Any, spec: TensorSpec) -> Any:
    name = _TORCH_DTYPES.get(spec.type)
    if name is None:
        raise SpecError(
            f"feature {spec.name!r} is {spec.type.llvm_name}, which PyTorch models cannot "
            f"take (supported: {', '.join(t.llvm_name for t in _TORCH_DTYPES)})"
        )
    return getattr(torch, name)


def torch_callable(module: Any, specs: Sequence[TensorSpec]) -> Callable[[Sample], np.ndarray]:
    """Wraps ``module`` as a function from a sample (feature name to value) to a numpy answer.

    The module is called as :func:`export_torch` exports it: one positional tensor per
    spec, in the order of ``specs``, under ``torch.no_grad()``. Use it as the ``original``
    of :func:`mlbridge.export.check_export`.

    Args:
        module: A ``torch.nn.Module`` (or any callable taking tensors).
        specs: The features, in the order ``module.forward`` takes them.

    Returns:
        The wrapping function.
    """
    torch = _torch()
    dtypes = [_dtype(torch, s) for s in specs]

    def call(sample: Sample) -> np.ndarray:
        args = [
            torch.as_tensor(np.asarray(sample[s.name]), dtype=dt)
            for s, dt in zip(specs, dtypes, strict=True)
        ]
        with torch.no_grad():
            out = module(*args)
        return out.detach().cpu().numpy()

    return call


def export_torch(
    module: Any,
    specs: Sequence[TensorSpec],
    path: str | Path,
    *,
    output_name: str = "advice",
    opset: int = OPSET,
) -> Path:
    """Exports ``module`` to ONNX, its inputs named and typed like the compiler's features.

    ``module.forward`` takes one tensor per spec, positionally, in the order of ``specs``,
    and returns one tensor: the advice. Dynamic dimensions (-1) in a spec become dynamic
    in the model. Uses PyTorch's TorchScript-based exporter (``dynamo=False``), which
    needs no extra packages and works offline.

    Inputs that the module does not use are left out of the model; the C++ runner accepts
    that (a model may know fewer features than the compiler sends).

    Args:
        module: The ``torch.nn.Module`` to export (put in eval mode for the export).
        specs: The compiler's features (numeric or bool; not uint16/32/64).
        path: Where to write the ``.onnx`` file.
        output_name: The name of the model's output: the pass's advice name.
        opset: The ONNX opset to export to.

    Returns:
        The path written.

    Raises:
        SpecError: A spec's type has no PyTorch equivalent, or the exported model's inputs
            do not match the specs.
    """
    torch = _torch()
    check_unique_names(specs)
    if output_name in {s.name for s in specs}:
        raise SpecError(f"output {output_name!r} has the name of a feature")
    example = tuple(
        torch.zeros([1 if d == DYNAMIC else d for d in s.shape], dtype=_dtype(torch, s))
        for s in specs
    )
    dynamic_axes = {
        s.name: {i: f"{s.name}_dim{i}" for i, d in enumerate(s.shape) if d == DYNAMIC}
        for s in specs
        if s.is_dynamic
    }
    path = Path(path)
    was_training = bool(getattr(module, "training", False))
    if hasattr(module, "eval"):
        module.eval()
    try:
        with warnings.catch_warnings():
            # The TorchScript exporter is deprecated in favour of the dynamo one, which
            # needs onnxscript; its warning says nothing about this model.
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                module,
                example,
                str(path),
                input_names=[s.name for s in specs],
                output_names=[output_name],
                dynamic_axes=dynamic_axes or None,
                opset_version=opset,
                dynamo=False,
            )
    finally:
        if was_training:
            module.train()
    check_inputs_match(path, specs)
    return path
