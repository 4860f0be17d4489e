#!/usr/bin/env python3
"""Round-trip benchmark of the in-process runners (a measurement, not a test).

The sweep of the ML-Compiler-Bridge paper through the runners that ship a model inside the
compiler: query Q sends L floats (L = 500, 1000, ..., 50000) to one fully-connected layer
and gets one float back; the C++ side (``mlbridge-bench-inprocess``,
``bench/InProcessRoundTrip.cpp``) checks every answer. Four modes run in one invocation:

- ``onnx``: ``mlbridge::OnnxModelRunner`` over ``dense<L>.onnx``;
- ``onnx-floor``: the same model through ONNX Runtime's C++ API directly (one session with
  the runner's options, ``Session::Run``);
- ``tfaot``: ``mlbridge::TFAOTModelRunner`` over ``dense<L>.so`` from ``mlbridge aot``;
- ``tfaot-floor``: the same shared object's C ABI directly (``arg_data``, ``run``,
  ``result_data``: one-line calls into the class XLA generated).

Every mode copies the query's floats into the buffer it evaluates (a pass computes its
features there), so the copy is in every figure; the ratio runner / floor is the runner's
own overhead. Repetitions are interleaved between modes, so drift hits all alike. Then the
thread run: the same work (``--work-reps`` sweeps) on 1 and on 2 threads, one runner per
thread (ONNX: over one shared session); and the memory run: many queries of one size, RSS
growth after warm-up.

Models are made once and cached in ``<build>/bench-models/`` (ONNX: instant; TF AOT: one
``mlbridge aot`` per size, about 10 s each, progress on stderr).

    .venv/bin/python bench/inprocess_roundtrip.py            # full (100 sizes)
    .venv/bin/python bench/inprocess_roundtrip.py --quick    # 10 sizes, fewer repetitions
    .venv/bin/python bench/inprocess_roundtrip.py --smoke    # 2 tiny sizes once: correctness

Results: ``bench/results/inprocess-roundtrip-<time>.json`` and ``.md`` (``--json`` also
writes the JSON where asked); the Markdown also goes to
``bench/results/inprocess-roundtrip-latest.md``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from mlbridge.bench.stats import WIDE_SPREAD, spread_stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roundtrip import weights  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BINARY = "mlbridge-bench-inprocess"
SIZES = [500 * k for k in range(1, 101)]
QUICK_SIZES = [5000 * k for k in range(1, 11)]
SMOKE_SIZES = [3, 40]
MODES = ("onnx", "onnx-floor", "tfaot", "tfaot-floor")
LABELS = {
    "onnx": "ONNX Runtime (OnnxModelRunner)",
    "onnx-floor": "ONNX Runtime floor (direct Session::Run)",
    "tfaot": "TF AOT (TFAOTModelRunner)",
    "tfaot-floor": "TF AOT floor (direct call of the compiled model)",
}
FLOOR_OF = {"onnx": "onnx-floor", "tfaot": "tfaot-floor"}
#: Issue "In-process model runners": runner overhead within 1.1x of the direct call.
TARGET_FLOOR_RATIO = 1.1
#: The paper's totals for the sweep (different hardware), for scale.
PAPER_MS = {"onnx": 68.0, "tfaot": 21.0}
#: Bumped when the models' contents change, so that stale cached models are not used.
MODEL_VERSION = "v1"


def _log(message: str) -> None:
    print(f"inprocess-roundtrip: {message}", file=sys.stderr, flush=True)


def write_onnx(path: Path, w: np.ndarray) -> None:
    """Writes ``y = x . w + 0.25`` (x float [1, L], y float [1, 1]) as an ONNX model."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    length = w.size
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"])],
        "roundtrip",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, length])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        initializer=[
            numpy_helper.from_array(w.reshape(length, 1).astype(np.float32), "w"),
            numpy_helper.from_array(np.array([[0.25]], dtype=np.float32), "b"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    tmp = path.with_suffix(".tmp")
    onnx.save(model, str(tmp))
    tmp.replace(path)


def make_models(models: Path, sizes: list[int], need_aot: bool, lock_timeout: float) -> None:
    """Makes every missing ``dense<L>.onnx`` and (if ``need_aot``) ``dense<L>.so``.

    Raises:
        RuntimeError: If another run holds the folder's lock for ``lock_timeout`` seconds.
    """
    models.mkdir(parents=True, exist_ok=True)
    # One run at a time makes the models: `mlbridge aot` stages files in the folder.
    with open(models / ".lock", "w") as lock:
        deadline = time.monotonic() + lock_timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"another benchmark run has been making models in {models} for over "
                        f"{lock_timeout:g} s (lock {models / '.lock'}); wait for it, or pass "
                        "--models-dir to use another folder"
                    ) from None
                time.sleep(0.5)
        _make_models_locked(models, sizes, need_aot)


def _make_models_locked(models: Path, sizes: list[int], need_aot: bool) -> None:
    w = weights(max(sizes))
    for length in sizes:
        if not (models / f"dense{length}.onnx").is_file():
            write_onnx(models / f"dense{length}.onnx", w[:length])
    missing = [n for n in sizes if need_aot and not (models / f"dense{n}.so").is_file()]
    if not missing:
        return
    from mlbridge.aot.compile import compile_saved_model
    from mlbridge.aot.tfenv import run_tf_script

    _log(f"compiling {len(missing)} TF AOT models into {models} (once; about 10 s each)")
    with tempfile.TemporaryDirectory(prefix="mlbridge-bench-") as tmp:
        np.save(Path(tmp) / "w.npy", w)
        run_tf_script(
            Path(__file__).with_name("_tf_dense_models.py"),
            tmp, str(Path(tmp) / "w.npy"), ",".join(map(str, missing)),
            what="writing the round-trip SavedModels",
        )  # fmt: skip
        done = 0

        def compile_one(length: int) -> None:
            nonlocal done
            compile_saved_model(Path(tmp) / f"saved{length}", f"dense{length}", models, log=False)
            done += 1
            _log(f"  TF AOT model {done}/{len(missing)}: dense{length}.so")

        # Two at a time: each step is mostly one single-threaded subprocess.
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(compile_one, missing))


def run_binary(binary: Path, args: list[str], timeout: float) -> dict[str, Any]:
    """Runs the C++ side once and returns its JSON answer."""
    try:
        proc = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"{binary.name} {' '.join(args)} did not finish in {timeout} s") from e
    if proc.returncode != 0:
        raise RuntimeError(
            f"{binary.name} {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}"
        )
    return json.loads(proc.stdout)


def measure_sweep(
    binary: Path, models: Path, modes: list[str], sizes: list[int], rounds: int, reps: int,
    timeout: float,
) -> list[dict[str, Any]]:  # fmt: skip
    """``rounds`` interleaved rounds of ``reps`` sweeps per mode."""
    totals: dict[str, list[float]] = {m: [] for m in modes}
    per_size: dict[str, list[list[float]]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    checked = dict.fromkeys(modes, 0)
    common = [f"--models={models}", f"--sizes={','.join(map(str, sizes))}", f"--reps={reps}"]
    for r in range(rounds):
        for mode in modes:
            out = run_binary(binary, [f"--mode={mode}", *common], timeout)
            totals[mode] += out["total_seconds"]
            per_size[mode].append(out["per_size_seconds"])
            cpu[mode].append(out["cpu_seconds_per_rep"])
            checked[mode] += out["checked"]
            _log(
                f"round {r + 1}/{rounds} {LABELS[mode]:<48} "
                f"{statistics.median(out['total_seconds']) * 1000:8.3f} ms "
                f"({out['checked']} answers checked)"
            )
    rows = []
    for mode in modes:
        ms = [t * 1000 for t in totals[mode]]
        stats = spread_stats(ms)
        rows.append({
            "runner": mode,
            "label": LABELS[mode],
            "reps_ms": ms,
            "median_ms": stats["median"],
            "min_ms": stats["min"],
            "max_ms": stats["max"],
            "spread": stats["spread"],
            "cpu_ms": statistics.median(cpu[mode]) * 1000,
            "per_size_ms": {
                str(n): float(v) * 1000
                for n, v in zip(sizes, np.median(np.array(per_size[mode]), axis=0), strict=True)
            },
            "checked": checked[mode],
        })  # fmt: skip
    by_mode = {row["runner"]: row for row in rows}
    for mode, floor in FLOOR_OF.items():
        if mode in by_mode and floor in by_mode:
            by_mode[mode]["floor"] = floor
            by_mode[mode]["ratio_to_floor"] = (
                by_mode[mode]["median_ms"] / by_mode[floor]["median_ms"]
            )
    return rows


def measure_threads(
    binary: Path, models: Path, modes: list[str], sizes: list[int], work_reps: int, rounds: int,
    timeout: float,
) -> list[dict[str, Any]]:  # fmt: skip
    """The same work on 1 and on 2 threads, ``rounds`` times interleaved; the speed-up."""
    walls: dict[tuple[str, int], list[float]] = {}
    common = [f"--models={models}", f"--sizes={','.join(map(str, sizes))}",
              f"--work-reps={work_reps}"]  # fmt: skip
    for _ in range(rounds):
        for mode in modes:
            for threads in (1, 2):
                out = run_binary(
                    binary, [f"--mode={mode}", f"--threads={threads}", *common], timeout
                )
                walls.setdefault((mode, threads), []).append(out["wall_seconds"] * 1000)
    rows = []
    for mode in modes:
        one = statistics.median(walls[(mode, 1)])
        for threads in (1, 2):
            med = statistics.median(walls[(mode, threads)])
            rows.append({
                "runner": mode,
                "threads": threads,
                "median_ms": med,
                "spread": spread_stats(walls[(mode, threads)])["spread"],
                "speedup": one / med,
            })  # fmt: skip
        _log(f"threads {LABELS[mode]:<48} speed-up on 2 threads {rows[-1]['speedup']:.2f}x")
    return rows


def measure_memory(
    binary: Path, models: Path, modes: list[str], size: int, queries: int, timeout: float
) -> list[dict[str, Any]]:
    """Peak RSS and RSS growth over ``queries`` queries of ``size`` floats."""
    rows = []
    for mode in modes:
        out = run_binary(
            binary,
            [f"--mode={mode}", f"--models={models}", f"--sizes={size}",
             f"--memory-queries={queries}"],
            timeout,
        )  # fmt: skip
        rows.append({
            "runner": mode,
            "queries": out["queries"],
            "size": size,
            "peak_rss_kib": out["peak_rss_kib"],
            "growth_kib": out["rss_kib_end"] - out["rss_kib_after_warmup"],
            "seconds": out["wall_seconds"],
        })  # fmt: skip
        _log(f"memory {LABELS[mode]:<48} growth {rows[-1]['growth_kib']} KiB")
    return rows


def markdown(result: dict[str, Any]) -> str:
    """The results as a Markdown report."""
    meta = result["meta"]
    lines = [
        "# In-process round-trip benchmark",
        "",
        f"`{meta['command']}` on {meta['date']} ({result['machine']['summary']}).",
        "",
        f"Sweep: {meta['queries']} queries, one per size L = {meta['sizes']}, float32 [1, L] in, "
        "one float32 out (one dense layer); every answer checked. Total time of the queries "
        f"(C++ clock), {meta['samples']} samples per mode ({meta['rounds']} interleaved rounds of "
        f"{meta['reps']}): median, min, max, spread = (max - min) / median.",
        "",
        "| runner | median (ms) | min (ms) | max (ms) | spread | × floor | CPU (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["sweep"]:
        ratio = f"{row['ratio_to_floor']:.2f}" if "ratio_to_floor" in row else "1.00"
        lines.append(
            f"| {row['label']} | {row['median_ms']:.3f} | {row['min_ms']:.3f} | "
            f"{row['max_ms']:.3f} | {row['spread']:.0%} | {ratio} | {row['cpu_ms']:.3f} |"
        )
    lines += ["", "Targets (reported, not asserted):", ""]
    for row in result["sweep"]:
        if "ratio_to_floor" in row:
            verdict = "met" if row["ratio_to_floor"] <= TARGET_FLOOR_RATIO else "MISSED"
            paper = PAPER_MS[row["runner"]]
            lines.append(
                f"- {row['label']} within {TARGET_FLOOR_RATIO}x of its floor: "
                f"{row['ratio_to_floor']:.2f}x, {verdict}; total {row['median_ms']:.2f} ms "
                f"(the paper: {paper:.0f} ms on other hardware)"
            )
    if result["threads"]:
        lines += [
            "",
            f"Threads: {meta['work_reps']} sweeps split over 1 and 2 threads, one runner per "
            "thread (ONNX: one shared session per model); wall time, median of "
            f"{meta['thread_rounds']}.",
            "",
            "| runner | threads | wall (ms) | spread | speed-up |",
            "|---|---:|---:|---:|---:|",
        ]
        for row in result["threads"]:
            lines.append(
                f"| {LABELS[row['runner']]} | {row['threads']} | {row['median_ms']:.1f} | "
                f"{row['spread']:.0%} | {row['speedup']:.2f}x |"
            )
    if result["memory"]:
        lines += [
            "",
            "Memory: growth = RSS at the end minus RSS after the first tenth of the queries.",
            "",
            "| runner | queries | L | peak RSS (KiB) | growth (KiB) | time (s) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in result["memory"]:
            lines.append(
                f"| {LABELS[row['runner']]} | {row['queries']} | {row['size']} | "
                f"{row['peak_rss_kib']} | {row['growth_kib']} | {row['seconds']:.2f} |"
            )
    wide = [r for r in result["sweep"] if r["spread"] > WIDE_SPREAD]
    if wide:
        lines += ["", "**Warnings**", ""]
        lines += [
            f"- {r['label']}: spread {r['spread']:.0%} is wide (> {WIDE_SPREAD:.0%}): the machine "
            "was busy; compare medians with care."
            for r in wide
        ]
    return "\n".join(lines) + "\n"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": list(load),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "summary": f"{platform.machine()}, {os.cpu_count()} CPUs, load {load[0]:.2f}",
    }


def main(argv: list[str]) -> int:
    """Runs the benchmark; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )  # fmt: skip
    parser.add_argument(
        "--build-dir",
        type=Path,
        default=None,
        help="the build folder (default: $MLBRIDGE_BUILD_DIR or build/)",
    )
    parser.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES)
    )
    parser.add_argument("--sizes", help="comma-separated L values (default: 500..50000 step 500)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--reps", type=int, default=5, help="sweeps per mode and round (default 5)")
    parser.add_argument(
        "--work-reps",
        type=int,
        default=40,
        help="sweeps of the thread run, split over the threads (default 40)",
    )
    parser.add_argument("--memory-queries", type=int, default=100_000)
    parser.add_argument("--memory-size", type=int, default=5000)
    parser.add_argument(
        "--quick", action="store_true", help="10 sizes, 2 rounds, 10,000 memory queries"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="2 tiny sizes, once, no thread or memory run: correctness only",
    )
    parser.add_argument(
        "--models-dir", type=Path, help="model cache (default: <build>/bench-models)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--json", type=Path, help="also write the JSON result here")
    parser.add_argument("--timeout", type=float, default=600.0, help="bound of every run, seconds")
    args = parser.parse_args(argv)  # fmt: skip

    build = args.build_dir or Path(os.environ.get("MLBRIDGE_BUILD_DIR") or ROOT / "build")
    binary = build / "bin" / BINARY
    if not binary.is_file():
        _log(f"{binary} is not built: run `make build` first (or pass --build-dir)")
        return 2
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        _log(f"unknown mode(s) {unknown}; choose from {list(MODES)}")
        return 2
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",") if s]
    else:
        sizes = SMOKE_SIZES if args.smoke else QUICK_SIZES if args.quick else SIZES
    rounds = 1 if args.smoke else (2 if args.quick else args.rounds)
    reps = 1 if args.smoke else args.reps
    mem_queries = 0 if args.smoke else (10_000 if args.quick else args.memory_queries)
    models = args.models_dir or build / "bench-models" / MODEL_VERSION
    needed = sorted(set(sizes) | ({args.memory_size} if mem_queries else set()))
    need_aot = any(m.startswith("tfaot") for m in modes)
    make_models(models, needed, need_aot, lock_timeout=args.timeout)

    _log(f"{len(sizes)} sizes x {rounds * reps} samples, modes {modes}")
    sweep = measure_sweep(binary, models, modes, sizes, rounds, reps, args.timeout)
    runner_modes = [m for m in modes if m in FLOOR_OF]
    threads = (
        []
        if args.smoke
        else measure_threads(
            binary, models, runner_modes, sizes, args.work_reps, rounds, args.timeout
        )
    )
    memory = (
        measure_memory(binary, models, runner_modes, args.memory_size, mem_queries, args.timeout)
        if mem_queries
        else []
    )
    result = {
        "meta": {
            "command": "bench/inprocess_roundtrip.py " + " ".join(argv),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "sizes": f"{sizes[0]}..{sizes[-1]}" if len(sizes) > 3 else ", ".join(map(str, sizes)),
            "queries": len(sizes),
            "rounds": rounds,
            "reps": reps,
            "samples": rounds * reps,
            "work_reps": args.work_reps,
            "thread_rounds": rounds,
            "smoke": args.smoke,
        },
        "machine": machine(),
        "sweep": sweep,
        "threads": threads,
        "memory": memory,
    }
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"inprocess-roundtrip-{'smoke-' if args.smoke else ''}{stamp}"
    text = json.dumps(result, indent=1) + "\n"
    (args.out / f"{name}.json").write_text(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    md = markdown(result)
    (args.out / f"{name}.md").write_text(md)
    if not args.smoke and not args.sizes:
        (args.out / "inprocess-roundtrip-latest.md").write_text(md)
    print(md)
    _log(f"wrote {args.out / name}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
