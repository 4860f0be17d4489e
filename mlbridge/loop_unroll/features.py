"""The loop features of ``mlbridge-loop-unroll``, computed in Python with the MLIR bindings.

The pass (``passes/loop_unroll/LoopFeatures.cpp``) sends one ``int64 [1]`` tensor per feature for
every ``affine.for`` and ``scf.for``, innermost first (post-order), per function, all
computed on the input IR. :func:`loop_features` computes the same values from the same
text, in the same order, so that a model can be trained offline on MLIR files
(``docs/mlir.md`` defines each feature). It needs the real MLIR Python bindings
(``pip install 'mlbridge[mlir]'``: ``xtc-mlir-python-bindings``, ``from mlir import ir``).

Trip counts: like MLIR's ``affine::getConstantTripCount``, an ``affine.for`` has a constant
trip count when its bounds are constants, or when its single-result lower bound and its
upper bound use the same operands and differ by a constant; ``scf.for`` when its bounds
and step are ``arith.constant`` values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "LOOP_FEATURE_NAMES",
    "LoopInfo",
    "loop_features",
    "parse_module",
]

#: Feature names in the order the pass sends them (LoopFeature in LoopFeatures.h).
LOOP_FEATURE_NAMES = (
    "trip_count",
    "depth",
    "step",
    "constant_bounds",
    "body_ops",
    "arith_ops",
    "loads",
    "stores",
    "calls",
    "nested_loops",
    "iter_args",
    "is_affine",
)

_LOOPS = ("affine.for", "scf.for")
_LOADS = frozenset({"affine.load", "memref.load", "affine.vector_load", "vector.load"})
_STORES = frozenset({"affine.store", "memref.store", "affine.vector_store", "vector.store"})
_CALLS = frozenset({"func.call", "func.call_indirect"})
_ANY_LOOP = frozenset({"affine.for", "affine.parallel", "scf.for", "scf.while", "scf.parallel"})


@dataclass(frozen=True)
class LoopInfo:
    """One loop as the pass sees it.

    Attributes:
        function: The enclosing ``func.func``'s name (the pass's context).
        index: The loop's position in the function, innermost first (the observation id).
        op: The loop's name, ``affine.for`` or ``scf.for``.
        features: Feature name to value, in :data:`LOOP_FEATURE_NAMES` order.
    """

    function: str
    index: int
    op: str
    features: dict[str, int]

    def as_array(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The features as an ``int64`` vector in :data:`LOOP_FEATURE_NAMES` order."""
        return np.array([self.features[n] for n in LOOP_FEATURE_NAMES], dtype=np.int64)


def _ir() -> Any:
    try:
        from mlir import ir
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "mlbridge.loop_unroll.features needs the MLIR Python bindings: "
            "pip install 'mlbridge[mlir]'"
        ) from e
    return ir


def parse_module(text: str, context: Any | None = None) -> Any:
    """Parses MLIR text (e.g. ``mlir-opt-22`` output) into an ``ir.Module``.

    Args:
        text: The module's text.
        context: An ``ir.Context``; a new one (allowing unregistered dialects) if omitted.

    Returns:
        The parsed ``mlir.ir.Module``.
    """
    ir = _ir()
    if context is None:
        context = ir.Context()
        context.allow_unregistered_dialects = True
    return ir.Module.parse(text, context)


def _ops(op: Any) -> Iterator[Any]:
    """Every operation nested in ``op``'s regions, parents first, and whether it ends its block.

    Blocks in these regions end in a terminator, so the last op of a block is one.
    """
    for region in op.regions:
        for block in region.blocks:
            ops = [o.operation for o in block.operations]
            for i, child in enumerate(ops):
                yield child, i == len(ops) - 1
                yield from _ops(child)


def _post_order_loops(op: Any) -> Iterator[Any]:
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                yield from _post_order_loops(child)
                if child.name in _LOOPS:
                    yield child


def _constant_int(value: Any) -> int | None:
    ir = _ir()
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    owner = owner.operation
    if owner.name != "arith.constant":
        return None
    attr = owner.attributes["value"]
    return attr.value if isinstance(attr, ir.IntegerAttr) else None


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _affine_trip_count(op: Any) -> int:
    ir = _ir()
    attrs = op.attributes
    lb_map = attrs["lowerBoundMap"].value
    ub_map = attrs["upperBoundMap"].value
    step = attrs["step"].value
    n_lb, n_ub, _ = list(attrs["operandSegmentSizes"])
    operands = list(op.operands)
    lb_ops, ub_ops = operands[:n_lb], operands[n_lb : n_lb + n_ub]
    if len(lb_map.results) != 1:
        return -1
    lb = lb_map.results[0]
    same_operands = (
        lb_map.n_dims == ub_map.n_dims
        and lb_map.n_symbols == ub_map.n_symbols
        and len(lb_ops) == len(ub_ops)
        and all(a == b for a, b in zip(lb_ops, ub_ops, strict=True))
    )
    counts = []
    for ub in ub_map.results:
        if isinstance(lb, ir.AffineConstantExpr) and isinstance(ub, ir.AffineConstantExpr):
            span = ub.value - lb.value
        elif same_operands:
            diff = (ub - lb).maybe_downcast()
            if not isinstance(diff, ir.AffineConstantExpr):
                return -1
            span = diff.value
        else:
            return -1
        counts.append(max(_ceil_div(span, step), 0))
    return min(counts)


def _scf_trip_count(op: Any) -> tuple[int, int, bool]:
    lb, ub, step = (_constant_int(v) for v in list(op.operands)[:3])
    constant_bounds = lb is not None and ub is not None
    if not constant_bounds or step is None or step <= 0:
        return -1, -1 if step is None else step, constant_bounds
    assert lb is not None and ub is not None
    return (max(_ceil_div(ub - lb, step), 0), step, True)


def _features(loop: Any) -> dict[str, int]:
    f = dict.fromkeys(LOOP_FEATURE_NAMES, 0)
    depth = 0
    parent = loop
    while parent is not None and parent.name != "func.func":
        if parent.name in _LOOPS:
            depth += 1
        parent = parent.parent
    f["depth"] = depth
    attrs = loop.attributes
    if loop.name == "affine.for":
        lb_map = attrs["lowerBoundMap"].value
        ub_map = attrs["upperBoundMap"].value
        n_lb, n_ub, n_iter = list(attrs["operandSegmentSizes"])
        f["trip_count"] = _affine_trip_count(loop)
        f["step"] = attrs["step"].value
        f["constant_bounds"] = int(
            n_lb == 0
            and n_ub == 0
            and len(lb_map.results) == 1
            and len(ub_map.results) == 1
            and lb_map.n_dims + lb_map.n_symbols + ub_map.n_dims + ub_map.n_symbols == 0
        )
        f["iter_args"] = n_iter
        f["is_affine"] = 1
    else:
        trip, step, constant_bounds = _scf_trip_count(loop)
        f["trip_count"] = trip
        f["step"] = step
        f["constant_bounds"] = int(constant_bounds)
        f["iter_args"] = len(list(loop.operands)) - 3
        f["is_affine"] = 0
    for op, is_terminator in _ops(loop):
        if is_terminator:
            continue
        name = op.name
        f["body_ops"] += 1
        if name.split(".", 1)[0] in ("arith", "math"):
            f["arith_ops"] += 1
        elif name in _LOADS:
            f["loads"] += 1
        elif name in _STORES:
            f["stores"] += 1
        elif name in _CALLS:
            f["calls"] += 1
        elif name in _ANY_LOOP:
            f["nested_loops"] += 1
    return f


def loop_features(module: Any) -> list[LoopInfo]:
    """The features the pass sends, for every loop of every function, in the pass's order.

    Args:
        module: An ``mlir.ir.Module`` (see :func:`parse_module`) or MLIR text.

    Returns:
        One :class:`LoopInfo` per ``affine.for``/``scf.for``: functions in module order,
        loops innermost first (post-order) within each function.
    """
    if isinstance(module, str):
        module = parse_module(module)
    result: list[LoopInfo] = []
    for fn, _ in _ops(module.operation):
        if fn.name != "func.func":
            continue
        name = fn.attributes["sym_name"].value
        for index, loop in enumerate(_post_order_loops(fn)):
            result.append(LoopInfo(name, index, loop.name, _features(loop)))
    return result
