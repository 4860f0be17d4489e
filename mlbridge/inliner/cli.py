"""``mlbridge train inliner``: train an inlining-for-size policy on the corpus."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from mlbridge.errors import MLBridgeError
from mlbridge.training.run_options import add_pool_arguments, add_run_arguments

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
    add_pool_arguments(inl, rollout="compilation", rollouts="compilations")
    add_run_arguments(
        inl,
        checkpoint_default="OUTPUT's name with .checkpoints, next to it",
        checkpoint_contents="parameters, best policy and score, random generator, settings, "
        "stock sizes",
        tensorboard_default="OUTPUT's name with .tensorboard, next to it",
        curve_default="OUTPUT's name with .curve.png, next to it",
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
        describe,
        prepare_checkpoints,
        train_inliner,
    )
    from mlbridge.training.metrics import TrainingMetrics, plot_learning_curve
    from mlbridge.training.run_options import check_pool_arguments, open_rollout_pool

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
    check_pool_arguments(args)
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
            opened = open_rollout_pool(stack, args, setup=check_worker, say=say)
            pool, workers = opened.pool, opened.workers
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
