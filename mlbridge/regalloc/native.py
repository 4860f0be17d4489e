"""The register-allocation agents as native code, through MLIR 22: no ONNX Runtime in llc.

:func:`regalloc_mlir` writes a :class:`~mlbridge.regalloc.gnn.RegallocGNN` as one MLIR
module (``memref``, ``scf``, ``arith``, ``math``; its weights as constant globals) whose
function ``regalloc_agents`` answers every agent's query as the ONNX export does: the
priority agent over the whole graph, the coloring and split agents over their node's
neighbourhood, masked scores, the first of the best within
:data:`~mlbridge.regalloc.gnn.TIE_TOLERANCE`. Every input keeps its own number of rows,
which ``mlbridge compile`` (one dynamic batch, computed a row at a time) cannot give an
ONNX model, hence a compiler of this network's own, as :meth:`RegallocGNN.to_onnx` is
its own exporter.

:func:`compile_native` lowers the module with ``mlir-opt-22`` and ``mlir-translate-22``
and links it with a C wrapper into a shared object exporting mlbridge's AOT C ABI
(:mod:`mlbridge.aot.abi`) with the per-input rows of :data:`~mlbridge.aot.abi.ROWS_FUNCTIONS`,
which ``TFAOTModelRunner`` loads in ``llc-22``. Dense layers are computed output-wise (a
row of the transposed weights at a time, in the inputs' order), so LLVM vectorizes them;
the object holds an AVX2 copy of the model beside the baseline one and runs it where the
processor has AVX2 (the same operations in the same order: the same floats). The floats
may differ from PyTorch's and ONNX Runtime's in the last bits (their kernels add in
other orders), which the tie tolerance absorbs but at its very edge (docs/ml-regalloc.md).

Between two priority queries the allocator changes a few nodes (the one it colored, the
ones it evicted or split), so the wrapper keeps, per node, the last priority query's
features, encoding and score, and the sources of its messages. It compares each query
with the last (features bit for bit, the edges as a whole, else each node's sources)
and marks the nodes whose score cannot have changed: those ``rounds`` edges or more
from any change. The model reuses their scores and the unchanged nodes' encodings, and
computes the rest in the same operations and order as without the cache, so an answer
is the same whatever came before it.
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from mlbridge.llvm import find_llvm_tool
from mlbridge.native.compile import run_tool
from mlbridge.native.importer import NativeCompileError
from mlbridge.regalloc.interface import ADVICE, BLOCK_FEATURES, MASK, NODE_FEATURES

if TYPE_CHECKING:
    from collections.abc import Callable

    from mlbridge.regalloc.gnn import RegallocGNN

__all__ = ["MODEL_FUNCTION", "STATUS_MESSAGES", "compile_native", "regalloc_mlir"]

#: The MLIR function answering a query.
MODEL_FUNCTION = "regalloc_agents"
#: What each nonzero status of :data:`MODEL_FUNCTION` means (the wrapper's error_message).
STATUS_MESSAGES = {
    1: "an edge names a node outside [0, N) (N: the rows of node_features)",
    2: "action_mask does not have one element per action (priority: N; coloring: the "
    "rows of register_features + 1; split: the rows of block_features + 1)",
    3: "node is outside [0, N) for a coloring or split query",
    4: "an input with rows has no data (set_arg_data)",
    5: "the model could not allocate its cache of node rows (out of memory)",
}

_NODE, _REG, _BLOCK = 12, 6, 9  # transformed widths (gnn's _NODE_INPUTS, ...)
_DEGREE = NODE_FEATURES.index("degree")
_WEIGHT = NODE_FEATURES.index("weight")
# The inputs, in the wrapper's order: name, MLIR element type, columns (None: one value).
_ARGS: tuple[tuple[str, str, int | None], ...] = (
    ("agent", "i64", None),
    ("node_features", "f32", len(NODE_FEATURES)),
    ("edges", "i64", 2),
    ("node", "i64", None),
    ("register_features", "f32", 5),
    ("block_features", "f32", len(BLOCK_FEATURES)),
    (MASK, "i64", 0),
)


def _f32(value: float) -> str:
    bits = struct.unpack("<I", struct.pack("<f", np.float32(value)))[0]
    return f"0x{bits:08X}"


def _rows(width: int) -> str:
    return f"memref<?x{width}xf32>"


class _Function:
    """One MLIR function being written: fresh SSA names, constants hoisted to its top."""

    def __init__(self, module: _Module, header: str) -> None:
        self.module = module
        self.lines = [header]
        self.count = 0
        self.indent = 4
        self.indices: dict[int, str] = {}
        self.zero = self.op(f"arith.constant {_f32(0.0)} : f32")
        self.zero64 = self.op("arith.constant 0 : i64")
        self.c0 = self.index(0)
        self.c1 = self.index(1)

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append(" " * self.indent + line)

    def op(self, text: str) -> str:
        value = self.fresh()
        self.emit(f"{value} = {text}")
        return value

    def f32(self, value: float) -> str:
        return self.op(f"arith.constant {_f32(value)} : f32")

    def i32(self, value: int) -> str:
        return self.op(f"arith.constant {value} : i32")

    def index(self, value: int) -> str:
        if value not in self.indices:
            # At the top of the function, so that every region below sees it.
            name = self.fresh()
            self.lines.insert(1, f"    {name} = arith.constant {value} : index")
            self.indices[value] = name
        return self.indices[value]

    def loop(self, upper: str) -> str:
        i = self.fresh()
        self.emit(f"scf.for {i} = {self.c0} to {upper} step {self.c1} {{")
        self.indent += 2
        return i

    def open_if(self, condition: str, result: str | None = "i32") -> str | None:
        value = self.fresh() if result else None
        self.emit(
            f"{value} = scf.if {condition} -> ({result}) {{" if value else f"scf.if {condition} {{"
        )
        self.indent += 2
        return value

    def otherwise(self) -> None:
        self.indent -= 2
        self.emit("} else {")
        self.indent += 2

    def end(self) -> None:
        self.indent -= 2
        self.emit("}")

    def yield_status(self, status: int | str) -> None:
        value = self.i32(status) if isinstance(status, int) else status
        self.emit(f"scf.yield {value} : i32")

    def load(self, buf: str, width: int, row: str, col: str | int) -> str:
        column = self.index(col) if isinstance(col, int) else col
        return self.op(f"memref.load {buf}[{row}, {column}] : {_rows(width)}")

    def store(self, value: str, buf: str, width: int, row: str, col: str | int) -> None:
        column = self.index(col) if isinstance(col, int) else col
        self.emit(f"memref.store {value}, {buf}[{row}, {column}] : {_rows(width)}")

    def edge(self, j: str, column: int) -> str:
        return self.op(f"memref.load %edges[{j}, {self.index(column)}] : memref<?x2xi64>")

    def scratch(self, width: int) -> str:
        """A one-row buffer on the stack."""
        buf = self.op(f"memref.alloca() : memref<1x{width}xf32>")
        return self.op(f"memref.cast {buf} : memref<1x{width}xf32> to {_rows(width)}")

    def alloc(self, rows: str, width: int) -> str:
        return self.op(f"memref.alloc({rows}) : {_rows(width)}")

    def free(self, buf: str, width: int) -> None:
        self.emit(f"memref.dealloc {buf} : {_rows(width)}")

    def relu(self, v: str) -> str:
        positive = self.op(f"arith.cmpf ogt, {v}, {self.zero} : f32")
        return self.op(f"arith.select {positive}, {v}, {self.zero} : f32")

    def log1p_relu(self, v: str) -> str:
        return self.op(f"math.log1p {self.relu(v)} : f32")

    def div(self, v: str, by: float) -> str:
        return self.op(f"arith.divf {v}, {self.f32(by)} : f32")

    def call(self, name: str, args: list[tuple[str, str]], result: str | None = None) -> str:
        values = ", ".join(a for a, _ in args)
        types = ", ".join(t for _, t in args)
        if result is None:
            self.emit(f"func.call @{name}({values}) : ({types}) -> ()")
            return ""
        return self.op(f"func.call @{name}({values}) : ({types}) -> {result}")

    def dense(
        self,
        layer: Any,  # noqa: ANN401 - a torch.nn.Linear
        name: str,
        sources: list[tuple[str, int, str, int]],
        out: tuple[str, int, str],
        relu: bool,
    ) -> None:
        """Writes ``out = relu?(W [sources...] + b)``.

        The inputs are the concatenation of ``sources`` (buffer, its width, row, length),
        added up in their order, an output at a time across the transposed weights' row.
        """
        weight = layer.weight.detach().numpy().astype(np.float32)
        outputs, inputs = weight.shape
        if sum(s[3] for s in sources) != inputs:
            raise NativeCompileError(f"{name}: {inputs} inputs, sources give another count")
        wt = self.module.constant(f"{name}_w", np.ascontiguousarray(weight.T))
        wt_type = f"memref<{inputs}x{outputs}xf32>"
        buf, width, row = out
        o_count = self.index(outputs)
        q = self.loop(o_count)
        self.store(self.zero, buf, width, row, q)
        self.end()
        base = 0
        for src, src_width, src_row, length in sources:
            k = self.loop(self.index(length))
            x = self.load(src, src_width, src_row, k)
            kw = self.op(f"arith.addi {k}, {self.index(base)} : index")
            q = self.loop(o_count)
            w = self.op(f"memref.load {wt}[{kw}, {q}] : {wt_type}")
            total = self.op(
                f"arith.addf {self.load(buf, width, row, q)}, "
                f"{self.op(f'arith.mulf {x}, {w} : f32')} : f32"
            )
            self.store(total, buf, width, row, q)
            self.end()
            self.end()
            base += length
        if layer.bias is None and not relu:
            return
        bias = None
        if layer.bias is not None:
            bias = self.module.constant(f"{name}_b", layer.bias.detach().numpy().astype(np.float32))
        q = self.loop(o_count)
        v = self.load(buf, width, row, q)
        if bias is not None:
            b = self.op(f"memref.load {bias}[{q}] : memref<{outputs}xf32>")
            v = self.op(f"arith.addf {v}, {b} : f32")
        if relu:
            v = self.relu(v)
        self.store(v, buf, width, row, q)
        self.end()

    def text(self, tail: str = "return") -> str:
        self.emit(tail)
        self.lines.append("  }")
        return "\n".join(self.lines)


class _Module:
    def __init__(self) -> None:
        self.globals: list[str] = []
        self.types: dict[str, str] = {}
        self.functions: list[str] = []
        self.current: _Function | None = None

    def constant(self, name: str, array: np.ndarray[Any, Any]) -> str:
        """The global ``name`` holding ``array``, read in the current function."""
        if name not in self.types:
            self.types[name] = "memref<" + "x".join(map(str, array.shape)) + "xf32>"
            data = np.ascontiguousarray(array, dtype="<f4").tobytes().hex().upper()
            self.globals.append(
                f'  memref.global "private" constant @{name} : {self.types[name]} = '
                f'dense<"0x{data}">'
            )
        assert self.current is not None
        return self.current.op(f"memref.get_global @{name} : {self.types[name]}")

    def function(self, header: str) -> _Function:
        self.current = _Function(self, header)
        return self.current

    def add(self, text: str) -> None:
        self.functions.append(text)

    def text(self) -> str:
        return "module {\n" + "\n".join([*self.globals, *self.functions]) + "\n}\n"


_NF = ("%nf", _rows(len(NODE_FEATURES)))


def _row_functions(m: _Module, policy: RegallocGNN) -> None:
    """node_row, encode, update<r>, the heads, register_row, block_row, first_best."""
    from mlbridge.regalloc.gnn import _NODE_SCALE, TIE_TOLERANCE

    hid = policy.hidden
    f = m.function(
        f"  func.func private @node_row(%nf: {_NF[1]}, %i: index, %x: {_rows(_NODE)}, "
        "%xr: index) {"
    )
    for c, scale in enumerate(_NODE_SCALE):
        f.store(f.div(f.log1p_relu(f.load("%nf", 11, "%i", c)), scale), "%x", _NODE, "%xr", c)
    weight = f.relu(f.load("%nf", 11, "%i", _WEIGHT))
    shifted = f.op(f"arith.addf {weight}, {f.f32(1e-4)} : f32")
    f.store(f.div(f.op(f"math.log {shifted} : f32"), 10.0), "%x", _NODE, "%xr", _NODE - 1)
    m.add(f.text())

    f = m.function(
        f"  func.func private @encode(%x: {_rows(_NODE)}, %xr: index, %h: {_rows(hid)}, "
        "%hr: index) {"
    )
    t = f.scratch(hid)
    f.dense(policy.encoder[0], "encoder0", [("%x", _NODE, "%xr", _NODE)], (t, hid, f.c0), True)
    f.dense(policy.encoder[2], "encoder2", [(t, hid, f.c0, hid)], ("%h", hid, "%hr"), True)
    m.add(f.text())

    for r, (own, neighbour) in enumerate(
        zip(policy.self_layers, policy.neighbour_layers, strict=True)
    ):
        # h = relu(self(h) + neighbour(total / degree)) + h, in place.
        f = m.function(
            f"  func.func private @update{r}(%h: {_rows(hid)}, %hr: index, %t: {_rows(hid)}, "
            "%tr: index, %degree: f32) {"
        )
        mean, a, b = f.scratch(hid), f.scratch(hid), f.scratch(hid)
        q = f.loop(f.index(hid))
        f.store(
            f.op(f"arith.divf {f.load('%t', hid, '%tr', q)}, %degree : f32"), mean, hid, f.c0, q
        )
        f.end()
        f.dense(own, f"self{r}", [("%h", hid, "%hr", hid)], (a, hid, f.c0), False)
        f.dense(neighbour, f"neighbour{r}", [(mean, hid, f.c0, hid)], (b, hid, f.c0), False)
        q = f.loop(f.index(hid))
        s = f.op(f"arith.addf {f.load(a, hid, f.c0, q)}, {f.load(b, hid, f.c0, q)} : f32")
        h = f.load("%h", hid, "%hr", q)
        f.store(f.op(f"arith.addf {f.relu(s)}, {h} : f32"), "%h", hid, "%hr", q)
        f.end()
        m.add(f.text())

    def head(name: str, mlp: Any, linear: Any, extra: int | None) -> None:  # noqa: ANN401
        # mlp([h, x, extra...]) + linear(extra, else x): one score.
        params = f"%h: {_rows(hid)}, %hr: index, %x: {_rows(_NODE)}, %xr: index"
        sources = [("%h", hid, "%hr", hid), ("%x", _NODE, "%xr", _NODE)]
        if extra is not None:
            params += f", %e: {_rows(extra)}, %er: index"
            sources.append(("%e", extra, "%er", extra))
        f = m.function(f"  func.func private @{name}({params}) -> f32 {{")
        t, s = f.scratch(hid), f.scratch(1)
        f.dense(mlp[0], f"{name}0", sources, (t, hid, f.c0), True)
        f.dense(mlp[2], f"{name}2", [(t, hid, f.c0, hid)], (s, 1, f.c0), False)
        score = f.load(s, 1, f.c0, 0)
        if linear is not None:
            lin = f.scratch(1)
            f.dense(linear, f"{name}_linear", [sources[-1]], (lin, 1, f.c0), False)
            score = f.op(f"arith.addf {score}, {f.load(lin, 1, f.c0, 0)} : f32")
        m.add(f.text(f"return {score} : f32"))

    head("priority_score", policy.priority_head, policy.priority_linear, None)
    head("register_score", policy.register_head, policy.register_linear, _REG)
    head("spill_score", policy.spill_head, None, None)
    if policy.split:
        head("block_score", policy.block_head, policy.block_linear, _BLOCK)
        head("split_spill_score", policy.split_spill_head, None, None)

    # gnn.register_inputs.
    f = m.function(
        f"  func.func private @register_row(%rf: {_rows(5)}, %i: index, %o: {_rows(_REG)}) {{"
    )
    free, hinted, cost, csr, order = (f.load("%rf", 5, "%i", c) for c in range(5))
    negative = f.op(f"arith.cmpf olt, {cost}, {f.zero} : f32")
    columns = [
        free,
        hinted,
        f.div(f.log1p_relu(cost), 8.0),
        f.op(f"arith.select {negative}, {f.f32(1.0)}, {f.zero} : f32"),
        csr,
        order,
    ]
    for c, v in enumerate(columns):
        f.store(v, "%o", _REG, f.c0, c)
    m.add(f.text())

    # gnn.block_inputs.
    f = m.function(
        f"  func.func private @block_row(%bf: {_rows(7)}, %i: index, %o: {_rows(_BLOCK)}) {{"
    )
    freq, uses, live_in, live_out, instructions, calls, region = (
        f.load("%bf", 7, "%i", c) for c in range(7)
    )
    net = f.op(f"arith.subf {f.op(f'arith.subf {uses}, {live_in} : f32')}, {live_out} : f32")
    power = f.op(f"math.powf {f.f32(2.0)}, {freq} : f32")
    saving = f.op(f"arith.mulf {net}, {f.op(f'arith.subf {power}, {f.f32(1.0)} : f32')} : f32")
    positive = f.op(f"arith.cmpf ogt, {saving}, {f.zero} : f32")
    negative = f.op(f"arith.cmpf olt, {saving}, {f.zero} : f32")
    minus = f.op(f"arith.select {negative}, {f.f32(-1.0)}, {f.zero} : f32")
    sign = f.op(f"arith.select {positive}, {f.f32(1.0)}, {minus} : f32")
    size = f.op(f"math.log1p {f.op(f'math.absf {saving} : f32')} : f32")
    columns = [
        f.div(freq, 8.0),
        f.div(f.log1p_relu(uses), 3.0),
        f.log1p_relu(live_in),
        f.log1p_relu(live_out),
        f.log1p_relu(instructions),
        f.log1p_relu(calls),
        region,
        f.div(f.op(f"arith.mulf {sign}, {size} : f32"), 8.0),
        f.op(f"arith.select {positive}, {f.f32(1.0)}, {f.zero} : f32"),
    ]
    for c, v in enumerate(columns):
        f.store(v, "%o", _BLOCK, f.c0, c)
    m.add(f.text())

    # gnn.first_best: the first score within the tolerance of the largest.
    f = m.function("  func.func private @first_best(%s: memref<?xf32>) -> i64 {")
    count = f.op(f"memref.dim %s, {f.c0} : memref<?xf32>")
    lowest = f.f32(-3.0e38)
    top = f.fresh()
    f.emit(
        f"{top} = scf.for %i = {f.c0} to {count} step {f.c1} "
        f"iter_args(%best = {lowest}) -> (f32) {{"
    )
    f.emit("  %x = memref.load %s[%i] : memref<?xf32>")
    f.emit("  %more = arith.cmpf ogt, %x, %best : f32")
    f.emit("  %next = arith.select %more, %x, %best : f32")
    f.emit("  scf.yield %next : f32")
    f.emit("}")
    size = f.op(f"arith.addf {f.op(f'math.absf {top} : f32')}, {f.f32(1.0)} : f32")
    threshold = f.op(
        f"arith.subf {top}, {f.op(f'arith.mulf {size}, {f.f32(TIE_TOLERANCE)} : f32')} : f32"
    )
    unset = f.op("arith.constant -1 : i64")
    first = f.fresh()
    f.emit(
        f"{first} = scf.for %j = {f.c0} to {count} step {f.c1} iter_args(%at = {unset}) -> (i64) {{"
    )
    f.emit("  %y = memref.load %s[%j] : memref<?xf32>")
    f.emit(f"  %near = arith.cmpf oge, %y, {threshold} : f32")
    f.emit(f"  %none = arith.cmpi slt, %at, {f.zero64} : i64")
    f.emit("  %take = arith.andi %near, %none : i1")
    f.emit("  %j64 = arith.index_cast %j : index to i64")
    f.emit("  %chosen = arith.select %take, %j64, %at : i64")
    f.emit("  scf.yield %chosen : i64")
    f.emit("}")
    m.add(f.text(f"return {first} : i64"))


def _embed_all(
    f: _Function, policy: RegallocGNN, n: str, e: str, queued: bool = False
) -> tuple[str, str]:
    """Every node's transformed features and embedding, after the rounds of messages.

    With ``queued``, only the rows the queued nodes' embeddings read (``action_mask`` > 0:
    the priority agent's nodes) whose score is not reused from the cache (``%reuse``):
    after round r, the nodes fewer than ``rounds - r`` edges from such a node. Their rows
    are computed by the same operations in the same order, so they equal the whole
    graph's; the others are left unset. The transformed features are then the cache's
    (``%cache_x``, not to be freed), and each row's encoding is taken from the cache
    where the wrapper left it valid (``%ok_h``), else computed and cached.
    """
    hid = policy.hidden
    rounds = policy.rounds
    xs = "%cache_x" if queued else f.alloc(n, _NODE)
    hs = f.alloc(n, hid)
    # levels[r]: the rows needed after round r (levels[rounds]: the queued nodes).
    levels: list[str | None] = [None] * (rounds + 1)
    if queued:
        one8, zero8 = f.op("arith.constant 1 : i8"), f.op("arith.constant 0 : i8")
        for r in range(rounds, -1, -1):
            level = f.op(f"memref.alloc({n}) : memref<?xi8>")
            levels[r] = level
            i = f.loop(n)
            if r == rounds:
                mk = f.op(f"memref.load %mask[{i}] : memref<?xi64>")
                reused = f.op(f"memref.load %reuse[{i}] : memref<?xi8>")
                on = f.op(
                    f"arith.andi {f.op(f'arith.cmpi sgt, {mk}, {f.zero64} : i64')}, "
                    f"{f.op(f'arith.cmpi eq, {reused}, {zero8} : i8')} : i1"
                )
            else:
                later = f.op(f"memref.load {levels[r + 1]}[{i}] : memref<?xi8>")
                on = f.op(f"arith.cmpi ne, {later}, {zero8} : i8")
            flag = f.op(f"arith.select {on}, {one8}, {zero8} : i8")
            f.emit(f"memref.store {flag}, {level}[{i}] : memref<?xi8>")
            f.end()
            if r < rounds:
                # And every neighbour of a row needed after the next round (the sources
                # of its messages: the edges go both ways).
                i = f.loop(n)
                flag = f.op(f"memref.load {levels[r + 1]}[{i}] : memref<?xi8>")
                f.open_if(f.op(f"arith.cmpi ne, {flag}, {zero8} : i8"), None)
                u = _sources(f, i)
                f.emit(f"memref.store {one8}, {level}[{u}] : memref<?xi8>")
                f.end()
                f.end()
                f.end()

    def when(level: str | None, row: str) -> None:
        # Opens an scf.if on the row being needed (closed by the caller), or nothing.
        if level is not None:
            flag = f.op(f"memref.load {level}[{row}] : memref<?xi8>")
            f.open_if(f.op(f"arith.cmpi ne, {flag}, {f.op('arith.constant 0 : i8')} : i8"), None)

    def close(level: str | None) -> None:
        if level is not None:
            f.end()

    i = f.loop(n)
    when(levels[0], i)
    if queued:
        # The cached row (a function of the node's features alone), else computed into
        # the cache; then copied, as the rounds update it in place.
        ok = f.op(f"memref.load %ok_h[{i}] : memref<?xi8>")
        f.open_if(f.op(f"arith.cmpi eq, {ok}, {f.op('arith.constant 0 : i8')} : i8"), None)
        f.call("node_row", [_NF, (i, "index"), (xs, _rows(_NODE)), (i, "index")])
        f.call("encode", [(xs, _rows(_NODE)), (i, "index"), ("%cache_h", _rows(hid)), (i, "index")])
        f.emit(f"memref.store {f.op('arith.constant 1 : i8')}, %ok_h[{i}] : memref<?xi8>")
        f.end()
        q = f.loop(f.index(hid))
        f.store(f.load("%cache_h", hid, i, q), hs, hid, i, q)
        f.end()
    else:
        f.call("node_row", [_NF, (i, "index"), (xs, _rows(_NODE)), (i, "index")])
        f.call("encode", [(xs, _rows(_NODE)), (i, "index"), (hs, _rows(hid)), (i, "index")])
    close(levels[0])
    f.end()
    for r in range(rounds):
        total = f.alloc(n, hid)
        if queued:
            # Each needed row's messages, added up in the wrapper's order of their sources
            # (along every edge a -> b, then b -> a, in the edges' order): the scatter's.
            i = f.loop(n)
            when(levels[r + 1], i)
            q = f.loop(f.index(hid))
            f.store(f.zero, total, hid, i, q)
            f.end()
            u = _sources(f, i)
            q = f.loop(f.index(hid))
            f.store(
                f.op(f"arith.addf {f.load(total, hid, i, q)}, {f.load(hs, hid, u, q)} : f32"),
                total,
                hid,
                i,
                q,
            )
            f.end()
            f.end()
            close(levels[r + 1])
            f.end()
            _update(f, r, hs, total, hid, n, when, close, levels[r + 1])
            f.free(total, hid)
            continue
        # The neighbours' embeddings added up along every edge a -> b, then b -> a, in
        # the edges' order, as the network's scatter does.
        i = f.loop(n)
        when(levels[r + 1], i)
        q = f.loop(f.index(hid))
        f.store(f.zero, total, hid, i, q)
        f.end()
        close(levels[r + 1])
        f.end()
        for src, dst in ((0, 1), (1, 0)):
            j = f.loop(e)
            a = f.op(f"arith.index_cast {f.edge(j, src)} : i64 to index")
            b = f.op(f"arith.index_cast {f.edge(j, dst)} : i64 to index")
            when(levels[r + 1], b)
            q = f.loop(f.index(hid))
            s = f.op(f"arith.addf {f.load(total, hid, b, q)}, {f.load(hs, hid, a, q)} : f32")
            f.store(s, total, hid, b, q)
            f.end()
            close(levels[r + 1])
            f.end()
        _update(f, r, hs, total, hid, n, when, close, levels[r + 1])
        f.free(total, hid)
    for level in levels:
        if level is not None:
            f.emit(f"memref.dealloc {level} : memref<?xi8>")
    return xs, hs


def _update(
    f: _Function,
    r: int,
    hs: str,
    total: str,
    hid: int,
    n: str,
    when: Callable[[str | None, str], None],
    close: Callable[[str | None], None],
    level: str | None,
) -> None:
    """Round ``r``'s update of every row (of ``level``), once all its totals are in."""
    i = f.loop(n)
    when(level, i)
    args = [(hs, _rows(hid)), (i, "index"), (total, _rows(hid)), (i, "index")]
    f.call(f"update{r}", [*args, (_degree(f, i), "f32")])
    close(level)
    f.end()


def _sources(f: _Function, node: str) -> str:
    """Opens a loop over the wrapper's list of ``node``'s message sources; the source."""
    bounds = [
        f.op(f"memref.load %start[{at}] : memref<?xi64>")
        for at in (node, f.op(f"arith.addi {node}, {f.c1} : index"))
    ]
    first, last = (f.op(f"arith.index_cast {b} : i64 to index") for b in bounds)
    k = f.fresh()
    f.emit(f"scf.for {k} = {first} to {last} step {f.c1} {{")
    f.indent += 2
    source = f.op(f"memref.load %sources[{k}] : memref<?xi64>")
    return f.op(f"arith.index_cast {source} : i64 to index")


def _degree(f: _Function, row: str) -> str:
    """The node's degree column, at least 1 (the mean's divisor)."""
    degree = f.op(f"memref.load %nf[{row}, {f.index(_DEGREE)}] : {_NF[1]}")
    one = f.f32(1.0)
    below = f.op(f"arith.cmpf olt, {degree}, {one} : f32")
    return f.op(f"arith.select {below}, {one}, {degree} : f32")


def _embed_node(f: _Function, policy: RegallocGNN, n: str, e: str, node: str) -> tuple[str, str]:
    """One-row buffers with ``node``'s transformed features and embedding."""
    hid = policy.hidden
    xv, hv = f.alloc(f.c1, _NODE), f.alloc(f.c1, hid)
    if policy.rounds >= 2:
        # Several rounds: the whole graph's (a coloring or split query's nodes reach far).
        xs, hs = _embed_all(f, policy, n, e)
        q = f.loop(f.index(hid))
        f.store(f.load(hs, hid, node, q), hv, hid, f.c0, q)
        f.end()
        q = f.loop(f.index(_NODE))
        f.store(f.load(xs, _NODE, node, q), xv, _NODE, f.c0, q)
        f.end()
        f.free(xs, _NODE)
        f.free(hs, hid)
        return xv, hv
    f.call("node_row", [_NF, (node, "index"), (xv, _rows(_NODE)), (f.c0, "index")])
    f.call("encode", [(xv, _rows(_NODE)), (f.c0, "index"), (hv, _rows(hid)), (f.c0, "index")])
    if policy.rounds == 0:
        return xv, hv
    total, xu, hu = f.scratch(hid), f.scratch(_NODE), f.scratch(hid)
    q = f.loop(f.index(hid))
    f.store(f.zero, total, hid, f.c0, q)
    f.end()
    node64 = f.op(f"arith.index_cast {node} : index to i64")

    def message(u: str) -> None:
        f.call("node_row", [_NF, (u, "index"), (xu, _rows(_NODE)), (f.c0, "index")])
        f.call("encode", [(xu, _rows(_NODE)), (f.c0, "index"), (hu, _rows(hid)), (f.c0, "index")])
        q = f.loop(f.index(hid))
        s = f.op(f"arith.addf {f.load(total, hid, f.c0, q)}, {f.load(hu, hid, f.c0, q)} : f32")
        f.store(s, total, hid, f.c0, q)
        f.end()

    # Messages into the node: along every edge (u, node), then every (node, u).
    for src, dst in ((0, 1), (1, 0)):
        j = f.loop(e)
        f.open_if(f.op(f"arith.cmpi eq, {f.edge(j, dst)}, {node64} : i64"), None)
        message(f.op(f"arith.index_cast {f.edge(j, src)} : i64 to index"))
        f.end()
        f.end()
    f.call(
        "update0",
        [
            (hv, _rows(hid)),
            (f.c0, "index"),
            (total, _rows(hid)),
            (f.c0, "index"),
            (_degree(f, node), "f32"),
        ],
    )
    return xv, hv


def _masked_choice(f: _Function, scores: str, index: str, score: str) -> None:
    """scores[index] = score where action_mask[index] > 0, else the illegal score."""
    from mlbridge.regalloc.gnn import ILLEGAL_SCORE

    legal = f.op(
        f"arith.cmpi sgt, {f.op(f'memref.load %mask[{index}] : memref<?xi64>')}, {f.zero64} : i64"
    )
    value = f.op(f"arith.select {legal}, {score}, {f.f32(ILLEGAL_SCORE)} : f32")
    f.emit(f"memref.store {value}, {scores}[{index}] : memref<?xf32>")


def _choose(f: _Function, scores: str) -> None:
    best = f.call("first_best", [(scores, "memref<?xf32>")], "i64")
    f.emit(f"memref.store {best}, %action[{f.c0}] : memref<1xi64>")
    f.emit(f"memref.dealloc {scores} : memref<?xf32>")


def _candidates(
    f: _Function,
    policy: RegallocGNN,
    xv: str,
    hv: str,
    actions: str,
    features: tuple[str, int],
    transform: tuple[str, int],
    score: str,
    spill: str,
) -> None:
    """Yields the status of a coloring or split query.

    Its candidates' scores, then spilling's, masked; the first best is stored.
    """
    hid = policy.hidden
    buf, width = features
    count = f.op(f"memref.dim {buf}, {f.c0} : {_rows(width)}")
    wanted = f.op(f"arith.addi {count}, {f.c1} : index")
    status = f.open_if(f.op(f"arith.cmpi eq, {actions}, {wanted} : index"))
    scores = f.op(f"memref.alloc({actions}) : memref<?xf32>")
    row = f.scratch(transform[1])
    node_args = [(hv, _rows(hid)), (f.c0, "index"), (xv, _rows(_NODE)), (f.c0, "index")]
    i = f.loop(count)
    f.call(transform[0], [(buf, _rows(width)), (i, "index"), (row, _rows(transform[1]))])
    s = f.call(score, [*node_args, (row, _rows(transform[1])), (f.c0, "index")], "f32")
    _masked_choice(f, scores, i, s)
    f.end()
    _masked_choice(f, scores, count, f.call(spill, node_args, "f32"))
    _choose(f, scores)
    f.yield_status(0)
    f.otherwise()
    f.yield_status(2)
    f.end()
    f.emit(f"scf.yield {status} : i32")


def regalloc_mlir(policy: RegallocGNN) -> str:
    """The MLIR module of ``policy``'s deterministic decisions (see the module's docs).

    ``regalloc_agents(agent, node_features, edges, node, register_features,
    block_features, action_mask, action, reuse, ok_h, ok_score, cache_x, cache_h,
    cache_score, start, sources) -> i32`` (``memref`` arguments, C interface) stores the
    action and returns 0, or returns a status of :data:`STATUS_MESSAGES`. The arguments
    after ``action`` are the wrapper's cache, a row per node for a priority query (else
    empty): which scores to reuse, which cached encodings and scores are valid (set
    here for what it computes), the cached rows, and each node's message sources in the
    network's order (``sources[start[v]:start[v + 1]]``).
    """
    from mlbridge.regalloc.gnn import ILLEGAL_SCORE

    policy = policy.eval()
    hid = policy.hidden
    m = _Module()
    _row_functions(m, policy)
    f = m.function(
        f"  func.func @{MODEL_FUNCTION}(%agent: memref<1xi64>, %nf: {_NF[1]}, "
        "%edges: memref<?x2xi64>, %node: memref<1xi64>, %rf: memref<?x5xf32>, "
        "%bf: memref<?x7xf32>, %mask: memref<?xi64>, %action: memref<1xi64>, "
        "%reuse: memref<?xi8>, %ok_h: memref<?xi8>, %ok_score: memref<?xi8>, "
        f"%cache_x: {_rows(_NODE)}, %cache_h: {_rows(hid)}, %cache_score: memref<?xf32>, "
        "%start: memref<?xi64>, %sources: memref<?xi64>) "
        "-> i32 attributes {llvm.emit_c_interface} {"
    )
    n = f.op(f"memref.dim %nf, {f.c0} : {_NF[1]}")
    e = f.op(f"memref.dim %edges, {f.c0} : memref<?x2xi64>")
    actions = f.op(f"memref.dim %mask, {f.c0} : memref<?xi64>")
    n64 = f.op(f"arith.index_cast {n} : index to i64")
    # Status 1 before anything reads a node: every edge's ends in [0, N).
    bad = f.fresh()
    no = f.op("arith.constant false")
    f.emit(f"{bad} = scf.for %j = {f.c0} to {e} step {f.c1} iter_args(%b = {no}) -> (i1) {{")
    for k in (0, 1):
        f.emit(f"  %end{k} = memref.load %edges[%j, {f.index(k)}] : memref<?x2xi64>")
        f.emit(f"  %low{k} = arith.cmpi slt, %end{k}, {f.zero64} : i64")
        f.emit(f"  %high{k} = arith.cmpi sge, %end{k}, {n64} : i64")
        f.emit(f"  %out{k} = arith.ori %low{k}, %high{k} : i1")
    f.emit("  %either = arith.ori %out0, %out1 : i1")
    f.emit("  %any = arith.ori %b, %either : i1")
    f.emit("  scf.yield %any : i1")
    f.emit("}")
    agent = f.op(f"memref.load %agent[{f.c0}] : memref<1xi64>")
    node64 = f.op(f"memref.load %node[{f.c0}] : memref<1xi64>")
    status = f.open_if(bad)
    f.yield_status(1)
    f.otherwise()
    # The ONNX export's branches: priority (0), coloring (1), split (anything else).
    priority = f.open_if(f.op(f"arith.cmpi eq, {agent}, {f.zero64} : i64"))
    checked = f.open_if(f.op(f"arith.cmpi eq, {actions}, {n} : index"))
    # The wrapper's cache has a row per node (else it could not allocate one).
    cached = f.op(f"memref.dim %reuse, {f.c0} : memref<?xi8>")
    ready = f.open_if(f.op(f"arith.cmpi eq, {cached}, {n} : index"))
    xs, hs = _embed_all(f, policy, n, e, queued=True)
    scores = f.op(f"memref.alloc({actions}) : memref<?xf32>")
    i = f.loop(n)
    # A queued node's score (the cache's where the wrapper found the node's inputs
    # unchanged since it was computed); the others' are illegal whatever they would be.
    legal = f.op(
        f"arith.cmpi sgt, {f.op(f'memref.load %mask[{i}] : memref<?xi64>')}, {f.zero64} : i64"
    )
    score = f.open_if(legal, "f32")
    reused = f.op(f"memref.load %reuse[{i}] : memref<?xi8>")
    fresh = f.open_if(f.op(f"arith.cmpi eq, {reused}, {f.op('arith.constant 0 : i8')} : i8"), "f32")
    node_args = [(hs, _rows(hid)), (i, "index"), (xs, _rows(_NODE)), (i, "index")]
    computed = f.call("priority_score", node_args, "f32")
    f.emit(f"memref.store {computed}, %cache_score[{i}] : memref<?xf32>")
    f.emit(f"memref.store {f.op('arith.constant 1 : i8')}, %ok_score[{i}] : memref<?xi8>")
    f.emit(f"scf.yield {computed} : f32")
    f.otherwise()
    f.emit(f"scf.yield {f.op(f'memref.load %cache_score[{i}] : memref<?xf32>')} : f32")
    f.end()
    f.emit(f"scf.yield {fresh} : f32")
    f.otherwise()
    f.emit(f"scf.yield {f.f32(ILLEGAL_SCORE)} : f32")
    f.end()
    f.emit(f"memref.store {score}, {scores}[{i}] : memref<?xf32>")
    f.end()
    _choose(f, scores)
    f.free(hs, hid)
    f.yield_status(0)
    f.otherwise()
    f.yield_status(5)
    f.end()
    f.emit(f"scf.yield {ready} : i32")
    f.otherwise()
    f.yield_status(2)
    f.end()
    f.emit(f"scf.yield {checked} : i32")
    f.otherwise()
    inside = f.op(
        f"arith.andi {f.op(f'arith.cmpi sge, {node64}, {f.zero64} : i64')}, "
        f"{f.op(f'arith.cmpi slt, {node64}, {n64} : i64')} : i1"
    )
    located = f.open_if(inside)
    node = f.op(f"arith.index_cast {node64} : i64 to index")
    xv, hv = _embed_node(f, policy, n, e, node)
    coloring = f.open_if(f.op(f"arith.cmpi eq, {agent}, {f.op('arith.constant 1 : i64')} : i64"))
    _candidates(
        f,
        policy,
        xv,
        hv,
        actions,
        ("%rf", 5),
        ("register_row", _REG),
        "register_score",
        "spill_score",
    )
    f.otherwise()
    if policy.split:
        _candidates(
            f,
            policy,
            xv,
            hv,
            actions,
            ("%bf", 7),
            ("block_row", _BLOCK),
            "block_score",
            "split_spill_score",
        )
    else:
        # A policy without a split agent spills (the last action), as its export does.
        some = f.open_if(f.op(f"arith.cmpi sgt, {actions}, {f.c0} : index"))
        last = f.op(f"arith.subi {actions}, {f.c1} : index")
        f.emit(
            f"memref.store {f.op(f'arith.index_cast {last} : index to i64')}, "
            f"%action[{f.c0}] : memref<1xi64>"
        )
        f.yield_status(0)
        f.otherwise()
        f.yield_status(2)
        f.end()
        f.emit(f"scf.yield {some} : i32")
    f.end()
    f.free(xv, _NODE)
    f.free(hv, hid)
    f.emit(f"scf.yield {coloring} : i32")
    f.otherwise()
    f.yield_status(3)
    f.end()
    f.emit(f"scf.yield {located} : i32")
    f.end()
    f.emit(f"scf.yield {priority} : i32")
    f.end()
    m.add(f.text(f"return {status} : i32"))
    return m.text()


_C_TYPES = {"f32": 8, "i64": 6}  # mlbridge::ElementType numbers (Float, Int64)


def _c_wrapper(hidden: int, rounds: int) -> str:
    """The C side of the shared object: mlbridge's AOT ABI over :data:`MODEL_FUNCTION`.

    It keeps the priority agent's cache: between one priority query and the next, the
    allocator changes a few nodes' features and edges, so most nodes' scores and
    encodings are the same. A score is a function of the node's features and, after
    ``rounds`` rounds of messages, of the sources of the messages into it (in order) and
    their features, ``rounds`` edges deep; the wrapper compares these with the last
    priority query's (the features bit for bit) and lets the model reuse what is
    unchanged. Reused values are the ones the same operations on the same inputs give.
    """
    names = ", ".join(f'"{name}"' for name, _, _ in _ARGS)
    types = ", ".join(str(_C_TYPES[t]) for _, t, _ in _ARGS)
    ranks = ", ".join("1" if c is None or c == 0 else "2" for _, _, c in _ARGS)
    shapes = "\n".join(
        f"static const int64_t kShape{i}[] = "
        + ("{1};" if c is None else "{-1};" if c == 0 else f"{{-1, {c}}};")
        for i, (_, _, c) in enumerate(_ARGS)
    )
    widths = ", ".join("0" if c is None else str(max(c, 1)) for _, _, c in _ARGS)
    shape_names = ", ".join(f"kShape{i}" for i in range(len(_ARGS)))
    messages = "\n".join(f'    case {k}: return "{v}";' for k, v in STATUS_MESSAGES.items())
    return f"""\
/* Generated by mlbridge.regalloc.native: mlbridge's AOT C ABI (version 1, with
 * set_arg_data, set_arg_rows and error_message) over the MLIR function
 * {MODEL_FUNCTION}. Inputs with rows (a leading -1) read the caller's buffers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))
#define NUM_ARGS {len(_ARGS)}
#define FEATURES {len(NODE_FEATURES)} /* columns of node_features */
#define ENCODED {_NODE}   /* columns of a transformed row */
#define HIDDEN {hidden}
#define ROUNDS {rounds}

struct memref1 {{ void *allocated, *aligned; int64_t offset, size[1], stride[1]; }};
struct memref2 {{ void *allocated, *aligned; int64_t offset, size[2], stride[2]; }};

#define MODEL_ARGS struct memref1 *, struct memref2 *, struct memref2 *, \
    struct memref1 *, struct memref2 *, struct memref2 *, struct memref1 *, \
    struct memref1 *, struct memref1 *, struct memref1 *, struct memref1 *, \
    struct memref2 *, struct memref2 *, struct memref1 *, struct memref1 *, \
    struct memref1 *
int32_t _mlir_ciface_{MODEL_FUNCTION}_base(MODEL_ARGS);
int32_t _mlir_ciface_{MODEL_FUNCTION}_avx2(MODEL_ARGS);

static const char *const kNames[NUM_ARGS] = {{{names}}};
static const int32_t kTypes[NUM_ARGS] = {{{types}}};
static const int32_t kRanks[NUM_ARGS] = {{{ranks}}};
{shapes}
static const int64_t *const kShapes[NUM_ARGS] = {{{shape_names}}};
/* Columns of a row (0: a single value, no rows). */
static const int64_t kWidths[NUM_ARGS] = {{{widths}}};
static const int64_t kOne[1] = {{1}};

/* What the last priority query left, per node: its features (bits), its transformed
 * row and encoding (valid where ok_h), its score (valid where ok_score), and the
 * sources of the messages into it (sources[start[v]] to sources[start[v + 1]]). */
struct cache {{
  int64_t capacity, source_capacity;
  int64_t rows; /* the last priority query's N; rows past it are unknown */
  uint32_t *key;
  float *x, *h, *score;
  int8_t *ok_h, *ok_score, *reuse, *clean, *next_clean, *same_sources;
  int64_t *start, *sources, *next_start, *next_sources, *fill;
  int64_t *edges, edge_count; /* the last priority query's */
}};

struct mlbridge_aot_instance {{
  const void *data[NUM_ARGS]; /* the caller's buffers, or own for single values */
  int64_t rows[NUM_ARGS];
  int64_t own[NUM_ARGS];
  int64_t action;
  int32_t status;
  struct cache cache;
}};

static int valid(int32_t i) {{ return i >= 0 && i < NUM_ARGS; }}

API uint32_t mlbridge_aot_abi_version(void) {{ return 1; }}
API const char *mlbridge_aot_model_name(void) {{ return "{MODEL_FUNCTION}"; }}
API int32_t mlbridge_aot_num_args(void) {{ return NUM_ARGS; }}
API const char *mlbridge_aot_arg_name(int32_t i) {{ return valid(i) ? kNames[i] : 0; }}
API int32_t mlbridge_aot_arg_type(int32_t i) {{ return valid(i) ? kTypes[i] : -1; }}
API int32_t mlbridge_aot_arg_rank(int32_t i) {{ return valid(i) ? kRanks[i] : -1; }}
API const int64_t *mlbridge_aot_arg_shape(int32_t i) {{ return valid(i) ? kShapes[i] : 0; }}
API int32_t mlbridge_aot_num_results(void) {{ return 1; }}
API const char *mlbridge_aot_result_name(int32_t i) {{ return i == 0 ? "{ADVICE}" : 0; }}
API int32_t mlbridge_aot_result_type(int32_t i) {{ return i == 0 ? {_C_TYPES["i64"]} : -1; }}
API int32_t mlbridge_aot_result_rank(int32_t i) {{ return i == 0 ? 1 : -1; }}
API const int64_t *mlbridge_aot_result_shape(int32_t i) {{ return i == 0 ? kOne : 0; }}

API struct mlbridge_aot_instance *mlbridge_aot_create(void) {{
  struct mlbridge_aot_instance *P = calloc(1, sizeof(struct mlbridge_aot_instance));
  if (P)
    for (int32_t i = 0; i < NUM_ARGS; ++i)
      P->data[i] = &P->own[i];
  return P;
}}
API void mlbridge_aot_destroy(struct mlbridge_aot_instance *P) {{
  if (!P)
    return;
  struct cache *C = &P->cache;
  void *owned[] = {{C->key, C->x, C->h, C->score, C->ok_h, C->ok_score, C->reuse, C->clean,
                   C->next_clean, C->same_sources, C->start, C->sources, C->next_start,
                   C->next_sources, C->fill, C->edges}};
  for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); ++i)
    free(owned[i]);
  free(P);
}}
/* A single value's own buffer; an input with rows has none (set_arg_data). */
API void *mlbridge_aot_arg_data(struct mlbridge_aot_instance *P, int32_t i) {{
  return P && valid(i) && !kWidths[i] ? &P->own[i] : 0;
}}
API const void *mlbridge_aot_result_data(struct mlbridge_aot_instance *P, int32_t i) {{
  return P && i == 0 ? &P->action : 0;
}}
/* Input i reads the caller's buffer (aligned to its element size, valid while the
 * instance runs); null: its own (a single value's) or none. 0 on success. */
API int32_t mlbridge_aot_set_arg_data(struct mlbridge_aot_instance *P, int32_t i,
                                      const void *data) {{
  if (!P || !valid(i) || ((uintptr_t)data % (kTypes[i] == 8 ? 4 : 8)))
    return 1;
  P->data[i] = data ? data : &P->own[i];
  return 0;
}}
/* The rows of input i (one with a leading -1) for the following runs. 0 on success. */
API int32_t mlbridge_aot_set_arg_rows(struct mlbridge_aot_instance *P, int32_t i,
                                      int64_t rows) {{
  if (!P || !valid(i) || !kWidths[i] || rows < 0)
    return 1;
  P->rows[i] = rows;
  return 0;
}}
/* What the last failed run did not accept. */
API const char *mlbridge_aot_error_message(struct mlbridge_aot_instance *P) {{
  switch (P ? P->status : 0) {{
{messages}
    default: return "no error";
  }}
}}

static struct memref1 vector(const void *p, int64_t n) {{
  struct memref1 m = {{(void *)p, (void *)p, 0, {{n}}, {{1}}}};
  return m;
}}
static struct memref2 matrix(const void *p, int64_t n, int64_t w) {{
  struct memref2 m = {{(void *)p, (void *)p, 0, {{n, w}}, {{w, 1}}}};
  return m;
}}

/* *p grown to count elements of size bytes (its contents kept); 0 if out of memory. */
static int grow(void *p, int64_t count, size_t size) {{
  void *bigger = realloc(*(void **)p, (size_t)count * size);
  if (!bigger)
    return 0;
  *(void **)p = bigger;
  return 1;
}}

/* Room for n nodes and s message sources; 0 if out of memory (the cache then forgets
 * everything, as the arrays may be of different sizes). */
static int reserve(struct cache *C, int64_t n, int64_t s) {{
  if (n + 1 > C->capacity) {{ /* start has a row more */
    int64_t c = n + 1 > 2 * C->capacity ? n + 1 : 2 * C->capacity;
    int ok = grow(&C->key, c * FEATURES, 4) && grow(&C->x, c * ENCODED, 4) &&
             grow(&C->h, c * HIDDEN, 4) && grow(&C->score, c, 4) && grow(&C->ok_h, c, 1) &&
             grow(&C->ok_score, c, 1) && grow(&C->reuse, c, 1) && grow(&C->clean, c, 1) &&
             grow(&C->next_clean, c, 1) && grow(&C->same_sources, c, 1) &&
             grow(&C->start, c, 8) && grow(&C->next_start, c, 8) &&
             grow(&C->fill, c, 8);
    if (!ok) {{
      C->rows = 0;
      return 0;
    }}
    C->capacity = c;
  }}
  if (s > C->source_capacity) {{
    int64_t c = s > 2 * C->source_capacity ? s : 2 * C->source_capacity;
    if (!grow(&C->sources, c, 8) || !grow(&C->next_sources, c, 8) || !grow(&C->edges, c, 8)) {{
      C->rows = 0;
      return 0;
    }}
    C->source_capacity = c;
  }}
  return 1;
}}

/* Whether the edges are the last priority query's (and N): the allocator sends the
 * whole interference graph, which changes only when a node or an edge is added. */
static int same_edges(const struct cache *C, int64_t n, int64_t e, const int64_t *edges) {{
  return n == C->rows && e == C->edge_count &&
         (e == 0 || !memcmp(C->edges, edges, (size_t)e * 16));
}}

/* Every edge's ends in [0, N) (else the model refuses the query). */
static int inside(int64_t n, int64_t e, const int64_t *edges) {{
  uint64_t outside = 0; /* branch-free, so vectorized */
  for (int64_t j = 0; j < 2 * e; ++j)
    outside |= (uint64_t)edges[j] >= (uint64_t)n;
  return !outside;
}}

/* The sources of each node's messages in the model's order (along every edge (a, b)
 * into b, then along every edge into a), and which nodes' lists are the last query's. */
static void index_sources(struct cache *C, int64_t n, int64_t e, const int64_t *edges) {{
  memset(C->fill, 0, (size_t)n * 8);
  for (int64_t j = 0; j < e; ++j) {{
    ++C->fill[edges[2 * j + 1]];
    ++C->fill[edges[2 * j]];
  }}
  C->next_start[0] = 0;
  for (int64_t v = 0; v < n; ++v) {{
    C->next_start[v + 1] = C->next_start[v] + C->fill[v];
    C->fill[v] = C->next_start[v];
  }}
  for (int64_t j = 0; j < e; ++j)
    C->next_sources[C->fill[edges[2 * j + 1]]++] = edges[2 * j];
  for (int64_t j = 0; j < e; ++j)
    C->next_sources[C->fill[edges[2 * j]]++] = edges[2 * j + 1];
  for (int64_t v = 0; v < n; ++v) {{
    int64_t count = C->next_start[v + 1] - C->next_start[v];
    int8_t same = v < C->rows && C->start[v + 1] - C->start[v] == count;
    const int64_t *was = C->sources + C->start[v], *now = C->next_sources + C->next_start[v];
    for (int64_t k = 0; same && k < count; ++k)
      same = was[k] == now[k];
    C->same_sources[v] = same;
  }}
  int64_t *t = C->start;
  C->start = C->next_start;
  C->next_start = t;
  t = C->sources;
  C->sources = C->next_sources;
  C->next_sources = t;
  if (e)
    memcpy(C->edges, edges, (size_t)e * 16);
  C->edge_count = e;
}}

/* For a priority query the model answers (agent 0, a mask of N, every edge inside):
 * compares it with the last one, clears what changed and sets reuse[v] where node v's
 * score is the cache's. 0 for another query, or if out of memory. */
static int prepare(struct mlbridge_aot_instance *P) {{
  struct cache *C = &P->cache;
  int64_t n = P->rows[1], e = P->rows[2];
  const uint32_t *features = P->data[1];
  const int64_t *edges = P->data[2];
  if (*(const int64_t *)P->data[0] != 0 || P->rows[6] != n)
    return 0;
  int unchanged = same_edges(C, n, e, edges);
  if (!unchanged && !inside(n, e, edges))
    return 0;
  if (!reserve(C, n, 2 * e))
    return 0;
  /* clean[v]: what node v reads is the last query's (its features, bit for bit:
   * 0.0 and -0.0 differ), after 0 rounds of messages, then after each. */
  for (int64_t v = 0; v < n; ++v) {{
    const uint32_t *row = features + v * FEATURES;
    uint32_t *key = C->key + v * FEATURES;
    uint32_t differ = v >= C->rows;
    for (int c = 0; !differ && c < FEATURES; ++c)
      differ |= row[c] ^ key[c];
    if (differ) {{
      memcpy(key, row, FEATURES * 4);
      C->ok_h[v] = C->ok_score[v] = 0;
    }}
    C->clean[v] = !differ;
  }}
  if (unchanged) {{
    /* Outwards from the changed nodes, a ring of neighbours a round (the edges go
     * both ways, so a node's sources are the nodes it sends to). */
    int64_t *changed = C->fill, count = 0, begin = 0;
    for (int64_t v = 0; v < n; ++v)
      if (!C->clean[v])
        changed[count++] = v;
    for (int r = 0; r < ROUNDS; ++r) {{
      int64_t end = count;
      for (int64_t i = begin; i < end; ++i)
        for (int64_t k = C->start[changed[i]]; k < C->start[changed[i] + 1]; ++k)
          if (C->clean[C->sources[k]]) {{
            C->clean[C->sources[k]] = 0;
            changed[count++] = C->sources[k];
          }}
      begin = end;
    }}
  }} else {{
    index_sources(C, n, e, edges);
    for (int r = 0; r < ROUNDS; ++r) {{
      for (int64_t v = 0; v < n; ++v) {{
        int8_t still = C->clean[v] && C->same_sources[v];
        for (int64_t k = C->start[v]; still && k < C->start[v + 1]; ++k)
          still = C->clean[C->sources[k]];
        C->next_clean[v] = still;
      }}
      int8_t *t = C->clean;
      C->clean = C->next_clean;
      C->next_clean = t;
    }}
  }}
  for (int64_t v = 0; v < n; ++v) {{
    if (!C->clean[v])
      C->ok_score[v] = 0;
    C->reuse[v] = C->ok_score[v];
  }}
  C->rows = n;
  return 1;
}}

/* 0 on success; else error_message says why. */
API int32_t mlbridge_aot_run(struct mlbridge_aot_instance *P) {{
  if (!P)
    return 1;
  for (int32_t i = 0; i < NUM_ARGS; ++i)
    if (kWidths[i] && P->rows[i] && P->data[i] == &P->own[i])
      return P->status = 4;
  struct memref1 agent = vector(P->data[0], 1), node = vector(P->data[3], 1);
  struct memref2 nf = matrix(P->data[1], P->rows[1], kWidths[1]);
  struct memref2 edges = matrix(P->data[2], P->rows[2], kWidths[2]);
  struct memref2 rf = matrix(P->data[4], P->rows[4], kWidths[4]);
  struct memref2 bf = matrix(P->data[5], P->rows[5], kWidths[5]);
  struct memref1 mask = vector(P->data[6], P->rows[6]);
  struct memref1 action = vector(&P->action, 1);
  /* The cache's rows, for a priority query only (none: the model refuses the query,
   * or says the cache could not be allocated). */
  struct cache *C = &P->cache;
  int64_t n = prepare(P) ? P->rows[1] : 0;
  struct memref1 reuse = vector(C->reuse, n), ok_h = vector(C->ok_h, n);
  struct memref1 ok_score = vector(C->ok_score, n), score = vector(C->score, n);
  struct memref2 x = matrix(C->x, n, ENCODED), h = matrix(C->h, n, HIDDEN);
  struct memref1 start = vector(C->start, n ? n + 1 : 0);
  struct memref1 sources = vector(C->sources, n ? C->start[n] : 0);
  /* The same operations in the same order either way: the same floats. */
  P->status = __builtin_cpu_supports("avx2")
      ? _mlir_ciface_{MODEL_FUNCTION}_avx2(&agent, &nf, &edges, &node, &rf, &bf, &mask, &action,
                                           &reuse, &ok_h, &ok_score, &x, &h, &score, &start,
                                           &sources)
      : _mlir_ciface_{MODEL_FUNCTION}_base(&agent, &nf, &edges, &node, &rf, &bf, &mask, &action,
                                           &reuse, &ok_h, &ok_score, &x, &h, &score, &start,
                                           &sources);
  return P->status;
}}
"""


#: The ``mlir-opt-22`` passes from this module's dialects to the LLVM dialect.
_LOWERING = (
    "--convert-scf-to-cf",
    "--convert-math-to-libm",
    "--expand-strided-metadata",
    "--finalize-memref-to-llvm",
    "--convert-to-llvm",
    "--reconcile-unrealized-casts",
)


def compile_native(policy: RegallocGNN, out: str | Path) -> Path:
    """Compiles ``policy`` into the shared object ``out`` (and ``<stem>.specs.json``).

    The object needs only the C library and libm and exports mlbridge's AOT C ABI
    (``TFAOTModelRunner::load``; the registry's kind ``native``): the features of
    :func:`~mlbridge.regalloc.interface.feature_specs` but ``function_name`` and
    ``spill_weights``, which the network does not read, and the advice.

    Raises:
        NativeCompileError: If a tool fails (a bug: the message says so).
        mlbridge.llvm.LLVMToolError: If an LLVM or MLIR 22 tool is missing.
    """
    out = Path(out)
    text = regalloc_mlir(policy)
    mlir_opt, translate = find_llvm_tool("mlir-opt"), find_llvm_tool("mlir-translate")
    clang = find_llvm_tool("clang")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mlbridge-regalloc-native-") as tmp_name:
        tmp = Path(tmp_name)
        objects = []
        for variant, march in (("base", "x86-64"), ("avx2", "x86-64-v3")):
            # Each copy under its own names: the wrapper picks one at run time.
            source = text.replace(f"@{MODEL_FUNCTION}(", f"@{MODEL_FUNCTION}_{variant}(")
            for private in (
                "node_row",
                "encode",
                "update",
                "priority_score",
                "register_score",
                "spill_score",
                "block_score",
                "split_spill_score",
                "register_row",
                "block_row",
                "first_best",
            ):
                source = source.replace(f"@{private}", f"@{variant}_{private}")
            (tmp / f"{variant}.mlir").write_text(source, encoding="utf-8")
            run_tool(
                mlir_opt,
                [str(tmp / f"{variant}.mlir"), *_LOWERING, "-o", str(tmp / f"{variant}.llvm.mlir")],
                "lowering the agents",
            )
            run_tool(
                translate,
                [
                    "--mlir-to-llvmir",
                    str(tmp / f"{variant}.llvm.mlir"),
                    "-o",
                    str(tmp / f"{variant}.ll"),
                ],
                "translating the agents",
            )
            obj = tmp / f"{variant}.o"
            run_tool(
                clang,
                [
                    "-O2",
                    f"-march={march}",
                    "-fPIC",
                    "-Wno-override-module",
                    "-c",
                    str(tmp / f"{variant}.ll"),
                    "-o",
                    str(obj),
                ],
                "compiling the agents",
            )
            objects.append(str(obj))
        (tmp / "wrapper.c").write_text(_c_wrapper(policy.hidden, policy.rounds), encoding="utf-8")
        (tmp / "exports.map").write_text(
            "MLBRIDGE_AOT_1 { global: mlbridge_aot_*; local: *; };\n", encoding="utf-8"
        )
        run_tool(
            clang,
            [
                "-O2",
                "-fPIC",
                "-std=c11",
                "-shared",
                "-fvisibility=hidden",
                f"-Wl,--version-script={tmp / 'exports.map'}",
                "-Wl,--no-undefined",
                str(tmp / "wrapper.c"),
                *objects,
                "-lm",
                "-o",
                str(out),
            ],
            "linking the agents",
        )
    from mlbridge.regalloc.interface import feature_specs

    read = {name for name, _, _ in _ARGS}
    specs = {
        "name": MODEL_FUNCTION,
        "kind": "native",
        "features": [s.to_dict() for s in feature_specs() if s.name in read],
        "advice": [{"name": ADVICE, "type": "int64_t", "port": 0, "shape": [1]}],
    }
    specs_file = out.with_name(out.name.removesuffix(".so") + ".specs.json")
    specs_file.write_bytes(orjson.dumps(specs, option=orjson.OPT_INDENT_2) + b"\n")
    return out
