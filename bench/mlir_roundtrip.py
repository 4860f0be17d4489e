#!/usr/bin/env python3
"""MLIR round-trip benchmark: the paper's MLIR experiment through mlir-opt-22 (a measurement).

``mlir-opt-22`` runs the plugin's ``mlbridge-roundtrip{length=L queries=Q runner=...}`` pass
(``passes/roundtrip/MLIRRoundTrip.cpp``): each query sends a float vector of length L to the model,
which applies one fully-connected layer (``w . x + b``, ``mlbridge.bench.roundtrip_model``) and
returns one float. The pass records every answer in the output module; this script checks
each one against numpy. Runners: ``pipe-bitstream`` and ``pipe-json`` (a Python model over
named pipes, ``mlbridge.compiler.pipe``), ``grpc`` (``mlbridge serve``), ``onnx`` (the layer
as an ONNX model, in-process), and ``callback`` (in-process C++, the sum of the inputs: the
floor). The time reported is the pass's own wall time from ``--mlir-timing`` (it includes
connecting to the model), per run of Q queries; the median of ``--reps`` runs.

    .venv/bin/python bench/mlir_roundtrip.py            # L = 500, 5000, 10000, ..., 50000
    .venv/bin/python bench/mlir_roundtrip.py --full     # L = 500, 1000, ..., 50000 (100 sizes)
    .venv/bin/python bench/mlir_roundtrip.py --smoke    # tiny sizes, once: correctness only

Results: ``bench/results/mlir-roundtrip-latest.md`` (and ``.json``). Needs the MLIR plugin
built (``mlbridge build``; ``$MLBRIDGE_BUILD_DIR`` picks the build folder).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mlbridge.bench.roundtrip_model import (
    RoundTripModel,
    roundtrip_bias,
    roundtrip_inputs,
    roundtrip_weights,
)
from mlbridge.compiler.pipe import drive_compiler
from mlbridge.llvm import find_llvm_tool
from mlbridge.paths import default_build_dir
from mlbridge.paths import plugin_path as _plugin_path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("callback", "pipe-bitstream", "pipe-json", "grpc", "onnx")
_ANSWERS = re.compile(r"mlbridge\.roundtrip_answers = array<f32:([^>]*)>")
_TIMING = re.compile(r"^\s*([0-9.]+)\s+\(\s*[0-9.]+%\)\s+\S*RoundTripPass\s*$", re.M)


def plugin_path() -> Path:
    path = _plugin_path("mlir", default_build_dir() or ROOT / "build")
    if not path.is_file():
        raise SystemExit(f"error: {path} is missing: build it first (mlbridge build)")
    return path


def expected(mode: str, length: int, queries: int) -> np.ndarray:
    x = np.stack([roundtrip_inputs(q, length) for q in range(queries)])
    if mode == "callback":
        return x.sum(axis=1, dtype=np.float64)
    return x.astype(np.float64) @ roundtrip_weights(length).astype(np.float64) + float(
        roundtrip_bias()
    )


def write_onnx(path: Path, length: int) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(roundtrip_weights(length).reshape(length, 1), "w")
    b = numpy_helper.from_array(np.array([roundtrip_bias()], dtype=np.float32), "b")
    nodes = [
        helper.make_node("Reshape", ["input", "row"], ["x"]),
        helper.make_node("Gemm", ["x", "w", "b"], ["y"]),
        helper.make_node("Reshape", ["y", "one"], ["output"]),
    ]
    row = numpy_helper.from_array(np.array([1, length], dtype=np.int64), "row")
    one = numpy_helper.from_array(np.array([1], dtype=np.int64), "one")
    graph = helper.make_graph(
        nodes, "roundtrip",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [length])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1])],
        initializer=[w, b, row, one],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def command(plugin: Path, options: str) -> list[str]:
    return [
        find_llvm_tool("mlir-opt"), f"--load-pass-plugin={plugin}", "--mlir-timing",
        f"--pass-pipeline=builtin.module(mlbridge-roundtrip{{{options}}})", "-",
    ]  # fmt: skip


def run_once(
    mode: str, plugin: Path, length: int, queries: int, tmp: Path, timeout: float,
    address: str | None,
) -> tuple[float, np.ndarray]:  # fmt: skip
    """One mlir-opt run; the pass's wall time (s) and its answers."""
    opts = f"length={length} queries={queries} timeout-ms={int(timeout * 1000)}"
    out = tmp / "out.mlir"
    err = tmp / "err.txt"

    def mlir_opt(extra: str) -> list[str]:
        return [*command(plugin, f"{opts} {extra}"), "-o", str(out)]

    with open(err, "w") as err_f:
        if mode.startswith("pipe-"):
            serdes = mode.split("-", 1)[1]
            argv = mlir_opt(f"runner=pipe channel={{base}} serdes={serdes}")
            # drive_compiler inherits our stdio: an empty module from a file, not stdin.
            src = tmp / "in.mlir"
            src.write_text("module {}\n")
            argv[-3] = str(src)
            saved = os.dup(2)
            os.dup2(err_f.fileno(), 2)
            try:
                result = drive_compiler(
                    argv, RoundTripModel(), serdes=serdes, timeout=timeout,
                    require_end=True, parent=tmp,
                )  # fmt: skip
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            code = result.returncode
        else:
            extra = {
                "callback": "runner=callback",
                "grpc": f"runner=grpc address={address}",
                "onnx": f"runner=onnx model={tmp / f'dense{length}.onnx'}",
            }[mode]
            code = subprocess.run(
                mlir_opt(extra), input="module {}\n", text=True, stderr=err_f,
                timeout=timeout,
            ).returncode  # fmt: skip
    text = err.read_text()
    if code != 0:
        raise RuntimeError(f"{mode} L={length}: mlir-opt exit {code}:\n{text[-2000:]}")
    timing = _TIMING.search(text)
    answers = _ANSWERS.search(out.read_text())
    if timing is None or answers is None:
        raise RuntimeError(f"{mode} L={length}: no timing or no answers in the output")
    values = np.array([float(v) for v in answers.group(1).split(",")], dtype=np.float64)
    return float(timing.group(1)), values


def check(mode: str, length: int, queries: int, got: np.ndarray) -> None:
    want = expected(mode, length, queries)
    # float32 sums of L terms: allow for summation order (C++, numpy, ONNX Runtime).
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5 * length):
        raise RuntimeError(f"{mode} L={length}: wrong answers {got[:4]} vs {want[:4]}")


class GrpcServer:
    """``mlbridge serve mlbridge.bench.roundtrip_model:RoundTripModel`` on a free loopback port."""

    def __init__(self, tmp: Path, timeout: float) -> None:
        ready = tmp / "ready"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlbridge", "serve",
             "mlbridge.bench.roundtrip_model:RoundTripModel", "--ready-file", str(ready)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not (ready.exists() and ready.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("mlbridge serve did not start")
            time.sleep(0.02)
        self.address = ready.read_text().strip()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run(
    modes: list[str], sizes: list[int], queries: int, reps: int, timeout: float,
    log: Callable[[str], None],
) -> dict[str, Any]:  # fmt: skip
    plugin = plugin_path()
    table: dict[str, dict[int, float]] = {m: {} for m in modes}
    with tempfile.TemporaryDirectory(prefix="mlbridge-mlir-bench-") as tmp_name:
        tmp = Path(tmp_name)
        server = GrpcServer(tmp, timeout) if "grpc" in modes else None
        try:
            for length in sizes:
                if "onnx" in modes:
                    write_onnx(tmp / f"dense{length}.onnx", length)
                for mode in modes:
                    times = []
                    for _ in range(reps):
                        t, answers = run_once(
                            mode, plugin, length, queries, tmp, timeout,
                            server.address if server else None,
                        )  # fmt: skip
                        check(mode, length, queries, answers)
                        times.append(t)
                    table[mode][length] = statistics.median(times)
                    log(f"{mode:15s} L={length:6d}: {table[mode][length] * 1e3:9.2f} ms")
        finally:
            if server is not None:
                server.close()
    return {"queries": queries, "reps": reps, "sizes": sizes, "seconds": table}


def markdown(result: dict[str, Any]) -> str:
    modes = list(result["seconds"])
    lines = [
        "# MLIR round trip (mlir-opt-22, mlbridge-roundtrip)",
        "",
        f"Pass wall time in ms for {result['queries']} queries of L floats each, one dense "
        f"layer per query; median of {result['reps']} runs; every answer checked.",
        "",
        "| L | " + " | ".join(modes) + " |",
        "|---:|" + "---:|" * len(modes),
    ]
    for length in result["sizes"]:
        row = [f"{result['seconds'][m][length] * 1e3:.2f}" for m in modes]
        lines.append(f"| {length} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--full", action="store_true", help="L = 500, 1000, ..., 50000")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, once, no files")
    parser.add_argument("--timeout", type=float, default=300.0, help="bound of every wait, s")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {', '.join(MODES)}")
    if args.smoke:
        sizes, queries, reps = [8, 24], 3, 1
    else:
        step = 500 if args.full else 5000
        sizes = [500] + list(range(step if step > 500 else 1000, 50001, step))
        queries, reps = args.queries, args.reps
    result = run(modes, sizes, queries, reps, args.timeout, lambda s: print(s, flush=True))
    if args.smoke:
        print(f"smoke: {len(modes)} runners x {len(sizes)} sizes, every answer correct")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mlir-roundtrip-latest.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "mlir-roundtrip-latest.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
