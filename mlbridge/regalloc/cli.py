"""``mlbridge train regalloc``: train, export and evaluate the ML register allocator's agents."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from mlbridge.training.run_options import add_pool_arguments, add_run_arguments

__all__ = ["ALGORITHMS", "add_train_parser", "run_train"]

#: The values of ``--algorithm``; the first is the default.
ALGORITHMS = ("reinforce", "rllib-ppo")
#: Options of REINFORCE alone, and of RLlib's multi-agent PPO alone (argparse dest names).
_REINFORCE_ONLY = (
    "bc_modules",
    "bc_epochs",
    "dagger_rounds",
    "dagger_epochs",
    "samples_per_function",
    "modules_per_iteration",
    "episodes_per_module",
    "temperature",
    "validation_modules",
)
_PPO_ONLY = (
    "steps_per_iteration",
    "minibatch_size",
    "ppo_epochs",
    "max_nodes",
    "max_edges",
    "max_registers",
    "max_blocks",
    "verify_machineinstrs",
    "init_policy",
)


def add_train_parser(sub: Any) -> argparse.ArgumentParser:
    """Adds the ``regalloc`` subcommand to the ``train`` subparsers ``sub``."""
    from mlbridge.regalloc.ppo_settings import RegallocPPOSettings
    from mlbridge.regalloc.trainer import RegallocTrainConfig

    d = RegallocTrainConfig()
    ppo = RegallocPPOSettings()
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
            "TensorBoard event files (docs/ml-regalloc.md, 'Training'). --algorithm "
            "rllib-ppo trains one policy per agent with RLlib's multi-agent PPO instead (a "
            "warm start only from --init-policy; the episodes run in RLlib's env runners on "
            "Ray) and writes priority.json, coloring.json and, with --split, split.json for "
            "policy.json, all three exported together."
        ),
    )
    p.add_argument(
        "--algorithm",
        choices=ALGORITHMS,
        default="reinforce",
        help="reinforce: behaviour cloning of the basic policy, then REINFORCE, one graph "
        "network for both agents, rollouts on mlbridge's pool (the default); rllib-ppo: "
        "RLlib's multi-agent PPO from random policies, one graph network per agent, "
        "episodes in RLlib's env runners (Ray actors, one per --workers; needs the rllib "
        "extra)",
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
    p.add_argument(
        "--sample-functions",
        type=int,
        metavar="N",
        help="in a module with more functions than N, each rollout lets the policy allocate "
        "N of them, drawn from its seed, and llc's built-in basic policy the others; 0: "
        f"every function (default {d.sample_functions}; with rllib-ppo "
        f"{ppo.sample_functions}: an episode is then one function, rewarded for itself)",
    )
    number(
        "--max-decisions",
        d.max_decisions,
        "the most decisions the policy makes per rollout; the basic policy makes the later "
        "ones and the function where it ran out is left out of the rollout",
    )

    def reinforce(flag: str, default: Any, text: str, kind: type = int, meta: str = "N") -> None:
        # None: not given (refused with rllib-ppo); the default is filled in later.
        p.add_argument(flag, type=kind, metavar=meta, help=f"{text} (default {default})")

    reinforce(
        "--bc-modules",
        d.bc_modules,
        "training modules on which the basic policy's decisions are recorded for cloning",
    )
    reinforce("--bc-epochs", d.bc_epochs, "epochs of behaviour cloning")
    reinforce(
        "--dagger-rounds",
        d.dagger_rounds,
        "rounds of DAgger after the cloning: the cloned policy allocates --bc-modules "
        "modules itself, the teacher labels its decisions and it trains on all of them "
        "(learns the teacher's answers where its own mistakes lead)",
    )
    reinforce("--dagger-epochs", d.dagger_epochs, "epochs of training after each DAgger round")
    reinforce(
        "--samples-per-function",
        d.samples_per_function,
        "decisions kept per function and rollout, drawn uniformly",
    )
    p.add_argument(
        "--iterations",
        type=int,
        metavar="N",
        help=f"REINFORCE updates (0: cloning only; default {d.iterations}), or PPO iterations "
        f"(default {ppo.iterations})",
    )
    reinforce("--modules-per-iteration", d.modules_per_iteration, "modules drawn per update")
    reinforce("--episodes-per-module", d.episodes_per_module, "sampled rollouts per drawn module")
    reinforce(
        "--temperature",
        d.temperature,
        "divides the scores before sampling the actions",
        float,
        "X",
    )
    number("--learning-rate", d.learning_rate, "Adam's step size", float, "X")
    number("--entropy", d.entropy, "entropy bonus weight", float, "X")
    reinforce(
        "--validation-modules",
        d.validation_modules,
        "training modules on which the cloned and the fine-tuned policies are compared; the "
        "lower SpillReloadCost is kept",
    )
    g = p.add_argument_group(
        "rllib-ppo",
        "Only with --algorithm rllib-ppo (the REINFORCE-only options --bc-*, "
        "--samples-per-function, --modules-per-iteration, --episodes-per-module, "
        "--temperature and --validation-modules are refused with it, as these with "
        "reinforce). Each query's graph is padded to --max-nodes, --max-edges, "
        "--max-registers and --max-blocks; a query above a bound is answered by the basic "
        "policy and its function left out of the reward.",
    )

    def only_ppo(flag: str, default: Any, text: str) -> None:
        g.add_argument(flag, type=int, metavar="N", help=f"{text} (default {default})")

    only_ppo(
        "--steps-per-iteration",
        ppo.steps_per_iteration,
        "decisions sampled per PPO iteration, over every agent and env runner",
    )
    only_ppo("--minibatch-size", ppo.minibatch_size, "decisions per SGD minibatch")
    only_ppo("--ppo-epochs", ppo.epochs, "passes over each iteration's decisions")
    only_ppo("--max-nodes", ppo.max_nodes, "live ranges of the padded graph")
    only_ppo("--max-edges", ppo.max_edges, "interference edges of the padded graph")
    only_ppo("--max-registers", ppo.max_registers, "candidate registers of the padded query")
    only_ppo("--max-blocks", ppo.max_blocks, "candidate blocks of the split agent's query")
    g.add_argument(
        "--init-policy",
        metavar="FILE",
        help="start every agent's graph network from this policy.json of the REINFORCE "
        "trainer (e.g. its cloned basic policy, --iterations 0; same --hidden) instead of "
        "random weights",
    )
    g.add_argument(
        "--verify-machineinstrs",
        action="store_const",
        const=True,
        help="run llc with -verify-machineinstrs in every episode (llc fails on a wrong "
        "allocation)",
    )
    p.add_argument(
        "--split",
        action="store_true",
        help="run llc with -mlbridge-regalloc-split and train the split agent too. reinforce: "
        "the split policy (-mlbridge-regalloc-policy=split) is the teacher and the baseline "
        "instead of the basic policy, and agent.onnx answers the split agent; rllib-ppo: the "
        "split agent's policy stays in the checkpoints (the ONNX model spills where it "
        "would act)",
    )
    number("--hidden", d.hidden, "the width of the node embeddings")
    number(
        "--rounds",
        d.rounds,
        "rounds of message passing over the interference graph (each costs the exported "
        "model about one pass over the edges per decision)",
    )
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


def _check_algorithm_options(args: argparse.Namespace) -> None:
    """Refuses the other algorithm's options and fills in the defaults of this one's.

    Raises:
        CLIError: Naming the options given that the algorithm does not use.
    """
    from mlbridge.errors import CLIError
    from mlbridge.regalloc.ppo_settings import RegallocPPOSettings
    from mlbridge.regalloc.trainer import RegallocTrainConfig

    ppo = args.algorithm == "rllib-ppo"
    unused = [n for n in (_REINFORCE_ONLY if ppo else _PPO_ONLY) if getattr(args, n) is not None]
    if unused:
        names = ", ".join("--" + n.replace("_", "-") for n in unused)
        other = "reinforce" if ppo else "rllib-ppo"
        raise CLIError(
            f"{names} {'is an option' if len(unused) == 1 else 'are options'} of --algorithm "
            f"{other}, not of --algorithm {args.algorithm}"
        )
    if ppo:
        if args.no_ray:
            raise CLIError(
                "--algorithm rllib-ppo runs on Ray (RLlib's env runners are Ray actors): "
                "drop --no-ray"
            )
        s = RegallocPPOSettings()
        defaults: dict[str, Any] = {
            "iterations": s.iterations,
            "steps_per_iteration": s.steps_per_iteration,
            "minibatch_size": s.minibatch_size,
            "ppo_epochs": s.epochs,
            "max_nodes": s.max_nodes,
            "max_edges": s.max_edges,
            "max_registers": s.max_registers,
            "max_blocks": s.max_blocks,
            "verify_machineinstrs": False,
            "sample_functions": s.sample_functions or 0,
        }
    else:
        d = RegallocTrainConfig()
        defaults = {n: getattr(d, n) for n in _REINFORCE_ONLY}
        defaults["iterations"] = d.iterations
        defaults["sample_functions"] = d.sample_functions or 0
    for name, default in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, default)


def run_train(args: argparse.Namespace) -> int:
    """Runs ``mlbridge train regalloc``."""
    import contextlib
    import functools
    import os

    from mlbridge.corpus import default_corpus_dir, load_manifest
    from mlbridge.errors import CLIError, MLBridgeError
    from mlbridge.regalloc.gnn import agreement
    from mlbridge.regalloc.ppo_settings import CHECKPOINT_KIND
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
    from mlbridge.training.rllib import RLlibCheckpoints
    from mlbridge.training.run_options import check_pool_arguments, open_rollout_pool

    started = time.perf_counter()
    ppo = args.algorithm == "rllib-ppo"
    _check_algorithm_options(args)
    names = [
        "iterations",
        "bc_epochs",
        "bc_modules",
        "dagger_rounds",
        "dagger_epochs",
        "validation_modules",
    ]
    for flag in names[:1] if ppo else names:
        if getattr(args, flag) < 0:
            raise CLIError(f"--{flag.replace('_', '-')} must be >= 0")
    if args.sample_functions < 0:
        raise CLIError("--sample-functions must be >= 0")
    if args.rounds < 0:
        raise CLIError("--rounds must be >= 0")
    at_least_one = (
        ["hidden", "max_decisions", "steps_per_iteration", "minibatch_size", "ppo_epochs",
         "max_nodes", "max_edges", "max_registers", "max_blocks", "iterations"]
        if ppo
        else ["modules_per_iteration", "episodes_per_module", "hidden", "samples_per_function",
              "max_decisions"]
    )  # fmt: skip
    for flag in at_least_one:
        if getattr(args, flag) < 1:
            raise CLIError(f"--{flag.replace('_', '-')} must be at least 1")
    if ppo and args.minibatch_size > args.steps_per_iteration:
        raise CLIError(
            f"--minibatch-size ({args.minibatch_size}) must not exceed --steps-per-iteration "
            f"({args.steps_per_iteration})"
        )
    if not ppo and args.temperature <= 0:
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
        if ppo:
            RLlibCheckpoints(checkpoint_dir, CHECKPOINT_KIND).prepare(
                resume=args.resume, say=stderr_log
            )
        else:
            prepare_checkpoints(checkpoint_dir, args.resume, stderr_log)
    except MLBridgeError as e:
        raise CLIError(str(e)) from e
    out.mkdir(parents=True, exist_ok=True)
    stderr_log(f"{len(entries)} training modules from {corpus}, plugin {plugin}")
    metrics_log = TrainingMetrics(tensorboard_dir, log=stderr_log)
    written = [out / "policy.json", out / "agent.onnx", out / "metrics.json"]
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(metrics_log.close)
            if ppo:
                from mlbridge.regalloc.ppo_settings import RegallocPPOSettings
                from mlbridge.training.ray_pool import cluster_cpus, ray_session
                from mlbridge.training.run_options import default_workers

                local_cpus = max(os.cpu_count() or 1, args.workers or 1)
                where = stack.enter_context(
                    ray_session(args.ray_address, num_cpus=None if args.ray_address else local_cpus)
                )
                workers = args.workers or (
                    cluster_cpus() if args.ray_address else default_workers()
                )
                backend = "Ray"
                stderr_log(f"on the {where}: RLlib's multi-agent PPO with {workers} env runners")
                settings = RegallocPPOSettings(
                    iterations=args.iterations,
                    steps_per_iteration=args.steps_per_iteration,
                    minibatch_size=args.minibatch_size,
                    epochs=args.ppo_epochs,
                    learning_rate=args.learning_rate,
                    entropy=args.entropy,
                    hidden=args.hidden,
                    rounds=args.rounds,
                    split=args.split,
                    max_nodes=args.max_nodes,
                    max_edges=args.max_edges,
                    max_registers=args.max_registers,
                    max_blocks=args.max_blocks,
                    max_decisions=args.max_decisions,
                    sample_functions=args.sample_functions or None,
                    verify=args.verify_machineinstrs,
                    init_policy=args.init_policy,
                    seed=args.seed,
                    workers=workers,
                )
                from mlbridge.regalloc.rllib_ppo import train_regalloc_ppo

                trained = train_regalloc_ppo(
                    [e.bitcode_path for e in entries],
                    settings,
                    plugin=plugin,
                    log=stderr_log,
                    metrics=metrics_log,
                    checkpoint_dir=checkpoint_dir,
                    checkpoint_every=args.checkpoint_every,
                    resume=args.resume,
                )
                policy, coloring, splitter = trained.priority, trained.coloring, trained.split
                history, samples = trained.history, trained.samples
                config_record: dict[str, Any] = {"algorithm": args.algorithm, **vars(settings)}
            else:
                opened = open_rollout_pool(
                    stack, args, setup=functools.partial(check_worker, str(plugin)), say=stderr_log
                )
                workers, backend = opened.workers, opened.pool.backend
                config = RegallocTrainConfig(
                    max_decisions=args.max_decisions,
                    sample_functions=args.sample_functions or None,
                    bc_modules=args.bc_modules,
                    bc_epochs=args.bc_epochs,
                    dagger_rounds=args.dagger_rounds,
                    dagger_epochs=args.dagger_epochs,
                    samples_per_function=args.samples_per_function,
                    iterations=args.iterations,
                    modules_per_iteration=args.modules_per_iteration,
                    episodes_per_module=args.episodes_per_module,
                    temperature=args.temperature,
                    learning_rate=args.learning_rate,
                    entropy=args.entropy,
                    validation_modules=args.validation_modules,
                    hidden=args.hidden,
                    rounds=args.rounds,
                    split=args.split,
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
                coloring = splitter = None
                config_record = vars(config)
        train_seconds = time.perf_counter() - started
        if coloring is None:
            policy.save(out / "policy.json")
        else:
            # One network per agent: no single policy.json.
            networks = [(out / "priority.json", policy), (out / "coloring.json", coloring)]
            if splitter is not None:
                networks.append((out / "split.json", splitter))
            written[0:1] = [path for path, _ in networks]
            for path, network in networks:
                network.save(path)
        onnx_path = policy.to_onnx(out / "agent.onnx", coloring, splitter)
        agree, checked = agreement(policy, onnx_path, samples, coloring, splitter)
        stderr_log(
            f"the ONNX model answers as the PyTorch policy on {agree * 100:.2f}% of {checked} "
            "recorded observations"
        )
        metrics: dict[str, Any] = {
            "config": config_record,
            "corpus": str(corpus),
            "training_modules": [e.id for e in entries],
            "training": history,
            "training_seconds": train_seconds,
            "export_agreement": {"fraction": agree, "samples": checked},
        }
        if _plot(metrics_log.history, curve, workers, backend, stderr_log, ppo=ppo):
            metrics["learning_curve"] = str(curve)
        if not args.no_eval:
            # In this process: the held-out compilations use the ONNX model in llc, and
            # this machine's CPUs bound them.
            heldout = _heldout(manifest, args.heldout_max_modules)
            rows = evaluate_heldout(
                onnx_path,
                heldout,
                plugin=plugin,
                jobs=min(workers, os.cpu_count() or 1),
                log=stderr_log,
                split=args.split,
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
    stderr_log(f"wrote {', '.join(str(w) for w in written)}")
    stderr_log(
        f"checkpoints in {checkpoint_dir}; TensorBoard: tensorboard --logdir {tensorboard_dir}"
    )
    stderr_log(f"wall time {metrics['wall_seconds']:.0f} s")
    return 0


def _plot(
    history: list[dict[str, float]],
    path: Path,
    workers: int,
    backend: str,
    log: Any,
    *,
    ppo: bool = False,
) -> bool:
    """The learning curve: sampled ``SpillReloadCost`` against the basic policy's, per iteration.

    REINFORCE: two series, the change of the sum over the iteration's modules (a few hot
    functions dominate it), and the mean over the functions that spill of the change
    relative to the larger cost. PPO (``ppo``): the episodes' mean reward. Nothing without
    an iteration.
    """
    from mlbridge.regalloc.ppo_settings import METRIC_REWARD
    from mlbridge.regalloc.trainer import METRIC_RELATIVE, METRIC_SAMPLED_VS_BASIC, METRIC_WALL
    from mlbridge.training.metrics import plot_learning_curve

    if ppo:
        series = {"episodes' reward, mean": METRIC_REWARD}
        ylabel = "basic policy's SpillReloadCost minus the agents' (% of the larger)"
        title = f"mlbridge train regalloc --algorithm rllib-ppo, {workers} env runners (Ray)"
    else:
        series = {
            "sum over the drawn modules": METRIC_SAMPLED_VS_BASIC,
            "mean over the functions that spill": METRIC_RELATIVE,
        }
        ylabel = "sampled SpillReloadCost vs the basic policy's (%)"
        title = (
            f"mlbridge train regalloc: REINFORCE on the drawn training modules, "
            f"{workers} workers ({backend})"
        )
    steps = [h for h in history if any(tag in h for tag in series.values())]
    if not steps:
        return False
    try:
        plot_learning_curve(
            steps, path, series=series, ylabel=ylabel, title=title, wall_time=METRIC_WALL
        )
    except ImportError:
        log("matplotlib is not installed: no learning-curve.png (pip install 'mlbridge[train]')")
        return False
    log(f"wrote {path}")
    return True
