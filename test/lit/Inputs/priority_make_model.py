"""Writes an ONNX register-allocation priority model for the llc plugin's lit tests.

    priority_make_model.py OUT.onnx {identity,identity-int64,reverse,nan,dense}

The model reads one of the advisor's features, ``default_priority`` (int64 [1], LLVM's
default priority; a model may read a subset of the features) and answers ``priority``
(docs/regalloc.md):

- ``identity``: float64, ``priority = default_priority`` (stock llc's allocation);
- ``identity-int64``: int64, the same (for ``-mlbridge-regalloc-priority-advice-type=int64``);
- ``reverse``: float64, ``priority = 2^32 - 1 - default_priority`` (the default order
  reversed);
- ``nan``: float64, ``priority = NaN`` (a model failure);
- ``dense``: float32 (``-mlbridge-regalloc-priority-advice-type=float``), a dense layer
  made by :mod:`mlbridge.export.numpy_dense` over ``default_priority`` and
  ``in_one_block``: ``priority = default_priority + 2^24 * in_one_block`` in float32, so
  ranges within one block go first. Both products are exact and only the one sum rounds,
  so every kernel (ONNX Runtime's, native code's) answers the same bits.
"""

from __future__ import annotations

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build_dense(out: str) -> None:
    """Write the ``dense`` model (see the module docstring) to ``out``."""
    from mlbridge.export.numpy_dense import Dense, export_numpy_dense
    from mlbridge.tensor_spec import ElementType, TensorSpec

    specs = [
        TensorSpec("default_priority", ElementType.INT64, (1,)),
        TensorSpec("in_one_block", ElementType.INT64, (1,)),
    ]
    layers = [Dense(np.array([[1.0], [2.0**24]], dtype=np.float32))]
    output = TensorSpec("priority", ElementType.FLOAT, (1,))
    export_numpy_dense(specs, layers, out, output=output)


def build(kind: str) -> onnx.ModelProto:
    """The model ``kind`` names (see the module docstring), but ``dense``."""
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
    parser.add_argument("kind", choices=["identity", "identity-int64", "reverse", "nan", "dense"])
    args = parser.parse_args()
    if args.kind == "dense":
        build_dense(args.out)
    else:
        onnx.save(build(args.kind), args.out)
    print(f"wrote {args.out}: {args.kind} priority model")


if __name__ == "__main__":
    main()
