"""MLIR test kernels: ``(index) -> i64`` functions with loops whose shape is chosen.

Each kernel folds an order-dependent hash over a loop's iterations
(``acc = acc * 31 + i``), so any change in the iterations executed, their order or
their number changes the result: a good check that unrolling kept the program's
meaning. :func:`reduction_kernel` returns the text; :func:`kernel_module` joins several
and checks the result with the MLIR Python bindings.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlbridge.loop_unroll.features import parse_module

__all__ = ["expected_hash", "kernel_module", "reduction_kernel"]


def reduction_kernel(name: str, kind: str, lower: int, upper: int | None, step: int = 1) -> str:
    """One kernel: a loop from ``lower`` to ``upper`` (``None``: the argument ``%n``).

    Args:
        name: The function's name.
        kind: ``"affine"`` (``affine.for``) or ``"scf"`` (``scf.for``).
        lower: The constant lower bound.
        upper: The constant upper bound, or ``None`` for a dynamic one (``%n``).
        step: The constant step (> 0).

    Returns:
        A ``func.func`` in MLIR text.

    Raises:
        ValueError: For an unknown kind or a step below 1.
    """
    if step < 1:
        raise ValueError(f"step must be at least 1, got {step}")
    head = (
        f"func.func @{name}(%n: index) -> i64 {{\n"
        "  %seed = arith.constant 7 : i64\n"
        "  %m = arith.constant 31 : i64\n"
    )
    body = (
        "    %v = arith.index_cast %i : index to i64\n"
        "    %t = arith.muli %acc, %m : i64\n"
        "    %u = arith.addi %t, %v : i64\n"
    )
    if kind == "affine":
        ub = "%n" if upper is None else str(upper)
        loop = (
            f"  %h = affine.for %i = {lower} to {ub} step {step} "
            "iter_args(%acc = %seed) -> (i64) {\n" + body + "    affine.yield %u : i64\n  }\n"
        )
    elif kind == "scf":
        consts = f"  %lb = arith.constant {lower} : index\n  %st = arith.constant {step} : index\n"
        if upper is not None:
            consts += f"  %ub = arith.constant {upper} : index\n"
        ub = "%n" if upper is None else "%ub"
        loop = (
            consts + f"  %h = scf.for %i = %lb to {ub} step %st "
            "iter_args(%acc = %seed) -> (i64) {\n" + body + "    scf.yield %u : i64\n  }\n"
        )
    else:
        raise ValueError(f"kind must be 'affine' or 'scf', got {kind!r}")
    return head + loop + "  return %h : i64\n}\n"


def kernel_module(kernels: Sequence[str]) -> str:
    """Joins kernels into one module's text, checked by parsing it with the bindings."""
    text = "\n".join(kernels)
    parse_module(text)
    return text


def expected_hash(lower: int, upper: int, step: int) -> int:
    """What :func:`reduction_kernel` computes for a loop ``lower..upper`` by ``step``.

    Args:
        lower: The lower bound.
        upper: The (effective) upper bound.
        step: The step.

    Returns:
        The hash as a signed 64-bit integer (wrapping like ``i64``).
    """
    acc = 7
    for i in range(lower, upper, step):
        acc = (acc * 31 + i) & 0xFFFFFFFFFFFFFFFF
    return acc - (1 << 64) if acc >= 1 << 63 else acc
