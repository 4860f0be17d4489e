"""``mlbridge train phase-order``: train, export and evaluate a phase-ordering agent."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from mlbridge.training.run_options import add_pool_arguments, add_run_arguments

__all__ = ["ALGORITHMS", "add_train_parser", "run_train"]

#: The values of ``--algorithm``; the first is the default.
ALGORITHMS = ("reinforce", "rllib-ppo")
#: Options of REINFORCE alone, and of RLlib's PPO alone (argparse dest names).
_REINFORCE_ONLY = (
    "teacher",
    "bc_modules",
    "bc_epochs",
    "validation_modules",
    "modules_per_iteration",
    "episodes_per_module",
)
_PPO_ONLY = ("steps_per_iteration", "minibatch_size", "ppo_epochs", "init_policy")


def add_train_parser(sub: Any) -> argparse.ArgumentParser:
    """Adds the ``phase-order`` subcommand to the ``train`` subparsers ``sub``."""
    from mlbridge.phase_order.ppo_settings import PPOSettings
    from mlbridge.phase_order.trainer import PGConfig

    d = PGConfig()
    ppo = PPOSettings()
    p: argparse.ArgumentParser = sub.add_parser(
        "phase-order",
        help="a phase-ordering agent for mlbridge-phase-order (policy gradient, ONNX)",
        description=(
            "Trains a small PyTorch policy for the opt plugin's mlbridge-phase-order pass "
            "by behaviour cloning of a fixed sequence, then REINFORCE, on the corpus's "
            "training modules (each episode: opt-22 runs the "
            "pass over the pipe, the policy picks each sub-sequence, the reward is the "
            "code-size decrease the pass reports), exports it to ONNX (int64 'action'), "
            "checks the export against the policy, and compares the held-out modules' "
            ".text bytes with the ONNX agent in-process against stock -Oz. The episodes "
            "run on Ray (a local instance, or a cluster) or in threads (--no-ray); the "
            "updates in this process. Writes policy.json, agent.onnx and metrics.json to "
            "the output folder, with the run's checkpoints, TensorBoard event files and a "
            "PNG learning curve (docs/phase-order-training.md). --algorithm rllib-ppo "
            "trains the same policy with RLlib's PPO instead (no warm start; the episodes "
            "run in RLlib's env runners on Ray)."
        ),
    )
    p.add_argument(
        "--algorithm",
        choices=ALGORITHMS,
        default="reinforce",
        help="reinforce: behaviour cloning of --teacher, then REINFORCE with a leave-one-out "
        "baseline, episodes on mlbridge's rollout pool (the default); rllib-ppo: RLlib's PPO "
        "from a random policy, episodes in RLlib's env runners (Ray actors, one per "
        "--workers; needs the rllib extra)",
    )
    p.add_argument("--corpus", metavar="DIR", help="corpus folder (default: the built one)")
    p.add_argument(
        "--output-dir", "-o", required=True, metavar="DIR", help="where to write the results"
    )
    p.add_argument("--build-dir", metavar="DIR", help="the build with the opt plugin")
    p.add_argument(
        "--max-modules",
        type=int,
        metavar="N",
        help="use at most N training modules, evenly spread (default: all that qualify)",
    )
    p.add_argument(
        "--max-instructions",
        type=int,
        default=10000,
        metavar="N",
        help="leave out training modules with more IR instructions (default 10000)",
    )
    p.add_argument(
        "--teacher",
        metavar="LIST",
        help="the warm start's fixed sequence, e.g. 0-13 or 0,2,5-7, then stop; '' for none "
        f"(default {d.teacher}: the built-in set's pieces of -Oz in -Oz's order)",
    )
    p.add_argument(
        "--bc-modules",
        type=int,
        metavar="N",
        help=f"training modules on which the teacher's episodes are recorded (default "
        f"{d.bc_modules})",
    )
    p.add_argument(
        "--bc-epochs",
        type=int,
        metavar="N",
        help=f"full-batch epochs of behaviour cloning (default {d.bc_epochs})",
    )
    p.add_argument(
        "--validation-modules",
        type=int,
        metavar="N",
        help="training modules on which the greedy policies after cloning and after "
        f"fine-tuning are compared; the better one is kept (default {d.validation_modules})",
    )
    p.add_argument(
        "--policy-out",
        metavar="FILE",
        help="also write the policy JSON here (the built-in phase-order-oz is "
        "mlbridge/phase_order/models/phase-order-oz.json)",
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=d.iterations,
        metavar="N",
        help=f"policy-gradient updates, or PPO iterations (default {d.iterations})",
    )
    p.add_argument(
        "--modules-per-iteration",
        type=int,
        metavar="N",
        help=f"modules drawn per update (default {d.modules_per_iteration})",
    )
    p.add_argument(
        "--episodes-per-module",
        type=int,
        metavar="N",
        help=f"sampled episodes per drawn module, at least 2 (default {d.episodes_per_module})",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=d.max_steps,
        metavar="N",
        help=f"the pass's step limit per episode (default {d.max_steps})",
    )
    p.add_argument(
        "--hidden",
        type=int,
        default=d.hidden,
        metavar="N",
        help=f"the policy's hidden width (default {d.hidden})",
    )
    p.add_argument(
        "--learning-rate",
        type=float,
        default=d.learning_rate,
        metavar="X",
        help=f"Adam's step size (default {d.learning_rate})",
    )
    p.add_argument("--entropy", type=float, default=d.entropy, help="entropy bonus weight")
    ppo_group = p.add_argument_group(
        "rllib-ppo",
        "Only with --algorithm rllib-ppo (the REINFORCE-only options --teacher, --bc-*, "
        "--validation-modules, --modules-per-iteration and --episodes-per-module are refused "
        "with it, as these with reinforce).",
    )
    ppo_group.add_argument(
        "--steps-per-iteration",
        type=int,
        metavar="N",
        help=f"decisions sampled per PPO iteration over all env runners (default "
        f"{ppo.steps_per_iteration})",
    )
    ppo_group.add_argument(
        "--minibatch-size",
        type=int,
        metavar="N",
        help=f"decisions per SGD minibatch (default {ppo.minibatch_size})",
    )
    ppo_group.add_argument(
        "--ppo-epochs",
        type=int,
        metavar="N",
        help=f"passes over each iteration's decisions (default {ppo.epochs})",
    )
    ppo_group.add_argument(
        "--init-policy",
        metavar="FILE",
        help="start the policy network from this policy.json (of either algorithm: e.g. "
        "one REINFORCE warm-started by behaviour cloning with --teacher, or a built-in "
        "model's); the value network starts from random (default: both from random)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=d.seed,
        metavar="N",
        help="seeds the policy's initialisation, the module draws and the action samples "
        f"(default {d.seed})",
    )
    p.add_argument(
        "--observation",
        choices=["counts", "ir2vec"],
        default=d.observation,
        help="the pass's observation: instruction counts, or an IR2Vec embedding (needs "
        f"--ir2vec-vocab) (default {d.observation})",
    )
    p.add_argument("--ir2vec-vocab", metavar="PATH|NAME", help="the vocabulary for ir2vec")
    p.add_argument("--actions", metavar="FILE", help="the action set (default: the pass's)")
    p.add_argument(
        "--heldout-max-modules",
        type=int,
        metavar="N",
        help="evaluate on at most N held-out modules (default: all)",
    )
    p.add_argument("--no-eval", action="store_true", help="skip the held-out evaluation")
    add_pool_arguments(p, rollout="episode", rollouts="episodes")
    add_run_arguments(
        p,
        checkpoint_default="OUTPUT_DIR/checkpoints",
        checkpoint_contents="the policy, the cloned policy, the optimizer's state, random "
        "generator, settings, the observations seen; the first after the warm start",
        tensorboard_default="OUTPUT_DIR/tensorboard",
        tensorboard_contents="the per-iteration size reduction, episode length, entropy "
        "and wall time",
        curve_default="OUTPUT_DIR/curve.png",
    )
    return p


def _check_init_policy(path: str, hidden: int) -> None:
    """Refuses an ``--init-policy`` that is no policy or has another hidden width.

    Raises:
        CLIError: Naming the file and the fix.
    """
    from mlbridge.errors import CLIError, MLBridgeError
    from mlbridge.phase_order.policy import PhasePolicy

    try:
        policy = PhasePolicy.load(path)
    except MLBridgeError as e:
        raise CLIError(f"--init-policy: {e}") from e
    if policy.hidden != hidden:
        raise CLIError(
            f"--init-policy {path} has hidden width {policy.hidden}, the policy to train "
            f"{hidden}: give --hidden {policy.hidden}"
        )


def _check_algorithm_options(args: argparse.Namespace) -> None:
    """Refuses the other algorithm's options and fills in the defaults of this one's.

    Raises:
        CLIError: Naming the options given that the algorithm does not use.
    """
    from mlbridge.errors import CLIError
    from mlbridge.phase_order.ppo_settings import PPOSettings
    from mlbridge.phase_order.trainer import PGConfig

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
        if args.init_policy is not None:
            _check_init_policy(args.init_policy, args.hidden)
        s = PPOSettings()
        for name, default in (
            ("steps_per_iteration", s.steps_per_iteration),
            ("minibatch_size", s.minibatch_size),
            ("ppo_epochs", s.epochs),
        ):
            if getattr(args, name) is None:
                setattr(args, name, default)
        return
    d = PGConfig()
    for name in _REINFORCE_ONLY:
        if getattr(args, name) is None:
            setattr(args, name, getattr(d, name))
    if args.episodes_per_module < 2:
        raise CLIError(
            f"--episodes-per-module must be at least 2 (got {args.episodes_per_module}): each "
            "episode's baseline is the mean return of the module's other episodes"
        )


def run_train(args: argparse.Namespace) -> int:
    """Runs ``mlbridge train phase-order``."""
    import contextlib
    import functools
    import os
    from dataclasses import asdict

    from mlbridge.corpus import default_corpus_dir, load_manifest
    from mlbridge.errors import CLIError, MLBridgeError
    from mlbridge.phase_order.command import find_plugin
    from mlbridge.phase_order.ppo_settings import CHECKPOINT_KIND, PPOSettings
    from mlbridge.phase_order.trainer import (
        METRIC_BEST,
        METRIC_MEAN,
        METRIC_WALL,
        PGConfig,
        agreement,
        check_worker,
        evaluate_heldout,
        prepare_checkpoints,
        select_modules,
        stderr_log,
        summarize_heldout,
        train_phase_order,
        write_metrics,
    )
    from mlbridge.training.metrics import TrainingMetrics, plot_learning_curve
    from mlbridge.training.rllib import RLlibCheckpoints
    from mlbridge.training.run_options import (
        check_pool_arguments,
        default_workers,
        open_rollout_pool,
    )

    started = time.perf_counter()
    ppo = args.algorithm == "rllib-ppo"
    _check_algorithm_options(args)
    check_pool_arguments(args)
    corpus = Path(args.corpus) if args.corpus else default_corpus_dir()
    try:
        manifest = load_manifest(corpus)
        plugin = find_plugin(args.build_dir)
    except (MLBridgeError, OSError) as e:
        raise CLIError(str(e)) from e
    modules = select_modules(
        manifest, "train", max_instructions=args.max_instructions, max_modules=args.max_modules
    )
    if not modules:
        raise CLIError(
            f"no training module in {corpus} has <= {args.max_instructions} instructions"
        )
    heldout = select_modules(
        manifest,
        "heldout",
        max_instructions=None,
        min_instructions=0,
        max_modules=args.heldout_max_modules,
    )
    out = Path(args.output_dir)
    checkpoint_dir = Path(args.checkpoint_dir or out / "checkpoints")
    tensorboard_dir = Path(args.tensorboard_dir or out / "tensorboard")
    curve = Path(args.curve or out / "curve.png")
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
    stderr_log(f"{len(modules)} training modules from {corpus}, plugin {plugin}")
    metrics_log = TrainingMetrics(tensorboard_dir, log=stderr_log)
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(metrics_log.close)
            if ppo:
                from mlbridge.training.ray_pool import cluster_cpus, ray_session

                local_cpus = max(os.cpu_count() or 1, args.workers or 1)
                where = stack.enter_context(
                    ray_session(args.ray_address, num_cpus=None if args.ray_address else local_cpus)
                )
                workers = args.workers or (
                    cluster_cpus() if args.ray_address else default_workers()
                )
                stderr_log(f"on the {where}: RLlib's PPO with {workers} env runners")
                settings = PPOSettings(
                    iterations=args.iterations,
                    steps_per_iteration=args.steps_per_iteration,
                    minibatch_size=args.minibatch_size,
                    epochs=args.ppo_epochs,
                    learning_rate=args.learning_rate,
                    entropy=args.entropy,
                    max_steps=args.max_steps,
                    hidden=args.hidden,
                    seed=args.seed,
                    workers=workers,
                    observation=args.observation,
                    ir2vec_vocab=args.ir2vec_vocab,
                    actions=args.actions,
                    init_policy=args.init_policy,
                )
                from mlbridge.phase_order.rllib_ppo import train_phase_order_ppo

                policy, history, samples = train_phase_order_ppo(
                    modules,
                    settings,
                    plugin=plugin,
                    log=stderr_log,
                    metrics=metrics_log,
                    checkpoint_dir=checkpoint_dir,
                    checkpoint_every=args.checkpoint_every,
                    resume=args.resume,
                )
                config_record: dict[str, Any] = {"algorithm": args.algorithm, **asdict(settings)}
                title = (
                    f"mlbridge train phase-order --algorithm rllib-ppo: {len(modules)} "
                    f"training modules, {settings.steps_per_iteration} decisions per "
                    f"iteration, {workers} env runners (Ray)"
                )
            else:
                opened = open_rollout_pool(
                    stack,
                    args,
                    setup=functools.partial(check_worker, str(plugin)),
                    say=stderr_log,
                    rollouts="episodes",
                )
                workers = opened.workers
                config = PGConfig(
                    teacher=args.teacher,
                    bc_modules=args.bc_modules,
                    bc_epochs=args.bc_epochs,
                    validation_modules=args.validation_modules,
                    iterations=args.iterations,
                    modules_per_iteration=args.modules_per_iteration,
                    episodes_per_module=args.episodes_per_module,
                    max_steps=args.max_steps,
                    hidden=args.hidden,
                    learning_rate=args.learning_rate,
                    entropy=args.entropy,
                    jobs=opened.workers,
                    seed=args.seed,
                    observation=args.observation,
                    ir2vec_vocab=args.ir2vec_vocab,
                    actions=args.actions,
                )
                policy, history, samples = train_phase_order(
                    modules,
                    config,
                    plugin=plugin,
                    log=stderr_log,
                    pool=opened.pool,
                    checkpoint_dir=checkpoint_dir,
                    checkpoint_every=args.checkpoint_every,
                    resume=args.resume,
                    metrics=metrics_log,
                )
                config_record = vars(config)
                title = (
                    f"mlbridge train phase-order: {len(modules)} training modules, "
                    f"{config.episodes_per_module} episodes x {config.modules_per_iteration} "
                    f"modules per iteration, {opened.workers} workers ({opened.pool.backend}); "
                    "step 0: the teacher"
                )
        train_seconds = time.perf_counter() - started
        policy.save(out / "policy.json")
        if args.policy_out:
            policy.save(args.policy_out)
            stderr_log(f"wrote {args.policy_out}")
        onnx_path = policy.to_onnx(out / "agent.onnx")
        agree, checked = agreement(policy, onnx_path, samples)
        stderr_log(
            f"ONNX agent answers as the PyTorch policy on {agree * 100:.2f}% of {checked} "
            "observations seen in training"
        )
        metrics: dict[str, Any] = {
            "config": config_record,
            "corpus": str(corpus),
            "training_modules": [str(m) for m in modules],
            "training": history,
            "training_seconds": train_seconds,
            "export_agreement": {"fraction": agree, "samples": checked},
        }
        if not args.no_eval:
            # In this process: the held-out compilations use the ONNX agent in opt, and
            # this machine's CPUs bound them.
            results = evaluate_heldout(
                onnx_path,
                heldout,
                plugin=plugin,
                max_steps=args.max_steps,
                observation=args.observation,
                ir2vec_vocab=args.ir2vec_vocab,
                actions=args.actions,
                jobs=min(workers, os.cpu_count() or 1),
                log=stderr_log,
            )
            summary = summarize_heldout(results)
            metrics["heldout"] = {"summary": summary, "modules": [vars(r) for r in results]}
            t = summary["text_bytes"]
            stderr_log(
                f"held-out .text bytes over {summary['modules']} modules: agent {t['agent']}, "
                f"stock -Oz {t['oz']} ({summary['agent_vs_oz'] * 100:+.2f}% vs -Oz), "
                f"unoptimised {t['unoptimized']}; agent smaller on "
                f"{summary['modules_agent_smaller']}, equal on "
                f"{summary['modules_agent_equal']}, larger on {summary['modules_agent_larger']}"
            )
    except (MLBridgeError, ValueError) as e:
        raise CLIError(str(e)) from e
    metrics["wall_seconds"] = time.perf_counter() - started
    write_metrics(out / "metrics.json", metrics)
    stderr_log(f"wrote {out / 'policy.json'}, {out / 'agent.onnx'}, {out / 'metrics.json'}")
    stderr_log(
        f"checkpoints in {checkpoint_dir}; TensorBoard: tensorboard --logdir {tensorboard_dir}"
    )
    try:
        plot_learning_curve(
            metrics_log.history,
            curve,
            series={
                "sampled episodes, mean": METRIC_MEAN,
                "best episode": METRIC_BEST,
            },
            ylabel="code-size reduction, the pass's estimate (%)",
            title=title,
            wall_time=METRIC_WALL,
        )
    except ImportError as e:
        stderr_log(f"no learning curve ({e}): pip install 'mlbridge[train]'")
    else:
        stderr_log(f"wrote {curve}")
    stderr_log(f"wall time {metrics['wall_seconds']:.0f} s")
    return 0
