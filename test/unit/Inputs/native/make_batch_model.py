"""Writes the dynamic-batch test model of NativeBatchTest.cpp and ONNX Runtime's answers.

``batch_mlp.onnx``: inputs ``x`` float [batch, 6] and ``scale`` float [batch, 1] (the
symbolic batch ``batch``) and ``offset`` float [3] (static); outputs ``scores`` float
[batch, 3] = (relu(x W1 + b1) W2) * scale + offset and ``choice`` int64 [batch], the
argmax of each row of ``scores``. ``batch_mlp.answers.json``: inputs and ONNX Runtime's
outputs for batches of 1, 2, 7, 0 and 3 rows.

Usage: make_batch_model.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

BATCHES = (1, 2, 7, 0, 3)


def make_model() -> onnx.ModelProto:
    """The model; its weights come from a fixed seed."""
    rng = np.random.default_rng(11)
    weights = {
        "W1": rng.standard_normal((6, 8)).astype(np.float32),
        "b1": rng.standard_normal(8).astype(np.float32),
        "W2": rng.standard_normal((8, 3)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="dense1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu1"),
        helper.make_node("MatMul", ["r", "W2"], ["s"], name="dense2"),
        helper.make_node("Mul", ["s", "scale"], ["scaled"], name="scale_rows"),
        helper.make_node("Add", ["scaled", "offset"], ["scores"], name="add_offset"),
        helper.make_node("ArgMax", ["scores"], ["choice"], axis=1, keepdims=0, name="choose"),
    ]
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "batch_mlp",
        [
            helper.make_tensor_value_info("x", f32, ["batch", 6]),
            helper.make_tensor_value_info("scale", f32, ["batch", 1]),
            helper.make_tensor_value_info("offset", f32, [3]),
        ],
        [
            helper.make_tensor_value_info("scores", f32, ["batch", 3]),
            helper.make_tensor_value_info("choice", TensorProto.INT64, ["batch"]),
        ],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> int:
    """Write the model and its answers into ``sys.argv[1]``."""
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    path = out / "batch_mlp.onnx"
    onnx.save(make_model(), str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(12)
    cases = []
    for rows in BATCHES:
        feeds = {
            "x": (rng.standard_normal((rows, 6)) * 2).astype(np.float32),
            "scale": rng.uniform(0.5, 2.0, (rows, 1)).astype(np.float32),
            "offset": rng.standard_normal(3).astype(np.float32),
        }
        scores, choice = session.run(["scores", "choice"], feeds)
        cases.append(
            {
                "rows": rows,
                "inputs": {k: v.reshape(-1).tolist() for k, v in feeds.items()},
                "outputs": {
                    "scores": scores.reshape(-1).tolist(),
                    "choice": choice.reshape(-1).tolist(),
                },
            }
        )
    (out / "batch_mlp.answers.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
