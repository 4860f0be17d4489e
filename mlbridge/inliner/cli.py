"""``mlbridge train inliner``: train an inlining-for-size policy on the corpus."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mlbridge.errors import MLBridgeError

__all__ = ["add_train_parser", "run_train"]


def add_train_parser(sub: Any) -> argparse.ArgumentParser:  # noqa: ANN401
    """Adds the ``inliner`` subcommand to the ``train`` subparsers ``sub``."""
    inl = sub.add_parser(
        "inliner",
        help="an inlining-for-size policy (linear, evolution strategies) on the corpus",
        description=(
            "Trains a linear policy over LLVM's ML inliner features to inline for code "
            "size: every evaluation compiles a corpus module with opt-22 -passes='default<Oz>' "
            "while the policy answers each inlining decision over the pipe, and measures "
            "the .text size llc-22 makes of it, against stock -Oz. Writes the policy as "
            "JSON (mlbridge.inliner.policy) and, with --onnx, as an ONNX model."
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
        "--max-calls",
        type=int,
        default=400,
        metavar="N",
        help="skip modules with more calls to functions they define (default 400)",
    )
    inl.add_argument(
        "--max-modules", type=int, metavar="N", help="use at most N modules (evenly spread)"
    )
    inl.add_argument(
        "--iterations", type=int, default=20, metavar="N", help="parameter updates (default 20)"
    )
    inl.add_argument("--pairs", type=int, default=6, metavar="N", help="perturbation pairs")
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
    inl.add_argument("--jobs", type=int, metavar="N", help="parallel compilations (default 2)")
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
    from mlbridge.inliner.trainer import ESConfig, default_jobs, describe, train_inliner

    corpus = Path(args.corpus) if args.corpus else default_corpus_dir()
    try:
        manifest = load_manifest(corpus)
    except (MLBridgeError, OSError) as e:
        raise CLIError(
            f"cannot read the corpus in {corpus}: {e} (run 'mlbridge corpus build')"
        ) from e
    modules = [
        m.bitcode_path
        for m in manifest.ok_modules(split=args.split)
        if args.min_calls <= int(m.stats.get("calls_to_defined", 0)) <= args.max_calls
    ]
    if args.max_modules is not None and len(modules) > args.max_modules:
        step = len(modules) / args.max_modules
        modules = [modules[int(i * step)] for i in range(args.max_modules)]
    if not modules:
        raise CLIError(
            f"no {args.split} module in {corpus} has between {args.min_calls} and "
            f"{args.max_calls} calls to functions it defines"
        )
    print(f"mlbridge train: {len(modules)} {args.split} modules from {corpus}", file=sys.stderr)
    config = ESConfig(
        iterations=args.iterations,
        pairs=args.pairs,
        modules_per_iteration=args.modules_per_iteration,
        sigma=args.sigma,
        learning_rate=args.learning_rate,
        jobs=args.jobs or default_jobs(),
        seed=args.seed,
    )
    initial = LinearPolicy.load(args.initial) if args.initial else None
    try:
        policy = train_inliner(modules, config, initial=initial)
    except MLBridgeError as e:
        raise CLIError(str(e)) from e
    policy.metadata["split"] = args.split
    policy.save(args.output)
    print(f"mlbridge train: {describe(policy)}", file=sys.stderr)
    print(f"mlbridge train: wrote {args.output}", file=sys.stderr)
    if args.onnx:
        policy.to_onnx(args.onnx)
        print(f"mlbridge train: wrote {args.onnx}", file=sys.stderr)
    return 0
