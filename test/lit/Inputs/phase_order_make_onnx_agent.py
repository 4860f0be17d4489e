"""Writes an ONNX phase-order agent whose decisions are known: action = table[min(step, n-1)].

    phase_order_make_onnx_agent.py OUT.onnx 0,3,8,15 [--obs-dim 22] [--action-count]

The graph reads ``observation`` float [obs_dim] (unused: a real agent would look at it)
and ``step`` int64 [1], and outputs int64 ``action`` [1] by a Gather from the table, so the
argmax-free int64 output is what mlbridge-phase-order expects from an ONNX agent
(docs/phase-order.md). With ``--action-count`` the graph also reads ``action_count`` and
adds ``action_count - 15`` (zero for the built-in set), to show the feature reaches it.
Prints the model's inputs.
"""

from __future__ import annotations

import argparse
import sys

import onnx
from onnx import TensorProto, helper


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("table", help="comma-separated actions, one per step")
    parser.add_argument("--obs-dim", type=int, default=22)
    parser.add_argument("--action-count", action="store_true")
    args = parser.parse_args(argv)
    table = [int(a) for a in args.table.split(",")]

    inputs = [
        helper.make_tensor_value_info("observation", TensorProto.FLOAT, [args.obs_dim]),
        helper.make_tensor_value_info("step", TensorProto.INT64, [1]),
    ]
    inits = [
        helper.make_tensor("table", TensorProto.INT64, [len(table)], table),
        helper.make_tensor("last", TensorProto.INT64, [1], [len(table) - 1]),
    ]
    nodes = [
        helper.make_node("Min", ["step", "last"], ["index"]),
        helper.make_node(
            "Gather", ["table", "index"], ["picked" if args.action_count else "action"]
        ),
    ]
    if args.action_count:
        inputs.append(helper.make_tensor_value_info("action_count", TensorProto.INT64, [1]))
        inits.append(helper.make_tensor("fifteen", TensorProto.INT64, [1], [15]))
        nodes += [
            helper.make_node("Sub", ["action_count", "fifteen"], ["offset"]),
            helper.make_node("Add", ["picked", "offset"], ["action"]),
        ]
    graph = helper.make_graph(
        nodes,
        "phase_order_table_agent",
        inputs,
        [helper.make_tensor_value_info("action", TensorProto.INT64, [1])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, args.out)
    print("inputs " + " ".join(i.name for i in graph.input))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
