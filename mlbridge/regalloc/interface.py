"""The ML register allocator's model interface, as ``passes/regalloc/MLRegAlloc.h`` defines it.

``llc-22 -load-pass-plugin=... -regalloc=mlbridge`` allocates registers in an episode over
each function's interference graph (RL4ReAl's shape, docs/ml-regalloc.md): the *priority*
agent picks the next live range among the queued ones, the *coloring* agent picks a
register for it among the legal ones, or spilling it; with ``-mlbridge-regalloc-split``
the *split* agent then picks a block to split that live range around, or spilling after
all. Every query carries the whole current graph, and one interface serves every agent
(the feature ``agent`` says which acts):

=====================  ===========  ==================================================
feature                 shape        meaning
=====================  ===========  ==================================================
``agent``               int64 [1]    :class:`Agent`
``function_name``       string [1]   the machine function
``node_features``       float [N,11] one row per live range, :data:`NODE_FEATURES`
``edges``               int64 [E,2]  interfering live ranges (node indices)
``spill_weights``       float [N]    LLVM's spill weights, capped at
                                     :data:`UNSPILLABLE_WEIGHT`
``node``                int64 [1]    the live range being colored or split, -1 for
                                     priority
``register_features``   float [R,5]  coloring: one row per candidate register,
                                     :data:`REGISTER_FEATURES`; else R = 0
``block_features``      float [S,7]  split: one row per candidate block or region,
                                     :data:`BLOCK_FEATURES`; else S = 0
``action_mask``         int64 [A]    1 where the action is legal
=====================  ===========  ==================================================

The advice ``regalloc_action`` (int64 [1]) is an index of a nonzero ``action_mask``
element. Priority: ``A = N``, action ``i`` allocates node ``i`` next. Coloring: ``A = R +
1``, action ``r < R`` assigns candidate register ``r`` (evicting, and spilling, the live
ranges in its way when it is not free), action ``R`` spills the live range (or, with
splitting, hands it to the split agent). Split: ``A = S + 1``, action ``s < S`` splits the
live range around candidate block ``s``, action ``S`` spills it.
"""

from __future__ import annotations

import enum

from mlbridge.tensor_spec import ElementType, TensorSpec

__all__ = [
    "ADVICE",
    "BLOCK_FEATURES",
    "MASK",
    "NODE_FEATURES",
    "REGISTER_FEATURES",
    "UNSPILLABLE_WEIGHT",
    "Agent",
    "advice_spec",
    "feature_specs",
]


class Agent(enum.IntEnum):
    """The value of the feature ``agent``: which agent acts."""

    PRIORITY = 0
    COLORING = 1
    SPLIT = 2


#: The columns of ``node_features`` (C++: ``NodeFeature``), in order.
NODE_FEATURES: tuple[str, ...] = (
    "weight",  # spill weight, capped at UNSPILLABLE_WEIGHT
    "spillable",  # 1 if the live range may be spilled
    "log_size",  # log2(1 + slot-index length)
    "segments",  # live segments
    "instructions",  # instructions reading or writing it
    "queued",  # 1 while waiting for a register
    "assigned",  # 1 once it has one
    "spilled",  # 1 once spilled (or evicted and spilled)
    "degree",  # interfering live ranges
    "class_size",  # allocatable registers of its class
    "has_hint",  # 1 if a copy hints a register
)

#: The columns of ``register_features`` (C++: ``RegisterFeature``), in order.
REGISTER_FEATURES: tuple[str, ...] = (
    "free",  # 1 if no live range holds it where this one lives
    "hinted",  # 1 if a copy hints it
    "evict_cost",  # spill weight evicted by taking it (0 if free, -1 if not legal)
    "first_csr_use",  # 1 if taking it is the first use of a callee-saved register
    "order",  # position in the allocation order, in [0, 1)
)

#: The columns of ``block_features`` (C++: ``BlockFeature``), in order.
BLOCK_FEATURES: tuple[str, ...] = (
    "frequency",  # log2(1 + the block's frequency relative to the entry block)
    "uses",  # the block's instructions that read or write the live range
    "live_in",  # 1 if the live range is live into the block
    "live_out",  # 1 if a split copies it back at the block's end (docs/ml-regalloc.md)
    "instructions",  # the block's instructions, / 100
    "calls",  # the block's calls (each clobbers registers)
    "region",  # 1 for a region's row: its counts are frequency-weighted sums, frequency 1
)

#: ``node_features``' and ``spill_weights``' weight of an unspillable live range.
UNSPILLABLE_WEIGHT = 1e6

#: The advice's name.
ADVICE = "regalloc_action"
#: The mask feature of the advice.
MASK = "action_mask"
#: The metadata key (an ONNX model's ``metadata_props``) under which a model declares the
#: rounds of messages it passes along ``edges``, in decimal. The allocator then sends each
#: query only the edges with an end fewer than that many edges away from the nodes the
#: decision is about (the queued ones, or ``node``), in the same order
#: (``-mlbridge-regalloc-message-rounds``, docs/ml-regalloc.md).
MESSAGE_ROUNDS_METADATA = "mlbridge.regalloc.message_rounds"


def feature_specs() -> tuple[TensorSpec, ...]:
    """The feature specs, in the order the allocator sends them."""
    f32, i64 = ElementType.FLOAT, ElementType.INT64
    return (
        TensorSpec("agent", i64, (1,)),
        TensorSpec("function_name", ElementType.STRING, (1,)),
        TensorSpec("node_features", f32, (-1, len(NODE_FEATURES))),
        TensorSpec("edges", i64, (-1, 2)),
        TensorSpec("spill_weights", f32, (-1,)),
        TensorSpec("node", i64, (1,)),
        TensorSpec("register_features", f32, (-1, len(REGISTER_FEATURES))),
        TensorSpec("block_features", f32, (-1, len(BLOCK_FEATURES))),
        TensorSpec(MASK, i64, (-1,)),
    )


def advice_spec() -> TensorSpec:
    """The advice spec: ``regalloc_action``, int64 [1], masked by ``action_mask``."""
    return TensorSpec(ADVICE, ElementType.INT64, (1,), mask_feature=MASK)
