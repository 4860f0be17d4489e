"""Writes an ONNX register-allocation priority model for the llc plugin's lit tests.

    priority_make_model.py OUT.onnx {identity,identity-int64,reverse,nan}

The model reads one of the advisor's features, ``default_priority`` (int64 [1], LLVM's
default priority; a model may read a subset of the features) and answers ``priority``
(docs/regalloc.md):

- ``identity``: float64, ``priority = default_priority`` (stock llc's allocation);
- ``identity-int64``: int64, the same (for ``-mlbridge-regalloc-priority-advice-type=int64``);
- ``reverse``: float64, ``priority = 2^32 - 1 - default_priority`` (the default order
  reversed);
- ``nan``: float64, ``priority = NaN`` (a model failure).
"""

from __future__ import annotations

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(kind: str) -> onnx.ModelProto:
    """The model ``kind`` names (see the module docstring)."""
    initializers = []
    if kind == "identity":
        nodes = [
            helper.make_node("Cast", ["default_priority"], ["priority"], to=TensorProto.DOUBLE)
        ]
        out_type = TensorProto.DOUBLE
    elif kind == "identity-int64":
        nodes = [helper.make_node("Identity", ["default_priority"], ["priority"])]
        out_type = TensorProto.INT64
    elif kind == "nan":
        initializers = [numpy_helper.from_array(np.array([np.nan]), "nan")]
        nodes = [
            helper.make_node("Cast", ["default_priority"], ["as_double"], to=TensorProto.DOUBLE),
            helper.make_node("Mul", ["as_double", "nan"], ["priority"]),
        ]
        out_type = TensorProto.DOUBLE
    else:
        initializers = [numpy_helper.from_array(np.array([0xFFFFFFFF], dtype=np.int64), "top")]
        nodes = [
            helper.make_node("Sub", ["top", "default_priority"], ["reversed"]),
            helper.make_node("Cast", ["reversed"], ["priority"], to=TensorProto.DOUBLE),
        ]
        out_type = TensorProto.DOUBLE
    graph = helper.make_graph(
        nodes,
        f"mlbridge_priority_{kind.replace('-', '_')}",
        [helper.make_tensor_value_info("default_priority", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("priority", out_type, [1])],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("kind", choices=["identity", "identity-int64", "reverse", "nan"])
    args = parser.parse_args()
    onnx.save(build(args.kind), args.out)
    print(f"wrote {args.out}: {args.kind} priority model")


if __name__ == "__main__":
    main()
