"""``mlbridge train regalloc``: train, export and evaluate the ML register allocator's agents."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from mlbridge.training.run_options import add_pool_arguments, add_run_arguments

__all__ = ["add_train_parser", "run_train"]


def add_train_parser(sub: Any) -> argparse.ArgumentParser:
    """Adds the ``regalloc`` subcommand to the ``train`` subparsers ``sub``."""
    from mlbridge.regalloc.trainer import RegallocTrainConfig

    d = RegallocTrainConfig()
    p: argparse.ArgumentParser = sub.add_parser(
        "regalloc",
        help="the agents of llc's -regalloc=mlbridge (a graph policy: cloning, REINFORCE, ONNX)",
        description=(
            "Trains the priority and coloring agents of the ML register allocator "
            "(llc-22 -regalloc=mlbridge) as one graph neural network in PyTorch: behaviour "
            "cloning of the built-in basic policy, then REINFORCE where each function's "
            "return is minus its spill/reload cost weighted by block frequency "
            "(mlbridge-regalloc-cost) and its baseline the basic policy's cost. Each rollout "
            "is one llc run over the pipe, the policy answering in Python. The rollouts run on "
            "Ray (a local instance, or a cluster) or in threads (--no-ray); the gradient "
            "steps in this process. Exports the policy to ONNX (one model, an If on "
            "'agent'), checks the export against PyTorch, and compares the held-out projects "
            "(lua, cmark-gfm) under greedy, LLVM's basic allocator, the basic policy and the "
            "trained model in-process. Writes policy.json, agent.onnx, metrics.json and "
            "learning-curve.png to the output folder, with the run's checkpoints and "
            "TensorBoard event files (docs/ml-regalloc.md, 'Training')."
        ),
    )
    p.add_argument(
        "--output-dir", "-o", required=True, metavar="DIR", help="where to write the results"
    )
    p.add_argument("--corpus", metavar="DIR", help="corpus folder (default: the built one)")
    p.add_argument("--build-dir", metavar="DIR", help="the build with the llc plugin")

    def number(flag: str, default: Any, text: str, kind: type = int, meta: str = "N") -> None:
        p.add_argument(
            flag,
            type=kind,
            default=default,
            metavar=meta,
            help=f"{text} (default {default})" if default is not None else text,
        )

    number(
        "--max-modules",
        None,
        "use at most N training modules, evenly spread (default: all that qualify)",
    )
    number(
        "--max-instructions",
        None,
        "leave out training modules with more IR instructions before -O2 (default: none "
        "is left out; large modules are sampled, see --sample-functions)",
    )
    number(
        "--sample-functions",
        d.sample_functions,
        "in a module with more functions than N, each rollout lets the policy allocate N of "
        "them, drawn from its seed, and llc's built-in basic policy the others; 0: every "
        "function",
    )
    number(
        "--max-decisions",
        d.max_decisions,
        "the most decisions the policy makes per rollout; the basic policy makes the later "
        "ones and the function where it ran out is left out of the rollout",
    )
    number(
        "--bc-modules",
        d.bc_modules,
        "training modules on which the basic policy's decisions are recorded for cloning",
    )
    number("--bc-epochs", d.bc_epochs, "epochs of behaviour cloning")
    number(
        "--samples-per-function",
        d.samples_per_function,
        "decisions kept per function and rollout, drawn uniformly",
    )
    number("--iterations", d.iterations, "REINFORCE updates (0: cloning only)")
    number("--modules-per-iteration", d.modules_per_iteration, "modules drawn per update")
    number("--episodes-per-module", d.episodes_per_module, "sampled rollouts per drawn module")
    number(
        "--temperature",
        d.temperature,
        "divides the scores before sampling the actions",
        float,
        "X",
    )
    number("--learning-rate", d.learning_rate, "Adam's step size in REINFORCE", float, "X")
    number("--entropy", d.entropy, "entropy bonus weight in REINFORCE", float, "X")
    number(
        "--validation-modules",
        d.validation_modules,
        "training modules on which the cloned and the fine-tuned policies are compared; the "
        "lower SpillReloadCost is kept",
    )
    number("--hidden", d.hidden, "the width of the node embeddings")
    number("--seed", d.seed, "seeds the policy's initialisation, the module draws and the samples")
    number(
        "--heldout-max-modules",
        None,
        "evaluate at most N modules per held-out project, evenly spread (default: all)",
    )
    p.add_argument("--no-eval", action="store_true", help="skip the held-out evaluation")
    add_pool_arguments(p)
    add_run_arguments(
        p,
        checkpoint_default="OUTPUT_DIR/checkpoints",
        checkpoint_contents="the policy, the cloned policy, the optimizer's state, random "
        "generator, settings, the recorded observations; the first after the cloning",
        tensorboard_default="OUTPUT_DIR/tensorboard",
        tensorboard_contents="the per-iteration sampled cost against the basic policy's, "
        "entropy, loss and wall time",
        curve_default="OUTPUT_DIR/learning-curve.png",
    )
    return p


def _heldout(manifest: Any, per_project: int | None) -> list[Any]:
    by: dict[str, list[Any]] = {}
    for m in manifest.ok_modules(split="heldout"):
        by.setdefault(m.project, []).append(m)
    out = []
    for entries in by.values():
        if per_project is not None and len(entries) > per_project:
            stride = len(entries) / per_project
            entries = [entries[int(i * stride)] for i in range(per_project)]
        out.extend(entries)
    return out


def run_train(args: argparse.Namespace) -> int:
    """Runs ``mlbridge train regalloc``."""
    import contextlib
    import functools
    import os

    from mlbridge.corpus import default_corpus_dir, load_manifest
    from mlbridge.errors import CLIError, MLBridgeError
    from mlbridge.regalloc.gnn import agreement
    from mlbridge.regalloc.trainer import (
        RegallocTrainConfig,
        check_worker,
        evaluate_heldout,
        find_llc_plugin,
        heldout_table,
        prepare_checkpoints,
        select_modules,
        stderr_log,
        summarize_heldout,
        train_regalloc,
        write_metrics,
    )
    from mlbridge.training.metrics import TrainingMetrics
    from mlbridge.training.run_options import check_pool_arguments, open_rollout_pool

    started = time.perf_counter()
    for flag in ("iterations", "bc_epochs", "bc_modules", "validation_modules"):
        if getattr(args, flag) < 0:
            raise CLIError(f"--{flag.replace('_', '-')} must be >= 0")
    if args.sample_functions < 0:
        raise CLIError("--sample-functions must be >= 0")
    for flag in ("modules_per_iteration", "episodes_per_module", "hidden",
                 "samples_per_function", "max_decisions"):  # fmt: skip
        if getattr(args, flag) < 1:
            raise CLIError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.temperature <= 0:
        raise CLIError("--temperature must be positive")
    check_pool_arguments(args)
    corpus = Path(args.corpus) if args.corpus else default_corpus_dir()
    try:
        manifest = load_manifest(corpus)
        plugin = find_llc_plugin(args.build_dir)
    except (MLBridgeError, OSError) as e:
        raise CLIError(str(e)) from e
    entries = select_modules(
        manifest, "train", max_instructions=args.max_instructions, max_modules=args.max_modules
    )
    if not entries:
        bound = "" if args.max_instructions is None else f" and {args.max_instructions}"
        raise CLIError(f"no training module in {corpus} has at least 50{bound} IR instructions")
    out = Path(args.output_dir)
    checkpoint_dir = Path(args.checkpoint_dir or out / "checkpoints")
    tensorboard_dir = Path(args.tensorboard_dir or out / "tensorboard")
    curve = Path(args.curve or out / "learning-curve.png")
    try:
        # Before Ray starts: a wrong checkpoint folder is said at once.
        prepare_checkpoints(checkpoint_dir, args.resume, stderr_log)
    except MLBridgeError as e:
        raise CLIError(str(e)) from e
    out.mkdir(parents=True, exist_ok=True)
    stderr_log(f"{len(entries)} training modules from {corpus}, plugin {plugin}")
    metrics_log = TrainingMetrics(tensorboard_dir, log=stderr_log)
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(metrics_log.close)
            opened = open_rollout_pool(
                stack, args, setup=functools.partial(check_worker, str(plugin)), say=stderr_log
            )
            config = RegallocTrainConfig(
                max_decisions=args.max_decisions,
                sample_functions=args.sample_functions or None,
                bc_modules=args.bc_modules,
                bc_epochs=args.bc_epochs,
                samples_per_function=args.samples_per_function,
                iterations=args.iterations,
                modules_per_iteration=args.modules_per_iteration,
                episodes_per_module=args.episodes_per_module,
                temperature=args.temperature,
                learning_rate=args.learning_rate,
                entropy=args.entropy,
                validation_modules=args.validation_modules,
                hidden=args.hidden,
                jobs=opened.workers,
                seed=args.seed,
            )
            policy, history, samples = train_regalloc(
                [e.bitcode_path for e in entries],
                config,
                plugin=plugin,
                log=stderr_log,
                pool=opened.pool,
                checkpoint_dir=checkpoint_dir,
                checkpoint_every=args.checkpoint_every,
                resume=args.resume,
                metrics=metrics_log,
            )
        train_seconds = time.perf_counter() - started
        policy.save(out / "policy.json")
        onnx_path = policy.to_onnx(out / "agent.onnx")
        agree, checked = agreement(policy, onnx_path, samples)
        stderr_log(
            f"the ONNX model answers as the PyTorch policy on {agree * 100:.2f}% of {checked} "
            "recorded observations"
        )
        metrics: dict[str, Any] = {
            "config": vars(config),
            "corpus": str(corpus),
            "training_modules": [e.id for e in entries],
            "training": history,
            "training_seconds": train_seconds,
            "export_agreement": {"fraction": agree, "samples": checked},
        }
        if _plot(metrics_log.history, curve, opened.workers, opened.pool.backend, stderr_log):
            metrics["learning_curve"] = str(curve)
        if not args.no_eval:
            # In this process: the held-out compilations use the ONNX model in llc, and
            # this machine's CPUs bound them.
            heldout = _heldout(manifest, args.heldout_max_modules)
            rows = evaluate_heldout(
                onnx_path,
                heldout,
                plugin=plugin,
                jobs=min(opened.workers, os.cpu_count() or 1),
                log=stderr_log,
            )
            summary = summarize_heldout(rows)
            metrics["heldout"] = {"summary": summary, "modules": [vars(r) for r in rows]}
            table = heldout_table(summary)
            metrics["heldout"]["table"] = table
            stderr_log("held-out projects (sums over their modules):\n" + table)
    except (MLBridgeError, ValueError) as e:
        raise CLIError(str(e)) from e
    metrics["wall_seconds"] = time.perf_counter() - started
    write_metrics(out / "metrics.json", metrics)
    stderr_log(f"wrote {out / 'policy.json'}, {out / 'agent.onnx'}, {out / 'metrics.json'}")
    stderr_log(
        f"checkpoints in {checkpoint_dir}; TensorBoard: tensorboard --logdir {tensorboard_dir}"
    )
    stderr_log(f"wall time {metrics['wall_seconds']:.0f} s")
    return 0


def _plot(
    history: list[dict[str, float]], path: Path, workers: int, backend: str, log: Any
) -> bool:
    """The learning curve: sampled ``SpillReloadCost`` against the basic policy's, per iteration.

    Two series: the change of the sum over the iteration's modules (a few hot functions
    dominate it), and the mean over the functions that spill of the change relative to the
    larger cost. Nothing without an iteration.
    """
    from mlbridge.regalloc.trainer import METRIC_RELATIVE, METRIC_SAMPLED_VS_BASIC, METRIC_WALL
    from mlbridge.training.metrics import plot_learning_curve

    steps = [h for h in history if METRIC_SAMPLED_VS_BASIC in h]
    if not steps:
        return False
    try:
        plot_learning_curve(
            steps,
            path,
            series={
                "sum over the drawn modules": METRIC_SAMPLED_VS_BASIC,
                "mean over the functions that spill": METRIC_RELATIVE,
            },
            ylabel="sampled SpillReloadCost vs the basic policy's (%)",
            title=f"mlbridge train regalloc: REINFORCE on the drawn training modules, "
            f"{workers} workers ({backend})",
            wall_time=METRIC_WALL,
        )
    except ImportError:
        log("matplotlib is not installed: no learning-curve.png (pip install 'mlbridge[train]')")
        return False
    log(f"wrote {path}")
    return True
