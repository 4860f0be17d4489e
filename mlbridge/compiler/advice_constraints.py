"""The constraints of stock LLVM 22 advisors' advice, which their headers do not carry.

Stock LLVM trusts its model: ``llc-22``'s eviction advisor indexes its candidate arrays
with ``index_to_evict`` unchecked (99 once gives assembly that does not assemble, 33, -1
or a masked index crash llc, 99 on every query makes it loop), and its priority advisor
casts ``priority`` to ``unsigned`` (undefined for NaN, negatives and 2^32 or more). The
compiler-side interfaces (:mod:`mlbridge.compiler.pipe`, :mod:`mlbridge.compiler.grpc`)
attach these constraints to a header's advice spec that has none, and check each answer
against them before sending it (docs/serialization.md, docs/regalloc.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mlbridge.tensor_spec import ElementType, TensorSpec

__all__ = ["STOCK_ADVICE_CONSTRAINTS", "StockAdviceConstraint", "with_stock_constraints"]


@dataclass(frozen=True)
class StockAdviceConstraint:
    """The constraints of one stock advisor's advice.

    Attributes:
        advice: The advice spec as the advisor's header gives it (name, type, shape).
        valid_range: ``(low, high)``: ``low <= v < high``.
        mask_feature: The feature whose nonzero elements are the allowed indices.
        needs_feature: A feature the header must have for this to be that advisor
            (told apart from mlbridge's own advisors of the same advice name).
    """

    advice: TensorSpec
    valid_range: tuple[int, int] | None
    mask_feature: str | None = None
    needs_feature: str | None = None


#: From LLVM 22: llvm/lib/CodeGen/MLRegAllocEvictAdvisor.cpp (33 = MaxInterferences + 1
#: columns, the last being the candidate itself; the ``mask`` feature is ``[1, 33]``),
#: llvm/lib/CodeGen/MLRegAllocPriorityAdvisor.cpp (``static_cast<unsigned>`` of the
#: float), llvm/lib/Analysis/MLInlineAdvisor.cpp (a decision, 0 or 1).
STOCK_ADVICE_CONSTRAINTS: tuple[StockAdviceConstraint, ...] = (
    StockAdviceConstraint(
        TensorSpec("index_to_evict", ElementType.INT64, (1,)), (0, 33), "mask", "mask"
    ),
    StockAdviceConstraint(
        TensorSpec("priority", ElementType.FLOAT, (1,)), (0, 2**32), None, "stage"
    ),
    StockAdviceConstraint(TensorSpec("inlining_decision", ElementType.INT64, (1,)), (0, 2)),
)


_KNOWN_NAMES = frozenset(c.advice.name for c in STOCK_ADVICE_CONSTRAINTS)


def with_stock_constraints(advice: TensorSpec, features: Iterable[str]) -> TensorSpec:
    """``advice`` with a stock advisor's constraints, if it is one's and has none.

    Args:
        advice: The advice spec of a header or observation.
        features: The names of the features the compiler sends (the advisor is told
            apart by them; the mask feature must be among them).

    Returns:
        ``advice`` itself when nothing applies.
    """
    if advice.name not in _KNOWN_NAMES or advice.has_constraints:
        return advice
    names = set(features)
    for known in STOCK_ADVICE_CONSTRAINTS:
        if advice != known.advice:
            continue
        if known.needs_feature is not None and known.needs_feature not in names:
            continue
        if known.mask_feature is not None and known.mask_feature not in names:
            continue
        return advice.with_constraints(known.valid_range, known.mask_feature)
    return advice
