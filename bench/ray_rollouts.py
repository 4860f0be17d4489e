#!/usr/bin/env python3
"""Training rollouts per second on Ray and in a plain local pool, on 1 and 2 workers.

The inliner trainer's rollout (``mlbridge train inliner``: ``opt-22`` with the ML inline
advisor over a pipe, the built-in ``inliner-oz`` linear policy answering every decision in
Python, then ``llc-22`` and the ``.text`` size) on training modules of the corpus, through
the trainers' rollout pools (docs/distributed-training.md):

- ``local``: :class:`mlbridge.training.pool.LocalRolloutPool` (threads in this process);
- ``ray``: :class:`mlbridge.training.ray_pool.RayRolloutPool` on a local Ray instance, one
  actor per worker, the modules shipped through Ray's object store.

Each configuration maps the same rollouts in the same order on as many workers; every
round runs each configuration once, in the order of the list on even rounds and reversed on
odd ones (ABBA), so that a drift of the machine's load weighs on both backends alike. The
median wall time is reported, with the rollouts per second, and the ratios within a round
(Ray / local pool on the same workers, 2 Ray workers against 1): their median, a bootstrap
95% interval of it, and every round's. Every rollout's size must be the same in every
configuration (checked). Targets (issue 18): 2 Ray workers at least 1.8x the rollouts per
second of 1; Ray within 10% of the local pool's time.

    .venv/bin/python bench/ray_rollouts.py            # 16 modules x 2, 6 rounds
    .venv/bin/python bench/ray_rollouts.py --compare-queue-depth   # + actors of 1 rollout
    .venv/bin/python bench/ray_rollouts.py --smoke    # 2 modules, 1 round: correctness

Results: ``bench/results/ray-rollouts-<time>.json`` and ``.md``; the Markdown also goes to
``bench/results/ray-rollouts-latest.md`` (not with ``--smoke``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mlbridge.corpus import load_manifest
from mlbridge.corpus.fetch import default_corpus_dir
from mlbridge.inliner.builtin import BUILTIN_MODELS
from mlbridge.inliner.policy import LinearPolicy
from mlbridge.inliner.trainer import evaluate_policy
from mlbridge.training.pool import LocalRolloutPool, RolloutPool, SharedFile, WorkerContext
from mlbridge.training.ray_pool import RayRolloutPool, ray_session

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inprocess_roundtrip import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET_SPEEDUP = 1.8
TARGET_RAY_OVERHEAD = 1.10
CONFIGS = [("local", 1), ("ray", 1), ("local", 2), ("ray", 2)]
#: With --compare-queue-depth: Ray actors holding one rollout at a time, beside each Ray row.
COMPARED = [("local", 1), ("ray", 1), ("ray-q1", 1), ("local", 2), ("ray", 2), ("ray-q1", 2)]
BOOTSTRAP = 2000


def _log(message: str) -> None:
    print(f"ray-rollouts: {message}", file=sys.stderr, flush=True)


def niceness(context: WorkerContext, item: int) -> int:
    """The worker's scheduling niceness (Ray's default is 15; mlbridge's local instance 0)."""
    return os.nice(0)


def rollout(
    context: WorkerContext, task: tuple[LinearPolicy, SharedFile]
) -> tuple[int, float, float, str]:
    """One inliner rollout: the ``.text`` size of the module compiled with the policy, when
    it started and ended (``time.monotonic``, the same clock in every process of this
    machine) and which worker ran it (process and thread)."""
    policy, module = task
    start = time.monotonic()
    size = evaluate_policy(policy, context.local_path(module), timeout=600)[0]
    return size, start, time.monotonic(), f"{os.getpid()}/{threading.get_ident()}"


def idle_between(runs: list[tuple[int, float, float, str]]) -> float:
    """Mean time (s) a worker spent between the end of one of its rollouts and the start of
    its next, over every worker."""
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for _, start, end, worker in runs:
        by_worker.setdefault(worker, []).append((start, end))
    gaps = [
        b[0] - a[1] for spans in by_worker.values() for a, b in itertools.pairwise(sorted(spans))
    ]
    return statistics.mean(gaps) if gaps else 0.0


def fetch(context: WorkerContext, files: list[SharedFile]) -> int:
    """Makes every file local to the worker (Ray: from the object store); their bytes."""
    return sum(context.local_path(f).stat().st_size for f in files)


def time_config(
    pool: RolloutPool, policy: LinearPolicy, files: list[Path], repeats: int
) -> tuple[float, list[int], float]:
    """Wall time of the rollouts of ``files`` (each ``repeats`` times) on ``pool``, their
    sizes, and the mean time a worker was idle between two of them (s)."""
    shared = [pool.share(f) for f in files]  # outside the clock: done once per job
    # Warm the workers up, outside the clock, as a trainer's pool does once per job: each
    # worker fetches the modules (a Ray actor, from the object store, the first time one of
    # its rollouts reads one) and makes a rollout (a Ray actor's first imports mlbridge).
    # A map of as many items as workers gives each worker one.
    pool.map(fetch, [shared] * pool.workers)
    pool.map(rollout, [(policy, shared[0])] * pool.workers)
    tasks = [(policy, s) for s in shared for _ in range(repeats)]
    start = time.perf_counter()
    results = pool.map(rollout, tasks)
    wall = time.perf_counter() - start
    runs = [r.value for r in results]
    return wall, [run[0] for run in runs], idle_between(runs)


def median_interval(ratios: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Median of ``ratios`` and its bootstrap 95% interval."""
    values = np.asarray(ratios)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(values, (BOOTSTRAP, values.size)), axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(np.median(values)), float(low), float(high)


def round_order(configs: list[tuple[str, int]], r: int) -> list[tuple[str, int]]:
    """The configurations of round ``r``: as listed on even rounds, reversed on odd ones."""
    return configs if r % 2 == 0 else configs[::-1]


def measure(
    files: list[Path],
    repeats: int,
    rounds: int,
    policy: LinearPolicy,
    queue_depth: int,
    configs: list[tuple[str, int]],
) -> list[dict[str, Any]]:
    """Interleaved rounds of every configuration; one row per configuration."""
    walls: dict[tuple[str, int], list[float]] = {c: [] for c in configs}
    idles: dict[tuple[str, int], list[float]] = {c: [] for c in configs}
    sizes: dict[tuple[str, int], list[int]] = {}
    nice: dict[str, int] = {}
    with ray_session(num_cpus=2):
        pools: dict[tuple[str, int], Callable[[], RolloutPool]] = {
            ("local", 1): lambda: LocalRolloutPool(1),
            ("local", 2): lambda: LocalRolloutPool(2),
            ("ray", 1): lambda: RayRolloutPool(1, queue_depth=queue_depth),
            ("ray", 2): lambda: RayRolloutPool(2, queue_depth=queue_depth),
            ("ray-q1", 1): lambda: RayRolloutPool(1, queue_depth=1),
            ("ray-q1", 2): lambda: RayRolloutPool(2, queue_depth=1),
        }
        for r in range(rounds):
            for config in round_order(configs, r):
                # The pool (Ray: its actors) starts outside the clock, as a trainer's
                # does once per job.
                with pools[config]() as pool:
                    wall, got, idle = time_config(pool, policy, files, repeats)
                    nice[config[0]] = pool.map(niceness, [0])[0].value
                walls[config].append(wall)
                idles[config].append(idle)
                sizes.setdefault(config, got)
                if got != sizes[config]:
                    raise RuntimeError(f"{config}: the sizes changed between rounds")
                _log(f"round {r + 1}/{rounds} {config[0]:<6} {config[1]} worker(s): "
                     f"{wall:7.2f} s")  # fmt: skip
    reference = sizes[configs[0]]
    for config, got in sizes.items():
        if got != reference:
            raise RuntimeError(f"{config}: other sizes than {configs[0]}")
    count = len(files) * repeats
    return [
        {"backend": b, "workers": w, "rollouts": count, "median_s": statistics.median(v),
         "samples_s": v, "rollouts_per_s": count / statistics.median(v),
         "worker_niceness": nice[b], "idle_ms": 1000 * statistics.median(idles[(b, w)])}
        for (b, w), v in walls.items()
    ]  # fmt: skip


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ratios within each round: Ray / local on 1 and 2 workers, Ray 1 / Ray 2 workers,
    and with ``ray-q1`` rows, Ray / Ray with one rollout per actor (no target)."""
    by = {(r["backend"], r["workers"]): r["samples_s"] for r in rows}
    pairs: list[tuple[str, list[float], list[float], float | None, str]] = [
        ("ray / local, 1 worker", by[("ray", 1)], by[("local", 1)], TARGET_RAY_OVERHEAD, "<="),
        ("ray / local, 2 workers", by[("ray", 2)], by[("local", 2)], TARGET_RAY_OVERHEAD, "<="),
        ("ray 1 worker / ray 2 workers", by[("ray", 1)], by[("ray", 2)], TARGET_SPEEDUP, ">="),
    ]
    for w in (1, 2):
        if ("ray-q1", w) in by:
            name = f"ray / ray-q1, {w} worker{'s' if w > 1 else ''}"
            pairs.append((name, by[("ray", w)], by[("ray-q1", w)], None, ""))
    out = []
    for seed, (name, top, bottom, target, sense) in enumerate(pairs):
        per_round = [t / b for t, b in zip(top, bottom, strict=True)]
        median, low, high = median_interval(per_round, seed)
        out.append({"ratio": name, "median": median, "low": low, "high": high,
                    "per_round": per_round, "target": target, "sense": sense})  # fmt: skip
    return out


def markdown(result: dict[str, Any]) -> str:
    """The results as a Markdown report."""
    meta = result["meta"]
    by = {(r["backend"], r["workers"]): r for r in result["rows"]}
    lines = [
        "# Training rollouts: Ray against a local pool",
        "",
        f"`{meta['command']}` on {meta['date']} ({result['machine']['summary']}; load "
        f"{meta['load_before']:.2f} at the start). {meta['rollouts']} rollouts per "
        f"configuration ({meta['modules']} training modules x {meta['repeats']}): `opt-22` "
        "with the ML inline advisor, the built-in inliner-oz policy answering in Python over "
        "a pipe, then `llc-22` and the `.text` size; median of "
        f"{meta['rounds']} rounds, the configurations in turn, in reverse order every other "
        "round (the pool starts, and each worker fetches the modules and makes one rollout, "
        f"outside the clock). Ray actors hold {meta['queue_depth']} rollout(s) at once "
        "(`queue_depth`)"
        + ("; `ray-q1`: Ray actors holding one at a time." if meta["compare_queue_depth"] else "."),
        "",
        "| backend | workers | niceness | wall (s) | rollouts/s | speed-up over 1 worker | "
        "× local | idle between rollouts (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        one = by[(r["backend"], 1)]["median_s"]
        local = by[("local", r["workers"])]["median_s"]
        lines.append(
            f"| {r['backend']} | {r['workers']} | {r['worker_niceness']} | {r['median_s']:.2f} | "
            f"{r['rollouts_per_s']:.2f} | {one / r['median_s']:.2f}x | "
            f"{r['median_s'] / local:.2f} | {r['idle_ms']:.2f} |"
        )
    lines += [
        "",
        "Idle between rollouts: the mean time from the end of a worker's rollout to the start "
        "of its next, as the rollouts timed themselves (median over the rounds); the time a "
        "Ray actor waits for its next rollout, less sensitive to other load than the wall "
        "times.",
    ]
    lines += [
        "",
        "Ratios within a round (median over the rounds, bootstrap 95% interval of the "
        "median, every round's):",
        "",
        "| ratio | median | 95% interval | per round | target |",
        "|---|---:|---:|---|---|",
    ]
    verdicts = []
    for q in result["ratios"]:
        target = "" if q["target"] is None else f"{q['sense']} {q['target']:.2f}x"
        lines.append(
            f"| {q['ratio']} | {q['median']:.3f}x | {q['low']:.3f}-{q['high']:.3f} | "
            f"{', '.join(f'{v:.3f}' for v in q['per_round'])} | {target} |"
        )
        if q["target"] is None:
            continue
        met = q["median"] <= q["target"] if q["sense"] == "<=" else q["median"] >= q["target"]
        sure = q["high"] <= q["target"] if q["sense"] == "<=" else q["low"] >= q["target"]
        verdict = ("met" if sure else "met by the median only") if met else "MISSED"
        verdicts.append(f"- {q['ratio']}: {q['median']:.3f}x (target {target}: {verdict})")
    lines += [
        "",
        "Targets (reported, not asserted; met: the whole interval is on the right side):",
        "",
        *verdicts,
        "",
        "The niceness column is each backend's worker priority: a local Ray instance of "
        "mlbridge's runs its workers at 0, the job's own (Ray's default is 15, which on a "
        "machine with other work gives them the CPU last).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """Runs the benchmark; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )  # fmt: skip
    parser.add_argument("--corpus", type=Path, help="default: the corpus the set-up built")
    parser.add_argument("--modules", type=int, default=16, help="training modules (default 16)")
    parser.add_argument("--repeats", type=int, default=2, help="rollouts per module (default 2)")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds (default 6)")
    parser.add_argument(
        "--queue-depth", type=int, default=2,
        help="rollouts a Ray actor holds at once (RayRolloutPool's queue_depth; default 2)",
    )  # fmt: skip
    parser.add_argument(
        "--compare-queue-depth", action="store_true",
        help="also Ray actors holding one rollout at a time (rows ray-q1), in the same rounds",
    )  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="2 modules, once: correctness")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)

    modules = 2 if args.smoke else args.modules
    repeats = 1 if args.smoke else args.repeats
    rounds = 1 if args.smoke else args.rounds
    manifest = load_manifest(args.corpus or default_corpus_dir())
    # Modules of a few hundred decisions at most: seconds per rollout.
    files = [
        m.bitcode_path
        for m in manifest.select(
            "train", min_instructions=200, max_instructions=3000, max_modules=modules
        )
    ]
    (builtin,) = [m for m in BUILTIN_MODELS if m.task == "inliner"]
    policy = LinearPolicy.load(builtin.policy_path)
    configs = COMPARED if args.compare_queue_depth else CONFIGS
    _log(f"{len(files)} modules x {repeats}, {rounds} round(s), configurations {configs}")
    load_before = os.getloadavg()[0]
    rows = measure(files, repeats, rounds, policy, args.queue_depth, configs)
    result = {
        "meta": {
            "command": "bench/ray_rollouts.py " + " ".join(argv),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "modules": len(files),
            "repeats": repeats,
            "rounds": rounds,
            "rollouts": len(files) * repeats,
            "queue_depth": args.queue_depth,
            "compare_queue_depth": args.compare_queue_depth,
            "load_before": load_before,
        },
        "machine": machine(),
        "rows": rows,
        "ratios": ratios(rows),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    kind = "ray-rollouts-smoke" if args.smoke else "ray-rollouts"
    (args.out / f"{kind}-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    (args.out / f"{kind}-{stamp}.md").write_text(text)
    if not args.smoke:
        (args.out / "ray-rollouts-latest.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
