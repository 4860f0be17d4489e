"""``mlbridge train inliner``: train an inlining-for-size policy on the corpus."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from mlbridge.errors import MLBridgeError

__all__ = ["add_train_parser", "run_train", "say"]


def add_train_parser(sub: Any) -> argparse.ArgumentParser:  # noqa: ANN401
    """Adds the ``inliner`` subcommand to the ``train`` subparsers ``sub``."""
    inl = sub.add_parser(
        "inliner",
        help="an inlining-for-size policy (linear, evolution strategies) on the corpus",
        description=(
            "Trains a linear policy over LLVM's ML inliner features to inline for code "
            "size: every evaluation compiles a corpus module with opt-22 -passes='default<Oz>' "
            "while the policy answers each inlining decision over the pipe, and measures "
            "the size of the object llc-22 makes of it (every allocated section, or .text "
            "with --size-measure text), against stock -Oz. Writes the policy as "
            "JSON (mlbridge.inliner.policy) and, with --onnx, as an ONNX model; beside it "
            "the run's checkpoints, TensorBoard event files and a PNG learning curve."
        ),
    )
    inl.add_argument("--corpus", metavar="DIR", help="corpus folder (default: the built one)")
    inl.add_argument(
        "--split", default="train", choices=["train", "heldout"], help="modules to train on"
    )
    inl.add_argument(
        "--min-calls",
        type=int,
        default=3,
        metavar="N",
        help="skip modules with fewer calls to functions they define (default 3)",
    )
    inl.add_argument(
        "--sample-call-sites",
        type=int,
        default=400,
        metavar="N",
        help="in a module asking more inlining decisions than N, a perturbed policy makes N "
        "of them per rollout, sampled, and LLVM's default decision the rest; no module is "
        "left out for its size (default 400; 0: the policy makes every decision)",
    )
    inl.add_argument(
        "--size-measure",
        choices=("allocated", "text"),
        default="allocated",
        help="what the reward's sizes count: the bytes of every allocated section of the "
        "object (.text, .rodata, .eh_frame, data; the default: .text alone flatters an "
        "inliner, every call left in place keeps unwind information) or .text alone",
    )
    inl.add_argument(
        "--max-calls",
        type=int,
        metavar="N",
        help="deprecated: large modules are no longer left out; this now sets --sample-call-sites",
    )
    inl.add_argument(
        "--max-modules", type=int, metavar="N", help="use at most N modules (evenly spread)"
    )
    inl.add_argument(
        "--iterations", type=int, default=20, metavar="N", help="parameter updates (default 20)"
    )
    inl.add_argument(
        "--pairs", type=int, default=6, metavar="N", help="perturbation pairs (default 6)"
    )
    inl.add_argument(
        "--modules-per-iteration",
        type=int,
        default=8,
        metavar="N",
        help="modules sampled (without replacement) per update (default 8)",
    )
    inl.add_argument(
        "--sigma",
        type=float,
        default=0.05,
        metavar="X",
        help="standard deviation of the weight perturbations (default 0.05)",
    )
    inl.add_argument(
        "--learning-rate", type=float, default=0.05, metavar="X", help="step size (default 0.05)"
    )
    where = inl.add_argument_group(
        "where the compilations run",
        "By default on Ray: a local Ray instance started for the job (no dashboard, no usage "
        "statistics) and stopped at its end, or the cluster of --ray-address. Each worker is "
        "a Ray actor running one compilation at a time; the modules reach it through Ray's "
        "object store, so worker nodes need the same mlbridge install and LLVM 22, no shared "
        "files. A worker lost mid-job has its compilations retried on the others "
        "(docs/distributed-training.md).",
    )
    where.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="join this Ray cluster: HOST:PORT of its head (`ray start --head` prints it), "
        "'auto' for the cluster this machine belongs to, or ray://HOST:PORT (Ray Client); "
        "default: start a local Ray instance",
    )
    where.add_argument(
        "--workers",
        "--jobs",
        dest="workers",
        type=int,
        metavar="N",
        help="compilations at once: Ray actors of 1 CPU each (default: every CPU of the "
        "cluster; on a local instance this machine's CPUs, at most 2), or threads with "
        "--no-ray (default: CPUs, at most 2)",
    )
    where.add_argument(
        "--no-ray",
        action="store_true",
        help="run the compilations in threads of this process, without Ray",
    )
    runs = inl.add_argument_group("checkpoints and metrics")
    runs.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="where checkpoints go (default: OUTPUT's name with .checkpoints, next to it); "
        "a new run replaces a finished run's checkpoints there and refuses an unfinished "
        "run's (continue it with --resume)",
    )
    runs.add_argument(
        "--checkpoint-every",
        type=int,
        default=1,
        metavar="N",
        help="write a checkpoint (parameters, best policy and score, random generator, "
        "settings, stock sizes) every N iterations, and after the last (default 1)",
    )
    runs.add_argument(
        "--resume",
        action="store_true",
        help="continue the run from the latest checkpoint in --checkpoint-dir; give the "
        "run's settings again (only --iterations and --workers may change)",
    )
    runs.add_argument(
        "--tensorboard-dir",
        metavar="DIR",
        help="TensorBoard event files of the per-iteration reward and wall time (default: "
        "OUTPUT's name with .tensorboard, next to it; view with `tensorboard --logdir DIR`)",
    )
    runs.add_argument(
        "--curve",
        metavar="FILE",
        help="the PNG learning curve (default: OUTPUT's name with .curve.png, next to it)",
    )
    inl.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="random seed; the run is deterministic given it and the tools (default 0)",
    )
    inl.add_argument("--initial", metavar="FILE", help="start from this policy (JSON)")
    inl.add_argument(
        "--output", "-o", required=True, metavar="FILE", help="where to write the policy JSON"
    )
    inl.add_argument("--onnx", metavar="FILE", help="also write the policy as an ONNX model")
    return inl


def run_train(args: argparse.Namespace) -> int:
    """Runs ``mlbridge train inliner``."""
    from mlbridge.corpus import default_corpus_dir, load_manifest
    from mlbridge.errors import CLIError
    from mlbridge.inliner.policy import LinearPolicy
    from mlbridge.inliner.trainer import (
        METRIC_BEST,
        METRIC_ITERATE,
        METRIC_PERTURBED,
        METRIC_WALL,
        ESConfig,
        check_worker,
        default_jobs,
        describe,
        prepare_checkpoints,
        train_inliner,
    )
    from mlbridge.training.metrics import TrainingMetrics, plot_learning_curve
    from mlbridge.training.pool import LocalRolloutPool, RolloutPool

    corpus = Path(args.corpus) if args.corpus else default_corpus_dir()
    try:
        manifest = load_manifest(corpus)
    except (MLBridgeError, OSError) as e:
        raise CLIError(
            f"cannot read the corpus in {corpus}: {e} (run 'mlbridge corpus build')"
        ) from e
    if args.max_calls is not None:
        say(
            f"--max-calls is deprecated: modules above it are sampled, not left out; "
            f"read as --sample-call-sites {args.max_calls}"
        )
        args.sample_call_sites = args.max_calls
    if args.sample_call_sites < 0:
        raise CLIError(f"--sample-call-sites must be at least 0, got {args.sample_call_sites}")
    # Only trivially small modules are left out: large ones are sampled (trainer.py).
    modules = [
        m.bitcode_path
        for m in manifest.ok_modules(split=args.split)
        if int(m.stats.get("calls_to_defined", 0)) >= args.min_calls
    ]
    if args.max_modules is not None and len(modules) > args.max_modules:
        step = len(modules) / args.max_modules
        modules = [modules[int(i * step)] for i in range(args.max_modules)]
    if not modules:
        raise CLIError(
            f"no {args.split} module in {corpus} has at least {args.min_calls} calls to "
            "functions it defines"
        )
    say(f"{len(modules)} {args.split} modules from {corpus}")
    if args.no_ray and args.ray_address:
        raise CLIError("--ray-address joins a Ray cluster and --no-ray runs without Ray: pick one")
    for name in ("workers", "checkpoint_every"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise CLIError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    output = Path(args.output)
    checkpoint_dir = Path(args.checkpoint_dir or _beside(output, ".checkpoints"))
    tensorboard_dir = Path(args.tensorboard_dir or _beside(output, ".tensorboard"))
    curve = Path(args.curve or _beside(output, ".curve.png"))
    initial = LinearPolicy.load(args.initial) if args.initial else None
    try:
        # Before Ray starts: a wrong checkpoint folder is said at once.
        prepare_checkpoints(checkpoint_dir, args.resume, say)
    except MLBridgeError as e:
        raise CLIError(str(e)) from e
    metrics = TrainingMetrics(tensorboard_dir, log=say)
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(metrics.close)
            pool: RolloutPool
            if args.no_ray:
                workers = args.workers or default_jobs()
                pool = stack.enter_context(LocalRolloutPool(workers))
                say(f"{workers} compilations at once in this process (no Ray)")
            else:
                from mlbridge.training.ray_pool import RayRolloutPool, cluster_cpus, ray_session

                local_cpus = max(os.cpu_count() or 1, args.workers or 1)
                where = stack.enter_context(
                    ray_session(args.ray_address, num_cpus=None if args.ray_address else local_cpus)
                )
                workers = args.workers or (cluster_cpus() if args.ray_address else default_jobs())
                say(f"on the {where}: starting {workers} workers")
                pool = stack.enter_context(RayRolloutPool(workers, setup=check_worker, log=say))
                nodes = sorted({n.describe() for n in pool.live_nodes()})
                say(f"{workers} workers on {len(nodes)} node(s): {'; '.join(nodes)}")
            config = ESConfig(
                iterations=args.iterations,
                pairs=args.pairs,
                modules_per_iteration=args.modules_per_iteration,
                sigma=args.sigma,
                learning_rate=args.learning_rate,
                jobs=workers,
                seed=args.seed,
                sample_call_sites=args.sample_call_sites or None,
                size_measure=args.size_measure,
            )
            policy = train_inliner(
                modules,
                config,
                initial=initial,
                progress=say,
                pool=pool,
                checkpoint_dir=checkpoint_dir,
                checkpoint_every=args.checkpoint_every,
                resume=args.resume,
                metrics=metrics,
            )
    except (MLBridgeError, ValueError) as e:
        raise CLIError(str(e)) from e
    policy.metadata["split"] = args.split
    policy.save(output)
    say(describe(policy))
    say(f"wrote {output}")
    say(f"checkpoints in {checkpoint_dir}; TensorBoard: tensorboard --logdir {tensorboard_dir}")
    try:
        plot_learning_curve(
            metrics.history,
            curve,
            series={
                "iterate, all modules": METRIC_ITERATE,
                "best so far": METRIC_BEST,
                "perturbed policies, batch mean": METRIC_PERTURBED,
            },
            ylabel=f"mean {'allocated' if config.size_measure == 'allocated' else '.text'} "
            "saving vs stock -Oz (%)",
            title=(
                f"mlbridge train inliner: {len(modules)} {args.split} modules, "
                f"{config.pairs} pairs, {workers} workers ({pool.backend})"
            ),
            wall_time=METRIC_WALL,
        )
    except ImportError as e:
        say(f"no learning curve ({e}): pip install 'mlbridge[train]'")
    else:
        say(f"wrote {curve}")
    if args.onnx:
        policy.to_onnx(args.onnx)
        say(f"wrote {args.onnx}")
    return 0


def _beside(output: Path, suffix: str) -> Path:
    """``p.json`` -> ``p<suffix>`` in the same folder."""
    return output.with_name(output.stem + suffix)


def say(message: str) -> None:
    """One line of the command's progress, on stderr."""
    print(f"mlbridge train: {message}", file=sys.stderr, flush=True)
