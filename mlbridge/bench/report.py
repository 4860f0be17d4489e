"""Run every benchmark of ``bench/`` once and collect the figures into one report.

The sections, each measured in this invocation on this machine:

1. the round-trip sweep (``bench/roundtrip.py``) from the C++ benchmark program, with the
   FIFO and bare-gRPC floors, and from the C API program (``mlbridge-bench-roundtrip-c``)
   against the same floors;
2. the same experiment from inside ``opt-22`` and ``mlir-opt-22`` (:mod:`mlbridge.bench.hosts`);
3. the in-process runners against direct calls, thread scaling and their memory
   (``bench/inprocess_roundtrip.py``, when present);
4. the inter-process runners' memory over a long run (``bench/roundtrip.py``);
5. compile time of the ML inliner (``bench/inliner_compile.py``) and of phase ordering
   with the built-in agent (``bench/phase_order_compile.py``), against stock opt-22.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlbridge.bench.hosts import MLIR_RUNNERS, OPT_RUNNERS, run_mlir_host, run_opt_host
from mlbridge.bench.machine import describe_machine, load_average
from mlbridge.bench.scripts import bench_dir, load_script
from mlbridge.bench.stats import spread_stats
from mlbridge.progress import track

__all__ = ["PAPER_TOTALS_MS", "Profile", "WIDE_SPREAD", "profile", "run_report"]

#: (max - min) / median above which a figure is flagged as too noisy to trust.
WIDE_SPREAD = 0.25
#: The ML-Compiler-Bridge paper's totals of the 100-query sweep (different hardware).
PAPER_TOTALS_MS = {
    "TF AOT": 21.0,
    "ONNX Runtime": 68.0,
    "pipe + bitstream": 772.0,
    "pipe + json": 3154.0,
    "gRPC": 5948.0,
}
#: Targets of the runner issues, reported against, never asserted.
TARGET_FLOOR_RATIO = 1.3
TARGET_JSON_MS = 1100.0 / 4
TARGET_INPROCESS_RATIO = 1.1
SWEEP_QUERIES = 100  # the paper's sweep: L = 500, 1000, ..., 50000
#: The host of the C++ program's sweep with both processes pinned to one core.
ONE_CORE_HOST = "C++ (one core)"

_C_MODES = ["bitstream", "json", "protobuf", "grpc"]
_CXX_MODES = ["bitstream", "json", "protobuf", "fifo", "grpc", "grpc-floor"]
_FLOOR_OF = {"bitstream": "fifo", "json": "fifo", "protobuf": "fifo", "grpc": "grpc-floor"}
_HOST_FLOOR_OF = {
    "pipe-bitstream": "fifo",
    "pipe-json": "fifo",
    "pipe-protobuf": "fifo",
    "grpc": "grpc-floor",
    "onnx": "callback",
}
_LABELS = {
    "bitstream": "pipe + bitstream",
    "json": "pipe + json",
    "protobuf": "pipe + protobuf",
    "fifo": "FIFO floor",
    "grpc": "gRPC",
    "grpc-floor": "gRPC floor",
    "pipe-bitstream": "pipe + bitstream",
    "pipe-json": "pipe + json",
    "pipe-protobuf": "pipe + protobuf",
    "onnx": "ONNX Runtime",
    "callback": "in-process C++ (callback floor)",
    "onnx-floor": "ONNX Runtime floor",
    "tfaot": "TF AOT",
    "tfaot-floor": "TF AOT floor",
}


@dataclass(frozen=True)
class Profile:
    """How much a run measures.

    Attributes:
        name: ``smoke``, ``quick`` or ``full``.
        sizes: L of the C++ / C API sweep.
        reps: Repetitions of every timed measurement.
        host_sizes: L of the opt and mlir-opt hosts (a subset: each is a compiler run).
        host_reps: Repetitions of every compiler run.
        host_queries: Queries per compiler run.
        memory_queries: Queries of the inter-process memory run (0: none).
        inliner_args: Extra arguments of ``bench/inliner_compile.py``.
        inprocess_args: Extra arguments of ``bench/inprocess_roundtrip.py``.
        phase_order_args: Extra arguments of ``bench/phase_order_compile.py``.
    """

    name: str
    sizes: list[int]
    reps: int
    host_sizes: list[int]
    host_reps: int
    host_queries: int
    memory_queries: int
    inliner_args: list[str]
    inprocess_args: list[str]
    phase_order_args: list[str]


def profile(name: str) -> Profile:
    """The profile ``smoke`` (correctness only), ``quick`` (< 2 min) or ``full`` (< 15 min)."""
    full_sizes = [500 * k for k in range(1, 101)]
    if name == "smoke":
        return Profile(
            "smoke", [1, 7, 33], 1, [8, 24], 1, 3, 0, ["--smoke"], ["--smoke"], ["--smoke"]
        )
    if name == "quick":
        return Profile(
            "quick",
            full_sizes,
            3,
            [500, 25000, 50000],
            3,
            10,
            10_000,
            ["--smoke"],
            ["--quick"],
            ["--modules", "4"],
        )
    if name == "full":
        return Profile(
            "full",
            full_sizes,
            11,
            [500, *range(5000, 50001, 5000)],
            3,
            20,
            100_000,
            ["--reps", "3"],
            [],
            [],
        )
    raise ValueError(f"unknown profile {name!r}: smoke, quick or full")


class Progress:
    """Progress lines on stderr, with the time since the start."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.start:6.1f}s] {message}", file=sys.stderr, flush=True)


def _row(
    host: str,
    runner: str,
    totals_ms: list[float],
    *,
    floor: str | None = None,
    floor_ms: float | None = None,
    floor_best_ms: float | None = None,
    checked: int = 0,
    estimated_from: int | None = None,
    per_size_ms: dict[int, float] | None = None,
) -> dict[str, Any]:
    s = spread_stats(totals_ms)
    return {
        "host": host,
        "runner": runner,
        "label": _LABELS.get(runner, runner),
        "total_ms": s["median"],
        "min_ms": s["min"],
        "max_ms": s["max"],
        "spread": s["spread"],
        "reps": len(totals_ms),
        "floor": floor,
        "floor_ms": floor_ms,
        "ratio": (s["median"] / floor_ms) if floor_ms else None,
        # Best of the repetitions over the floor's best: noise on a shared machine only
        # ever adds time, so the fastest run of each is the least disturbed one.
        "floor_best_ms": floor_best_ms,
        "best_ratio": (s["min"] / floor_best_ms) if floor_best_ms else None,
        "checked": checked,
        "estimated_from_sizes": estimated_from,
        "per_size_ms": {str(k): v for k, v in (per_size_ms or {}).items()},
    }


# -- sections ------------------------------------------------------------------------------


def _cxx_and_c_hosts(
    build: Path, prof: Profile, timeout: float, log: Progress
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The sweep from the C++ program (with both floors) and from the C API program.

    Both programs' sessions run interleaved in one batch; then the C++ program's again,
    with both processes on one core.
    """
    roundtrip = load_script("roundtrip")
    cxx_bin = build / "bin" / "mlbridge-bench-roundtrip"
    c_bin = build / "bin" / "mlbridge-bench-roundtrip-c"
    for b in (cxx_bin, c_bin):
        if not b.is_file():
            raise FileNotFoundError(f"{b} is not built: run `mlbridge build` (or make build)")
    sessions = [roundtrip.Session(m, cxx_bin, m) for m in _CXX_MODES]
    sessions += [roundtrip.Session(f"C API {m}", c_bin, m) for m in _C_MODES]
    log(
        f"round trip, C++ and C API hosts (interleaved): {len(prof.sizes)} sizes x "
        f"{prof.reps} reps, {_CXX_MODES} and {_C_MODES}"
    )
    both = roundtrip.measure_sessions(sessions, prof.sizes, prof.reps, timeout)
    cxx = {m: both[m] for m in _CXX_MODES}
    c = {m: both[f"C API {m}"] for m in _C_MODES}
    cpus = roundtrip.one_core()
    log(
        f"round trip, C++ host, both processes on CPU {min(cpus)}: {len(prof.sizes)} sizes x "
        f"{prof.reps} reps, {_CXX_MODES}"
    )
    one = roundtrip.measure(cxx_bin, _CXX_MODES, prof.sizes, prof.reps, timeout, cpus=cpus)
    rows = []
    for host, sweep, floors in (("C++", cxx, cxx), ("C API", c, cxx), (ONE_CORE_HOST, one, one)):
        for mode, s in sweep.items():
            floor = None if mode in ("fifo", "grpc-floor") else _FLOOR_OF[mode]
            rows.append(
                _row(
                    host,
                    mode,
                    [t * 1e3 for t in s["runs"]],
                    floor=floor,
                    floor_ms=floors[floor]["total_seconds"]["median"] * 1e3 if floor else None,
                    floor_best_ms=floors[floor]["total_seconds"]["min"] * 1e3 if floor else None,
                    checked=s["checked"],
                    per_size_ms={
                        size: t * 1e3
                        for size, t in zip(prof.sizes, s["median_per_size_seconds"], strict=True)
                    },
                )
            )
    return rows, {"C++": cxx, "C API": c, ONE_CORE_HOST: one, "one_core_cpu": min(cpus)}


def _compiler_hosts(
    build: Path,
    prof: Profile,
    timeout: float,
    floors_per_size: dict[str, dict[int, float]],
    log: Progress,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The sweep from inside opt-22 and mlir-opt-22 (a subset of sizes, scaled to 100)."""
    raw: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    scale = SWEEP_QUERIES / len(prof.host_sizes) if prof.name != "smoke" else 1.0
    for host, runners, fn in (
        ("opt", list(OPT_RUNNERS), run_opt_host),
        ("mlir-opt", list(MLIR_RUNNERS), run_mlir_host),
    ):
        log(
            f"round trip, {host} host: {len(prof.host_sizes)} sizes x {prof.host_reps} reps, "
            f"{prof.host_queries} queries per run, {runners}"
        )
        result = fn(
            build, runners, prof.host_sizes, prof.host_queries, prof.host_reps, timeout, log
        )
        raw[host] = result
        runs: dict[str, dict[int, list[float]]] = result["runs"]
        n_reps = max(len(v) for r in runs.values() for v in r.values())

        def totals(
            runner: str, runs: dict[str, dict[int, list[float]]] = runs, n_reps: int = n_reps
        ) -> list[float]:
            return [
                scale * sum(v[min(i, len(v) - 1)] for v in runs[runner].values()) * 1e3
                for i in range(n_reps)
            ]

        callback_ms = statistics.median(totals("callback"))
        for runner in runners:
            floor = _HOST_FLOOR_OF.get(runner)
            floor_ms = None
            if floor == "callback":
                floor_ms = callback_ms
            elif floor is not None and floor in floors_per_size:
                per = floors_per_size[floor]
                if all(size in per for size in prof.host_sizes):
                    floor_ms = scale * sum(per[size] for size in prof.host_sizes)
            rows.append(
                _row(
                    host,
                    runner,
                    totals(runner),
                    floor=floor,
                    floor_ms=floor_ms,
                    checked=result["checked"][runner],
                    estimated_from=len(prof.host_sizes) if scale != 1.0 else None,
                    per_size_ms={
                        size: statistics.median(v) * 1e3 for size, v in runs[runner].items()
                    },
                )
            )
    return rows, raw


def _script_available(name: str) -> Path | None:
    path = bench_dir() / name
    return path if path.is_file() else None


def _run_script(
    build: Path, name: str, args: list[str], results: str, waits: tuple[float, float],
    what: str, log: Progress,
) -> tuple[dict[str, Any], str] | None:  # fmt: skip
    """Run ``bench/<name>`` into a temporary folder; its JSON result and the file's name.

    ``results`` is the glob of the script's JSON output there (the newest one is read).
    ``waits``: the script's own ``--timeout`` (its bound of each wait) and the bound of
    the whole run. ``None`` if the script is not in this checkout.
    """
    wait, bound = waits
    script = _script_available(name)
    if script is None:
        return None
    with tempfile.TemporaryDirectory(prefix="mlbridge-bench-") as tmp:
        argv = [
            sys.executable, str(script), "--build-dir", str(build), "--out", tmp,
            "--timeout", str(wait), *args,
        ]  # fmt: skip
        log(f"{what}: {' '.join(argv[1:])}")
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, timeout=bound)
        files = sorted(Path(tmp).glob(results))
        if proc.returncode != 0 or not files:
            raise RuntimeError(f"bench/{name} failed (exit {proc.returncode})")
        return json.loads(files[-1].read_text()), files[-1].name


def _inprocess(build: Path, prof: Profile, timeout: float, log: Progress) -> dict[str, Any]:
    """``bench/inprocess_roundtrip.py`` (ONNX Runtime, TF AOT, floors, threads, memory)."""
    got = _run_script(
        build, "inprocess_roundtrip.py", prof.inprocess_args, "inprocess-roundtrip-*.json",
        (2 * timeout, 4 * timeout), "in-process runners", log,
    )  # fmt: skip
    if got is None:
        return {"available": False, "reason": "bench/inprocess_roundtrip.py is not present"}
    data = got[0]
    data["available"] = True
    return data


def _inprocess_rows(data: dict[str, Any], prof: Profile) -> list[dict[str, Any]]:
    """Rows of the in-process sweep.

    A sweep of fewer than 100 sizes (quick) is scaled to 100 queries, as for the compiler
    hosts.
    """
    if not data.get("available"):
        return []
    sweep = {s["runner"]: s for s in data.get("sweep", [])}
    n_sizes = max((len(s.get("per_size_ms", {})) for s in sweep.values()), default=0)
    scale = SWEEP_QUERIES / n_sizes if prof.name != "smoke" and 0 < n_sizes < 100 else 1.0
    rows = []
    for runner, s in sweep.items():
        floor = None if runner.endswith("-floor") else f"{runner}-floor"
        floor_ms = scale * sweep[floor]["median_ms"] if floor and floor in sweep else None
        reps = [scale * float(x) for x in s.get("reps_ms", [])] or [scale * s["median_ms"]]
        floor_reps = sweep[floor].get("reps_ms") if floor and floor in sweep else None
        row = _row(
            "C++ (in-process)",
            runner,
            reps,
            floor=floor,
            floor_ms=floor_ms,
            floor_best_ms=scale * min(floor_reps) if floor_reps else None,
            checked=int(s.get("checked", 0)),
            estimated_from=n_sizes if scale != 1.0 else None,
            per_size_ms={int(k): float(v) for k, v in s.get("per_size_ms", {}).items()},
        )
        # The script's own median over its rounds (its reps may be finer-grained).
        row["total_ms"] = scale * float(s["median_ms"])
        row["ratio"] = row["total_ms"] / floor_ms if floor_ms else None
        rows.append(row)
    return rows


def _inliner(build: Path, prof: Profile, timeout: float, log: Progress) -> dict[str, Any]:
    """``bench/inliner_compile.py``: held-out compile time, ML inliner vs stock opt-22."""
    got = _run_script(
        build, "inliner_compile.py", prof.inliner_args, "inliner-compile-*.json",
        (timeout, 10 * timeout), "inliner compile time", log,
    )  # fmt: skip
    if got is None:
        return {"available": False, "reason": "bench/inliner_compile.py is not present"}
    data = got[0]
    configs = []
    stock = None
    for c in data["configurations"]:
        total = sum(c["seconds"])
        if stock is None:
            stock = total  # the first configuration is stock opt-22
        configs.append(
            {
                "name": c["name"],
                "seconds": total,
                "ratio": total / stock if stock else None,
                "text_bytes": c.get("text_bytes"),
                "target": c.get("target"),
            }
        )
    return {
        "available": True,
        "modules": len(data["modules"]),
        "reps": data["reps"],
        "agreement_with_default": data.get("agreement_with_default"),
        "decisions": data.get("decisions"),
        "configurations": configs,
    }


def _phase_order(build: Path, prof: Profile, timeout: float, log: Progress) -> dict[str, Any]:
    """``bench/phase_order_compile.py`` with the built-in agent phase-order-oz.

    POSET-RL's design, the in-process episode and stock opt-22 -Oz on the held-out modules.
    """
    got = _run_script(
        build, "phase_order_compile.py", prof.phase_order_args, "phase-order-*.json",
        (timeout, 10 * timeout), "phase-ordering compile time", log,
    )  # fmt: skip
    if got is None:
        return {"available": False, "reason": "bench/phase_order_compile.py is not present"}
    return {"available": True, "file": got[1], "data": got[0]}


# -- the whole run ---------------------------------------------------------------------------


def _last_stages(
    build: Path,
    prof: Profile,
    timeout: float,
    inprocess: dict[str, Any],
    stages: Iterator[str],
    log: Progress,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Memory, the inliner's and phase ordering's compile time; ``stages`` moved on at each."""
    memory: dict[str, Any] = {}
    if prof.memory_queries:
        next(stages)
        log(f"memory: {prof.memory_queries} queries of 64 floats per inter-process runner")
        roundtrip = load_script("roundtrip")
        memory["inter-process"] = roundtrip.measure_memory(
            build / "bin" / "mlbridge-bench-roundtrip",
            _CXX_MODES,
            prof.memory_queries,
            64,
            timeout,
        )
    if inprocess.get("available"):
        memory["in-process"] = inprocess.get("memory", [])
    next(stages)
    inliner = _inliner(build, prof, timeout, log)
    next(stages)
    phase_order = _phase_order(build, prof, timeout, log)
    next(stages, None)  # all done: the bar reaches its end
    return memory, inliner, phase_order


def run_report(
    build: Path, prof: Profile, timeout: float, log: Progress | None = None
) -> dict[str, Any]:
    """Measure everything of ``prof`` on this machine; the report as a JSON-able dict."""
    log = log or Progress()
    started = time.monotonic()
    machine = describe_machine()
    log(
        f"mlbridge bench ({prof.name}) on {machine['cpu_model']}, {machine['cores']} cores, "
        f"load {machine['load_average_start']}"
    )

    # One bar over the stages (a bar with an estimate on a terminal, plain lines elsewhere):
    # next(stages) as each stage starts, the last one when all are done.
    names = ["C/C++ hosts", "compiler hosts", "in-process runners"]
    names += ["memory"] * bool(prof.memory_queries) + ["inliner", "phase ordering"]
    stages = track(names, description=f"mlbridge bench ({prof.name})", unit="stage")
    try:
        next(stages)
        rows, inter = _cxx_and_c_hosts(build, prof, timeout, log)
        floors_per_size = {
            mode: {int(k): v for k, v in r["per_size_ms"].items()}
            for r in rows
            if r["host"] == "C++" and (mode := r["runner"]) in ("fifo", "grpc-floor")
        }
        next(stages)
        host_rows, host_raw = _compiler_hosts(build, prof, timeout, floors_per_size, log)
        rows += host_rows
        next(stages)
        inprocess = _inprocess(build, prof, timeout, log)
        rows += _inprocess_rows(inprocess, prof)
        memory, inliner, phase_order = _last_stages(build, prof, timeout, inprocess, stages, log)
    finally:
        stages.close()
    warnings = [
        f"{r['host']} / {r['label']}: spread {r['spread']:.0%} over {r['reps']} reps is wide "
        f"(> {WIDE_SPREAD:.0%}): the machine was busy; compare medians with care"
        for r in rows
        if r["reps"] > 1 and r["spread"] > WIDE_SPREAD
    ]
    for w in warnings:
        log(f"warning: {w}")
    checked = sum(r["checked"] for r in rows)
    return {
        "meta": {
            "profile": prof.name,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "duration_seconds": time.monotonic() - started,
            "sizes": [prof.sizes[0], prof.sizes[-1], len(prof.sizes)],
            "host_sizes": prof.host_sizes,
            "host_queries": prof.host_queries,
            "host_reps": prof.host_reps,
            "reps": prof.reps,
            "load_average_end": load_average(),
        },
        "machine": machine,
        "roundtrip": rows,
        "roundtrip_raw": {"inter-process": inter, "compiler-hosts": host_raw},
        "inprocess": inprocess,
        "memory": memory,
        "compile_time": {"inliner": inliner, "phase_order": phase_order},
        "answers": {"checked": checked, "mismatches": 0},
        "paper_totals_ms": PAPER_TOTALS_MS,
        "warnings": warnings,
    }


def measured_totals(report: dict[str, Any]) -> dict[str, float]:
    """This run's totals under the paper's runner names (C++ host; in-process runners)."""
    by_key = {(r["host"], r["runner"]): r["total_ms"] for r in report["roundtrip"]}
    wanted = {
        "TF AOT": ("C++ (in-process)", "tfaot"),
        "ONNX Runtime": ("C++ (in-process)", "onnx"),
        "pipe + bitstream": ("C++", "bitstream"),
        "pipe + json": ("C++", "json"),
        "gRPC": ("C++", "grpc"),
    }
    return {name: by_key[key] for name, key in wanted.items() if key in by_key}


def write_outputs(report: dict[str, Any], out: Path, stamp: str) -> dict[str, Path]:
    """Write ``report-<stamp>.json``, ``.md`` and the PNG plots; copies as ``report-latest``."""
    from mlbridge.bench.markdown import markdown
    from mlbridge.bench.plots import plot_sweep, plot_totals

    out.mkdir(parents=True, exist_ok=True)
    name = f"report-{stamp}"
    paths = {
        "json": out / f"{name}.json",
        "md": out / f"{name}.md",
        "sweep_png": out / f"{name}-sweep.png",
        "totals_png": out / f"{name}-totals.png",
    }
    plot_sweep(report, paths["sweep_png"])
    plot_totals(report, paths["totals_png"])
    paths["json"].write_text(json.dumps(report, indent=1) + "\n")
    paths["md"].write_text(
        markdown(report, sweep_png=paths["sweep_png"].name, totals_png=paths["totals_png"].name)
    )
    if report["meta"]["profile"] != "smoke":
        for key, suffix in (("sweep_png", "-sweep.png"), ("totals_png", "-totals.png")):
            shutil.copyfile(paths[key], out / f"report-latest{suffix}")
        (out / "report-latest.md").write_text(
            markdown(
                report, sweep_png="report-latest-sweep.png", totals_png="report-latest-totals.png"
            )
        )
    return paths


def progress() -> Callable[[str], None]:
    """A fresh progress printer (stderr)."""
    return Progress()
