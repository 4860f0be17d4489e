"""The basic policy as an ONNX graph, for the allocator's in-process runners.

:func:`basic_policy_onnx` writes :func:`mlbridge.regalloc.policy.basic_policy` (the
allocator's built-in policy) as an ONNX model over the allocator's whole interface
(:func:`mlbridge.regalloc.interface.feature_specs`): ``If`` nodes on ``agent`` select the
priority branch (the first of the heaviest queued live ranges), the coloring branch (the
first free register, else the cheapest eviction, else spilling) or the split branch
(spilling: the basic allocator never splits). ``llc-22 -regalloc=mlbridge
-mlbridge-regalloc-model=<file>.onnx`` then decides in-process through ONNX Runtime and
makes the built-in policy's allocation. It is the reference the trained agents' graphs
are checked against, and a template for them; it is not compiled natively (``mlbridge
compile`` has no ``If``, and one shared dynamic batch where the queries' sizes vary on
their own) and has no TF AOT form (TensorFlow's AOT path takes static shapes only).
"""

from __future__ import annotations

from pathlib import Path

from mlbridge.regalloc.interface import (
    ADVICE,
    MASK,
    NODE_FEATURES,
    REGISTER_FEATURES,
    feature_specs,
)
from mlbridge.tensor_spec import ElementType

__all__ = ["basic_policy_onnx", "write_basic_policy_onnx"]

#: The ONNX opset the graph uses, and the IR version ONNX Runtime 1.2x reads.
OPSET = 17
IR_VERSION = 8
# Scores of the coloring branch: any free register beats any eviction (whose score is
# minus its cost), which beats spilling; an illegal action scores lowest.
_FREE_SCORE = 1e30
_SPILL_SCORE = -1e31
_ILLEGAL = -3.0e38


def basic_policy_onnx():  # noqa: ANN201 (onnx is imported on demand)
    """The basic policy as an ``onnx.ModelProto`` (needs the ``onnx`` package)."""
    import onnx
    from onnx import TensorProto, helper

    def const(name: str, value: object, dtype: int, dims: tuple[int, ...] = ()) -> object:
        vals = value if isinstance(value, list) else [value]
        return helper.make_node(
            "Constant", [], [name], value=helper.make_tensor(name, dtype, dims, vals)
        )

    f32, i64 = TensorProto.FLOAT, TensorProto.INT64

    # Priority: argmax over queued nodes of their weight (the first on ties).
    priority = helper.make_graph(
        [
            const("p_col", NODE_FEATURES.index("weight"), i64),
            helper.make_node("Gather", ["node_features", "p_col"], ["p_w"], axis=1),
            const("p_zero", 0, i64),
            helper.make_node("Greater", [MASK, "p_zero"], ["p_legal"]),
            const("p_ill", _ILLEGAL, f32),
            helper.make_node("Where", ["p_legal", "p_w", "p_ill"], ["p_scores"]),
            helper.make_node("ArgMax", ["p_scores"], ["p_action"], axis=0, keepdims=1),
        ],
        "priority",
        [],
        [helper.make_tensor_value_info("p_action", i64, [1])],
    )

    # Coloring: scores per candidate register, then spilling, masked; argmax.
    coloring = helper.make_graph(
        [
            helper.make_node("Shape", ["register_features"], ["c_shape"], start=0, end=1),
            const("c_zero1", [0], i64, (1,)),
            const("c_big", [2**62], i64, (1,)),
            helper.make_node("Slice", [MASK, "c_zero1", "c_shape"], ["c_regmask"]),
            helper.make_node("Slice", [MASK, "c_shape", "c_big"], ["c_spillmask"]),
            const("c_free_col", REGISTER_FEATURES.index("free"), i64),
            const("c_cost_col", REGISTER_FEATURES.index("evict_cost"), i64),
            helper.make_node("Gather", ["register_features", "c_free_col"], ["c_free"], axis=1),
            helper.make_node("Gather", ["register_features", "c_cost_col"], ["c_cost"], axis=1),
            const("c_fzero", 0.0, f32),
            const("c_izero", 0, i64),
            helper.make_node("Greater", ["c_free", "c_fzero"], ["c_is_free"]),
            helper.make_node("Greater", ["c_regmask", "c_izero"], ["c_reg_legal"]),
            helper.make_node("Neg", ["c_cost"], ["c_neg_cost"]),
            const("c_free_score", _FREE_SCORE, f32),
            helper.make_node(
                "Where", ["c_is_free", "c_free_score", "c_neg_cost"], ["c_legal_score"]
            ),
            const("c_ill", _ILLEGAL, f32),
            helper.make_node("Where", ["c_reg_legal", "c_legal_score", "c_ill"], ["c_reg_scores"]),
            helper.make_node("Greater", ["c_spillmask", "c_izero"], ["c_spill_legal"]),
            const("c_spill_score", [_SPILL_SCORE], f32, (1,)),
            helper.make_node("Where", ["c_spill_legal", "c_spill_score", "c_ill"], ["c_spill"]),
            helper.make_node("Concat", ["c_reg_scores", "c_spill"], ["c_scores"], axis=0),
            helper.make_node("ArgMax", ["c_scores"], ["c_action"], axis=0, keepdims=1),
        ],
        "coloring",
        [],
        [helper.make_tensor_value_info("c_action", i64, [1])],
    )
    # Split: the last action, spilling.
    split = helper.make_graph(
        [
            helper.make_node("Shape", [MASK], ["s_count"]),
            const("s_one", [1], i64, (1,)),
            helper.make_node("Sub", ["s_count", "s_one"], ["s_action"]),
        ],
        "split",
        [],
        [helper.make_tensor_value_info("s_action", i64, [1])],
    )
    not_priority = helper.make_graph(
        [
            const("agent_coloring", [1], i64, (1,)),
            helper.make_node("Equal", ["agent", "agent_coloring"], ["is_coloring"]),
            helper.make_node(
                "If", ["is_coloring"], ["n_action"], then_branch=coloring, else_branch=split
            ),
        ],
        "not_priority",
        [],
        [helper.make_tensor_value_info("n_action", i64, [1])],
    )

    onnx_type = {ElementType.INT64: i64, ElementType.FLOAT: f32, ElementType.STRING: 8}
    inputs = [
        helper.make_tensor_value_info(
            s.name,
            onnx_type[s.type],
            [d if d >= 0 else f"{s.name}_{i}" for i, d in enumerate(s.shape)],
        )
        for s in feature_specs()
    ]
    graph = helper.make_graph(
        [
            const("agent_priority", [0], i64, (1,)),
            helper.make_node("Equal", ["agent", "agent_priority"], ["is_priority"]),
            helper.make_node(
                "If", ["is_priority"], [ADVICE], then_branch=priority, else_branch=not_priority
            ),
        ],
        "mlbridge_regalloc_basic",
        inputs,
        [helper.make_tensor_value_info(ADVICE, i64, [1])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="mlbridge.regalloc",
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def write_basic_policy_onnx(path: str | Path) -> Path:
    """Writes :func:`basic_policy_onnx` to ``path``; returns it."""
    import onnx

    out = Path(path)
    onnx.save(basic_policy_onnx(), str(out))
    return out
