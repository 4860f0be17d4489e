"""mlbridge.native: ONNX models compiled through MLIR 22 agree with ONNX Runtime.

Every case builds a small ONNX graph, compiles it with the real mlir-opt-22,
mlir-translate-22 and clang-22, loads the shared object (ctypes over the AOT C ABI) and
compares its outputs with ONNX Runtime's on random and edge-case inputs: integer and
bool outputs bit-exact, float outputs within ``rtol=1e-5, atol=1e-6`` (libm's and ONNX
Runtime's exp/log/tanh differ in the last bits; NaN where ONNX Runtime gives NaN).
"""

from __future__ import annotations

import subprocess
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mlbridge.aot.abi import ABI_FUNCTIONS
from mlbridge.native import SUPPORTED_OPS, NativeCompileError, compile_onnx
from mlbridge.native.runtime import NativeModel

RTOL, ATOL = 1e-5, 1e-6
_ONNX_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.bool_): TensorProto.BOOL,
}

Gen = Callable[[np.random.Generator], np.ndarray[Any, Any]]


def f32(*shape: int, scale: float = 3.0) -> Gen:
    return lambda rng: (rng.standard_normal(shape) * scale).astype(np.float32)


def pos(*shape: int) -> Gen:
    return lambda rng: rng.uniform(0.01, 5.0, shape).astype(np.float32)


def ints(*shape: int, low: int = -5, high: int = 6, dtype: Any = np.int64) -> Gen:  # noqa: ANN401
    return lambda rng: rng.integers(low, high, shape).astype(dtype)


def nonzero_ints(*shape: int) -> Gen:
    def gen(rng: np.random.Generator) -> np.ndarray[Any, Any]:
        v = rng.integers(1, 9, shape) * rng.choice([-1, 1], shape)
        return v.astype(np.int64)

    return gen


def bools(*shape: int) -> Gen:
    return lambda rng: rng.integers(0, 2, shape).astype(np.bool_)


def edge_f32(*shape: int) -> Gen:
    """Zeros, signed zeros, ties, large values and integers among normal values."""
    specials = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 1e30, -1e30, 7.0], np.float32)

    def gen(rng: np.random.Generator) -> np.ndarray[Any, Any]:
        v = (rng.standard_normal(shape) * 3).astype(np.float32)
        mask = rng.random(shape) < 0.5
        v[mask] = rng.choice(specials, int(mask.sum()))
        return v

    return gen


@dataclass
class Case:
    """One graph: nodes over named inputs (random generators) and constant initializers."""

    id: str
    nodes: list[Any]
    inputs: dict[str, Gen]
    outputs: list[str]
    consts: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
    opset: int = 17

    def model(self, rng: np.random.Generator) -> Any:  # noqa: ANN401
        samples = {n: g(rng) for n, g in self.inputs.items()}
        ins = [
            helper.make_tensor_value_info(n, _ONNX_TYPES[v.dtype], list(v.shape))
            for n, v in samples.items()
        ]
        outs = [helper.make_value_info(n, onnx.TypeProto()) for n in self.outputs]
        inits = [numpy_helper.from_array(v, n) for n, v in self.consts.items()]
        graph = helper.make_graph(self.nodes, self.id, ins, outs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        # Graph outputs need types for ONNX Runtime: take them from shape inference.
        known = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
        for out in model.graph.output:
            out.type.CopyFrom(known[out.name].type)
        onnx.checker.check_model(model)
        return model


def N(op: str, ins: list[str], outs: list[str] | None = None, **attrs: Any) -> Any:  # noqa: ANN401, N802
    outs = outs or ["y"]
    return helper.make_node(op, ins, outs, name=f"{op.lower()}_{outs[0]}", **attrs)


def _i64(*v: int) -> np.ndarray[Any, Any]:
    return np.array(v, dtype=np.int64)


def _unary(op: str, gen: Gen, **attrs: Any) -> Case:  # noqa: ANN401
    return Case(op, [N(op, ["x"], **attrs)], {"x": gen}, ["y"])


def _binary(op: str, a: Gen, b: Gen, tag: str = "") -> Case:
    return Case(op + tag, [N(op, ["a", "b"])], {"a": a, "b": b}, ["y"])


CASES: list[Case] = [
    _binary("Add", f32(3, 4), f32(4)),
    _binary("Add", ints(2, 3, dtype=np.int32), ints(2, 1, dtype=np.int32), "-int32"),
    _binary("Sub", f32(2, 3, 4), f32(3, 1)),
    _binary("Mul", f32(4, 1), f32(1, 5)),
    _binary("Mul", ints(3, 4), ints(4), "-int64"),
    _binary("Div", f32(3, 4), pos(3, 4)),
    _binary("Div", ints(3, 4, low=-50, high=50), nonzero_ints(3, 4), "-int64"),
    _binary("Pow", pos(5), f32(5, scale=1.0)),
    _binary("Mod", ints(3, 4, low=-20, high=20), nonzero_ints(4)),
    Case("Mod-fmod", [N("Mod", ["a", "b"], fmod=1)], {"a": f32(6), "b": pos(6)}, ["y"]),
    Case(
        "Mod-fmod-int32",
        [N("Mod", ["a", "b"], fmod=1)],
        {
            "a": ints(6, low=-20, high=20, dtype=np.int32),
            "b": ints(6, low=1, high=9, dtype=np.int32),
        },
        ["y"],
    ),
    Case("Max", [N("Max", ["a", "b", "c"])], {"a": f32(3, 4), "b": f32(4), "c": f32(3, 1)}, ["y"]),
    Case("Min", [N("Min", ["a", "b"])], {"a": ints(3, 4), "b": ints(4)}, ["y"]),
    _unary("Relu", edge_f32(4, 5)),
    _unary("LeakyRelu", edge_f32(4, 5), alpha=0.2),
    _unary("Sigmoid", f32(4, 5)),
    _unary("Tanh", f32(4, 5)),
    _unary("Exp", f32(4, 5, scale=1.0)),
    _unary("Log", pos(4, 5)),
    _unary("Sqrt", pos(4, 5)),
    _unary("Abs", edge_f32(6)),
    _unary("Neg", ints(6)),
    _unary("Sign", edge_f32(3, 3)),
    _unary("Reciprocal", pos(7)),
    _unary("Floor", edge_f32(7)),
    _unary("Ceil", edge_f32(7)),
    _unary("Identity", f32(2, 2)),
    _unary("Softmax", f32(3, 5)),
    Case("Softmax-axis0", [N("Softmax", ["x"], axis=0)], {"x": f32(3, 5)}, ["y"]),
    Case("Softmax-opset11", [N("Softmax", ["x"], axis=1)], {"x": f32(2, 3, 4)}, ["y"], opset=11),
    _unary("LogSoftmax", f32(3, 5)),
    Case(
        "Concat",
        [N("Concat", ["a", "b", "c"], axis=1)],
        {"a": f32(2, 1), "b": f32(2, 3), "c": f32(2, 2)},
        ["y"],
    ),
    Case(
        "Concat-contiguous",
        [N("Concat", ["a", "b"], axis=1)],
        {"a": f32(1, 2), "b": f32(1, 3)},
        ["y"],
    ),
    Case(
        "Concat-axis0", [N("Concat", ["a", "b"], axis=0)], {"a": ints(2, 3), "b": ints(1, 3)}, ["y"]
    ),
    Case("Reshape", [N("Reshape", ["x", "s"])], {"x": f32(2, 3, 4)}, ["y"], {"s": _i64(0, -1, 2)}),
    Case("Flatten", [N("Flatten", ["x"], axis=2)], {"x": f32(2, 3, 4, 5)}, ["y"]),
    Case(
        "Squeeze", [N("Squeeze", ["x", "ax"])], {"x": f32(1, 3, 1, 2)}, ["y"], {"ax": _i64(0, -2)}
    ),
    Case("Unsqueeze", [N("Unsqueeze", ["x", "ax"])], {"x": f32(3, 2)}, ["y"], {"ax": _i64(0, 3)}),
    Case("Transpose", [N("Transpose", ["x"], perm=[2, 0, 1])], {"x": f32(2, 3, 4)}, ["y"]),
    Case(
        "Gather",
        [N("Gather", ["x", "i"], axis=0)],
        {"x": f32(5, 3), "i": ints(2, 4, low=-5, high=5)},
        ["y"],
    ),
    Case(
        "Gather-axis1",
        [N("Gather", ["x", "i"], axis=1)],
        {"x": f32(2, 6, 3), "i": ints(4, low=-6, high=6, dtype=np.int32)},
        ["y"],
    ),
    Case(
        "Gather-scalar",
        [N("Gather", ["x", "i"], axis=0)],
        {"x": f32(5, 3)},
        ["y"],
        {"i": np.array(3, dtype=np.int64)},
    ),
    Case(
        "ArgMax", [N("ArgMax", ["x"], axis=1, keepdims=0)], {"x": ints(4, 6, low=0, high=3)}, ["y"]
    ),
    Case(
        "ArgMax-last",
        [N("ArgMax", ["x"], axis=0, select_last_index=1)],
        {"x": ints(6, 3, low=0, high=3)},
        ["y"],
    ),
    Case("ArgMin", [N("ArgMin", ["x"], axis=-1)], {"x": f32(3, 7)}, ["y"]),
    Case("Cast-f32-i64", [N("Cast", ["x"], to=TensorProto.INT64)], {"x": edge_f32(9)}, ["y"]),
    Case(
        "Cast-i64-f32",
        [N("Cast", ["x"], to=TensorProto.FLOAT)],
        {"x": ints(9, low=-(2**40), high=2**40)},
        ["y"],
    ),
    Case("Cast-f32-bool", [N("Cast", ["x"], to=TensorProto.BOOL)], {"x": edge_f32(9)}, ["y"]),
    Case("Cast-bool-f32", [N("Cast", ["x"], to=TensorProto.FLOAT)], {"x": bools(9)}, ["y"]),
    Case("Cast-i64-i32", [N("Cast", ["x"], to=TensorProto.INT32)], {"x": ints(9)}, ["y"]),
    Case("Cast-f32-f64", [N("Cast", ["x"], to=TensorProto.DOUBLE)], {"x": f32(9)}, ["y"]),
    Case(
        "Clip",
        [N("Clip", ["x", "lo", "hi"])],
        {"x": f32(4, 5)},
        ["y"],
        {"lo": np.array(-1.0, np.float32), "hi": np.array(0.5, np.float32)},
    ),
    Case(
        "Clip-min-only",
        [N("Clip", ["x", "lo"])],
        {"x": ints(8)},
        ["y"],
        {"lo": np.array(0, np.int64)},
    ),
    Case("Clip-opset6", [N("Clip", ["x"], min=-0.5, max=2.0)], {"x": f32(8)}, ["y"], opset=6),
    Case(
        "Where",
        [N("Where", ["c", "a", "b"])],
        {"c": bools(3, 4), "a": f32(4), "b": f32(3, 1)},
        ["y"],
    ),
    _binary("Equal", ints(3, 4, low=0, high=3), ints(4, low=0, high=3)),
    _binary("Less", edge_f32(3, 4), edge_f32(3, 4)),
    _binary("Greater", edge_f32(3, 4), edge_f32(4)),
    _binary("LessOrEqual", ints(3, 4, low=0, high=3), ints(3, 4, low=0, high=3)),
    _binary("GreaterOrEqual", edge_f32(3, 4), edge_f32(3, 4)),
    _unary("Not", bools(5)),
    _binary("And", bools(2, 3), bools(3)),
    _binary("Or", bools(2, 3), bools(2, 3)),
    _binary("Xor", bools(2, 3), bools(2, 3)),
    Case(
        "ReduceSum",
        [N("ReduceSum", ["x", "ax"], keepdims=0)],
        {"x": f32(3, 4, 5)},
        ["y"],
        {"ax": _i64(0, 2)},
    ),
    Case("ReduceSum-all", [N("ReduceSum", ["x"])], {"x": ints(3, 4)}, ["y"]),
    Case("ReduceMean", [N("ReduceMean", ["x"], axes=[1])], {"x": f32(3, 4, 5)}, ["y"]),
    Case("ReduceMax", [N("ReduceMax", ["x"], axes=[-1], keepdims=0)], {"x": f32(3, 4)}, ["y"]),
    Case("ReduceMin", [N("ReduceMin", ["x"], axes=[0])], {"x": ints(3, 4)}, ["y"]),
    Case("MatMul", [N("MatMul", ["a", "b"])], {"a": f32(3, 4), "b": f32(4, 5)}, ["y"]),
    Case("MatMul-batched", [N("MatMul", ["a", "b"])], {"a": f32(2, 3, 4), "b": f32(4, 5)}, ["y"]),
    Case("MatMul-vector", [N("MatMul", ["a", "b"])], {"a": f32(4), "b": f32(4, 5)}, ["y"]),
    Case(
        "Gemm",
        [N("Gemm", ["a", "b", "c"], alpha=0.5, beta=2.0, transB=1)],
        {"a": f32(3, 4), "b": f32(5, 4), "c": f32(5)},
        ["y"],
    ),
    Case("Gemm-transA", [N("Gemm", ["a", "b"], transA=1)], {"a": f32(4, 3), "b": f32(4, 2)}, ["y"]),
    Case("Expand", [N("Expand", ["x", "s"])], {"x": f32(3, 1)}, ["y"], {"s": _i64(2, 3, 4)}),
    Case("Dropout", [N("Dropout", ["x"])], {"x": f32(3, 4)}, ["y"]),
    Case(
        "Shape-Reshape",
        [
            N("Shape", ["x"], ["s"]),
            N("Gather", ["s", "zero"], ["n"]),
            N("Unsqueeze", ["n", "ax"], ["n1"]),
            N("Concat", ["n1", "m1"], ["shape"], axis=0),
            N("Reshape", ["x", "shape"]),
        ],
        {"x": f32(2, 3, 4)},
        ["y"],
        {"zero": np.array(0, np.int64), "ax": _i64(0), "m1": _i64(-1)},
    ),
    Case(
        "ConstantOfShape",
        [
            N(
                "ConstantOfShape",
                ["s"],
                ["z"],
                value=numpy_helper.from_array(np.array([1.5], np.float32)),
            ),
            N("Add", ["x", "z"]),
        ],
        {"x": f32(2, 3)},
        ["y"],
        {"s": _i64(2, 3)},
    ),
    Case(
        "Constant",
        [N("Constant", [], ["k"], value_floats=[1.0, 2.0, 3.0]), N("Mul", ["x", "k"])],
        {"x": f32(2, 3)},
        ["y"],
    ),
    # Segment sum (message passing): messages added into their destination nodes.
    Case(
        "ScatterElements-add",
        [N("ScatterElements", ["d", "i", "u"], axis=0, reduction="add")],
        {"d": f32(5, 3), "i": ints(7, 3, low=0, high=5), "u": f32(7, 3)},
        ["y"],
    ),
    Case(
        "ScatterElements",
        [N("ScatterElements", ["d", "i", "u"], axis=1)],
        {"d": f32(2, 4), "u": f32(2, 2)},
        ["y"],
        {"i": np.array([[3, 0], [-1, 1]], np.int64)},
    ),
    Case(
        "ScatterND-add",
        [N("ScatterND", ["d", "i", "u"], reduction="add")],
        {"d": f32(4, 3), "i": ints(5, 1, low=0, high=4), "u": f32(5, 3)},
        ["y"],
    ),
]


def _gnn_case() -> Case:
    """A graph network layer: h' = relu(h W + sum over in-edges of (h W)[src])."""
    n, f, e = 6, 4, 9
    rng = np.random.default_rng(7)
    nodes = [
        N("MatMul", ["h", "W"], ["hw"]),
        N("Gather", ["hw", "src"], ["msg"], axis=0),
        N("Unsqueeze", ["dst", "ax1"], ["dst2"]),
        N("Expand", ["dst2", "eshape"], ["dst_e"]),
        N("ScatterElements", ["zeros", "dst_e", "msg"], ["agg"], axis=0, reduction="add"),
        N("Add", ["hw", "agg"], ["pre"]),
        N("Relu", ["pre"], ["y"]),
    ]
    consts = {
        "W": rng.standard_normal((f, f)).astype(np.float32),
        "ax1": _i64(1),
        "eshape": _i64(e, f),
        "zeros": np.zeros((n, f), np.float32),
    }
    return Case(
        "gnn-layer",
        nodes,
        {"h": f32(n, f), "src": ints(e, low=0, high=n), "dst": ints(e, low=0, high=n)},
        ["y"],
        consts,
    )


def _mlp_case() -> Case:
    """An MLGO-style policy: Gemm, Relu, Gemm, LogSoftmax, ArgMax."""
    rng = np.random.default_rng(3)
    nodes = [
        N("Gemm", ["x", "W1", "b1"], ["h"], transB=1),
        N("Relu", ["h"], ["r"]),
        N("Gemm", ["r", "W2", "b2"], ["logits"]),
        N("LogSoftmax", ["logits"], ["logp"], axis=1),
        N("ArgMax", ["logp"], ["y"], axis=1, keepdims=0),
    ]
    consts = {
        "W1": rng.standard_normal((16, 10)).astype(np.float32),
        "b1": rng.standard_normal(16).astype(np.float32),
        "W2": rng.standard_normal((16, 4)).astype(np.float32),
        "b2": rng.standard_normal(4).astype(np.float32),
    }
    return Case("mlp-policy", nodes, {"x": f32(1, 10)}, ["logp", "y"], consts)


CASES += [_gnn_case(), _mlp_case()]


def _compile(case: Case, tmp: Path) -> tuple[Path, Path]:
    model = case.model(np.random.default_rng(0))
    onnx_path = tmp / f"{case.id}.onnx"
    onnx.save(model, onnx_path)
    so = compile_onnx(onnx_path, tmp / f"{case.id}.so", name="m")
    return onnx_path, so


def _assert_same(native: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], what: str) -> None:
    assert native.shape == expected.shape, what
    assert native.dtype == expected.dtype, what
    if native.dtype.kind == "f":
        np.testing.assert_allclose(native, expected, rtol=RTOL, atol=ATOL, err_msg=what)
    else:
        np.testing.assert_array_equal(native, expected, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_native_agrees_with_onnxruntime(case: Case, tmp_path: Path) -> None:
    onnx_path, so = _compile(case, tmp_path)
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    with NativeModel(so) as native:
        rng = np.random.default_rng(1)
        for trial in range(5):
            feeds = {n: g(rng) for n, g in case.inputs.items()}
            expected = dict(zip(names, session.run(None, feeds), strict=True))
            got = native.run(feeds)
            for name in names:
                _assert_same(got[name], expected[name], f"{case.id} trial {trial} {name}")


def test_every_supported_operator_is_tested() -> None:
    tested = {n.op_type for c in CASES for n in c.nodes}
    # Shape and Constant become constants at compile time; they are in the cases too.
    assert set(SUPPORTED_OPS) - tested == set()


def test_shared_object_needs_only_libc_and_libm(tmp_path: Path) -> None:
    _, so = _compile(_mlp_case(), tmp_path)
    dynamic = subprocess.run(
        ["readelf", "-d", str(so)], capture_output=True, text=True, check=True
    ).stdout
    needed = {line.split("[")[1].split("]")[0] for line in dynamic.splitlines() if "NEEDED" in line}
    assert needed and needed <= {"libc.so.6", "libm.so.6"}, needed


def test_shared_object_exports_only_the_abi(tmp_path: Path) -> None:
    _, so = _compile(_mlp_case(), tmp_path)
    lines = subprocess.run(
        ["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    # "<address> <type> <name>@@MLBRIDGE_AOT_1"; the version node itself is type A.
    exported = {line.split()[2] for line in lines if line.split()[1] != "A"}
    assert {s.split("@@")[0] for s in exported} == {f"mlbridge_aot_{f[0]}" for f in ABI_FUNCTIONS}
    assert all(s.startswith("mlbridge_aot_") and s.endswith("@@MLBRIDGE_AOT_1") for s in exported)


def test_specs_sidecar_lists_inputs_and_outputs(tmp_path: Path) -> None:
    from mlbridge.models.specs import read_tfaot_specs

    _, so = _compile(_mlp_case(), tmp_path)
    specs = read_tfaot_specs(so)
    assert [(s.name, s.type.llvm_name, s.shape) for s in specs.features] == [
        ("x", "float", (1, 10))
    ]
    assert [(s.name, s.type.llvm_name, s.shape) for s in specs.advice] == [
        ("logp", "float", (1, 4)),
        ("y", "int64_t", (1,)),
    ]


def test_unsupported_operator_names_operator_and_node(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_1", pads=[1, 1, 1, 1])
    model = helper.make_model(
        helper.make_graph([node], "g", [x], [y], [w]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    path = tmp_path / "conv.onnx"
    onnx.save(model, path)
    with pytest.raises(NativeCompileError, match=r"operator Conv \(node 'conv_1'\)"):
        compile_onnx(path, tmp_path / "conv.so", name="conv")
    assert not (tmp_path / "conv.so").exists()


def test_unsupported_attribute_names_operator_and_node(tmp_path: Path) -> None:
    case = Case(
        "scatter-bad",
        [N("ScatterElements", ["d", "i", "u"], axis=0, reduction="mul")],
        {"d": bools(3), "i": ints(2, low=0, high=3), "u": bools(2)},
        ["y"],
        opset=18,
    )
    path = tmp_path / "bad.onnx"
    onnx.save(case.model(np.random.default_rng(0)), path)
    with pytest.raises(NativeCompileError, match=r"operator ScatterElements \(node 'scatter"):
        compile_onnx(path, tmp_path / "bad.so", name="bad")


def test_dynamic_dimension_is_an_error_naming_it(tmp_path: Path) -> None:
    # Only a leading dimension can be the dynamic batch.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "n"])
    model = helper.make_model(
        helper.make_graph([N("Relu", ["x"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    with pytest.raises(
        NativeCompileError, match=r"graph input 'x' has a dynamic dimension 1 \(n\)"
    ):
        compile_onnx(path, tmp_path / "dyn.so", name="dyn")


def test_symbolic_dimension_fixed_with_dims(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    model = helper.make_model(
        helper.make_graph([N("Relu", ["x"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    so = compile_onnx(path, tmp_path / "dyn.so", name="dyn", dims={"batch": 3})
    with NativeModel(so) as native:
        assert not native.dynamic_batch  # static tables, no set_batch
        assert native.inputs[0].shape == (3, 4)
        x_value = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
        np.testing.assert_array_equal(native.run({"x": x_value})["y"], np.maximum(x_value, 0))


def test_instances_on_two_threads_give_the_sequential_answers(tmp_path: Path) -> None:
    _, so = _compile(_mlp_case(), tmp_path)
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((1, 10)).astype(np.float32) for _ in range(200)]
    with NativeModel(so) as one:
        expected = [one.run({"x": x})["logp"] for x in inputs]
    results: dict[int, list[np.ndarray[Any, Any]]] = {}

    def work(k: int) -> None:
        with NativeModel(so) as model:
            order = inputs if k == 0 else inputs[::-1]
            out = [model.run({"x": x})["logp"] for x in order]
            results[k] = out if k == 0 else out[::-1]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        for got, want in zip(results[k], expected, strict=True):
            np.testing.assert_array_equal(got, want)


def test_static_library_links_into_a_c_program(tmp_path: Path) -> None:
    case = Case("lib", [N("Add", ["a", "b"])], {"a": f32(3), "b": f32(3)}, ["y"])
    path = tmp_path / "add.onnx"
    onnx.save(case.model(np.random.default_rng(0)), path)
    lib = compile_onnx(path, tmp_path / "libadder_native.a", name="adder", static=True)
    assert (tmp_path / "adder_mlbridge.h").is_file()
    main = tmp_path / "main.c"
    main.write_text(
        """
#include <stdint.h>
#include <stdio.h>
struct mlbridge_aot_instance;
struct mlbridge_aot_instance *mlbridge_aot_adder_create(void);
void *mlbridge_aot_adder_arg_data(struct mlbridge_aot_instance *, int32_t);
const void *mlbridge_aot_adder_result_data(struct mlbridge_aot_instance *, int32_t);
int32_t mlbridge_aot_adder_run(struct mlbridge_aot_instance *);
void mlbridge_aot_adder_destroy(struct mlbridge_aot_instance *);
int main(void) {
  struct mlbridge_aot_instance *m = mlbridge_aot_adder_create();
  float *a = mlbridge_aot_adder_arg_data(m, 0), *b = mlbridge_aot_adder_arg_data(m, 1);
  for (int i = 0; i < 3; ++i) { a[i] = (float)i; b[i] = 0.5f; }
  if (mlbridge_aot_adder_run(m) != 0) return 1;
  const float *y = mlbridge_aot_adder_result_data(m, 0);
  printf("%g %g %g\\n", y[0], y[1], y[2]);
  mlbridge_aot_adder_destroy(m);
  return 0;
}
""",
        encoding="utf-8",
    )
    exe = tmp_path / "main"
    subprocess.run(["clang-22", str(main), str(lib), "-lm", "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0.5", "1.5", "2.5"]


def _builtin_onnx(name: str, out: Path) -> Path:
    from mlbridge.inliner.policy import LinearPolicy
    from mlbridge.phase_order.policy import PhasePolicy
    from mlbridge.problems import builtin_models

    (model,) = [m for m in builtin_models() if m.name == name]
    if model.task == "phase-order":
        return PhasePolicy.load(model.policy_path).to_onnx(out)
    LinearPolicy.load(model.policy_path).to_onnx(out)
    return out


def _feature_sample(spec: Any, rng: np.random.Generator, trial: int) -> np.ndarray[Any, Any]:  # noqa: ANN401
    dtype = spec.type.numpy_dtype
    if trial % 4 == 0:  # edge cases: zeros, then extremes
        return np.zeros(spec.shape, dtype)
    if trial % 4 == 1:
        big = 1e6 if spec.type.is_floating else 2**31
        return rng.choice([-big, -1, 0, 1, big], spec.shape).astype(dtype)
    if spec.type.is_floating:
        return (rng.standard_normal(spec.shape) * 10).astype(dtype)
    return rng.integers(-50, 5000, spec.shape).astype(dtype)


@pytest.mark.parametrize("name", ["inliner-oz", "phase-order-oz"])
def test_builtin_model_native_decisions_equal_onnxruntime(name: str, tmp_path: Path) -> None:
    onnx_path = _builtin_onnx(name, tmp_path / f"{name}.onnx")
    so = compile_onnx(onnx_path, tmp_path / f"{name}.so", name=name.replace("-", "_"))
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(11)
    decisions = set()
    with NativeModel(so) as native:
        for trial in range(400):
            feeds = {s.name: _feature_sample(s, rng, trial) for s in native.inputs}
            expected = session.run(None, feeds)[0]
            got = next(iter(native.run(feeds).values()))
            np.testing.assert_array_equal(got, expected, err_msg=f"{name} trial {trial}")
            decisions.add(int(got.reshape(-1)[0]))
    assert len(decisions) > 1  # the inputs reach more than one decision


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os
    import sys

    return subprocess.run(
        [sys.executable, "-m", "mlbridge", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_compile_command_writes_shared_object_and_sidecar(tmp_path: Path) -> None:
    onnx_path = tmp_path / "policy.onnx"
    onnx.save(_mlp_case().model(np.random.default_rng(0)), onnx_path)
    out = tmp_path / "out" / "policy.so"
    proc = _cli("compile", str(onnx_path), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out)
    assert (tmp_path / "out" / "policy.specs.json").is_file()
    with NativeModel(out) as native:
        assert [s.name for s in native.outputs] == ["logp", "y"]


def test_compile_command_reports_unsupported_operator(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    model = helper.make_model(
        helper.make_graph([helper.make_node("Erf", ["x"], ["y"], name="erf7")], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    onnx.save(model, tmp_path / "erf.onnx")
    proc = _cli("compile", str(tmp_path / "erf.onnx"), "-o", str(tmp_path / "erf.so"))
    assert proc.returncode == 1
    assert "operator Erf (node 'erf7')" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_models_register_native_compiles_and_records_task(tmp_path: Path) -> None:
    onnx_path = _builtin_onnx("inliner-oz", tmp_path / "inliner.onnx")
    registry = tmp_path / "registry"
    proc = _cli(
        "models", "register", "my-inliner", str(onnx_path), "--native", "--registry", str(registry)
    )
    assert proc.returncode == 0, proc.stderr
    from mlbridge.models.registry import Registry

    model = Registry(registry).get("my-inliner")
    assert model.kind == "native"
    assert model.task == "inliner"
    assert model.path.suffix == ".so"
    assert [a.name for a in model.advice] == ["inlining_decision"]
    sidecar = orjson_loads(model.path.with_name(model.path.stem + ".specs.json"))
    assert sidecar["kind"] == "native"


def orjson_loads(path: Path) -> Any:  # noqa: ANN401
    import orjson

    return orjson.loads(path.read_bytes())


# -- the dynamic batch ----------------------------------------------------------------

_BATCHES = (1, 2, 7, 0)


def _batch_model(
    nodes: list[Any],
    inputs: dict[str, tuple[Any, list[Any]]],
    outputs: list[str],
    consts: dict[str, np.ndarray[Any, Any]] | None = None,
    opset: int = 17,
) -> Any:  # noqa: ANN401
    """A graph over inputs of (numpy dtype, shape with the symbol "batch")."""
    ins = [
        helper.make_tensor_value_info(n, _ONNX_TYPES[np.dtype(t)], shape)
        for n, (t, shape) in inputs.items()
    ]
    outs = [helper.make_value_info(n, onnx.TypeProto()) for n in outputs]
    inits = [numpy_helper.from_array(v, n) for n, v in (consts or {}).items()]
    model = helper.make_model(
        helper.make_graph(nodes, "batch", ins, outs, inits),
        opset_imports=[helper.make_opsetid("", opset)],
    )
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    known = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    for out in model.graph.output:
        out.type.CopyFrom(known[out.name].type)
    onnx.checker.check_model(model)
    return model


def _batch_feeds(
    inputs: dict[str, tuple[Any, list[Any]]], rows: int, rng: np.random.Generator
) -> dict[str, np.ndarray[Any, Any]]:
    feeds = {}
    for name, (dtype, shape) in inputs.items():
        concrete = tuple(rows if d == "batch" else d for d in shape)
        if np.dtype(dtype).kind == "f":
            feeds[name] = (rng.standard_normal(concrete) * 3).astype(dtype)
        else:
            feeds[name] = rng.integers(-3, 4, concrete).astype(dtype)
    return feeds


def _assert_agrees_at_every_batch(
    model: Any,  # noqa: ANN401
    feeds: Callable[[int, np.random.Generator], dict[str, np.ndarray[Any, Any]]],
    tmp: Path,
    batches: tuple[int, ...] = _BATCHES,
) -> Path:
    onnx_path = tmp / "batch.onnx"
    onnx.save(model, onnx_path)
    so = compile_onnx(onnx_path, tmp / "batch.so", name="batch")
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    rng = np.random.default_rng(4)
    with NativeModel(so) as native:
        assert native.dynamic_batch
        assert all(s.shape[0] == -1 for s in native.outputs)
        # Twice, so that the batch grows and shrinks on one instance.
        for rows in batches + batches:
            values = feeds(rows, rng)
            expected = dict(zip(names, session.run(None, values), strict=True))
            got = native.run(values)
            for name in names:
                _assert_same(got[name], expected[name], f"batch of {rows}: {name}")
    return so


def _mlp_batch_model() -> Any:  # noqa: ANN401
    """_mlp_case's policy (Gemm, Relu, Gemm, LogSoftmax, ArgMax) with a symbolic batch."""
    case = _mlp_case()
    return _batch_model(case.nodes, {"x": (np.float32, ["batch", 10])}, case.outputs, case.consts)


def test_dynamic_batch_mlp_agrees_with_onnxruntime(tmp_path: Path) -> None:
    _assert_agrees_at_every_batch(
        _mlp_batch_model(),
        lambda rows, rng: {"x": (rng.standard_normal((rows, 10)) * 3).astype(np.float32)},
        tmp_path,
    )


def test_dynamic_batch_torch_export_agrees_with_onnxruntime(tmp_path: Path) -> None:
    """PyTorch's export with dynamic_axes: x.view(x.size(0), -1) is Shape, Gather,
    Concat and Reshape over the batch size, which must keep the batch axis."""
    torch = pytest.importorskip("torch")

    class Policy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hidden = torch.nn.Linear(10, 16)
            self.out = torch.nn.Linear(16, 4)

        def forward(self, x: Any) -> tuple[Any, Any]:  # noqa: ANN401
            logits = self.out(torch.relu(self.hidden(x.view(x.size(0), -1))))
            return torch.log_softmax(logits, dim=1), torch.argmax(logits, dim=1)

    torch.manual_seed(0)
    path = tmp_path / "torch.onnx"
    with warnings.catch_warnings():  # the TorchScript exporter is deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            Policy().eval(),
            (torch.zeros(1, 2, 5),),
            str(path),
            input_names=["x"],
            output_names=["logp", "choice"],
            dynamic_axes={"x": {0: "batch"}, "logp": {0: "batch"}, "choice": {0: "batch"}},
            dynamo=False,
            opset_version=17,
        )
    model = onnx.load(str(path))
    assert "Shape" in {n.op_type for n in model.graph.node}
    # ONNX Runtime refuses view(0, -1) at batch 0 (the native model answers no rows).
    _assert_agrees_at_every_batch(
        model,
        lambda rows, rng: {"x": rng.standard_normal((rows, 2, 5)).astype(np.float32)},
        tmp_path,
        batches=(1, 2, 7),
    )


_I = np.int64
_F = np.float32

# (id, nodes, inputs, outputs, constants)
_BatchCase = tuple[str, list[Any], dict[str, tuple[Any, list[Any]]], list[str], dict[str, Any]]

# Graphs whose rows are independent, with the batch moved across axes on the way.
BATCH_CASES: list[_BatchCase] = [
    (
        "transpose-there-and-back",
        [N("Transpose", ["x"], ["t"], perm=[1, 2, 0]), N("Relu", ["t"], ["r"]),
         N("Transpose", ["r"], ["y"], perm=[2, 0, 1])],
        {"x": (_F, ["batch", 3, 4])}, ["y"], {},
    ),
    (
        "softmax-reduce-argmax",
        [N("Softmax", ["x"], ["s"], axis=-1), N("ReduceMean", ["s", "ax"], ["m"], keepdims=0),
         N("ArgMin", ["x"], ["y"], axis=2, keepdims=1)],
        {"x": (_F, ["batch", 3, 4])}, ["m", "y"], {"ax": _i64(1)},
    ),
    (
        "concat-gather-unsqueeze-squeeze",
        [N("Concat", ["a", "b"], ["c"], axis=1), N("Gather", ["c", "idx"], ["g"], axis=1),
         N("Unsqueeze", ["g", "ax1"], ["u"]), N("Squeeze", ["u", "ax1"], ["y"])],
        {"a": (_F, ["batch", 3]), "b": (_F, ["batch", 2])}, ["y"],
        {"idx": _i64(4, 0, -1, 2), "ax1": _i64(1)},
    ),
    (
        "embedding-of-batched-ids",
        [N("Gather", ["table", "ids"], ["e"], axis=0), N("Flatten", ["e"], ["y"], axis=1)],
        {"ids": (_I, ["batch", 3])}, ["y"],
        {"table": np.arange(20, dtype=np.float32).reshape(5, 4)},
    ),
    (
        "stacked-matmul-with-static-input",
        [N("MatMul", ["x", "w"], ["m"]), N("Add", ["m", "bias"], ["y"])],
        {"x": (_F, ["batch", 2, 3]), "bias": (_F, [2, 4])}, ["y"],
        {"w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)},
    ),
    (
        "scatter-within-rows",
        [N("ScatterElements", ["x", "idx", "upd"], ["y"], axis=1, reduction="add")],
        {"x": (_F, ["batch", 4]), "idx": (_I, ["batch", 2]), "upd": (_F, ["batch", 2])},
        ["y"], {},
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", BATCH_CASES, ids=[c[0] for c in BATCH_CASES])
def test_dynamic_batch_graphs_agree_with_onnxruntime(case: _BatchCase, tmp_path: Path) -> None:
    _, nodes, inputs, outputs, consts = case
    model = _batch_model(nodes, inputs, outputs, consts, opset=18)

    def feeds(rows: int, rng: np.random.Generator) -> dict[str, np.ndarray[Any, Any]]:
        values = _batch_feeds(inputs, rows, rng)
        for name in ("ids", "idx"):  # in range
            if name in values:
                values[name] = np.abs(values[name]) % (5 if name == "ids" else 4)
        return values

    _assert_agrees_at_every_batch(model, feeds, tmp_path)


# Graphs that mix rows: each is refused at compile time, naming the node and operator
# (id, nodes, inputs, outputs, constants, the error).
MIXING_CASES: list[tuple[str, list[Any], dict[str, Any], list[str], dict[str, Any], str]] = [
    (
        "reduce-over-batch",
        [N("ReduceSum", ["x", "ax"], ["y"], keepdims=1)], {"x": (_F, ["batch", 4])}, ["y"],
        {"ax": _i64(0)},
        r"operator ReduceSum \(node 'reducesum_y'\): it reduces over the batch axis 0",
    ),
    (
        "reshape-merging-rows",
        [N("Reshape", ["x", "shape"], ["y"])], {"x": (_F, ["batch", 4])}, ["y"],
        {"shape": _i64(-1, 2)},
        r"operator Reshape \(node 'reshape_y'\): it does not keep the batch axis 0 whole",
    ),
    (
        "reshape-to-fixed-batch",
        [N("Reshape", ["x", "shape"], ["y"])], {"x": (_F, ["batch", 4])}, ["y"],
        {"shape": _i64(1, 4)},
        r"operator Reshape \(node 'reshape_y'\): its target shape \(1, 4\) is fixed",
    ),
    (
        "matmul-batch-on-the-right",
        [N("MatMul", ["w", "x"], ["y"])], {"x": (_F, ["batch", 4])}, ["y"],
        {"w": np.ones((3, 1), np.float32)},
        r"operator MatMul \(node 'matmul_y'\): the batch is axis 0 of its right operand 'x'",
    ),
    (
        "softmax-over-batch",
        [N("Softmax", ["x"], ["y"], axis=0)], {"x": (_F, ["batch", 4])}, ["y"], {},
        r"operator Softmax \(node 'softmax_y'\): it normalizes over the batch axis 0",
    ),
    (
        "segment-sum-over-batch",
        [N("ScatterElements", ["zeros", "idx", "x"], ["y"], axis=0, reduction="add")],
        {"x": (_F, ["batch", 4]), "idx": (_I, ["batch", 4])}, ["y"],
        {"zeros": np.zeros((3, 4), np.float32)},
        r"operator ScatterElements \(node 'scatterelements_y'\): it scatters batched values "
        r"into a tensor without the batch",
    ),
    (
        "concat-along-batch",
        [N("Concat", ["x", "x"], ["y"], axis=0)], {"x": (_F, ["batch", 4])}, ["y"], {},
        r"operator Concat \(node 'concat_y'\): it concatenates along the batch axis 0",
    ),
    (
        "batch-size-as-a-value",
        [N("Shape", ["x"], ["s"]), N("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
         N("ReduceMax", ["sf"], ["n"], keepdims=0), N("Div", ["x", "n"], ["y"])],
        {"x": (_F, ["batch", 4])}, ["y"], {},
        r"operator Div \(node 'div_y'\): its input 'n' depends on the size of the dynamic batch",
    ),
    (
        "output-with-the-batch-moved",
        [N("Transpose", ["x"], ["y"], perm=[1, 0])], {"x": (_F, ["batch", 4])}, ["y"], {},
        r"graph output 'y' has the batch as axis 1, not axis 0",
    ),
    (
        "output-without-the-batch",
        [N("Relu", ["x"], ["y"]), N("Abs", ["c"], ["z"])],
        {"x": (_F, ["batch", 4]), "c": (_F, [4])}, ["y", "z"], {},
        r"graph output 'z' does not depend on the rows of the batch",
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", MIXING_CASES, ids=[c[0] for c in MIXING_CASES])
def test_graphs_that_mix_rows_are_refused_naming_the_node(
    case: tuple[str, list[Any], dict[str, Any], list[str], dict[str, Any], str], tmp_path: Path
) -> None:
    _, nodes, inputs, outputs, consts, message = case
    model = _batch_model(nodes, inputs, outputs, consts, opset=18)
    path = tmp_path / "mix.onnx"
    onnx.save(model, path)
    with pytest.raises(NativeCompileError, match=message) as err:
        compile_onnx(path, tmp_path / "mix.so", name="mix")
    assert "--dim batch=N" in str(err.value)
    assert not (tmp_path / "mix.so").exists()
    # Fixing the batch compiles the same graph.
    assert compile_onnx(path, tmp_path / "mix.so", name="mix", dims={"batch": 1}).is_file()


def test_dynamic_batch_sidecar_and_exports(tmp_path: Path) -> None:
    from mlbridge.aot.abi import BATCH_FUNCTIONS
    from mlbridge.models.specs import read_tfaot_specs

    path = tmp_path / "mlp.onnx"
    onnx.save(_mlp_batch_model(), path)
    so = compile_onnx(path, tmp_path / "mlp.so", name="mlp")
    specs = read_tfaot_specs(so)
    assert [s.shape for s in specs.features] == [(-1, 10)]
    assert [s.shape for s in specs.advice] == [(-1, 4), (-1,)]
    lines = subprocess.run(
        ["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    exported = {line.split()[2].split("@@")[0] for line in lines if line.split()[1] != "A"}
    assert exported == {f"mlbridge_aot_{f[0]}" for f in ABI_FUNCTIONS + BATCH_FUNCTIONS}


def test_dynamic_batch_inputs_must_agree_on_the_rows(tmp_path: Path) -> None:
    inputs = {"a": (_F, ["batch", 3]), "b": (_F, ["batch", 3])}
    path = tmp_path / "add.onnx"
    onnx.save(_batch_model([N("Add", ["a", "b"])], inputs, ["y"]), path)
    so = compile_onnx(path, tmp_path / "add.so", name="add")
    with NativeModel(so) as native:
        a, b = np.ones((2, 3), np.float32), np.ones((3, 3), np.float32)
        with pytest.raises(NativeCompileError, match=r"inputs 'a' and 'b' have different batches"):
            native.run({"a": a, "b": b})
        np.testing.assert_array_equal(native.run({"a": a, "b": a})["y"], a + a)


def test_dynamic_batch_static_library_links_into_a_c_program(tmp_path: Path) -> None:
    path = tmp_path / "relu.onnx"
    onnx.save(_batch_model([N("Relu", ["x"])], {"x": (_F, ["batch", 2])}, ["y"]), path)
    compile_onnx(path, tmp_path / "librelu_native.a", name="relu", static=True)
    header = (tmp_path / "relu_mlbridge.h").read_text()
    assert "mlbridge_aot_relu_set_batch" in header and "F.SetBatch" in header
    main = tmp_path / "main.c"
    main.write_text(
        """
#include <stdint.h>
#include <stdio.h>
struct mlbridge_aot_instance;
struct mlbridge_aot_instance *mlbridge_aot_relu_create(void);
const int64_t *mlbridge_aot_relu_arg_shape(int32_t);
int32_t mlbridge_aot_relu_set_batch(struct mlbridge_aot_instance *, int64_t);
void *mlbridge_aot_relu_arg_data(struct mlbridge_aot_instance *, int32_t);
const void *mlbridge_aot_relu_result_data(struct mlbridge_aot_instance *, int32_t);
int32_t mlbridge_aot_relu_run(struct mlbridge_aot_instance *);
void mlbridge_aot_relu_destroy(struct mlbridge_aot_instance *);
int main(void) {
  struct mlbridge_aot_instance *m = mlbridge_aot_relu_create();
  if (mlbridge_aot_relu_set_batch(m, -1) != 1 || mlbridge_aot_relu_set_batch(m, 3) != 0)
    return 1;
  float *x = mlbridge_aot_relu_arg_data(m, 0);
  for (int i = 0; i < 6; ++i)
    x[i] = (float)(i - 3);
  if (mlbridge_aot_relu_run(m) != 0)
    return 1;
  const float *y = mlbridge_aot_relu_result_data(m, 0);
  printf("%lld", (long long)mlbridge_aot_relu_arg_shape(0)[0]);
  for (int i = 0; i < 6; ++i)
    printf(" %g", y[i]);
  printf("\\n");
  mlbridge_aot_relu_destroy(m);
  return 0;
}
""",
        encoding="utf-8",
    )
    exe = tmp_path / "main"
    subprocess.run(
        ["clang-22", str(main), str(tmp_path / "librelu_native.a"), "-lm", "-o", str(exe)],
        check=True,
    )
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["-1", "0", "0", "0", "0", "1", "2"]
