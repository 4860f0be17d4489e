"""Writes the small ONNX models that test/unit/OnnxModelRunnerTest.cpp runs.

Run at build time (test/unit/CMakeLists.txt): ``python make_models.py OUT_DIR``. Each model's
answer is a simple function of its inputs that the C++ test computes itself, so every
answer is checked exactly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Opset and IR version that every ONNX Runtime since 1.16 reads.
OPSET = 17
IR_VERSION = 8

ELEMENT_TYPES = {
    "int8_t": TensorProto.INT8,
    "uint8_t": TensorProto.UINT8,
    "int16_t": TensorProto.INT16,
    "uint16_t": TensorProto.UINT16,
    "int32_t": TensorProto.INT32,
    "uint32_t": TensorProto.UINT32,
    "int64_t": TensorProto.INT64,
    "uint64_t": TensorProto.UINT64,
    "float": TensorProto.FLOAT,
    "double": TensorProto.DOUBLE,
    "bool": TensorProto.BOOL,
    "string": TensorProto.STRING,
    "float16": TensorProto.FLOAT16,
}


def _save(graph: onnx.GraphProto, path: Path, metadata: dict[str, str] | None = None) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    if metadata:
        helper.set_model_props(model, metadata)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def _value(name: str, elem: int, shape: list[int | str]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _const(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array, name)


def multi_input(out: Path) -> None:
    """score = a + 10*b[0] + 100*b[1] + 1000*c, inputs declared as (c, a, b); two entries
    of metadata (metadata_props), one of them empty."""
    nodes = [
        helper.make_node("Cast", ["a"], ["a_f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["c"], ["c_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["b", "b_w"], ["b_s"]),
        helper.make_node("ReduceSum", ["b_s"], ["b_sum"], keepdims=1),
        helper.make_node("Mul", ["c_f", "c_w"], ["c_s"]),
        helper.make_node("Add", ["a_f", "b_sum"], ["ab"]),
        helper.make_node("Add", ["ab", "c_s"], ["score"]),
    ]
    graph = helper.make_graph(
        nodes,
        "multi_input",
        [
            _value("c", TensorProto.DOUBLE, [1]),
            _value("a", TensorProto.INT64, [1]),
            _value("b", TensorProto.FLOAT, [2]),
        ],
        [_value("score", TensorProto.FLOAT, [1])],
        initializer=[
            _const("b_w", np.array([10.0, 100.0], dtype=np.float32)),
            _const("c_w", np.array([1000.0], dtype=np.float32)),
        ],
    )
    _save(graph, out / "multi_input.onnx", {"test.weights": "1 10 100 1000", "test.empty": ""})


def identities(out: Path) -> None:
    """identity_<type>.onnx: y = x, both of shape [3]."""
    for name, elem in ELEMENT_TYPES.items():
        graph = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])],
            f"identity_{name}",
            [_value("x", elem, [3])],
            [_value("y", elem, [3])],
        )
        _save(graph, out / f"identity_{name}.onnx")


def dynamic(out: Path) -> None:
    """dynamic_scale.onnx: y = 2x over [n]; dynamic_sum.onnx: s = sum(x), [n] -> [1]."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["y"])],
        "dynamic_scale",
        [_value("x", TensorProto.FLOAT, ["n"])],
        [_value("y", TensorProto.FLOAT, ["n"])],
        initializer=[_const("two", np.array([2.0], dtype=np.float32))],
    )
    _save(graph, out / "dynamic_scale.onnx")
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=1)],
        "dynamic_sum",
        [_value("x", TensorProto.FLOAT, ["n"])],
        [_value("s", TensorProto.FLOAT, [1])],
    )
    _save(graph, out / "dynamic_sum.onnx")


def two_outputs(out: Path) -> None:
    """x float[2] -> sum = x0 + x1 and prod = x0 * x1, both [1]."""
    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=1),
            helper.make_node("ReduceProd", ["x"], ["prod"], keepdims=1),
        ],
        "two_outputs",
        [_value("x", TensorProto.FLOAT, [2])],
        [_value("sum", TensorProto.FLOAT, [1]), _value("prod", TensorProto.FLOAT, [1])],
    )
    _save(graph, out / "two_outputs.onnx")


def batched(out: Path) -> None:
    """x float[1,3] -> y = x + 1, float[1,3]: a model exported with a batch dimension."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"])],
        "batched",
        [_value("x", TensorProto.FLOAT, [1, 3])],
        [_value("y", TensorProto.FLOAT, [1, 3])],
        initializer=[_const("one", np.array([1.0], dtype=np.float32))],
    )
    _save(graph, out / "batched.onnx")


def policies(out: Path) -> None:
    """RL agents over obs float[4]: logits = obs (argmax) and logits = -obs (argmin)."""
    for name, sign in (("policy_max", 1.0), ("policy_min", -1.0)):
        graph = helper.make_graph(
            [helper.make_node("Mul", ["obs", "sign"], ["logits"])],
            name,
            [_value("obs", TensorProto.FLOAT, [4])],
            [_value("logits", TensorProto.FLOAT, [4])],
            initializer=[_const("sign", np.array([sign], dtype=np.float32))],
        )
        _save(graph, out / f"{name}.onnx")


def exported_dense(out: Path) -> None:
    """Models from mlbridge.export.export_numpy_dense, with numpy's answers beside them.

    exported_decision.onnx answers an int64 decision (argmax), exported_scores.onnx the
    float scores; exported_samples.json holds features and numpy's answers for each.
    """
    from mlbridge import ElementType, TensorSpec
    from mlbridge.export import Dense, export_numpy_dense, numpy_dense_forward

    specs = [
        TensorSpec("callee_size", ElementType.INT64, (1,)),
        TensorSpec("weights", ElementType.FLOAT, (2, 2)),
        TensorSpec("is_hot", ElementType.BOOL, (1,)),
    ]
    rng = np.random.default_rng(42)
    layers = [
        Dense(rng.normal(size=(6, 8)), rng.normal(size=8), "relu"),
        Dense(rng.normal(size=(8, 3)), rng.normal(size=3)),
    ]
    decision = TensorSpec("decision", ElementType.INT64, (1,))
    export_numpy_dense(specs, layers, out / "exported_decision.onnx", output=decision, argmax=True)
    scores = TensorSpec("scores", ElementType.FLOAT, (3,))
    export_numpy_dense(specs, layers, out / "exported_scores.onnx", output=scores)
    samples = []
    for _ in range(200):
        features = {
            "callee_size": rng.integers(0, 4, size=1, dtype=np.int64),
            "weights": rng.normal(size=(2, 2)).astype(np.float32),
            "is_hot": rng.integers(0, 2, size=1).astype(np.bool_),
        }
        samples.append(
            {
                "callee_size": int(features["callee_size"][0]),
                "weights": [float(w) for w in features["weights"].reshape(-1)],
                "is_hot": bool(features["is_hot"][0]),
                "decision": int(numpy_dense_forward(specs, layers, features, argmax=True)[0]),
                "scores": [float(v) for v in numpy_dense_forward(specs, layers, features)],
            }
        )
    (out / "exported_samples.json").write_text(json.dumps(samples))


def ort_format(out: Path) -> None:
    """multi_input.ort: multi_input.onnx in ONNX Runtime's own format, as the model
    registry writes it (mlbridge.models.ort_format), under a name the runner never reads
    by itself; the tests copy it where OnnxModel::load looks."""
    from mlbridge.models.ort_format import write_ort_format_copy

    copy = write_ort_format_copy(out / "multi_input.onnx")
    if copy is None:
        raise SystemExit("make_models.py: ONNX Runtime cannot write multi_input.onnx's copy")
    copy.replace(out / "multi_input.ort")


def main() -> int:
    """Writes every model into the folder given as the only argument."""
    if len(sys.argv) != 2:
        print("usage: make_models.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    multi_input(out)
    ort_format(out)
    identities(out)
    dynamic(out)
    two_outputs(out)
    batched(out)
    policies(out)
    exported_dense(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
