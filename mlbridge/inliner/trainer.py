"""Training an inlining-for-size policy with evolution strategies, against a real ``opt``.

Each evaluation compiles one module with ``opt-22 -passes='default<Oz>'`` while a
:class:`~mlbridge.inliner.policy.LinearPolicy` answers every inlining decision over
the pipe (LLVM's interactive protocol, :func:`mlbridge.compiler.pipe.drive_compiler`),
then ``llc-22`` makes an object file and its size is the measure: by default the bytes of
every allocated section (``.text``, ``.rodata``, ``.eh_frame``, data: what the program
loads), since ``.text`` alone flatters an inliner (every call left in place keeps unwind
information); ``ESConfig.size_measure`` can ask for ``.text``. The reward of a module is
its relative size saving against stock ``opt-22 -passes='default<Oz>'`` (positive:
smaller than stock).

The search is antithetic evolution strategies (Salimans et al., 2017), the method MLGO
used for its inlining-for-size model: perturb the parameters both ways, compare the mean
reward of the two, step along the perturbations that helped. It starts from the policy
that imitates LLVM's default advisor, so the first iterate is as good as stock.

Large modules are sampled, not left out: in a module that asks more than
``ESConfig.sample_call_sites`` inlining decisions, a perturbed policy makes only that many
of them per rollout (:func:`sample_call_sites`, drawn from the iteration and the module,
the same for every perturbation of the iteration), and the others get LLVM's default
decision (the ``inlining_default`` feature), so that the module's saving against stock
``-Oz`` comes from the sampled decisions alone. Nothing changes on the compiler side: a
decision is known by its position in the compilation's sequence of questions.

The compiler command is a template: any tool that speaks LLVM's interactive inliner
protocol works (stock ``opt-22`` with ``-enable-ml-inliner=release``, or ``opt-22`` with
the mlbridge plugin on the pipe runner).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mlbridge.compiler.pipe import DriveResult, Observation, drive_compiler
from mlbridge.errors import MLBridgeError
from mlbridge.inliner.policy import DEFAULT_FEATURE, LinearPolicy
from mlbridge.llvm import LLVMToolError, find_llvm_tool, object_sizes
from mlbridge.progress import track
from mlbridge.training.checkpoints import (
    CheckpointError,
    latest_checkpoint,
    load_checkpoint,
    prepare_checkpoint_folder,
    save_checkpoint,
)
from mlbridge.training.metrics import TrainingMetrics
from mlbridge.training.pool import (
    LocalRolloutPool,
    RolloutPool,
    RolloutPoolError,
    SharedFile,
    WorkerContext,
)
from mlbridge.training.run_options import default_workers

__all__ = [
    "CHECKPOINT_FORMAT",
    "ESConfig",
    "SampledPolicy",
    "TrainingError",
    "evaluate_policy",
    "prepare_checkpoints",
    "ml_inliner_command",
    "sample_call_sites",
    "stock_text_size",
    "train_inliner",
]


class TrainingError(MLBridgeError):
    """A compilation during training failed."""


def ml_inliner_command(passes: str = "default<Oz>") -> list[str]:
    """Stock ``opt-22`` with its ML inliner asking over the pipe.

    Returns:
        A command template with ``{base}``, ``{input}`` and ``{output}`` placeholders.
    """
    return [
        find_llvm_tool("opt"),
        f"-passes={passes}",
        "-enable-ml-inliner=release",
        "-inliner-interactive-channel-base={base}",
        "-inliner-interactive-include-default",
        "{input}",
        "-o",
        "{output}",
    ]


def _run(argv: Sequence[str], timeout: float) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TrainingError(f"{argv[0]} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        raise TrainingError(f"{' '.join(argv)} failed: {proc.stderr.strip()[-2000:]}")


#: What a size means (:attr:`ESConfig.size_measure`): the bytes of every allocated section
#: of the object, or of ``.text`` alone.
SIZE_MEASURES = ("allocated", "text")


def _object_size(bitcode: Path, workdir: Path, timeout: float, measure: str) -> int:
    if measure not in SIZE_MEASURES:
        raise ValueError(f"unknown size measure {measure!r}: one of {', '.join(SIZE_MEASURES)}")
    obj = workdir / "out.o"
    _run(
        [find_llvm_tool("llc"), "-O2", "-filetype=obj", str(bitcode), "-o", str(obj)],
        timeout,
    )
    try:
        sizes = object_sizes(obj)
    except LLVMToolError as e:
        raise TrainingError(str(e)) from None
    return sizes.allocated if measure == "allocated" else sizes.text


def stock_text_size(
    module: Path, *, passes: str = "default<Oz>", timeout: float = 300, measure: str = "text"
) -> int:
    """The size of ``module`` after stock ``opt-22 -passes=<passes>``, ``llc-22 -O2``.

    ``measure`` is ``"text"`` (``.text`` bytes) or ``"allocated"`` (every allocated
    section's).
    """
    with tempfile.TemporaryDirectory(prefix="mlbridge-train-") as tmp:
        out = Path(tmp) / "out.bc"
        _run([find_llvm_tool("opt"), f"-passes={passes}", str(module), "-o", str(out)], timeout)
        return _object_size(out, Path(tmp), timeout, measure)


def _default_decision(observation: Mapping[str, Any]) -> int:
    """LLVM's default advisor's answer, which the compiler sends as a feature."""
    return int(np.asarray(observation[DEFAULT_FEATURE]).reshape(-1)[0])


def sample_call_sites(decisions: int, size: int | None, seed: int) -> frozenset[int] | None:
    """The positions of the inlining decisions a policy makes in one sampled rollout.

    Args:
        decisions: How many decisions the module asks (the trainer counts them when it
            scores its start policy).
        size: The sample size; a module asking no more than this is not sampled
            (``None``: never sampled).
        seed: Draws the sample; the same seed gives the same sample.

    Returns:
        ``size`` distinct positions in ``range(decisions)``, or ``None`` if the policy makes
        every decision.
    """
    if size is None or decisions <= size:
        return None
    rng = np.random.default_rng(seed)
    return frozenset(int(i) for i in rng.choice(decisions, size=size, replace=False))


class SampledPolicy:
    """Answers the sampled decisions with ``policy`` and the others as LLVM's default.

    A decision is known by its position among the compilation's questions (counted from
    0): the compiler is deterministic, so the same policy, module and sample ask the
    same questions in the same order. Use one instance per compilation.

    Attributes:
        policy: Makes the sampled decisions.
        sample: The positions it makes (``None``: every one).
        asked: Decisions seen so far.
        by_policy: Of those, the ones ``policy`` made.
    """

    def __init__(self, policy: Callable[[Observation], int], sample: frozenset[int] | None) -> None:
        self.policy = policy
        self.sample = sample
        self.asked = 0
        self.by_policy = 0

    def __call__(self, observation: Observation) -> int:
        """The answer to the next decision."""
        position = self.asked
        self.asked += 1
        if self.sample is None or position in self.sample:
            self.by_policy += 1
            return int(self.policy(observation))
        return _default_decision(observation)


def evaluate_policy(
    policy: Callable[[Observation], int],
    module: Path,
    *,
    command: Sequence[str] | None = None,
    timeout: float = 300,
    sample: frozenset[int] | None = None,
    capture: str | Path | None = None,
    measure: str = "text",
) -> tuple[int, int]:
    """Compiles ``module`` with ``policy`` answering the inlining decisions.

    Args:
        policy: Answers each decision (1: inline).
        module: The bitcode.
        command: The compiler command template (default :func:`ml_inliner_command`).
        timeout: Seconds for each tool and each wait of the session.
        sample: The positions of the decisions ``policy`` makes (:func:`sample_call_sites`);
            the others get LLVM's default decision. ``None``: ``policy`` makes every one.
        capture: Write the session's traffic, the answers included, to this file
            (:func:`mlbridge.logs.read_log` reads it).
        measure: ``"text"`` (``.text`` bytes) or ``"allocated"`` (every allocated
            section's).

    Returns:
        The size in bytes, and the number of decisions the compiler asked.

    Raises:
        TrainingError: If a tool fails.
    """
    template = list(command) if command is not None else ml_inliner_command()
    answer = SampledPolicy(policy, sample) if sample is not None else policy
    with tempfile.TemporaryDirectory(prefix="mlbridge-train-") as tmp:
        out = Path(tmp) / "out.bc"
        argv = [a.replace("{input}", str(module)).replace("{output}", str(out)) for a in template]
        try:
            result: DriveResult = drive_compiler(
                argv, answer, timeout=timeout, exit_timeout=timeout, parent=tmp, capture=capture
            )
        except MLBridgeError as e:
            raise TrainingError(f"compiling {module} with the policy: {e}") from e
        if result.returncode != 0:
            raise TrainingError(f"{argv[0]} exited with code {result.returncode} on {module}")
        return _object_size(out, Path(tmp), timeout, measure), result.answered


@dataclass
class ESConfig:
    """Evolution-strategies settings.

    Attributes:
        iterations: Parameter updates.
        pairs: Antithetic perturbation pairs per update.
        modules_per_iteration: Modules sampled (without replacement) per update.
        sigma: Standard deviation of the perturbations.
        learning_rate: Step size.
        jobs: Compilations in parallel (the threads of the default local pool; with a
            pool passed in, its workers decide, and this is recorded).
        seed: Random seed (the whole run is deterministic given it and the tools).
        sample_call_sites: In a module asking more inlining decisions than this, a
            perturbed policy makes this many of them per rollout, sampled, and the others
            get LLVM's default decision (``None``: the policy makes every decision).
        size_measure: What the reward's sizes count: ``"allocated"``, the bytes of every
            allocated section of the object (``.text``, ``.rodata``, ``.eh_frame``,
            data), or ``"text"``, ``.text`` alone.
    """

    iterations: int = 20
    pairs: int = 6
    modules_per_iteration: int = 8
    sigma: float = 0.05
    learning_rate: float = 0.05
    jobs: int = 2
    seed: int = 0
    sample_call_sites: int | None = 400
    size_measure: str = "allocated"


def _relative_saving(size: int, baseline: int) -> float:
    return (baseline - size) / baseline if baseline > 0 else 0.0


#: The ``format`` of the trainer's checkpoints (:mod:`mlbridge.training.checkpoints`).
CHECKPOINT_FORMAT = "mlbridge-inliner-es-checkpoint-2"

#: ESConfig fields a resumed run may change: how long it runs and on how many workers.
_RESUMABLE_CHANGES = frozenset({"iterations", "jobs"})

#: The TensorBoard tags of :func:`train_inliner` (and the curve's series).
METRIC_ITERATE = "reward/iterate_saving_pct"
METRIC_BEST = "reward/best_saving_pct"
METRIC_PERTURBED = "reward/perturbed_mean_saving_pct"
METRIC_WALL = "time/wall_s"
METRIC_ROLLOUTS = "rollouts/done"


# The rollouts: module-level functions, so that a Ray pool can pickle them to its workers.


def _stock_rollout(
    context: WorkerContext, module: SharedFile, *, timeout: float, measure: str
) -> int:
    return stock_text_size(context.local_path(module), timeout=timeout, measure=measure)


def _policy_rollout(
    context: WorkerContext,
    task: tuple[int, SharedFile, frozenset[int] | None],
    *,
    policies: Sequence[LinearPolicy],
    command: Sequence[str] | None,
    timeout: float,
    measure: str,
) -> tuple[int, int]:
    index, module, sample = task
    path = context.local_path(module)
    return evaluate_policy(
        policies[index], path, command=command, timeout=timeout, sample=sample, measure=measure
    )


def _features_rollout(
    context: WorkerContext, module: SharedFile, *, command: Sequence[str] | None, timeout: float
) -> list[str]:
    return _feature_names(context.local_path(module), command, timeout)


@dataclass
class _RunState:
    """Everything an iteration changes, and what a checkpoint holds."""

    baselines: list[int]
    decisions: list[int]  # per module, asked of the start policy: the sampling population
    policy: LinearPolicy  # the template: its features (and metadata) for every iterate
    theta: np.ndarray[Any, np.dtype[np.float64]]
    best: LinearPolicy
    best_score: float
    rng: np.random.Generator
    iteration: int  # iterations done
    elapsed_s: float  # wall time of the earlier segments of the run (resumed runs)
    rollouts: int

    def to_json(
        self, config: ESConfig, modules: list[dict[str, str]], history: list[dict[str, float]]
    ) -> dict[str, Any]:
        """The checkpoint's ``state``: JSON types only, every float exact."""
        return {
            "config": asdict(config),
            "modules": modules,
            "baselines": self.baselines,
            "decisions": self.decisions,
            "policy": json.loads(self.policy.to_json()),
            "theta": [float(x) for x in self.theta],
            "best": json.loads(self.best.to_json()),
            "best_score": self.best_score,
            "rng": self.rng.bit_generator.state,
            "history": history,
            "elapsed_s": self.elapsed_s,
            "rollouts": self.rollouts,
        }


def _resume(
    checkpoint_dir: Path, config: ESConfig, modules: list[dict[str, str]]
) -> tuple[_RunState, list[dict[str, float]], Path]:
    path = latest_checkpoint(checkpoint_dir)
    if path is None:
        raise TrainingError(f"no checkpoint to resume from in {checkpoint_dir}")
    try:
        iteration, state = load_checkpoint(path, CHECKPOINT_FORMAT)
        saved = dict(state["config"])
        mine = asdict(config)
        changed = sorted(k for k in mine if k not in _RESUMABLE_CHANGES and saved.get(k) != mine[k])
        if changed:
            diffs = ", ".join(f"{k}={saved.get(k)!r} there, {mine[k]!r} here" for k in changed)
            raise TrainingError(
                f"{path} was taken with other settings ({diffs}): resume with the settings "
                "of the run (only --iterations and --workers may change)"
            )
        if state["modules"] != modules:
            raise TrainingError(
                f"{path} was taken on other modules ({len(state['modules'])} there, "
                f"{len(modules)} here, or their contents differ): resume on the same "
                "corpus and selection"
            )
        rng = np.random.default_rng()
        rng.bit_generator.state = state["rng"]
        run = _RunState(
            baselines=[int(b) for b in state["baselines"]],
            decisions=[int(d) for d in state["decisions"]],
            policy=LinearPolicy.from_json(json.dumps(state["policy"])),
            theta=np.asarray(state["theta"], dtype=np.float64),
            best=LinearPolicy.from_json(json.dumps(state["best"])),
            best_score=float(state["best_score"]),
            rng=rng,
            iteration=iteration,
            elapsed_s=float(state["elapsed_s"]),
            rollouts=int(state["rollouts"]),
        )
        history = [dict(h) for h in state["history"]]
    except CheckpointError as e:
        raise TrainingError(str(e)) from e
    except (KeyError, TypeError, ValueError) as e:
        raise TrainingError(f"{path} is damaged or of another version ({e}); start anew") from e
    return run, history, path


def prepare_checkpoints(folder: str | Path, resume: bool, say: Callable[[str], None]) -> None:
    """Checks a run's checkpoint folder before the run (cheap: call it before starting Ray).

    :func:`mlbridge.training.checkpoints.prepare_checkpoint_folder` for this trainer's
    checkpoints: to resume, the folder must hold one; a new run removes a finished run's
    and refuses an unfinished run's.

    Raises:
        TrainingError: Saying what to do (resume, or remove the folder).
    """
    try:
        prepare_checkpoint_folder(folder, CHECKPOINT_FORMAT, resume=resume, say=say)
    except CheckpointError as e:
        raise TrainingError(str(e)) from e


def train_inliner(
    modules: Sequence[Path],
    config: ESConfig,
    *,
    initial: LinearPolicy | None = None,
    command: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
    timeout: float = 300,
    pool: RolloutPool | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 1,
    resume: bool = False,
    metrics: TrainingMetrics | None = None,
) -> LinearPolicy:
    """Trains a :class:`LinearPolicy` on ``modules`` and returns the best one seen.

    The features are those the compiler sends (read from the first compilation's header).
    Every iterate is scored on the whole module set at the end of its update; the best
    (largest mean saving against stock ``-Oz``) is returned, with its scores in
    ``metadata``. The run is deterministic given ``config.seed`` and the tools, whatever
    the pool and however its rollouts are spread.

    Args:
        modules: The bitcode to train on.
        config: The evolution-strategies settings.
        initial: The starting policy (default: the one that answers as LLVM's default).
        command: The compiler command template (default :func:`ml_inliner_command`,
            resolved on each worker).
        progress: Where the run's lines go (default: stderr).
        timeout: Seconds for one compilation.
        pool: Where the compilations run (default: a :class:`LocalRolloutPool` of
            ``config.jobs`` threads, closed at the end; a pool passed in stays open).
        checkpoint_dir: Where to write checkpoints (``None``: none).
        checkpoint_every: Write one every this many iterations, and after the last.
        resume: Continue from the latest checkpoint in ``checkpoint_dir`` (its settings
            must be this run's, except ``iterations`` and ``jobs``).
        metrics: Gets the scalars of the start and of every iteration (its history is
            replaced by the checkpoint's on resume).

    Raises:
        TrainingError: If a compilation fails, a checkpoint cannot be resumed, or the pool
            loses every worker (or one rollout's worker too often).
        ValueError: If ``modules`` is empty or the checkpoint settings are inconsistent.
    """
    if not modules:
        raise ValueError("no modules to train on")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
    if resume and checkpoint_dir is None:
        raise ValueError("resume needs the checkpoint folder (checkpoint_dir)")
    say = progress or (lambda m: print(f"mlbridge train: {m}", file=sys.stderr, flush=True))
    own_pool = pool is None
    if pool is None:
        pool = LocalRolloutPool(max(1, config.jobs))
    started = time.monotonic()
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None
    try:
        shared = [pool.share(m) for m in modules]
        fingerprint = [{"name": f.name, "sha256": f.digest} for f in shared]
        everything = list(range(len(modules)))

        asked: list[int] = []  # the decisions of the last scores()'s first policy, per module

        def scores(
            policies: Sequence[LinearPolicy],
            indices: Sequence[int],
            description: str | None,
            samples: Mapping[int, frozenset[int] | None] | None = None,
        ) -> list[float]:
            """The mean saving of each policy on ``indices``, all in one map.

            ``samples`` gives the decisions the policies make in a module (default: all).
            """
            chosen = samples or {}
            tasks = [(p, shared[i], chosen.get(i)) for p in range(len(policies)) for i in indices]
            rollout = functools.partial(
                _policy_rollout,
                policies=tuple(policies),
                command=command,
                timeout=timeout,
                measure=config.size_measure,
            )
            results = [r.value for r in pool.map(rollout, tasks, description=description)]
            sizes = [size for size, _ in results]
            asked[:] = [count for _, count in results[: len(indices)]]
            run.rollouts += len(tasks)
            out = []
            for p in range(len(policies)):
                chunk = sizes[p * len(indices) : (p + 1) * len(indices)]
                savings = [
                    _relative_saving(s, run.baselines[i])
                    for s, i in zip(chunk, indices, strict=True)
                ]
                out.append(float(np.mean(savings)))
            return out

        history: list[dict[str, float]] = []  # every step's scalars, kept in checkpoints

        def record(step: int, values: dict[str, float]) -> None:
            history.append({"step": float(step), **{k: float(v) for k, v in values.items()}})
            if metrics is not None:
                metrics.record(step, values)

        if folder is not None:
            prepare_checkpoints(folder, resume, say)
        if resume:
            assert folder is not None
            run, restored, path = _resume(folder, config, fingerprint)
            history.extend(restored)
            if metrics is not None:
                metrics.history = [dict(h) for h in restored]
            say(
                f"resuming from {path} (iteration {run.iteration}/{config.iterations}, "
                f"best saving {run.best_score * 100:+.3f}%)"
            )
        else:
            say(f"measuring stock -Oz on {len(modules)} modules ({pool.workers} workers)")
            stock = functools.partial(_stock_rollout, timeout=timeout, measure=config.size_measure)
            baselines = [
                r.value
                for r in pool.map(
                    stock, shared, description="mlbridge train: stock -Oz", unit="module"
                )
            ]
            policy = initial
            if policy is None:
                names = functools.partial(_features_rollout, command=command, timeout=timeout)
                policy = LinearPolicy.imitating_default(pool.map(names, shared[:1])[0].value)
            run = _RunState(
                baselines=baselines,
                decisions=[],
                policy=policy,
                theta=policy.parameters,
                best=policy,
                best_score=0.0,
                rng=np.random.default_rng(config.seed),
                iteration=0,
                elapsed_s=0.0,
                rollouts=len(modules) + (1 if initial is None else 0),
            )
            (run.best_score,) = scores(
                [policy], everything, "mlbridge train: scoring the start policy"
            )
            # The start policy's decisions are each module's sampling population.
            run.decisions = list(asked)
            say(f"start: mean saving vs stock -Oz {run.best_score * 100:+.3f}%")
            record(
                0,
                {
                    METRIC_ITERATE: run.best_score * 100,
                    METRIC_BEST: run.best_score * 100,
                    METRIC_WALL: time.monotonic() - started,
                    METRIC_ROLLOUTS: run.rollouts,
                },
            )

        def wall() -> float:
            return run.elapsed_s + (time.monotonic() - started)

        sampled = _describe_sampling(run.decisions, config.sample_call_sites)
        if sampled:
            say(sampled)

        def draw_samples(iteration: int, batch: Sequence[int]) -> dict[int, frozenset[int] | None]:
            """The sampled decisions of each module of an iteration's batch.

            Seeded by the run's seed, the iteration and the module alone (not the run's
            generator), so that a resumed run draws the same samples; shared by every
            perturbation of the iteration, so that the antithetic pairs are compared on
            the same decisions.
            """
            return {
                i: sample_call_sites(
                    run.decisions[i],
                    config.sample_call_sites,
                    _sample_seed(config.seed, iteration, i),
                )
                for i in batch
            }

        first = run.iteration
        iterations = track(
            range(first, config.iterations),
            description="mlbridge train: training",
            unit="iteration",
        )
        for it in iterations:
            theta = run.theta
            batch = run.rng.choice(
                len(modules), size=min(config.modules_per_iteration, len(modules)), replace=False
            )
            eps = run.rng.standard_normal((config.pairs, theta.size))
            perturbed = []
            for k in range(config.pairs):
                perturbed.append(run.policy.with_parameters(theta + config.sigma * eps[k]))
                perturbed.append(run.policy.with_parameters(theta - config.sigma * eps[k]))
            rewards = scores(perturbed, list(batch), None, draw_samples(it, list(batch)))
            diffs = np.array([rewards[2 * k] - rewards[2 * k + 1] for k in range(config.pairs)])
            if np.any(diffs != 0.0):
                # Normalise so that the step size does not depend on the reward scale. One
                # pair (or equal differences) has no spread: its sign is the step, not
                # diffs / 1e-12.
                spread = float(np.std(diffs))
                diffs = diffs / (spread if spread > 0.0 else float(np.max(np.abs(diffs))))
            run.theta = theta + config.learning_rate / (2 * config.pairs) * (diffs @ eps)
            candidate = run.policy.with_parameters(run.theta)
            (cand_score,) = scores([candidate], everything, None)
            if cand_score > run.best_score:
                run.best, run.best_score = candidate, cand_score
            run.iteration = it + 1
            say(
                f"iteration {it + 1}/{config.iterations}: saving {cand_score * 100:+.3f}% "
                f"(best {run.best_score * 100:+.3f}%), {wall():.0f} s"
            )
            record(
                it + 1,
                {
                    METRIC_ITERATE: cand_score * 100,
                    METRIC_BEST: run.best_score * 100,
                    METRIC_PERTURBED: float(np.mean(rewards)) * 100,
                    METRIC_WALL: wall(),
                    METRIC_ROLLOUTS: run.rollouts,
                },
            )
            if folder is not None and (
                run.iteration % checkpoint_every == 0 or run.iteration == config.iterations
            ):
                run_copy = replace(run, elapsed_s=wall())
                try:
                    save_checkpoint(
                        folder,
                        CHECKPOINT_FORMAT,
                        run.iteration,
                        run_copy.to_json(config, fingerprint, history),
                    )
                except CheckpointError as e:
                    raise TrainingError(str(e)) from e
        best = run.best.with_parameters(run.best.parameters)
        best.metadata = {
            "trainer": "mlbridge.inliner.trainer (antithetic evolution strategies)",
            "modules": len(modules),
            "iterations": config.iterations,
            "pairs": config.pairs,
            "sigma": config.sigma,
            "learning_rate": config.learning_rate,
            "seed": config.seed,
            "sample_call_sites": config.sample_call_sites,
            "sampled_modules": _sampled_modules(run.decisions, config.sample_call_sites),
            "size_measure": config.size_measure,
            "mean_saving_vs_stock_Oz": run.best_score,
            "wall_time_s": round(wall(), 3),
            "rollouts": run.rollouts,
            "pool": pool.summary(),
        }
        if first > 0:
            best.metadata["resumed_from_iteration"] = first
        return best
    except RolloutPoolError as e:
        resume_hint = (
            f" (the last checkpoint in {folder} resumes it: --resume)" if folder is not None else ""
        )
        raise TrainingError(f"the training stopped: {e}{resume_hint}") from e
    finally:
        if own_pool:
            pool.close()


def _sample_seed(seed: int, iteration: int, module: int) -> int:
    """The seed of a module's sample in an iteration: a function of the three only."""
    return int(np.random.SeedSequence([seed, iteration, module]).generate_state(1)[0])


def _sampled_modules(decisions: Sequence[int], size: int | None) -> int:
    return 0 if size is None else sum(d > size for d in decisions)


def _describe_sampling(decisions: Sequence[int], size: int | None) -> str:
    """The progress line about sampled modules (empty if none is sampled)."""
    large = _sampled_modules(decisions, size)
    if not large:
        return ""
    return (
        f"{large} of {len(decisions)} modules ask more than {size} inlining decisions "
        f"(the most: {max(decisions)}): sampled, the perturbed policies make {size} of "
        "them per rollout and LLVM's default makes the rest"
    )


def _feature_names(module: Path, command: Sequence[str] | None, timeout: float) -> list[str]:
    seen: list[str] = []

    def record(obs: Observation) -> int:
        if not seen:
            seen.extend(s.name for s in obs.header.features)
        return int(np.asarray(obs.get("inlining_default", [0])).reshape(-1)[0])

    evaluate_policy(record, module, command=command, timeout=timeout)
    if not seen:
        raise TrainingError(f"{module} made no inlining decision; cannot read the feature list")
    return seen


def default_jobs() -> int:
    """Parallel compilations: the number of CPUs, at most 2 (the machines here have 2)."""
    return default_workers()


def require_tools() -> None:
    """Raises :class:`TrainingError` naming the missing LLVM 22 tool, if any."""
    for tool in ("opt", "llc"):
        try:
            find_llvm_tool(tool)
        except MLBridgeError as e:
            raise TrainingError(str(e)) from e


def check_worker() -> None:
    """What a training worker checks at start (a Ray actor, on its node): LLVM 22's tools.

    Raises:
        TrainingError: Naming the missing tool and how to install it.
    """
    require_tools()


def describe(policy: LinearPolicy) -> str:
    """A one-line summary: number of active features and the largest weights."""
    order = np.argsort(-np.abs(policy.weights))[:5]
    top = ", ".join(f"{policy.features[i]}={policy.weights[i]:+.3f}" for i in order)
    return f"{len(policy.active_features())} active features; largest: {top}"
