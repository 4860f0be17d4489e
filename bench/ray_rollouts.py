#!/usr/bin/env python3
"""Training rollouts per second on Ray and in a plain local pool, on 1 and 2 workers.

The inliner trainer's rollout (``mlbridge train inliner``: ``opt-22`` with the ML inline
advisor over a pipe, the built-in ``inliner-oz`` linear policy answering every decision in
Python, then ``llc-22`` and the ``.text`` size) on training modules of the corpus, through
the trainers' rollout pools (docs/distributed-training.md):

- ``local``: :class:`mlbridge.training.pool.LocalRolloutPool` (threads in this process);
- ``ray``: :class:`mlbridge.training.ray_pool.RayRolloutPool` on a local Ray instance, one
  actor per worker, the modules shipped through Ray's object store.

Each configuration maps the same rollouts; the configurations are interleaved round by
round and the median wall time is reported, with the rollouts per second. Every rollout's
size must be the same in every configuration (checked). Targets (issue 18): 2 Ray workers
at least 1.8x the rollouts per second of 1; Ray within 10% of the local pool's time.

    .venv/bin/python bench/ray_rollouts.py            # 16 modules x 2, 3 rounds
    .venv/bin/python bench/ray_rollouts.py --smoke    # 2 modules, 1 round: correctness

Results: ``bench/results/ray-rollouts-<time>.json`` and ``.md``; the Markdown also goes to
``bench/results/ray-rollouts-latest.md`` (not with ``--smoke``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def _log(message: str) -> None:
    print(f"ray-rollouts: {message}", file=sys.stderr, flush=True)


def niceness(context: WorkerContext, item: int) -> int:
    """The worker's scheduling niceness (Ray's default is 15; mlbridge's local instance 0)."""
    return os.nice(0)


def rollout(context: WorkerContext, task: tuple[LinearPolicy, SharedFile]) -> int:
    """One inliner rollout: the ``.text`` size of the module compiled with the policy."""
    policy, module = task
    return evaluate_policy(policy, context.local_path(module), timeout=600)[0]


def time_config(
    pool: RolloutPool, policy: LinearPolicy, files: list[Path], repeats: int
) -> tuple[float, list[int]]:
    """Wall time of the rollouts of ``files`` (each ``repeats`` times) on ``pool``."""
    shared = [pool.share(f) for f in files]  # outside the clock: done once per job
    # Warm the workers up (a Ray actor's first rollout imports mlbridge and opens the
    # object store), outside the clock: a trainer's pool does it once per job.
    pool.map(rollout, [(policy, shared[0])] * pool.workers)
    tasks = [(policy, s) for s in shared for _ in range(repeats)]
    start = time.perf_counter()
    results = pool.map(rollout, tasks)
    return time.perf_counter() - start, [r.value for r in results]


def measure(
    files: list[Path], repeats: int, rounds: int, policy: LinearPolicy
) -> list[dict[str, Any]]:
    """Interleaved rounds of every configuration; one row per configuration."""
    walls: dict[tuple[str, int], list[float]] = {c: [] for c in CONFIGS}
    sizes: dict[tuple[str, int], list[int]] = {}
    nice: dict[str, int] = {}
    with ray_session(num_cpus=2):
        pools: dict[tuple[str, int], Callable[[], RolloutPool]] = {
            ("local", 1): lambda: LocalRolloutPool(1),
            ("local", 2): lambda: LocalRolloutPool(2),
            ("ray", 1): lambda: RayRolloutPool(1),
            ("ray", 2): lambda: RayRolloutPool(2),
        }
        for r in range(rounds):
            for config in CONFIGS:
                # The pool (Ray: its actors) starts outside the clock, as a trainer's
                # does once per job.
                with pools[config]() as pool:
                    wall, got = time_config(pool, policy, files, repeats)
                    nice[config[0]] = pool.map(niceness, [0])[0].value
                walls[config].append(wall)
                sizes.setdefault(config, got)
                if got != sizes[config]:
                    raise RuntimeError(f"{config}: the sizes changed between rounds")
                _log(f"round {r + 1}/{rounds} {config[0]:<5} {config[1]} worker(s): "
                     f"{wall:7.2f} s")  # fmt: skip
    reference = sizes[CONFIGS[0]]
    for config, got in sizes.items():
        if got != reference:
            raise RuntimeError(f"{config}: other sizes than {CONFIGS[0]}")
    count = len(files) * repeats
    return [
        {"backend": b, "workers": w, "rollouts": count, "median_s": statistics.median(v),
         "samples_s": v, "rollouts_per_s": count / statistics.median(v),
         "worker_niceness": nice[b]}
        for (b, w), v in walls.items()
    ]  # fmt: skip


def markdown(result: dict[str, Any]) -> str:
    """The results as a Markdown report."""
    meta = result["meta"]
    by = {(r["backend"], r["workers"]): r for r in result["rows"]}
    lines = [
        "# Training rollouts: Ray against a local pool",
        "",
        f"`{meta['command']}` on {meta['date']} ({result['machine']['summary']}). "
        f"{meta['rollouts']} rollouts per configuration ({meta['modules']} training modules x "
        f"{meta['repeats']}): `opt-22` with the ML inline advisor, the built-in inliner-oz "
        "policy answering in Python over a pipe, then `llc-22` and the `.text` size; median "
        f"of {meta['rounds']} interleaved rounds (the pool starts, and each worker makes one "
        "rollout, outside the clock).",
        "",
        "| backend | workers | niceness | wall (s) | rollouts/s | speed-up over 1 worker | "
        "× local |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        one = by[(r["backend"], 1)]["median_s"]
        local = by[("local", r["workers"])]["median_s"]
        lines.append(
            f"| {r['backend']} | {r['workers']} | {r['worker_niceness']} | {r['median_s']:.2f} | "
            f"{r['rollouts_per_s']:.2f} | {one / r['median_s']:.2f}x | "
            f"{r['median_s'] / local:.2f} |"
        )
    speedup = by[("ray", 1)]["median_s"] / by[("ray", 2)]["median_s"]
    overhead = max(by[("ray", w)]["median_s"] / by[("local", w)]["median_s"] for w in (1, 2))
    lines += [
        "",
        "Targets (reported, not asserted):",
        "",
        f"- 2 Ray workers against 1: {speedup:.2f}x (target at least {TARGET_SPEEDUP}x: "
        f"{'met' if speedup >= TARGET_SPEEDUP else 'MISSED'})",
        f"- Ray against the local pool, the worse of 1 and 2 workers: {overhead:.2f}x "
        f"(target within {TARGET_RAY_OVERHEAD:.2f}x: "
        f"{'met' if overhead <= TARGET_RAY_OVERHEAD else 'MISSED'})",
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
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
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
    _log(f"{len(files)} modules x {repeats}, {rounds} round(s), configurations {CONFIGS}")
    rows = measure(files, repeats, rounds, policy)
    result = {
        "meta": {
            "command": "bench/ray_rollouts.py " + " ".join(argv),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "modules": len(files),
            "repeats": repeats,
            "rounds": rounds,
            "rollouts": len(files) * repeats,
        },
        "machine": machine(),
        "rows": rows,
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
