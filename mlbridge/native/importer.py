"""ONNX graph -> MLIR text (linalg, tensor, arith, math, scf on tensors).

:func:`import_onnx` reads an ONNX model with the ``onnx`` package and writes one MLIR
function in destination-passing style: every graph input is a ``memref`` argument, then
every graph output is a ``memref`` argument the function writes into. The body works on
tensors (``linalg.generic`` with ``arith``/``math`` bodies, ``tensor.insert_slice``,
``tensor.collapse_shape``/``expand_shape``, ``scf.for`` for the scatters) and is lowered
by :mod:`mlbridge.native.compile` with the stock MLIR 22 passes.

Shapes are static: every dimension of every value is known when the model is compiled
(ONNX shape inference fills in what the graph does not say). Nodes whose inputs are all
constants are evaluated at compile time with ONNX's reference implementation, so the
shape arithmetic exporters emit (``Shape`` -> ``Gather`` -> ``Concat`` -> ``Reshape``)
costs nothing at run time. An operator, attribute or element type outside
:data:`SUPPORTED_OPS` is a :class:`NativeCompileError` naming the operator and the node.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlbridge.errors import MLBridgeError

__all__ = [
    "SUPPORTED_OPS",
    "ImportedModel",
    "NativeCompileError",
    "TensorInfo",
    "import_onnx",
]


class NativeCompileError(MLBridgeError):
    """An ONNX model cannot be compiled to native code (the message says what and why)."""


# ONNX TensorProto data type -> MLIR element type.
_ONNX_TO_MLIR = {1: "f32", 11: "f64", 7: "i64", 6: "i32", 3: "i8", 9: "i1"}
_MLIR_TO_NUMPY: dict[str, Any] = {
    "f32": np.float32,
    "f64": np.float64,
    "i64": np.int64,
    "i32": np.int32,
    "i8": np.int8,
    "i1": np.bool_,
}
_ONNX_NAMES = {1: "float", 11: "double", 7: "int64", 6: "int32", 3: "int8", 9: "bool"}


def _is_float(t: str) -> bool:
    return t.startswith("f")


def _mlir_of_numpy(dtype: np.dtype[Any], where: str) -> str:
    for t, np_type in _MLIR_TO_NUMPY.items():
        if np.dtype(np_type) == dtype:
            return t
    raise NativeCompileError(f"{where}: element type {dtype} is not supported natively")


def _ttype(shape: Sequence[int], dtype: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def _mtype(shape: Sequence[int], dtype: str) -> str:
    return "memref<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def _scalar_literal(value: float | int | bool, dtype: str) -> str:
    """An MLIR attribute literal of one element (floats as exact hex bit patterns)."""
    if dtype == "f32":
        return f"0x{struct.unpack('<I', struct.pack('<f', float(value)))[0]:08X}"
    if dtype == "f64":
        return f"0x{struct.unpack('<Q', struct.pack('<d', float(value)))[0]:016X}"
    if dtype == "i1":
        return "true" if value else "false"
    return str(int(value))


def _broadcast(shapes: Sequence[Sequence[int]], where: str) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise NativeCompileError(
            f"{where}: shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast"
        ) from None


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output: its ONNX name, MLIR element type and shape.

    With ``batch``, the leading dimension is the model's dynamic batch: ``shape`` is one
    row's (its leading dimension is 1), the function computes one row, and the C wrapper
    runs it once per row (see :func:`import_onnx`).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    batch: bool = False


@dataclass(frozen=True)
class ImportedModel:
    """The MLIR module of a model and its interface.

    Attributes:
        mlir: The module's text.
        function: The MLIR function's symbol (``llvm.emit_c_interface``: the C entry
            point is ``_mlir_ciface_<function>``).
        inputs: The graph inputs, in order (the function's first arguments).
        outputs: The graph outputs, in order (the function's last arguments).
        ops: The operators the graph uses (after constant folding), sorted.
        batch_symbol: The symbolic leading dimension left dynamic (the function computes
            one row of it), or None if every dimension is static.
    """

    mlir: str
    function: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    ops: tuple[str, ...]
    batch_symbol: str | None = None


@dataclass(frozen=True)
class _Val:
    ssa: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass
class _Node:
    """The node being translated, for error messages and attributes."""

    proto: Any
    opset: int
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def op(self) -> str:
        return str(self.proto.op_type)

    @property
    def where(self) -> str:
        name = self.proto.name or (self.proto.output[0] if self.proto.output else "?")
        return f"operator {self.op} (node '{name}')"

    def fail(self, why: str) -> NativeCompileError:
        return NativeCompileError(f"{self.where}: {why}")

    def attr(self, name: str, default: Any = None) -> Any:  # noqa: ANN401
        return self.attrs.get(name, default)


class _Emitter:
    """Writes the function body; one instance per model."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 2
        self.counter = 0

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"%{prefix}{self.counter}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    def op(self, text: str) -> str:
        """Emit ``%new = text`` and return ``%new``."""
        ssa = self.fresh()
        self.emit(f"{ssa} = {text}")
        return ssa

    # -- scalar helpers (inside region bodies) --------------------------------------

    def const(self, value: float | int | bool, dtype: str) -> str:
        if dtype == "i1":  # a bool attribute carries its type
            return self.op(f"arith.constant {_scalar_literal(value, dtype)}")
        return self.op(f"arith.constant {_scalar_literal(value, dtype)} : {dtype}")

    def index_const(self, value: int) -> str:
        return self.op(f"arith.constant {int(value)} : index")

    # -- tensors --------------------------------------------------------------------

    def constant_tensor(self, array: np.ndarray[Any, Any], where: str) -> _Val:
        dtype = _mlir_of_numpy(array.dtype, where)
        shape = tuple(int(d) for d in array.shape)
        if dtype == "i1":
            body = str(array.tolist()).replace("True", "true").replace("False", "false")
            if array.ndim == 0:
                body = "true" if bool(array) else "false"
        elif array.size == 0:
            body = "[]" if array.ndim else "0"
        else:
            raw = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
            body = '"0x' + raw.hex().upper() + '"'
        ssa = self.op(f"arith.constant dense<{body}> : {_ttype(shape, dtype)}")
        return _Val(ssa, shape, dtype)

    def empty(self, shape: Sequence[int], dtype: str) -> str:
        return self.op(f"tensor.empty() : {_ttype(shape, dtype)}")

    def filled(self, shape: Sequence[int], dtype: str, value: float | int | bool) -> str:
        init = self.empty(shape, dtype)
        scalar = self.const(value, dtype)
        t = _ttype(shape, dtype)
        return self.op(f"linalg.fill ins({scalar} : {dtype}) outs({init} : {t}) -> {t}")

    def generic(
        self,
        ins: Sequence[_Val],
        in_maps: Sequence[Sequence[str]],
        outs: Sequence[tuple[str, tuple[int, ...], str]],
        out_maps: Sequence[Sequence[str]],
        iterators: Sequence[str],
        body: Callable[[list[str], list[str]], list[str]],
    ) -> list[_Val]:
        """A ``linalg.generic``; ``outs`` are (init ssa, shape, dtype); body yields."""
        dims = ", ".join(f"d{i}" for i in range(len(iterators)))
        maps = [f"affine_map<({dims}) -> ({', '.join(m)})>" for m in list(in_maps) + list(out_maps)]
        its = ", ".join(f'"{it}"' for it in iterators)
        ins_text = ", ".join(v.ssa for v in ins)
        ins_types = ", ".join(_ttype(v.shape, v.dtype) for v in ins)
        outs_text = ", ".join(o[0] for o in outs)
        outs_types = ", ".join(_ttype(o[1], o[2]) for o in outs)
        results = [self.fresh() for _ in outs]
        head = ", ".join(results)
        ins_part = f"ins({ins_text} : {ins_types}) " if ins else ""
        self.emit(
            f"{head} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
            f"iterator_types = [{its}]}} {ins_part}outs({outs_text} : {outs_types}) {{"
        )
        in_args = [self.fresh("b") for _ in ins]
        out_args = [self.fresh("b") for _ in outs]
        arg_decls = [f"{a}: {v.dtype}" for a, v in zip(in_args, ins, strict=True)]
        arg_decls += [f"{a}: {o[2]}" for a, o in zip(out_args, outs, strict=True)]
        self.emit(f"^bb0({', '.join(arg_decls)}):")
        self.indent += 1
        yielded = body(in_args, out_args)
        types = ", ".join(o[2] for o in outs)
        self.emit(f"linalg.yield {', '.join(yielded)} : {types}")
        self.indent -= 1
        if len(outs) == 1:
            self.emit(f"}} -> {outs_types}")
        else:
            self.emit(f"}} -> ({outs_types})")
        return [_Val(r, o[1], o[2]) for r, o in zip(results, outs, strict=True)]

    def elementwise(
        self,
        ins: Sequence[_Val],
        out_dtype: str,
        fn: Callable[[list[str]], str],
        where: str,
        shape: Sequence[int] | None = None,
    ) -> _Val:
        """Numpy-broadcasting elementwise op; ``fn`` maps block arguments to the result."""
        out_shape = _broadcast([v.shape for v in ins] + ([shape] if shape else []), where)
        rank = len(out_shape)
        maps = []
        for v in ins:
            off = rank - v.rank
            maps.append(
                [
                    "0" if v.shape[i] == 1 and out_shape[off + i] != 1 else f"d{off + i}"
                    for i in range(v.rank)
                ]
            )
        init = self.empty(out_shape, out_dtype)
        return self.generic(
            ins,
            maps,
            [(init, out_shape, out_dtype)],
            [[f"d{i}" for i in range(rank)]],
            ["parallel"] * rank,
            lambda a, _o: [fn(a)],
        )[0]

    def reshape(self, v: _Val, shape: Sequence[int]) -> _Val:
        shape = tuple(int(d) for d in shape)
        if shape == v.shape:
            return v
        cur = v
        if cur.rank > 1 or (cur.rank == 1 and len(shape) == 0):
            target: tuple[int, ...] = (math.prod(cur.shape),) if shape else ()
            groups = f"[[{', '.join(str(i) for i in range(cur.rank))}]]" if shape else "[]"
            ssa = self.op(
                f"tensor.collapse_shape {cur.ssa} {groups} : "
                f"{_ttype(cur.shape, cur.dtype)} into {_ttype(target, cur.dtype)}"
            )
            cur = _Val(ssa, target, cur.dtype)
        if cur.shape == shape:
            return cur
        if cur.rank == 0:
            groups = "[]"
        else:
            groups = f"[[{', '.join(str(i) for i in range(len(shape)))}]]"
        dims = ", ".join(str(d) for d in shape)
        ssa = self.op(
            f"tensor.expand_shape {cur.ssa} {groups} output_shape [{dims}] : "
            f"{_ttype(cur.shape, cur.dtype)} into {_ttype(shape, cur.dtype)}"
        )
        return _Val(ssa, shape, cur.dtype)

    def reduce(
        self,
        x: _Val,
        axes: Sequence[int],
        init: float | int | bool,
        combine: Callable[[str, str], str],
        keepdims: bool,
        out_dtype: str | None = None,
    ) -> _Val:
        dtype = out_dtype or x.dtype
        axes = sorted(set(axes))
        out_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        acc = self.filled(out_shape, dtype, init)
        res = self.generic(
            [x],
            [[f"d{i}" for i in range(x.rank)]],
            [(acc, out_shape, dtype)],
            [[f"d{i}" for i in range(x.rank) if i not in axes]],
            ["reduction" if i in axes else "parallel" for i in range(x.rank)],
            lambda a, o: [combine(o[0], a[0])],
        )[0]
        if keepdims:
            res = self.reshape(res, [1 if i in axes else d for i, d in enumerate(x.shape)])
        return res


# -- scalar operations on block arguments -------------------------------------------


def _arith(e: _Emitter, op: str, dtype: str, *args: str) -> str:
    return e.op(f"{op} {', '.join(args)} : {dtype}")


def _binary(kind: str) -> Callable[[_Emitter, str, str, str], str]:
    float_ops = {
        "Add": "arith.addf",
        "Sub": "arith.subf",
        "Mul": "arith.mulf",
        "Div": "arith.divf",
        "Max": "arith.maximumf",
        "Min": "arith.minimumf",
        "Pow": "math.powf",
        "Mod": "arith.remf",
    }
    int_ops = {
        "Add": "arith.addi",
        "Sub": "arith.subi",
        "Mul": "arith.muli",
        "Div": "arith.divsi",
        "Max": "arith.maxsi",
        "Min": "arith.minsi",
    }

    def fn(e: _Emitter, dtype: str, a: str, b: str) -> str:
        table = float_ops if _is_float(dtype) else int_ops
        if dtype == "i1" or kind not in table:
            raise NativeCompileError(f"{kind} on {dtype}")
        return _arith(e, table[kind], dtype, a, b)

    return fn


_CMP = {
    "Equal": ("oeq", "eq"),
    "Less": ("olt", "slt"),
    "Greater": ("ogt", "sgt"),
    "LessOrEqual": ("ole", "sle"),
    "GreaterOrEqual": ("oge", "sge"),
}


def _cmp(e: _Emitter, pred: str, dtype: str, a: str, b: str) -> str:
    fp, ip = _CMP[pred]
    if _is_float(dtype):
        return e.op(f"arith.cmpf {fp}, {a}, {b} : {dtype}")
    return e.op(f"arith.cmpi {ip}, {a}, {b} : {dtype}")


def _cast(e: _Emitter, x: str, src: str, dst: str) -> str:
    if src == dst:
        return x
    if dst == "i1":
        zero = e.const(0, src)
        if _is_float(src):
            return e.op(f"arith.cmpf une, {x}, {zero} : {src}")
        return e.op(f"arith.cmpi ne, {x}, {zero} : {src}")
    if _is_float(src) and _is_float(dst):
        op = "arith.extf" if dst == "f64" else "arith.truncf"
        return e.op(f"{op} {x} : {src} to {dst}")
    if _is_float(src):
        return e.op(f"arith.fptosi {x} : {src} to {dst}")
    if _is_float(dst):
        op = "arith.uitofp" if src == "i1" else "arith.sitofp"
        return e.op(f"{op} {x} : {src} to {dst}")
    sbits, dbits = int(src[1:]), int(dst[1:])
    if dbits > sbits:
        op = "arith.extui" if src == "i1" else "arith.extsi"
        return e.op(f"{op} {x} : {src} to {dst}")
    return e.op(f"arith.trunci {x} : {src} to {dst}")


#: The ONNX operators (default domain) the native compiler translates.
SUPPORTED_OPS: tuple[str, ...] = tuple(
    sorted(
        {
            "Abs", "Add", "And", "ArgMax", "ArgMin", "Cast", "Ceil", "Clip", "Concat",
            "Constant", "ConstantOfShape", "Div", "Dropout", "Equal", "Exp", "Expand",
            "Flatten", "Floor", "Gather", "Gemm", "Greater", "GreaterOrEqual", "Identity",
            "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "MatMul", "Max",
            "Min", "Mod", "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal", "ReduceMax",
            "ReduceMean", "ReduceMin", "ReduceSum", "Relu", "Reshape", "ScatterElements",
            "ScatterND", "Shape", "Sigmoid", "Sign", "Softmax", "Sqrt", "Squeeze", "Sub",
            "Tanh", "Transpose", "Unsqueeze", "Where", "Xor",
        }
    )
)  # fmt: skip

# The attributes each operator may carry (every one is honoured); any other is an error.
_ATTRIBUTES: dict[str, set[str]] = {
    "ArgMax": {"axis", "keepdims", "select_last_index"},
    "ArgMin": {"axis", "keepdims", "select_last_index"},
    "Cast": {"to", "saturate"},  # saturate: float8 only, which is refused
    "Clip": {"min", "max"},
    "Concat": {"axis"},
    "Constant": {"value", "value_float", "value_floats", "value_int", "value_ints"},
    "ConstantOfShape": {"value"},
    "Dropout": {"seed", "ratio"},
    "Flatten": {"axis"},
    "Gather": {"axis"},
    "Gemm": {"alpha", "beta", "transA", "transB"},
    "LeakyRelu": {"alpha"},
    "LogSoftmax": {"axis"},
    "Mod": {"fmod"},
    "ReduceMax": {"axes", "keepdims", "noop_with_empty_axes"},
    "ReduceMean": {"axes", "keepdims", "noop_with_empty_axes"},
    "ReduceMin": {"axes", "keepdims", "noop_with_empty_axes"},
    "ReduceSum": {"axes", "keepdims", "noop_with_empty_axes"},
    "Reshape": {"allowzero"},
    "ScatterElements": {"axis", "reduction"},
    "ScatterND": {"reduction"},
    "Shape": {"start", "end"},
    "Softmax": {"axis"},
    "Squeeze": {"axes"},
    "Transpose": {"perm"},
    "Unsqueeze": {"axes"},
}

_UNARY_FLOAT = {
    "Exp": "math.exp",
    "Log": "math.log",
    "Sqrt": "math.sqrt",
    "Tanh": "math.tanh",
    "Floor": "math.floor",
    "Ceil": "math.ceil",
}


class _Translator:
    def __init__(
        self,
        model: Any,  # noqa: ANN401
        name: str,
        batch_symbol: str | None = None,
        batch_inputs: frozenset[str] = frozenset(),
    ) -> None:
        import onnx

        self.onnx = onnx
        self.model = model
        self.name = name
        # The dynamic batch (see import_onnx): the graph is translated at batch 1 while
        # the batch axis of every value is tracked (None: the value does not depend on
        # the batch rows), and every constant that depends on the batch size (a Shape of
        # a batched value, and what is folded from it) is also evaluated at batch 2, in
        # consts2 (None: it cannot be evaluated there).
        self.batch_symbol = batch_symbol
        self.batch_inputs = batch_inputs
        self.batch_axis: dict[str, int | None] = {}
        self.consts2: dict[str, np.ndarray[Any, Any] | None] = {}
        self.e = _Emitter()
        self.values: dict[str, _Val] = {}
        self.consts: dict[str, np.ndarray[Any, Any]] = {}
        self.types: dict[str, tuple[str | None, tuple[int, ...] | None]] = {}
        self.opset = 1
        for imp in model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                self.opset = int(imp.version)
        self.used_ops: set[str] = set()

    # -- values -----------------------------------------------------------------------

    def value(self, name: str, node: _Node) -> _Val:
        if name in self.values:
            return self.values[name]
        if name in self.consts2:
            raise self._batch_size_used(node, name)
        if name in self.consts:
            v = self.e.constant_tensor(self.consts[name], node.where)
            self.values[name] = v
            return v
        raise node.fail(f"input '{name}' is not defined before the node")

    def const_of(
        self, name: str, node: _Node, what: str, *, batch_dependent: bool = False
    ) -> np.ndarray[Any, Any]:
        """A constant input; ``batch_dependent``: the caller checks its batch-2 value."""
        if name not in self.consts:
            raise node.fail(
                f"its {what} ('{name}') must be a constant (an initializer or computed from "
                "constants and static shapes) for native compilation"
            )
        if name in self.consts2 and not batch_dependent:
            raise self._batch_size_used(node, name)
        return self.consts[name]

    def _batch_size_used(self, node: _Node, name: str) -> NativeCompileError:
        return node.fail(
            f"its input '{name}' depends on the size of the dynamic batch "
            f"'{self.batch_symbol}' (it is computed from a Shape), which a model compiled "
            "one row at a time cannot use; fix the batch with --dim "
            f"{self.batch_symbol}=N (dims={{'{self.batch_symbol}': N}})"
        )

    def optional(self, node: _Node, i: int) -> str | None:
        ins = node.proto.input
        return ins[i] if i < len(ins) and ins[i] else None

    # -- driver -----------------------------------------------------------------------

    def run(self) -> ImportedModel:
        onnx = self.onnx
        graph = self.model.graph
        from onnx import numpy_helper

        for init in graph.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)
        for vi in list(graph.value_info) + list(graph.output) + list(graph.input):
            self.types[vi.name] = self._type_of(vi)
        inputs: list[TensorInfo] = []
        for vi in graph.input:
            if vi.name in self.consts:
                continue
            dtype, shape = self._io_type(vi, "input")
            inputs.append(TensorInfo(vi.name, dtype, shape, vi.name in self.batch_inputs))
        batched = self.batch_symbol is not None
        outputs = [
            TensorInfo(vi.name, *self._io_type(vi, "output"), batch=batched) for vi in graph.output
        ]
        if not inputs:
            raise NativeCompileError("the graph has no inputs")
        for i, t in enumerate(inputs):
            ssa = self.e.op(
                f"bufferization.to_tensor %arg{i} restrict : {_mtype(t.shape, t.dtype)} to "
                f"{_ttype(t.shape, t.dtype)}"
            )
            self.values[t.name] = _Val(ssa, t.shape, t.dtype)
            self.batch_axis[t.name] = 0 if t.batch else None
        for proto in graph.node:
            self._node(proto)
        n_in = len(inputs)
        for j, t in enumerate(outputs):
            node = _Node(graph.node[-1] if graph.node else onnx.NodeProto(), self.opset)
            if t.name not in self.values and t.name not in self.consts:
                raise NativeCompileError(f"graph output '{t.name}' is not computed by any node")
            if batched:
                self._check_batched_output(t.name)
            v = self.value(t.name, node)
            if v.shape != t.shape or v.dtype != t.dtype:
                raise NativeCompileError(
                    f"graph output '{t.name}': the graph declares {_ttype(t.shape, t.dtype)} "
                    f"but its node computes {_ttype(v.shape, v.dtype)}"
                )
            self.e.emit(
                f"bufferization.materialize_in_destination {v.ssa} in restrict writable "
                f"%arg{n_in + j} : ({_ttype(t.shape, t.dtype)}, {_mtype(t.shape, t.dtype)}) "
                "-> ()"
            )
        args = [f"%arg{i}: {_mtype(t.shape, t.dtype)}" for i, t in enumerate(inputs + outputs)]
        function = f"mlbridge_native_{self.name}"
        text = "\n".join(
            [
                "module {",
                f"  func.func @{function}({', '.join(args)}) attributes "
                "{llvm.emit_c_interface} {",
                *self.e.lines,
                "    return",
                "  }",
                "}",
                "",
            ]
        )
        return ImportedModel(
            text,
            function,
            tuple(inputs),
            tuple(outputs),
            tuple(sorted(self.used_ops)),
            self.batch_symbol,
        )

    def _check_batched_output(self, name: str) -> None:
        """Every output of a model with a dynamic batch has the batch as its axis 0."""
        axis = self.batch_axis.get(name)
        if axis == 0:
            return
        symbol = self.batch_symbol
        if axis is None:
            why = (
                "does not depend on the rows of the batch (a constant, or computed from "
                "inputs without it, or reduced over it)"
            )
        else:
            why = f"has the batch as axis {axis}, not axis 0"
        raise NativeCompileError(
            f"graph output '{name}' {why}: with the dynamic batch '{symbol}' every output "
            f"needs one row per input row; fix the batch with --dim {symbol}=N "
            f"(dims={{'{symbol}': N}})"
        )

    def _batch_axes(self, node: _Node, results: Sequence[_Val]) -> list[int | None]:
        return _BatchRules(self, node, results).run()

    def _type_of(self, vi: Any) -> tuple[str | None, tuple[int, ...] | None]:  # noqa: ANN401
        if vi.type.WhichOneof("value") != "tensor_type":
            return None, None
        tt = vi.type.tensor_type
        dtype = _ONNX_TO_MLIR.get(tt.elem_type)
        if not tt.HasField("shape"):
            return dtype, None
        dims = []
        for d in tt.shape.dim:
            if d.WhichOneof("value") != "dim_value":
                return dtype, None
            dims.append(int(d.dim_value))
        return dtype, tuple(dims)

    def _io_type(self, vi: Any, role: str) -> tuple[str, tuple[int, ...]]:  # noqa: ANN401
        what = f"graph {role} '{vi.name}'"
        if vi.type.WhichOneof("value") != "tensor_type":
            raise NativeCompileError(f"{what} is not a tensor")
        tt = vi.type.tensor_type
        dtype = _ONNX_TO_MLIR.get(tt.elem_type)
        if dtype is None:
            type_name = self.onnx.TensorProto.DataType.Name(tt.elem_type)
            raise NativeCompileError(
                f"{what} has element type {type_name}, which native compilation does not "
                f"support (supported: {', '.join(_ONNX_NAMES.values())})"
            )
        if not tt.HasField("shape"):
            raise NativeCompileError(f"{what} has no shape; export the model with shapes")
        dims = []
        for k, d in enumerate(tt.shape.dim):
            if d.WhichOneof("value") != "dim_value" or d.dim_value <= 0:
                label = d.dim_param or "unknown"
                raise NativeCompileError(
                    f"{what} has a dynamic dimension {k} ({label}); native compilation needs "
                    "static shapes: fix it when exporting, or pass dims={'"
                    f"{label}': N}} (mlbridge compile --dim {label}=N)"
                )
            dims.append(int(d.dim_value))
        return dtype, tuple(dims)

    def _fold(self, node: _Node) -> bool:
        """Evaluate a node whose inputs are all constants; False if it is not one."""
        proto = node.proto
        inputs = [n for n in proto.input if n]
        if node.op == "Constant" or not all(n in self.consts for n in inputs):
            return False
        if not inputs and node.op not in ("ConstantOfShape",):
            return False
        onnx = self.onnx
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        undefined = onnx.TensorProto.UNDEFINED
        outputs = [n for n in proto.output if n]
        graph = helper.make_graph(
            [proto],
            "fold",
            [helper.make_tensor_value_info(n, undefined, None) for n in inputs],
            [helper.make_tensor_value_info(n, undefined, None) for n in outputs],
        )
        model = helper.make_model(graph, opset_imports=list(self.model.opset_import))
        try:
            results = ReferenceEvaluator(model).run(None, {n: self.consts[n] for n in inputs})
        except Exception as exc:  # noqa: BLE001 - the reference evaluator raises anything
            raise node.fail(f"cannot evaluate it on its constant inputs: {exc}") from None
        for out, res in zip(outputs, results, strict=True):
            self.consts[out] = np.asarray(res)
        if any(n in self.consts2 for n in inputs):
            self._fold_at_batch_2(node, model, inputs, outputs)
        return True

    def _fold_at_batch_2(
        self,
        node: _Node,
        model: Any,  # noqa: ANN401
        inputs: list[str],
        outputs: list[str],
    ) -> None:
        """Follow the batch size through a folded node (see ``consts2``).

        Every element of a batch-dependent constant with a batch-2 value is either fixed
        or exactly the batch size: Shape makes such constants, and the nodes of
        _SHAPE_PLUMBING only copy elements to places that do not depend on the batch, so
        evaluating them at batch 1 and 2 tells which elements are the batch size, and an
        output equal at both has none. Any other node (arithmetic on the batch size)
        gives constants that only a refusal can use (None).
        """
        from onnx.reference import ReferenceEvaluator

        proto = node.proto
        carriers = _SHAPE_PLUMBING.get(node.op)
        plumbing = node.op in _SHAPE_PLUMBING and (
            node.op != "Cast" or int(node.attr("to", 0)) in (6, 7)  # int32, int64
        )
        for i, n in enumerate(proto.input):
            if n in self.consts2 and (
                self.consts2[n] is None or (carriers is not None and i not in carriers)
            ):
                plumbing = False
        results2: list[Any] | None = None
        if plumbing:
            feeds2 = {n: self.consts2.get(n, self.consts[n]) for n in inputs}
            try:
                results2 = list(ReferenceEvaluator(model).run(None, feeds2))
            except Exception:  # noqa: BLE001 - the reference evaluator raises anything
                results2 = None
        for k, out in enumerate(outputs):
            value2 = None if results2 is None else np.asarray(results2[k])
            fixed = (
                value2 is not None
                and value2.shape == self.consts[out].shape
                and np.array_equal(value2, self.consts[out])
            )
            if not fixed:
                self.consts2[out] = value2

    def _node(self, proto: Any) -> None:  # noqa: ANN401
        onnx = self.onnx
        node = _Node(proto, self.opset)
        if proto.domain not in ("", "ai.onnx"):
            raise node.fail(
                f"operators of domain '{proto.domain}' are not supported natively "
                "(only the default ONNX domain)"
            )
        for a in proto.attribute:
            node.attrs[a.name] = onnx.helper.get_attribute_value(a)
        if node.op not in SUPPORTED_OPS:
            raise node.fail(
                "this operator is not supported by native compilation (supported: "
                f"{', '.join(SUPPORTED_OPS)}); use the ONNX Runtime form of the model"
            )
        unknown = sorted(set(node.attrs) - _ATTRIBUTES.get(node.op, set()))
        if unknown:
            raise node.fail(
                f"attribute {', '.join(unknown)} is not supported by native compilation"
            )
        if node.op == "Shape":
            x = self.values.get(proto.input[0])
            if x is None and proto.input[0] not in self.consts:
                raise node.fail(f"input '{proto.input[0]}' is not defined before the node")
            shape = x.shape if x is not None else self.consts[proto.input[0]].shape
            start, end = node.attr("start", 0), node.attr("end", None)
            self.consts[proto.output[0]] = np.array(shape[start:end], dtype=np.int64)
            axis = self.batch_axis.get(proto.input[0])
            if axis is not None:  # the size of the batch, at batch 2
                shape2 = list(shape)
                shape2[axis] = 2
                self.consts2[proto.output[0]] = np.array(shape2[start:end], dtype=np.int64)
            elif proto.input[0] in self.consts2:
                other = self.consts2[proto.input[0]]
                self.consts2[proto.output[0]] = (
                    None if other is None else np.array(other.shape[start:end], dtype=np.int64)
                )
            if proto.output[0] in self.consts2:
                other = self.consts2[proto.output[0]]
                if other is not None and np.array_equal(other, self.consts[proto.output[0]]):
                    del self.consts2[proto.output[0]]
            return
        if node.op == "Constant":
            self.consts[proto.output[0]] = self._constant(node)
            return
        if self._fold(node):
            return
        self.used_ops.add(node.op)
        handler = getattr(self, f"_op_{node.op}", None)
        if handler is None:
            handler = self._op_elementwise
        try:
            results = handler(node)
        except NativeCompileError as exc:
            if str(exc).startswith("operator "):
                raise
            raise node.fail(str(exc)) from None
        axes = self._batch_axes(node, results) if self.batch_symbol else [None] * len(results)
        for out, v, axis in zip(proto.output, results, axes, strict=False):
            if not out:
                continue
            self.batch_axis[out] = axis
            dtype, shape = self.types.get(out, (None, None))
            if shape is not None and shape != v.shape:
                raise node.fail(
                    f"computed shape {v.shape} for '{out}', but shape inference says {shape}"
                )
            if dtype is not None and dtype != v.dtype:
                raise node.fail(f"computed type {v.dtype} for '{out}', but the graph says {dtype}")
            self.values[out] = v

    def _constant(self, node: _Node) -> np.ndarray[Any, Any]:
        from onnx import numpy_helper

        for a in node.proto.attribute:
            if a.name == "value":
                return numpy_helper.to_array(a.t)
        simple = {
            "value_float": np.float32,
            "value_floats": np.float32,
            "value_int": np.int64,
            "value_ints": np.int64,
        }
        for key, dtype in simple.items():
            if key in node.attrs:
                return np.array(node.attrs[key], dtype=dtype)
        raise node.fail(f"attributes {sorted(node.attrs)} are not supported")

    # -- operators --------------------------------------------------------------------

    def _check_dtype(self, node: _Node, v: _Val, allowed: str) -> None:
        ok = {
            "float": _is_float(v.dtype),
            "number": v.dtype != "i1",
            "bool": v.dtype == "i1",
            "any": True,
        }[allowed]
        if not ok:
            raise node.fail(f"element type {v.dtype} is not supported for this operator")

    def _op_elementwise(self, node: _Node) -> list[_Val]:
        op = node.op
        e = self.e
        ins = [self.value(n, node) for n in node.proto.input if n]
        if op == "Mod":
            return [self._mod(node, ins)]
        if op in ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"):
            for v in ins:
                self._check_dtype(node, v, "number")
            if len({v.dtype for v in ins}) != 1 and op != "Pow":
                raise node.fail(f"mixed element types {[v.dtype for v in ins]}")
            if op == "Pow" and not (_is_float(ins[0].dtype) and ins[0].dtype == ins[1].dtype):
                raise node.fail("only float base and exponent of the same type are supported")
            fn = _binary(op)
            dtype = ins[0].dtype

            def body(a: list[str]) -> str:
                acc = a[0]
                for b in a[1:]:
                    acc = fn(e, dtype, acc, b)
                return acc

            return [e.elementwise(ins, dtype, body, node.where)]
        if op in _CMP:
            if ins[0].dtype != ins[1].dtype:
                raise node.fail("inputs of different element types")
            if ins[0].dtype == "i1" and op != "Equal":
                raise node.fail("bool inputs are only supported by Equal")
            return [
                e.elementwise(
                    ins, "i1", lambda a: _cmp(e, op, ins[0].dtype, a[0], a[1]), node.where
                )
            ]
        if op in ("And", "Or", "Xor"):
            for v in ins:
                self._check_dtype(node, v, "bool")
            name = {"And": "arith.andi", "Or": "arith.ori", "Xor": "arith.xori"}[op]
            return [e.elementwise(ins, "i1", lambda a: _arith(e, name, "i1", *a), node.where)]
        x = ins[0]
        dtype = x.dtype
        if op == "Not":
            self._check_dtype(node, x, "bool")
            return [
                e.elementwise(
                    ins, "i1", lambda a: _arith(e, "arith.xori", "i1", a[0], e.const(1, "i1")),
                    node.where,
                )
            ]  # fmt: skip
        if op in _UNARY_FLOAT:
            self._check_dtype(node, x, "float")
            name = _UNARY_FLOAT[op]
            return [e.elementwise(ins, dtype, lambda a: _arith(e, name, dtype, a[0]), node.where)]
        self._check_dtype(node, x, "number")
        flt = _is_float(dtype)

        def unary(a: list[str]) -> str:
            v = a[0]
            zero = e.const(0, dtype)
            if op == "Abs":
                return _arith(e, "math.absf" if flt else "math.absi", dtype, v)
            if op == "Neg":
                return (
                    _arith(e, "arith.negf", dtype, v)
                    if flt
                    else _arith(e, "arith.subi", dtype, zero, v)
                )
            if op == "Relu":
                pos = _cmp(e, "Greater", dtype, v, zero)
                return e.op(f"arith.select {pos}, {v}, {zero} : {dtype}")
            if op == "LeakyRelu":
                alpha = e.const(node.attr("alpha", 0.01), dtype)
                pos = _cmp(e, "GreaterOrEqual", dtype, v, zero)
                scaled = _arith(e, "arith.mulf", dtype, v, alpha)
                return e.op(f"arith.select {pos}, {v}, {scaled} : {dtype}")
            if op == "Sigmoid":
                one = e.const(1, dtype)
                neg = _arith(e, "arith.negf", dtype, v)
                ex = _arith(e, "math.exp", dtype, neg)
                den = _arith(e, "arith.addf", dtype, one, ex)
                return _arith(e, "arith.divf", dtype, one, den)
            if op == "Sign":
                one, minus = e.const(1, dtype), e.const(-1, dtype)
                pos = _cmp(e, "Greater", dtype, v, zero)
                neg = _cmp(e, "Less", dtype, v, zero)
                m = e.op(f"arith.select {neg}, {minus}, {zero} : {dtype}")
                return e.op(f"arith.select {pos}, {one}, {m} : {dtype}")
            if op == "Reciprocal":
                return _arith(e, "arith.divf", dtype, e.const(1, dtype), v)
            raise node.fail("unsupported")

        if op in ("LeakyRelu", "Sigmoid", "Reciprocal"):
            self._check_dtype(node, x, "float")
        return [e.elementwise(ins, dtype, unary, node.where)]

    def _mod(self, node: _Node, ins: list[_Val]) -> _Val:
        """ONNX Mod: fmod=1 is C's fmod (the dividend's sign).

        fmod=0 (integers only) takes the divisor's sign, like Python's %.
        """
        e = self.e
        a, b = ins
        if a.dtype != b.dtype or a.dtype == "i1":
            raise node.fail(f"inputs of types {a.dtype} and {b.dtype} are not supported")
        dtype = a.dtype
        fmod = bool(node.attr("fmod", 0))
        if _is_float(dtype) and not fmod:
            raise node.fail("fmod=0 on floats is not valid ONNX (use fmod=1)")

        def body(v: list[str]) -> str:
            if fmod:
                return _arith(e, "arith.remf" if _is_float(dtype) else "arith.remsi", dtype, *v)
            r = _arith(e, "arith.remsi", dtype, v[0], v[1])
            zero = e.const(0, dtype)
            nonzero = e.op(f"arith.cmpi ne, {r}, {zero} : {dtype}")
            r_neg = e.op(f"arith.cmpi slt, {r}, {zero} : {dtype}")
            b_neg = e.op(f"arith.cmpi slt, {v[1]}, {zero} : {dtype}")
            differ = e.op(f"arith.xori {r_neg}, {b_neg} : i1")
            fix = e.op(f"arith.andi {nonzero}, {differ} : i1")
            shifted = _arith(e, "arith.addi", dtype, r, v[1])
            return e.op(f"arith.select {fix}, {shifted}, {r} : {dtype}")

        return e.elementwise(ins, dtype, body, node.where)

    def _op_Identity(self, node: _Node) -> list[_Val]:
        return [self.value(node.proto.input[0], node)]

    def _op_Dropout(self, node: _Node) -> list[_Val]:
        if len(node.proto.output) > 1 and node.proto.output[1]:
            raise node.fail("its mask output is not supported (inference only)")
        training = self.optional(node, 2)
        if training and bool(self.const_of(training, node, "training_mode")):
            raise node.fail("training_mode=true is not supported (inference only)")
        return [self.value(node.proto.input[0], node)]

    def _op_Cast(self, node: _Node) -> list[_Val]:
        x = self.value(node.proto.input[0], node)
        to = _ONNX_TO_MLIR.get(int(node.attr("to")))
        if to is None:
            name = self.onnx.TensorProto.DataType.Name(int(node.attr("to")))
            raise node.fail(f"casting to {name} is not supported")
        if to == x.dtype:
            return [x]
        e = self.e
        return [e.elementwise([x], to, lambda a: _cast(e, a[0], x.dtype, to), node.where)]

    def _op_Clip(self, node: _Node) -> list[_Val]:
        e = self.e
        x = self.value(node.proto.input[0], node)
        self._check_dtype(node, x, "number")
        bounds: list[_Val | None] = []
        if self.opset < 11:
            for key in ("min", "max"):
                if key in node.attrs:
                    arr = np.array(node.attrs[key], dtype=_MLIR_TO_NUMPY[x.dtype])
                    bounds.append(e.constant_tensor(arr, node.where))
                else:
                    bounds.append(None)
        else:
            for i in (1, 2):
                name = self.optional(node, i)
                bounds.append(self.value(name, node) if name else None)
        ins = [x] + [b for b in bounds if b is not None]
        has_min, has_max = bounds[0] is not None, bounds[1] is not None
        dtype = x.dtype

        def body(a: list[str]) -> str:
            v = a[0]
            k = 1
            if has_min:
                lo = a[k]
                k += 1
                below = _cmp(e, "Less", dtype, v, lo)
                v = e.op(f"arith.select {below}, {lo}, {v} : {dtype}")
            if has_max:
                hi = a[k]
                above = _cmp(e, "Greater", dtype, v, hi)
                v = e.op(f"arith.select {above}, {hi}, {v} : {dtype}")
            return v

        return [e.elementwise(ins, dtype, body, node.where)]

    def _op_Where(self, node: _Node) -> list[_Val]:
        e = self.e
        c, x, y = (self.value(n, node) for n in node.proto.input)
        if c.dtype != "i1" or x.dtype != y.dtype:
            raise node.fail("needs a bool condition and two inputs of one element type")
        return [
            e.elementwise(
                [c, x, y], x.dtype,
                lambda a: e.op(f"arith.select {a[0]}, {a[1]}, {a[2]} : {x.dtype}"), node.where,
            )
        ]  # fmt: skip

    def _op_Expand(self, node: _Node) -> list[_Val]:
        x = self.value(node.proto.input[0], node)
        shape = [int(d) for d in self.const_of(node.proto.input[1], node, "shape")]
        return [self.e.elementwise([x], x.dtype, lambda a: a[0], node.where, shape)]

    def _op_ConstantOfShape(self, node: _Node) -> list[_Val]:  # only reached with a value
        raise node.fail("its shape must be a constant")

    def _matmul_core(self, a: _Val, b: _Val, node: _Node) -> _Val:
        e = self.e
        if a.dtype != b.dtype or a.dtype == "i1":
            raise node.fail(f"inputs of types {a.dtype} and {b.dtype} are not supported")
        a_vec, b_vec = a.rank == 1, b.rank == 1
        if a_vec:
            a = e.reshape(a, (1, a.shape[0]))
        if b_vec:
            b = e.reshape(b, (b.shape[0], 1))
        if a.shape[-1] != b.shape[-2]:
            raise node.fail(f"inner dimensions differ: {a.shape} x {b.shape}")
        batch = _broadcast([a.shape[:-2], b.shape[:-2]], node.where)
        nb = len(batch)
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        out_shape = (*batch, m, n)
        # loops: batch..., i, j, k
        di, dj, dk = f"d{nb}", f"d{nb + 1}", f"d{nb + 2}"

        def bmap(v: _Val) -> list[str]:
            off = nb - (v.rank - 2)
            return [
                "0" if v.shape[i] == 1 and batch[off + i] != 1 else f"d{off + i}"
                for i in range(v.rank - 2)
            ]

        dtype = a.dtype
        acc = e.filled(out_shape, dtype, 0)
        flt = _is_float(dtype)

        def body(x: list[str], o: list[str]) -> list[str]:
            if not flt:
                p = _arith(e, "arith.muli", dtype, x[0], x[1])
                return [_arith(e, "arith.addi", dtype, o[0], p)]
            # The sum may be reassociated (as ONNX Runtime's and XLA's kernels do): LLVM
            # then vectorizes the dot products.
            p = e.op(f"arith.mulf {x[0]}, {x[1]} fastmath<reassoc,contract> : {dtype}")
            return [e.op(f"arith.addf {o[0]}, {p} fastmath<reassoc,contract> : {dtype}")]

        res = e.generic(
            [a, b],
            [bmap(a) + [di, dk], bmap(b) + [dk, dj]],
            [(acc, out_shape, dtype)],
            [[f"d{i}" for i in range(nb)] + [di, dj]],
            ["parallel"] * (nb + 2) + ["reduction"],
            body,
        )[0]
        del k
        if a_vec and b_vec:
            return e.reshape(res, out_shape[:-2])
        if a_vec:
            return e.reshape(res, (*out_shape[:-2], n))
        if b_vec:
            return e.reshape(res, (*out_shape[:-2], m))
        return res

    def _op_MatMul(self, node: _Node) -> list[_Val]:
        a, b = (self.value(n, node) for n in node.proto.input)
        return [self._matmul_core(a, b, node)]

    def _op_Gemm(self, node: _Node) -> list[_Val]:
        e = self.e
        a = self.value(node.proto.input[0], node)
        b = self.value(node.proto.input[1], node)
        if a.rank != 2 or b.rank != 2:
            raise node.fail("A and B must be 2-D")
        if node.attr("transA", 0):
            a = self._transpose(a, [1, 0])
        if node.attr("transB", 0):
            b = self._transpose(b, [1, 0])
        y = self._matmul_core(a, b, node)
        dtype = y.dtype
        alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
        if alpha != 1.0:
            y = e.elementwise(
                [y], dtype, lambda v: _arith(e, "arith.mulf", dtype, v[0], e.const(alpha, dtype)),
                node.where,
            )  # fmt: skip
        c_name = self.optional(node, 2)
        if c_name and beta != 0.0:
            c = self.value(c_name, node)

            def add(v: list[str]) -> str:
                cc = v[1]
                if beta != 1.0:
                    cc = _arith(e, "arith.mulf", dtype, cc, e.const(beta, dtype))
                return _arith(e, "arith.addf", dtype, v[0], cc)

            y = e.elementwise([y, c], dtype, add, node.where)
            if y.shape != (a.shape[0], b.shape[1]):
                raise node.fail(f"C of shape {c.shape} does not broadcast to the output")
        return [y]

    def _transpose(self, x: _Val, perm: Sequence[int]) -> _Val:
        e = self.e
        out_shape = tuple(x.shape[p] for p in perm)
        inv = [0] * len(perm)
        for j, p in enumerate(perm):
            inv[p] = j
        init = e.empty(out_shape, x.dtype)
        return e.generic(
            [x],
            [[f"d{inv[i]}" for i in range(x.rank)]],
            [(init, out_shape, x.dtype)],
            [[f"d{i}" for i in range(x.rank)]],
            ["parallel"] * x.rank,
            lambda a, _o: [a[0]],
        )[0]

    def _op_Transpose(self, node: _Node) -> list[_Val]:
        x = self.value(node.proto.input[0], node)
        perm = node.attr("perm") or list(reversed(range(x.rank)))
        return [self._transpose(x, [int(p) for p in perm])]

    def _axis(self, node: _Node, axis: int, rank: int) -> int:
        if not -rank <= axis < max(rank, 1):
            raise node.fail(f"axis {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis

    def _op_Reshape(self, node: _Node) -> list[_Val]:
        x = self.value(node.proto.input[0], node)
        target = [
            int(d) for d in self.const_of(node.proto.input[1], node, "shape", batch_dependent=True)
        ]
        shape = _reshape_target(x.shape, target, bool(node.attr("allowzero", 0)))
        if shape is None:
            raise node.fail(f"cannot reshape {x.shape} to {target}")
        return [self.e.reshape(x, shape)]

    def _op_Flatten(self, node: _Node) -> list[_Val]:
        x = self.value(node.proto.input[0], node)
        axis = int(node.attr("axis", 1))
        axis = axis + x.rank if axis < 0 else axis
        return [self.e.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))]

    def _axes_input(self, node: _Node, index: int) -> list[int] | None:
        if "axes" in node.attrs:
            return [int(a) for a in node.attrs["axes"]]
        name = self.optional(node, index)
        if name is None:
            return None
        return [int(a) for a in self.const_of(name, node, "axes").reshape(-1)]

    def _op_Squeeze(self, node: _Node) -> list[_Val]:
        x = self.value(node.proto.input[0], node)
        axes = self._axes_input(node, 1)
        if axes is None:
            axes = [i for i, d in enumerate(x.shape) if d == 1]
        axes = [self._axis(node, a, x.rank) for a in axes]
        if any(x.shape[a] != 1 for a in axes):
            raise node.fail(f"cannot squeeze axes {axes} of shape {x.shape}")
        return [self.e.reshape(x, [d for i, d in enumerate(x.shape) if i not in axes])]

    def _op_Unsqueeze(self, node: _Node) -> list[_Val]:
        x = self.value(node.proto.input[0], node)
        axes = self._axes_input(node, 1) or []
        rank = x.rank + len(axes)
        axes = sorted(self._axis(node, a, rank) for a in axes)
        dims = iter(x.shape)
        return [self.e.reshape(x, [1 if i in axes else next(dims) for i in range(rank)])]

    def _op_Concat(self, node: _Node) -> list[_Val]:
        e = self.e
        ins = [self.value(n, node) for n in node.proto.input if n]
        rank = ins[0].rank
        axis = self._axis(node, int(node.attr("axis")), rank)
        dtype = ins[0].dtype
        for v in ins:
            if (
                v.dtype != dtype
                or v.rank != rank
                or any(v.shape[i] != ins[0].shape[i] for i in range(rank) if i != axis)
            ):
                raise node.fail(f"inputs {[x.shape for x in ins]} do not concatenate on {axis}")
        out_shape = list(ins[0].shape)
        out_shape[axis] = sum(v.shape[axis] for v in ins)
        if math.prod(out_shape[:axis]) != 1:
            return [self._concat_strided(ins, axis, tuple(out_shape))]
        # Each input is one contiguous block of the output: an insert_slice each (a
        # memcpy once bufferized).
        out = e.empty(out_shape, dtype)
        offset = 0
        for v in ins:
            offs = ", ".join(str(offset) if i == axis else "0" for i in range(rank))
            sizes = ", ".join(str(d) for d in v.shape)
            ones = ", ".join("1" for _ in range(rank))
            out = e.op(
                f"tensor.insert_slice {v.ssa} into {out}[{offs}] [{sizes}] [{ones}] : "
                f"{_ttype(v.shape, dtype)} into {_ttype(out_shape, dtype)}"
            )
            offset += v.shape[axis]
        return [_Val(out, tuple(out_shape), dtype)]

    def _concat_strided(self, ins: list[_Val], axis: int, out_shape: tuple[int, ...]) -> _Val:
        """Concat where the inputs are strided blocks of the output, as one generic op.

        The element at ``p`` along ``axis`` reads the input that covers ``p`` (an
        insert_slice would bufferize to a strided copy that needs MLIR's C runner library).
        """
        e = self.e
        dtype = ins[0].dtype
        rank = len(out_shape)
        offsets = [0]
        for v in ins:
            offsets.append(offsets[-1] + v.shape[axis])
        init = e.empty(out_shape, dtype)

        def body(_a: list[str], _o: list[str]) -> list[str]:
            idx = [e.op(f"linalg.index {i} : index") for i in range(rank)]
            p = idx[axis]
            value = ""
            for k in reversed(range(len(ins))):
                v = ins[k]
                local = e.op(f"arith.subi {p}, {e.index_const(offsets[k])} : index")
                local = e.op(f"arith.maxsi {local}, {e.index_const(0)} : index")
                local = e.op(f"arith.minsi {local}, {e.index_const(v.shape[axis] - 1)} : index")
                subs = ", ".join(local if i == axis else idx[i] for i in range(rank))
                got = e.op(f"tensor.extract {v.ssa}[{subs}] : {_ttype(v.shape, dtype)}")
                if not value:
                    value = got
                    continue
                below = e.op(f"arith.cmpi slt, {p}, {e.index_const(offsets[k + 1])} : index")
                value = e.op(f"arith.select {below}, {got}, {value} : {dtype}")
            return [value]

        return e.generic(
            [],
            [],
            [(init, out_shape, dtype)],
            [[f"d{i}" for i in range(rank)]],
            ["parallel"] * rank,
            body,
        )[0]

    def _index_of(self, idx: str, idx_dtype: str, dim: int) -> str:
        """An ``index`` from an integer tensor element: negative counts back, clamped."""
        e = self.e
        i = idx if idx_dtype == "i64" else _cast(e, idx, idx_dtype, "i64")
        zero, size = e.const(0, "i64"), e.const(dim, "i64")
        neg = e.op(f"arith.cmpi slt, {i}, {zero} : i64")
        shifted = _arith(e, "arith.addi", "i64", i, size)
        i = e.op(f"arith.select {neg}, {shifted}, {i} : i64")
        i = _arith(e, "arith.maxsi", "i64", i, zero)
        i = _arith(e, "arith.minsi", "i64", i, e.const(dim - 1, "i64"))
        return e.op(f"arith.index_cast {i} : i64 to index")

    def _op_Gather(self, node: _Node) -> list[_Val]:
        e = self.e
        data = self.value(node.proto.input[0], node)
        indices = self.value(node.proto.input[1], node)
        if indices.dtype not in ("i64", "i32"):
            raise node.fail("indices must be int64 or int32")
        axis = self._axis(node, int(node.attr("axis", 0)), data.rank)
        q = indices.rank
        out_shape = (*data.shape[:axis], *indices.shape, *data.shape[axis + 1 :])
        init = e.empty(out_shape, data.dtype)

        def body(a: list[str], _o: list[str]) -> list[str]:
            subs = []
            for i in range(data.rank):
                if i == axis:
                    subs.append(self._index_of(a[0], indices.dtype, data.shape[axis]))
                else:
                    loop = i if i < axis else i + q - 1
                    subs.append(e.op(f"linalg.index {loop} : index"))
            return [
                e.op(
                    f"tensor.extract {data.ssa}[{', '.join(subs)}] : "
                    f"{_ttype(data.shape, data.dtype)}"
                )
            ]

        rank = len(out_shape)
        return e.generic(
            [indices],
            [[f"d{axis + i}" for i in range(q)]],
            [(init, out_shape, data.dtype)],
            [[f"d{i}" for i in range(rank)]],
            ["parallel"] * rank,
            body,
        )

    def _reduce_axes(self, node: _Node, x: _Val) -> list[int] | None:
        axes: list[int] | None
        if "axes" in node.attrs:
            axes = [int(a) for a in node.attrs["axes"]]
        else:
            name = self.optional(node, 1)
            axes = [int(a) for a in self.const_of(name, node, "axes").reshape(-1)] if name else None
        if not axes:
            if node.attr("noop_with_empty_axes", 0):
                return None
            return list(range(x.rank))
        return [self._axis(node, a, x.rank) for a in axes]

    def _op_reduce(self, node: _Node) -> list[_Val]:
        e = self.e
        x = self.value(node.proto.input[0], node)
        self._check_dtype(node, x, "number")
        axes = self._reduce_axes(node, x)
        if axes is None:
            return [x]
        keep = bool(node.attr("keepdims", 1))
        dtype = x.dtype
        flt = _is_float(dtype)
        kind = node.op[len("Reduce") :]
        if kind in ("Sum", "Mean"):
            init: float | int = 0
            name = "arith.addf" if flt else "arith.addi"
        elif kind == "Max":
            init = -math.inf if flt else int(np.iinfo(_MLIR_TO_NUMPY[dtype]).min)
            name = "arith.maximumf" if flt else "arith.maxsi"
        else:
            init = math.inf if flt else int(np.iinfo(_MLIR_TO_NUMPY[dtype]).max)
            name = "arith.minimumf" if flt else "arith.minsi"
        res = e.reduce(x, axes, init, lambda acc, v: _arith(e, name, dtype, acc, v), keep)
        if kind == "Mean":
            count = math.prod(x.shape[a] for a in axes)
            op = "arith.divf" if flt else "arith.divsi"
            res = e.elementwise(
                [res], dtype, lambda v: _arith(e, op, dtype, v[0], e.const(count, dtype)),
                node.where,
            )  # fmt: skip
        return [res]

    _op_ReduceSum = _op_reduce
    _op_ReduceMean = _op_reduce
    _op_ReduceMax = _op_reduce
    _op_ReduceMin = _op_reduce

    def _softmax(self, node: _Node, log: bool) -> list[_Val]:
        e = self.e
        x = self.value(node.proto.input[0], node)
        self._check_dtype(node, x, "float")
        dtype = x.dtype
        default_axis = -1 if self.opset >= 13 else 1
        axis = self._axis(node, int(node.attr("axis", default_axis)), x.rank)
        orig = x
        if self.opset < 13:  # the input is coerced to 2-D around axis
            x = e.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
            axis = 1
        m = e.reduce(
            x, [axis], -math.inf, lambda a, v: _arith(e, "arith.maximumf", dtype, a, v), True
        )
        shifted = e.elementwise(
            [x, m], dtype, lambda a: _arith(e, "arith.subf", dtype, a[0], a[1]), node.where
        )
        ex = e.elementwise(
            [shifted], dtype, lambda a: _arith(e, "math.exp", dtype, a[0]), node.where
        )
        s = e.reduce(ex, [axis], 0.0, lambda a, v: _arith(e, "arith.addf", dtype, a, v), True)
        if log:
            y = e.elementwise(
                [shifted, s], dtype,
                lambda a: _arith(e, "arith.subf", dtype, a[0], _arith(e, "math.log", dtype, a[1])),
                node.where,
            )  # fmt: skip
        else:
            y = e.elementwise(
                [ex, s], dtype, lambda a: _arith(e, "arith.divf", dtype, a[0], a[1]), node.where
            )
        return [e.reshape(y, orig.shape)]

    def _op_Softmax(self, node: _Node) -> list[_Val]:
        return self._softmax(node, log=False)

    def _op_LogSoftmax(self, node: _Node) -> list[_Val]:
        return self._softmax(node, log=True)

    def _op_argminmax(self, node: _Node) -> list[_Val]:
        e = self.e
        x = self.value(node.proto.input[0], node)
        self._check_dtype(node, x, "number")
        axis = self._axis(node, int(node.attr("axis", 0)), x.rank)
        keep = bool(node.attr("keepdims", 1))
        last = bool(node.attr("select_last_index", 0))
        is_max = node.op == "ArgMax"
        dtype = x.dtype
        flt = _is_float(dtype)
        if flt:
            init: float | int = -math.inf if is_max else math.inf
        else:
            info = np.iinfo(_MLIR_TO_NUMPY[dtype])
            init = int(info.min if is_max else info.max)
        out_shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
        best = e.filled(out_shape, dtype, init)
        index = e.filled(out_shape, "i64", 0)
        pred = ("Greater" if is_max else "Less") + ("OrEqual" if last else "")

        def body(a: list[str], o: list[str]) -> list[str]:
            i = e.op(f"linalg.index {axis} : index")
            i64 = e.op(f"arith.index_cast {i} : index to i64")
            better = _cmp(e, pred, dtype, a[0], o[0])
            if not last:  # the first element always counts (a row of -inf, or NaN)
                zero = e.index_const(0)
                first = e.op(f"arith.cmpi eq, {i}, {zero} : index")
                better = e.op(f"arith.ori {better}, {first} : i1")
            v = e.op(f"arith.select {better}, {a[0]}, {o[0]} : {dtype}")
            j = e.op(f"arith.select {better}, {i64}, {o[1]} : i64")
            return [v, j]

        res = e.generic(
            [x],
            [[f"d{i}" for i in range(x.rank)]],
            [(best, out_shape, dtype), (index, out_shape, "i64")],
            [[f"d{i}" for i in range(x.rank) if i != axis]] * 2,
            ["reduction" if i == axis else "parallel" for i in range(x.rank)],
            body,
        )[1]
        if keep:
            res = e.reshape(res, [1 if i == axis else d for i, d in enumerate(x.shape)])
        return [res]

    _op_ArgMax = _op_argminmax
    _op_ArgMin = _op_argminmax

    def _loops(self, shape: Sequence[int], state: str, state_type: str) -> tuple[list[str], str]:
        """Open nested ``scf.for`` loops over ``shape`` carrying one tensor.

        Returns the induction variables and the carried value inside the innermost loop.
        """
        e = self.e
        c0, c1 = e.index_const(0), e.index_const(1)
        ivs = []
        self._loop_results: list[str] = []
        for d in shape:
            ub = e.index_const(d)
            iv, carried, res = e.fresh("i"), e.fresh("t"), e.fresh()
            e.emit(
                f"{res} = scf.for {iv} = {c0} to {ub} step {c1} iter_args({carried} = {state}) "
                f"-> ({state_type}) {{"
            )
            e.indent += 1
            ivs.append(iv)
            self._loop_results.append(res)
            state = carried
        return ivs, state

    def _close_loops(self, value: str, state_type: str) -> str:
        e = self.e
        for res in reversed(self._loop_results):
            e.emit(f"scf.yield {value} : {state_type}")
            e.indent -= 1
            e.emit("}")
            value = res
        return value

    def _scatter_combine(self, node: _Node, old: str, new: str, dtype: str) -> str:
        reduction = node.attr("reduction", "none")
        if isinstance(reduction, bytes):
            reduction = reduction.decode()
        if reduction == "none":
            return new
        flt = _is_float(dtype)
        table = {
            "add": "arith.addf" if flt else "arith.addi",
            "mul": "arith.mulf" if flt else "arith.muli",
            "max": "arith.maximumf" if flt else "arith.maxsi",
            "min": "arith.minimumf" if flt else "arith.minsi",
        }
        if reduction not in table or dtype == "i1":
            raise node.fail(f"reduction '{reduction}' on {dtype} is not supported")
        return _arith(self.e, table[reduction], dtype, old, new)

    def _op_ScatterElements(self, node: _Node) -> list[_Val]:
        e = self.e
        data, indices, updates = (self.value(n, node) for n in node.proto.input)
        if indices.dtype not in ("i64", "i32") or indices.shape != updates.shape:
            raise node.fail("indices must be int64/int32 of the shape of updates")
        axis = self._axis(node, int(node.attr("axis", 0)), data.rank)
        t = _ttype(data.shape, data.dtype)
        ivs, state = self._loops(updates.shape, data.ssa, t)
        subs = ", ".join(ivs)
        u = e.op(f"tensor.extract {updates.ssa}[{subs}] : {_ttype(updates.shape, updates.dtype)}")
        ix = e.op(f"tensor.extract {indices.ssa}[{subs}] : {_ttype(indices.shape, indices.dtype)}")
        target = list(ivs)
        target[axis] = self._index_of(ix, indices.dtype, data.shape[axis])
        tsubs = ", ".join(target)
        old = e.op(f"tensor.extract {state}[{tsubs}] : {t}")
        new = self._scatter_combine(node, old, u, data.dtype)
        inserted = e.op(f"tensor.insert {new} into {state}[{tsubs}] : {t}")
        return [_Val(self._close_loops(inserted, t), data.shape, data.dtype)]

    def _op_ScatterND(self, node: _Node) -> list[_Val]:
        e = self.e
        data, indices, updates = (self.value(n, node) for n in node.proto.input)
        if indices.dtype not in ("i64", "i32"):
            raise node.fail("indices must be int64 or int32")
        k = indices.shape[-1]
        lead = indices.shape[:-1]
        if updates.shape != (*lead, *data.shape[k:]):
            raise node.fail(f"updates of shape {updates.shape} do not fit")
        t = _ttype(data.shape, data.dtype)
        ivs, state = self._loops(updates.shape, data.ssa, t)
        u = e.op(
            f"tensor.extract {updates.ssa}[{', '.join(ivs)}] : "
            f"{_ttype(updates.shape, updates.dtype)}"
        )
        target = []
        for j in range(k):
            cj = e.index_const(j)
            ix = e.op(
                f"tensor.extract {indices.ssa}[{', '.join([*ivs[: len(lead)], cj])}] : "
                f"{_ttype(indices.shape, indices.dtype)}"
            )
            target.append(self._index_of(ix, indices.dtype, data.shape[j]))
        target += ivs[len(lead) :]
        tsubs = ", ".join(target)
        old = e.op(f"tensor.extract {state}[{tsubs}] : {t}")
        new = self._scatter_combine(node, old, u, data.dtype)
        inserted = e.op(f"tensor.insert {new} into {state}[{tsubs}] : {t}")
        return [_Val(self._close_loops(inserted, t), data.shape, data.dtype)]


# -- the dynamic batch: proving that rows are independent ----------------------------

#: Operators that compute each element from the elements at the same (broadcast)
#: position of their inputs.
_ELEMENTWISE_OPS = frozenset(
    {
        "Abs", "Add", "And", "Cast", "Ceil", "Clip", "Div", "Dropout", "Equal", "Exp",
        "Floor", "Greater", "GreaterOrEqual", "Identity", "LeakyRelu", "Less",
        "LessOrEqual", "Log", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Pow",
        "Reciprocal", "Relu", "Sigmoid", "Sign", "Sqrt", "Sub", "Tanh", "Where", "Xor",
    }
)  # fmt: skip


#: Folded nodes that only move elements of a shape vector: the input positions that may
#: carry the batch size (the others must not depend on it); None: every input.
_SHAPE_PLUMBING: dict[str, frozenset[int] | None] = {
    "Identity": frozenset({0}),
    "Cast": frozenset({0}),
    "Gather": frozenset({0}),
    "Slice": frozenset({0}),
    "Concat": None,
    "Unsqueeze": frozenset({0}),
    "Squeeze": frozenset({0}),
    "Reshape": frozenset({0}),
    "Flatten": frozenset({0}),
}


def _reshape_target(
    shape: Sequence[int], target: Sequence[int], allowzero: bool
) -> list[int] | None:
    """ONNX Reshape's output shape (``0`` copies, ``-1`` is inferred); None if invalid."""
    out = [
        shape[i] if d == 0 and not allowzero and i < len(shape) else d for i, d in enumerate(target)
    ]
    if out.count(-1) > 1 or any(d < -1 for d in out):
        return None
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if not known or math.prod(shape) % known:
            return None
        out[out.index(-1)] = math.prod(shape) // known
    return out if math.prod(out) == math.prod(shape) else None


def _with_batch(shape: Sequence[int], axis: int, size: int) -> tuple[int, ...]:
    return tuple(size if i == axis else d for i, d in enumerate(shape))


class _BatchRules:
    """The batch axis of a node's outputs from its inputs', or a refusal naming the node.

    A node is accepted when it computes every slice along the batch axis of its outputs
    from the same slice of its batched inputs alone (and all of its unbatched inputs), the
    same way for every slice: then the graph compiled at batch 1 and run once per row
    computes what the graph computes at any batch.
    """

    def __init__(self, t: _Translator, node: _Node, results: Sequence[_Val]) -> None:
        self.t = t
        self.node = node
        self.names = list(node.proto.input)
        self.results = results

    def shape(self, name: str) -> tuple[int, ...]:
        if name in self.t.values:
            return self.t.values[name].shape
        return tuple(int(d) for d in self.t.consts[name].shape)

    def axis(self, i: int) -> int | None:
        name = self.names[i] if i < len(self.names) else ""
        return self.t.batch_axis.get(name) if name else None

    def fail(self, why: str) -> NativeCompileError:
        symbol = self.t.batch_symbol
        return self.node.fail(
            f"{why}; a model with the dynamic batch '{symbol}' is compiled one row at a "
            "time, which needs every node to keep the rows apart: fix the batch with "
            f"--dim {symbol}=N (dims={{'{symbol}': N}})"
        )

    def run(self) -> list[int | None]:
        node = self.node
        batched = [i for i, n in enumerate(self.names) if n and self.axis(i) is not None]
        if not batched:
            return [None] * len(self.results)
        op = node.op
        handler = getattr(self, f"rule_{op}", None)
        if op in _ELEMENTWISE_OPS or op == "Expand":
            out = self.elementwise([0] if op == "Expand" else range(len(self.names)))
        elif handler is not None:
            out = handler()
        else:
            raise self.fail("this operator is not known to keep the rows of a batch apart")
        return [out] + [None] * (len(self.results) - 1)

    def elementwise(self, operands: Sequence[int]) -> int:
        rank = self.results[0].rank
        positions = set()
        for i in operands:
            a = self.axis(i)
            if a is not None:
                positions.add(a + rank - len(self.shape(self.names[i])))
        if len(positions) != 1:
            raise self.fail(f"its inputs have the batch on different axes {sorted(positions)}")
        pos = positions.pop()
        if self.results[0].shape[pos] != 1:
            raise self.fail(
                f"an input without the batch has {self.results[0].shape[pos]} elements "
                f"along the batch axis {pos}"
            )
        return pos

    def single(self, i: int = 0) -> tuple[int, tuple[int, ...]]:
        for k, n in enumerate(self.names):
            if n and k != i and self.axis(k) is not None:
                raise self.fail(f"its input '{n}' has the batch too")
        axis = self.axis(i)
        if axis is None:
            raise self.fail(f"the batch reaches it through input '{self.names[i]}' only")
        return axis, self.shape(self.names[i])

    def rule_MatMul(self) -> int:  # noqa: N802
        # The output's stacked (broadcast) axes come first; the left rows follow them.
        stacked = max(max(len(self.shape(n)) - 2, 0) for n in self.names[:2])
        positions = set()
        for i, side in ((0, "left"), (1, "right")):
            a = self.axis(i)
            if a is None:
                continue
            r = len(self.shape(self.names[i]))
            if r >= 3 and a < r - 2:  # a broadcast (stacked matrices) axis
                positions.add(stacked - (r - 2) + a)
            elif side == "left" and r >= 2 and a == r - 2:  # the rows of the left matrix
                positions.add(stacked)
            else:
                raise self.fail(
                    f"the batch is axis {a} of its {side} operand '{self.names[i]}', which "
                    "the product sums over or spreads across the columns"
                )
        if len(positions) != 1:
            raise self.fail(f"its operands have the batch on different axes {sorted(positions)}")
        pos = positions.pop()
        if self.results[0].shape[pos] != 1:
            raise self.fail("an operand without the batch has a stack of matrices along it")
        return pos

    def rule_Gemm(self) -> int:  # noqa: N802
        node = self.node
        a_axis = self.axis(0)
        if self.axis(1) is not None:
            raise self.fail(f"the batch is in its B operand '{self.names[1]}'")
        if a_axis is not None and a_axis != (1 if node.attr("transA", 0) else 0):
            raise self.fail(f"the batch is the inner dimension of its A operand '{self.names[0]}'")
        c_axis = self.axis(2)
        if c_axis is not None:
            c_rank = len(self.shape(self.names[2]))
            if c_rank != 2 or c_axis != 0:
                raise self.fail(f"its C operand '{self.names[2]}' has the batch on its columns")
        if self.results[0].shape[0] != 1:
            raise self.fail("its A operand has rows that are not the batch")
        return 0

    def softmax(self) -> int:
        axis, shape = self.single()
        default = -1 if self.t.opset >= 13 else 1
        along = self.t._axis(self.node, int(self.node.attr("axis", default)), len(shape))
        if axis == along or (self.t.opset < 13 and axis > along):
            raise self.fail(f"it normalizes over the batch axis {axis}")
        return axis

    rule_Softmax = softmax  # noqa: N815
    rule_LogSoftmax = softmax  # noqa: N815

    def argminmax(self) -> int:
        axis, shape = self.single()
        along = self.t._axis(self.node, int(self.node.attr("axis", 0)), len(shape))
        if axis == along:
            raise self.fail(f"it searches along the batch axis {axis}")
        keep = bool(self.node.attr("keepdims", 1))
        return axis if keep or along > axis else axis - 1

    rule_ArgMax = argminmax  # noqa: N815
    rule_ArgMin = argminmax  # noqa: N815

    def reduce(self) -> int:
        axis, shape = self.single()
        x = _Val("", shape, "f32")
        axes = self.t._reduce_axes(self.node, x)
        if axes is None:
            return axis
        if axis in axes:
            raise self.fail(f"it reduces over the batch axis {axis} (axes {sorted(axes)})")
        keep = bool(self.node.attr("keepdims", 1))
        return axis if keep else axis - sum(1 for a in axes if a < axis)

    rule_ReduceSum = reduce  # noqa: N815
    rule_ReduceMean = reduce  # noqa: N815
    rule_ReduceMax = reduce  # noqa: N815
    rule_ReduceMin = reduce  # noqa: N815

    def rule_Concat(self) -> int:  # noqa: N802
        axes = set()
        for i, n in enumerate(self.names):
            a = self.axis(i)
            if n and a is None:
                raise self.fail(f"it joins a batched input with '{n}', which has no batch")
            if n and a is not None:
                axes.add(a)
        if len(axes) != 1:
            raise self.fail(f"its inputs have the batch on different axes {sorted(axes)}")
        axis = axes.pop()
        rank = len(self.shape(self.names[0]))
        along = self.t._axis(self.node, int(self.node.attr("axis")), rank)
        if axis == along:
            raise self.fail(f"it concatenates along the batch axis {axis}")
        return axis

    def rule_Transpose(self) -> int:  # noqa: N802
        axis, shape = self.single()
        perm = self.node.attr("perm") or list(reversed(range(len(shape))))
        return [int(p) for p in perm].index(axis)

    def reshaped(self, axis: int, shape: tuple[int, ...], out2: Sequence[int] | None) -> int:
        """The output axis of a reshape that keeps the batch axis whole, else a refusal."""
        out1 = self.results[0].shape
        if out2 is not None and len(out2) == len(out1):
            differ = [j for j in range(len(out1)) if out1[j] != out2[j]]
            if len(differ) == 1:
                j = differ[0]
                if out1[j] == 1 and out2[j] == 2 and math.prod(shape[:axis]) == math.prod(out1[:j]):
                    return j
        if out2 is None:
            raise self.fail(
                f"its target shape {out1} is fixed: at batch 2 its input "
                f"{_with_batch(shape, axis, 2)} cannot take it"
            )
        raise self.fail(
            f"it does not keep the batch axis {axis} whole (at batch 1: {shape} -> {out1}; "
            f"at batch 2: {_with_batch(shape, axis, 2)} -> {tuple(out2)})"
        )

    def rule_Reshape(self) -> int:  # noqa: N802
        axis, shape = self.single()
        name = self.names[1]
        target2 = self.t.consts2.get(name, self.t.consts[name])
        if target2 is None:
            raise self.fail(
                f"its target shape '{name}' is computed from the batch size by arithmetic, "
                "which cannot be followed"
            )
        out2 = None
        if target2 is not None:
            out2 = _reshape_target(
                _with_batch(shape, axis, 2),
                [int(d) for d in target2.reshape(-1)],
                bool(self.node.attr("allowzero", 0)),
            )
        return self.reshaped(axis, shape, out2)

    def rule_Flatten(self) -> int:  # noqa: N802
        axis, shape = self.single()
        at = int(self.node.attr("axis", 1))
        at = at + len(shape) if at < 0 else at
        shape2 = _with_batch(shape, axis, 2)
        return self.reshaped(axis, shape, (math.prod(shape2[:at]), math.prod(shape2[at:])))

    def rule_Squeeze(self) -> int:  # noqa: N802
        axis, shape = self.single()
        axes = self.t._axes_input(self.node, 1)
        if axes is None:
            raise self.fail(
                "it squeezes every axis of size 1 (no axes given), the batch axis among them"
            )
        axes = [self.t._axis(self.node, a, len(shape)) for a in axes]
        if axis in axes:
            raise self.fail(f"it squeezes the batch axis {axis}")
        return axis - sum(1 for a in axes if a < axis)

    def rule_Unsqueeze(self) -> int:  # noqa: N802
        axis, shape = self.single()
        axes = self.t._axes_input(self.node, 1) or []
        rank = len(shape) + len(axes)
        inserted = {self.t._axis(self.node, a, rank) for a in axes}
        kept = [i for i in range(rank) if i not in inserted]
        return kept[axis]

    def rule_Gather(self) -> int:  # noqa: N802
        data, indices = self.axis(0), self.axis(1)
        rank = len(self.shape(self.names[0]))
        along = self.t._axis(self.node, int(self.node.attr("axis", 0)), rank)
        q = len(self.shape(self.names[1]))
        if data is not None and indices is not None:
            raise self.fail("both its data and its indices have the batch")
        if indices is not None:
            return along + indices
        assert data is not None
        if data == along:
            raise self.fail(f"it gathers along the batch axis {data}")
        return data if data < along else data + q - 1

    def rule_ScatterElements(self) -> int:  # noqa: N802
        axes = [self.axis(i) for i in range(3)]
        if axes[0] is None:
            raise self.fail(
                "it scatters batched values into a tensor without the batch (a sum or "
                "selection over the rows of the batch)"
            )
        if len(set(axes)) != 1:
            raise self.fail("its data, indices and updates do not all have the batch on one axis")
        rank = len(self.shape(self.names[0]))
        along = self.t._axis(self.node, int(self.node.attr("axis", 0)), rank)
        if axes[0] == along:
            raise self.fail(f"it scatters along the batch axis {along}")
        return axes[0]

    def rule_ScatterND(self) -> int:  # noqa: N802
        data, indices, updates = (self.axis(i) for i in range(3))
        if data is None:
            raise self.fail(
                "it scatters batched values into a tensor without the batch (a sum or "
                "selection over the rows of the batch)"
            )
        if indices is not None:
            raise self.fail(f"its indices '{self.names[1]}' have the batch")
        index_shape = self.shape(self.names[1])
        k = index_shape[-1]
        if data < k:
            raise self.fail(f"its indices select along the batch axis {data}")
        if updates != len(index_shape) - 1 + data - k:
            raise self.fail(
                f"its updates '{self.names[2]}' do not have the batch where the data has"
            )
        return data


def import_onnx(
    model: Any,  # noqa: ANN401 - an onnx.ModelProto
    name: str,
    dims: dict[str, int] | None = None,
) -> ImportedModel:
    """Translate an ONNX model into an MLIR module (see the module docstring).

    A symbolic leading dimension that the inputs share and ``dims`` does not fix is a
    dynamic batch: the graph is translated at batch 1 (``TensorInfo.batch`` marks the
    inputs and outputs that have it) and the C wrapper runs it once per row. That is only
    right when rows are independent, so the batch axis of every value is followed through
    every node, and a node that mixes rows (a reduction over the batch, a Reshape that
    merges it, a product that sums over it, a scatter into a tensor without it...), an
    output without the batch on axis 0, or a use of the batch size as a value is an error
    naming the node and the operator.

    Args:
        model: The ``onnx.ModelProto``.
        name: The model name (a C identifier); the function is ``mlbridge_native_<name>``.
        dims: Values for symbolic dimensions (``{"batch": 1}``), fixed before shape
            inference.

    Returns:
        The module and its interface.

    Raises:
        NativeCompileError: If the model uses an operator, attribute, element type or
            dynamic shape native compilation does not support (the message names the
            operator and the node), or is not a valid model.
    """
    import onnx

    model_copy = onnx.ModelProto()
    model_copy.CopyFrom(model)
    if dims:
        for vi in list(model_copy.graph.input) + list(model_copy.graph.output):
            for d in vi.type.tensor_type.shape.dim:
                if d.WhichOneof("value") == "dim_param" and d.dim_param in dims:
                    d.dim_value = int(dims[d.dim_param])
    batch_symbol, batch_inputs = _batch_symbol(model_copy)
    if batch_symbol is not None:
        for vi in model_copy.graph.input:
            if vi.name in batch_inputs:
                vi.type.tensor_type.shape.dim[0].dim_value = 1
        # Shape inference gives the outputs' leading dimension (checked to be the batch).
        for vi in model_copy.graph.output:
            dim = vi.type.tensor_type.shape.dim
            if len(dim) and dim[0].WhichOneof("value") == "dim_param":
                dim[0].ClearField("dim_param")
    try:
        inferred = onnx.shape_inference.infer_shapes(model_copy, strict_mode=True, data_prop=True)
    except Exception as exc:  # noqa: BLE001 - InferenceError and checker errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NativeCompileError(f"ONNX shape inference failed: {first}") from None
    return _Translator(inferred, name, batch_symbol, batch_inputs).run()


def _batch_symbol(model: Any) -> tuple[str | None, frozenset[str]]:  # noqa: ANN401
    """The symbolic leading dimension the graph inputs share, and the inputs that have it.

    Other symbolic dimensions are left for the translator to refuse, naming them.
    """
    initializers = {init.name for init in model.graph.initializer}
    symbols: dict[str, list[str]] = {}
    for vi in model.graph.input:
        if vi.name in initializers or vi.type.WhichOneof("value") != "tensor_type":
            continue
        dims = vi.type.tensor_type.shape.dim
        if len(dims) and dims[0].WhichOneof("value") == "dim_param" and dims[0].dim_param:
            symbols.setdefault(dims[0].dim_param, []).append(vi.name)
    if not symbols:
        return None, frozenset()
    if len(symbols) > 1:
        listed = "; ".join(f"'{s}' ({', '.join(names)})" for s, names in symbols.items())
        first = next(iter(symbols))
        raise NativeCompileError(
            f"the graph inputs have different symbolic leading dimensions: {listed}; a "
            f"dynamic batch is one symbol shared by the inputs: fix the others with --dim "
            f"(e.g. --dim {first}=N)"
        )
    symbol, names = next(iter(symbols.items()))
    return symbol, frozenset(names)
