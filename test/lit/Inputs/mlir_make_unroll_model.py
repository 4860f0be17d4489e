"""Writes the ONNX unroll model of the lit tests: factor = 4 if trip_count % 4 == 0 else 2.

    mlir_make_unroll_model.py OUT.onnx

Input ``trip_count`` int64 [1] (one of the pass's features: a model may read a subset),
output ``unroll_factor`` int64 [1]. ONNX ``Mod`` (fmod=0) takes the divisor's sign, like
Python, so an unknown trip count (-1) gets 2, as ``mlbridge.loop_unroll.policy`` does.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main(out: str) -> None:
    consts = [
        numpy_helper.from_array(np.array([v], dtype=np.int64), name)
        for name, v in (("four", 4), ("two", 2), ("zero", 0))
    ]
    nodes = [
        helper.make_node("Mod", ["trip_count", "four"], ["rem"], fmod=0),
        helper.make_node("Equal", ["rem", "zero"], ["divides"]),
        helper.make_node("Where", ["divides", "four", "two"], ["unroll_factor"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlbridge_unroll_by_trip_count",
        [helper.make_tensor_value_info("trip_count", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("unroll_factor", TensorProto.INT64, [1])],
        initializer=consts,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out)
    print(f"wrote {out}: unroll_factor = 4 if trip_count % 4 == 0 else 2")


if __name__ == "__main__":
    main(sys.argv[1])
