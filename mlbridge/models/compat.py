"""Does a model fit the features a compiler sends? MLGO's versioning rule.

The compiler may send more features than the model knows (those are simply not fed),
but every model input must be a compiler feature of the same name, element type and
shape. Shapes are compatible when they have the same rank and each pair of dimensions
is equal or one of them is dynamic (``-1``); two fully static shapes with the same
element count are compatible too (a model exported with a leading batch dimension of 1
reads the same row-major bytes).

This is the same rule, with the same wording, as the C++ ``listInputDifferences`` in
``include/mlbridge/ModelSpecs.h``, which the in-process runners apply when they load.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from mlbridge.tensor_spec import DYNAMIC, TensorSpec

__all__ = ["check_compatible", "shapes_compatible"]


def _shape_text(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def shapes_compatible(a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether a tensor of shape ``a`` can be read as one of shape ``b``.

    Args:
        a: One shape (``-1`` marks a dynamic dimension).
        b: The other shape.

    Returns:
        True if the ranks agree and every pair of dimensions is equal or dynamic, or if
        both shapes are static with the same element count.
    """
    if len(a) == len(b) and all(x == y or DYNAMIC in (x, y) for x, y in zip(a, b, strict=True)):
        return True
    if DYNAMIC in a or DYNAMIC in b:
        return False
    return math.prod(a) == math.prod(b)


def check_compatible(
    compiler_features: Iterable[TensorSpec], model_inputs: Iterable[TensorSpec]
) -> list[str]:
    """List every difference between a model's inputs and a compiler's features.

    Args:
        compiler_features: The features the compiler sends (a pass's feature specs).
        model_inputs: The inputs the model reads.

    Returns:
        One sentence per difference, in model input order; empty when the model fits.
        Extra compiler features are not differences.
    """
    by_name: dict[str, TensorSpec] = {}
    features = list(compiler_features)
    for feature in features:
        by_name.setdefault(feature.name, feature)
    differences: list[str] = []
    seen: set[str] = set()
    for spec in model_inputs:
        if spec.name in seen:
            differences.append(f"input '{spec.name}' is declared more than once")
            continue
        seen.add(spec.name)
        feature = by_name.get(spec.name)
        if feature is None:
            differences.append(f"input '{spec.name}' is not a feature the compiler sends")
            continue
        if feature.type is not spec.type:
            differences.append(
                f"input '{spec.name}' is {spec.type.llvm_name} but the compiler sends "
                f"{feature.type.llvm_name}"
            )
        if not shapes_compatible(feature.shape, spec.shape):
            differences.append(
                f"input '{spec.name}' has shape {_shape_text(spec.shape)} but the compiler "
                f"sends shape {_shape_text(feature.shape)}"
            )
    return differences
