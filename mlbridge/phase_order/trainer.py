"""Training a phase-ordering agent with policy gradient, and its held-out evaluation.

The agent is :class:`mlbridge.phase_order.policy.PhasePolicy` (a small perceptron over the
pass's features). Each episode is one compilation of a training module through
:class:`mlbridge.phase_order.env.PhaseOrderEnv` (``opt-22`` running
``mlbridge-phase-order`` with the pipe runner; the agent answers every step). The return of
an episode is the relative code-size decrease the pass reported on its outcome channel
(``(size_0 - size_T) / size_0``), so modules of any size weigh alike.

The update is REINFORCE with a leave-one-out baseline (RLOO, Kool et al., 2019): each
iteration draws a few modules and runs several sampled episodes on each; an episode's
advantage is its return minus the mean return of the other episodes on the same module,
which cancels how much a module can shrink at all. An entropy bonus keeps exploring.

Every episode is a rollout on a :class:`~mlbridge.training.pool.RolloutPool` (Ray actors or
threads, :mod:`mlbridge.training`): it gets the policy's weights, the module and its own
sampling seed, and plays in the worker's :class:`PhaseOrderEnv`; the updates run in the
driver, which draws the modules and the seeds, so the result does not depend on the pool.
Checkpoints (:mod:`mlbridge.training.checkpoints`) let a run resume with the result of an
uninterrupted one.

After training, the greedy policy is exported to ONNX (int64 ``action`` = the argmax, in
the graph), checked against the PyTorch policy on the observations seen in training, and
evaluated on held-out modules: ``.text`` bytes of ``llc-22 -O2`` after stock
``opt-22 -passes='default<Oz>'``, after the pass with the ONNX agent in-process, and
without optimisation.
"""

from __future__ import annotations

import base64
import functools
import io
import json
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mlbridge._onnxruntime import import_onnxruntime
from mlbridge.errors import MLBridgeError
from mlbridge.llvm import find_llvm_tool
from mlbridge.phase_order.command import (
    ACTION_HISTORY,
    ADVICE,
    OBSERVATION,
    PhaseOrderError,
    find_plugin,
    parse_trace,
    phase_order_command,
    run_tool,
    text_size,
)
from mlbridge.progress import track
from mlbridge.training.checkpoints import (
    CheckpointError,
    latest_checkpoint,
    load_checkpoint,
    prepare_checkpoint_folder,
    save_checkpoint,
    tensors_from_json,
    tensors_to_json,
)
from mlbridge.training.metrics import TrainingMetrics
from mlbridge.training.pool import (
    LocalRolloutPool,
    RolloutPool,
    RolloutPoolError,
    SharedFile,
    WorkerContext,
)

if TYPE_CHECKING:
    # Gymnasium (the gym extra) is only needed to train, not to build the command line.
    from mlbridge.phase_order.env import PhaseOrderEnv

__all__ = [
    "CHECKPOINT_FORMAT",
    "METRIC_BEST",
    "METRIC_ENTROPY",
    "METRIC_LENGTH",
    "METRIC_MEAN",
    "METRIC_ROLLOUTS",
    "METRIC_WALL",
    "Agent",
    "EnvSettings",
    "Episode",
    "HeldoutResult",
    "PGConfig",
    "PolicyWeights",
    "agreement",
    "check_worker",
    "evaluate_heldout",
    "parse_teacher",
    "prepare_checkpoints",
    "run_episode",
    "select_modules",
    "size_change_text",
    "stderr_log",
    "summarize_heldout",
    "train_phase_order",
    "write_metrics",
]

Obs = dict[str, np.ndarray]


@dataclass
class PGConfig:
    """Settings of :func:`train_phase_order`.

    The defaults are meant to finish within about fifteen minutes on a 2-core machine with
    the default module selection (see docs/phase-order-training.md for a measured run).

    Attributes:
        teacher: The warm start's fixed sequence (e.g. ``"0-13"`` or ``"0,1,2"``),
            followed by stop; ``""``: no warm start. The default applies the built-in set's
            pieces of -Oz in -Oz's order.
        bc_modules: Training modules on which the teacher's episodes are recorded.
        bc_epochs: Full-batch epochs of behaviour cloning.
        bc_smoothing: Label smoothing of the cloning loss (keeps the policy exploring).
        iterations: Policy-gradient updates.
        modules_per_iteration: Modules drawn per update.
        episodes_per_module: Sampled episodes per drawn module (at least 2 for the
            leave-one-out baseline).
        validation_modules: Training modules on which the greedy policies after cloning
            and after fine-tuning are compared (by the pass's code-size estimate); the
            smaller total is kept.
        max_steps: The pass's step limit.
        hidden: The policy's hidden width.
        learning_rate: Adam's step size.
        entropy: Weight of the entropy bonus.
        jobs: Compilations running at once.
        seed: Seeds the policy's initialisation, the module draws and the action samples.
        observation: The pass's observation (``counts`` or ``ir2vec``).
        ir2vec_vocab: The vocabulary for ``ir2vec``.
        actions: A file of sub-sequences; default the pass's built-in set.
        timeout: Bound of every wait, seconds.
    """

    teacher: str = "0-13"
    bc_modules: int = 64
    bc_epochs: int = 300
    bc_smoothing: float = 0.1
    iterations: int = 120
    modules_per_iteration: int = 8
    episodes_per_module: int = 4
    validation_modules: int = 32
    max_steps: int = 15
    hidden: int = 64
    learning_rate: float = 0.003
    entropy: float = 0.01
    jobs: int = 2
    seed: int = 0
    observation: str = "counts"
    ir2vec_vocab: str | None = None
    actions: str | None = None
    timeout: float = 300.0


@dataclass
class Episode:
    """One played episode.

    Attributes:
        module: The module compiled.
        observations: The observation of every decision.
        actions: The action taken at every decision.
        rewards: The code-size decrease of every decision (0 for stop).
        initial_size: The code-size estimate before the first step.
        final_size: The estimate at the end.
        output: A copy of the optimised module, if one was asked for.
    """

    module: Path
    observations: list[Obs] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    initial_size: int = 0
    final_size: int = 0
    output: Path | None = None

    @property
    def relative_return(self) -> float:
        """``(size_0 - size_T) / size_0``: the fraction of code size the episode removed."""
        return (self.initial_size - self.final_size) / max(self.initial_size, 1)


def select_modules(
    manifest: Any,
    split: str,
    *,
    max_instructions: int | None = 10000,
    min_instructions: int = 20,
    max_modules: int | None = None,
) -> list[Path]:
    """The ``split`` modules of a corpus manifest within an instruction-count range.

    Args:
        manifest: A :class:`mlbridge.corpus.Manifest`.
        split: ``train`` or ``heldout``.
        max_instructions: Leave out larger modules (``None``: no bound); keeps training
            episodes short.
        min_instructions: Leave out modules with almost no code.
        max_modules: Keep at most this many, spread evenly over the corpus order
            (projects stay mixed).
    """
    return [
        m.bitcode_path
        for m in manifest.select(
            split,
            min_instructions=min_instructions,
            max_instructions=max_instructions,
            max_modules=max_modules,
        )
    ]


def run_episode(
    env: PhaseOrderEnv,
    module: Path,
    choose: Callable[[Obs], int],
    *,
    keep_output: Path | None = None,
) -> Episode:
    """Plays one episode on ``module``, ``choose`` answering every decision.

    Args:
        env: The environment.
        module: The module to compile.
        choose: The agent: observation to action.
        keep_output: Copy the optimised module there.
    """
    obs, _ = env.reset(options={"module": module})
    episode = Episode(module, initial_size=int(obs["code_size"][0]))
    while True:
        action = int(choose(obs))
        episode.observations.append(obs)
        episode.actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        episode.rewards.append(float(reward))
        if terminated or truncated:
            summary = info["episode"]
            episode.final_size = summary.final_size
            if keep_output is not None:
                keep_output.write_bytes(summary.output.read_bytes())
                episode.output = keep_output
            return episode


def _log(message: str, log: Callable[[str], None] | None) -> None:
    if log is not None:
        log(message)


def size_change_text(relative_return: float) -> str:
    """The change in code size of a relative return, as a signed percentage.

    ``relative_return`` is ``(size_0 - size_T) / size_0``: 0.124 (12.4 % removed) gives
    ``"-12.4%"``, -0.05 (5 % added) gives ``"+5.0%"``; one sign, never two.
    """
    return f"{(0.0 - relative_return) * 100:+.1f}%"


def parse_teacher(text: str, n_actions: int) -> list[int]:
    """The warm start's action list from ``"0-13"`` / ``"0,2,5-7"`` (``""``: none).

    Raises:
        ValueError: If an item is not an action index below ``n_actions``.
    """
    out: list[int] = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        lo, _, hi = item.partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"teacher item {item!r} is not an index or a range a-b") from None
        if not 0 <= first <= last < n_actions:
            raise ValueError(f"teacher item {item!r} is outside the action set 0..{n_actions - 1}")
        out.extend(range(first, last + 1))
    return out


def _batch(episodes: Sequence[Episode]) -> tuple[Any, ...]:
    import torch

    rows = [(o, a) for e in episodes for o, a in zip(e.observations, e.actions, strict=True)]
    return (
        torch.as_tensor(np.stack([np.asarray(o[OBSERVATION], np.float32) for o, _ in rows])),
        torch.as_tensor(np.stack([np.asarray(o["step"], np.int64).reshape(1) for o, _ in rows])),
        torch.as_tensor(
            np.stack([np.asarray(o["code_size"], np.int64).reshape(1) for o, _ in rows])
        ),
        torch.as_tensor(np.stack([np.asarray(o[ACTION_HISTORY], np.float32) for o, _ in rows])),
        torch.as_tensor([a for _, a in rows], dtype=torch.int64),
    )


def _clone(policy: Any, episodes: Sequence[Episode], config: PGConfig) -> float:
    """Behaviour cloning: cross-entropy of the policy against the teacher's actions."""
    import torch

    *inputs, target = _batch(episodes)
    optimizer = torch.optim.Adam(policy.parameters(), lr=0.01)
    policy.train()
    loss = torch.zeros(())
    for _ in range(config.bc_epochs):
        loss = torch.nn.functional.cross_entropy(
            policy.logits(*inputs), target, label_smoothing=config.bc_smoothing
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    policy.eval()
    return float(loss.detach())


# -- the rollouts: what a pool's worker runs (module-level, so that Ray can pickle them) --


@dataclass(frozen=True)
class EnvSettings:
    """What a worker needs to build its :class:`PhaseOrderEnv` (the same on every worker).

    Attributes:
        plugin: The opt plugin, at this path on every node (the same install everywhere).
        max_steps: The pass's step limit.
        observation: ``counts`` or ``ir2vec``.
        ir2vec_vocab: The vocabulary for ``ir2vec``.
        actions: A file of sub-sequences; ``None``: the pass's built-in set.
        timeout: Bound of every wait, seconds.
    """

    plugin: str
    max_steps: int
    observation: str
    ir2vec_vocab: str | None
    actions: str | None
    timeout: float


@dataclass(frozen=True)
class PolicyWeights:
    """A :class:`~mlbridge.phase_order.policy.PhasePolicy` as plain data, for the workers.

    Attributes:
        dim: D, the observation's length.
        n_actions: N, the number of sub-sequences.
        hidden: The hidden layer's width.
        arrays: The state dict as ``(name, float32 array)`` pairs.
    """

    dim: int
    n_actions: int
    hidden: int
    arrays: tuple[tuple[str, np.ndarray], ...]

    @classmethod
    def of(cls, policy: Any) -> PolicyWeights:  # noqa: ANN401 - a PhasePolicy
        """A copy of ``policy``'s architecture and weights."""
        return cls(
            policy.dim,
            policy.n_actions,
            policy.hidden,
            tuple((k, v.detach().cpu().numpy().copy()) for k, v in policy.state_dict().items()),
        )

    def build(self) -> Any:  # noqa: ANN401 - a PhasePolicy
        """The policy, in eval mode, with exactly these weights."""
        import torch

        from mlbridge.phase_order.policy import PhasePolicy

        # Built on the meta device, then given the weights: a random initialisation would
        # draw from torch's global generator, which the driver's own draws use.
        with torch.device("meta"):
            policy = PhasePolicy(self.dim, self.n_actions, self.hidden)
        policy.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in self.arrays}, assign=True)
        policy.eval()
        return policy


@dataclass(frozen=True)
class Agent:
    """How one map's episodes choose their actions.

    Attributes:
        kind: ``"teacher"`` (the ``teacher`` actions, then stop), ``"sample"`` (drawn from
            the policy's probabilities with the episode's own seed) or ``"greedy"``.
        teacher: The teacher's actions.
        weights: The policy of ``sample`` and ``greedy``.
    """

    kind: str
    teacher: tuple[int, ...] = ()
    weights: PolicyWeights | None = None


#: One episode of a map: the index of its agent, the module, the sampling seed (or None).
EpisodeTask = tuple[int, SharedFile, int | None]

# Each worker thread (a Ray actor has one) keeps its environments between episodes: making
# one runs the pass once to learn the action count, as long as an episode on a small module.
_worker_state = threading.local()


def _worker_env(context: WorkerContext, settings: EnvSettings, module: Path) -> PhaseOrderEnv:
    """This worker's environment for ``settings`` (made on first use, in its scratch folder)."""
    from mlbridge.phase_order.env import PhaseOrderEnv

    envs: dict[tuple[EnvSettings, Path], PhaseOrderEnv] | None = getattr(
        _worker_state, "envs", None
    )
    if envs is None:
        envs = _worker_state.envs = {}
    key = (settings, context.scratch_dir)
    env = envs.get(key)
    if env is None:
        env = PhaseOrderEnv(
            [module],
            plugin=settings.plugin,
            max_steps=settings.max_steps,
            observation=settings.observation,
            ir2vec_vocab=settings.ir2vec_vocab,
            actions=settings.actions,
            timeout=settings.timeout,
            exit_timeout=settings.timeout,
            workdir_parent=context.scratch_dir,
        )
        envs[key] = env
    return env


def _shape_rollout(
    context: WorkerContext, module: SharedFile, *, settings: EnvSettings
) -> tuple[int, int]:
    """D and N, as the pass reports them on ``module``."""
    env = _worker_env(context, settings, context.local_path(module))
    return env.observation_dim, env.n_actions


def _episode_rollout(
    context: WorkerContext,
    task: EpisodeTask,
    *,
    agents: Sequence[Agent],
    settings: EnvSettings,
) -> Episode:
    """One episode of ``agents[task[0]]`` on module ``task[1]`` (named by the driver's path)."""
    import torch

    # The episodes run in other processes; more torch threads would compete with them.
    torch.set_num_threads(1)
    index, module, seed = task
    agent = agents[index]
    path = context.local_path(module)
    env = _worker_env(context, settings, path)
    choose: Callable[[Obs], int]
    if agent.kind == "teacher":
        teacher, stop = agent.teacher, env.stop_action

        def choose(obs: Obs) -> int:
            step = int(np.asarray(obs["step"]).reshape(-1)[0])
            return teacher[step] if step < len(teacher) else stop

    else:
        assert agent.weights is not None
        policy = agent.weights.build()
        if agent.kind == "greedy":
            choose = policy.act
        else:
            sampler = np.random.default_rng(seed)

            def choose(obs: Obs) -> int:
                p = policy.probabilities(obs)
                return int(sampler.choice(len(p), p=p / p.sum()))

    episode = run_episode(env, path, choose)
    episode.module = module.path
    return episode


def check_worker(plugin: str | Path) -> None:
    """What a training worker checks at start (a Ray actor, on its node).

    LLVM 22's ``opt``, the plugin at ``plugin`` and the ``gym`` extra (Gymnasium).

    Raises:
        PhaseOrderError: Naming what is missing and how to install it.
    """
    try:
        find_llvm_tool("opt")
    except MLBridgeError as e:
        raise PhaseOrderError(str(e)) from e
    if not Path(plugin).is_file():
        raise PhaseOrderError(
            f"the opt plugin {plugin} is not on this node: every node needs the same mlbridge "
            "build at the same path (`mlbridge build`, or --build-dir)"
        )
    try:
        import gymnasium  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        raise PhaseOrderError(
            f"{e}: training needs Gymnasium and PyTorch (pip install 'mlbridge[gym,dev]')"
        ) from None


#: The ``format`` of the trainer's checkpoints (:mod:`mlbridge.training.checkpoints`).
CHECKPOINT_FORMAT = "mlbridge-phase-order-checkpoint-1"

#: PGConfig fields a resumed run may change: how long it runs and on how many workers.
_RESUMABLE_CHANGES = frozenset({"iterations", "jobs"})

#: The TensorBoard tags of :func:`train_phase_order` (and the curve's series). Step 0 is
#: the warm start (the teacher's episodes); step k the k-th fine-tuning iteration.
METRIC_MEAN = "reward/mean_size_reduction_pct"
METRIC_BEST = "reward/best_size_reduction_pct"
METRIC_LENGTH = "episode/mean_steps"
METRIC_ENTROPY = "policy/entropy"
METRIC_WALL = "time/wall_s"
METRIC_ROLLOUTS = "rollouts/done"


class _Training:
    """What the stages of one :func:`train_phase_order` run share.

    The training modules (shared with the pool's workers) and their draws (one generator
    in the driver, so a seed gives the same draws and the same per-episode seeds whatever
    the pool), the pool the episodes run on, the observations seen so far (the export
    check's samples), the metrics and the progress log.
    """

    def __init__(
        self,
        modules: Sequence[Path],
        config: PGConfig,
        pool: RolloutPool,
        settings: EnvSettings,
        rng: np.random.Generator,
        log: Callable[[str], None] | None,
        metrics: TrainingMetrics | None,
    ) -> None:
        self.modules = modules
        self.shared = [pool.share(m) for m in modules]
        self.config = config
        self.pool = pool
        self.settings = settings
        self.rng = rng
        self.log = log
        self.metrics = metrics
        self.samples: list[Obs] = []
        self.new_samples = 0  # of those, taken since the last checkpoint
        self.rollouts = 0
        self.elapsed_s = 0.0  # the wall time of the earlier segments of a resumed run
        self.start = time.perf_counter()
        self.history: list[dict[str, float]] = []  # the metrics' scalars, for checkpoints

    def wall(self) -> float:
        """Seconds of training so far, the earlier segments of a resumed run included."""
        return self.elapsed_s + time.perf_counter() - self.start

    def fingerprint(self) -> list[dict[str, str]]:
        """The modules' names and SHA-256, which a resumed run must share."""
        return [{"name": f.name, "sha256": f.digest} for f in self.shared]

    def draw(self, count: int) -> list[int]:
        """``count`` distinct training modules (all if fewer), as indices in corpus order."""
        picks = self.rng.choice(
            len(self.modules), size=min(count, len(self.modules)), replace=False
        )
        return [int(i) for i in sorted(picks)]

    def shape(self) -> tuple[int, int]:
        """D and N, from the pass on the first module (one rollout)."""
        probe = functools.partial(_shape_rollout, settings=self.settings)
        self.rollouts += 1
        return self.pool.map(probe, self.shared[:1])[0].value

    def play_all(
        self,
        agents: Sequence[Agent],
        tasks: Sequence[tuple[int, int, int | None]],
        description: str | None = None,
    ) -> list[Episode]:
        """One episode per ``(agent, module, seed)`` on the pool, in the order given."""
        rollout = functools.partial(_episode_rollout, agents=tuple(agents), settings=self.settings)
        items = [(a, self.shared[m], seed) for a, m, seed in tasks]
        self.rollouts += len(items)
        done = self.pool.map(rollout, items, description=description, unit="episode")
        return [r.value for r in done]

    def see(self, episodes: Sequence[Episode]) -> None:
        """Keeps the episodes' observations for the export check."""
        before = len(self.samples)
        self.samples.extend(o for e in episodes for o in e.observations)
        self.new_samples += len(self.samples) - before

    def record(self, step: int, values: dict[str, float]) -> None:
        """The scalars of a step, to the metrics and the checkpoints' history."""
        self.history.append({"step": float(step), **{k: float(v) for k, v in values.items()}})
        if self.metrics is not None:
            self.metrics.record(step, values)


def _check_training(modules: Sequence[Path], config: PGConfig) -> None:
    if not modules:
        raise PhaseOrderError("no module to train on")
    if config.episodes_per_module < 2:
        raise ValueError("episodes_per_module must be at least 2 (leave-one-out baseline)")


def _description(training: _Training, stage: str) -> str | None:
    """The progress display's name of a stage's episodes (none without a log)."""
    return f"mlbridge train phase-order: {stage}" if training.log is not None else None


def _warm_start(training: _Training, policy: Any, teacher: list[int]) -> dict[str, Any]:
    """The warm start: behaviour cloning of the teacher's episodes into ``policy``.

    Plays ``teacher`` (then stop) on ``bc_modules`` drawn modules; returns the stage's record.
    """
    config = training.config
    t0 = time.perf_counter()
    agents = [Agent("teacher", teacher=tuple(teacher))]
    tasks = [(0, m, None) for m in training.draw(config.bc_modules)]
    shown = training.play_all(agents, tasks, _description(training, "warm start"))
    training.see(shown)
    loss = _clone(policy, shown, config)
    match = float(
        np.mean(
            [
                policy.act(o) == a
                for e in shown
                for o, a in zip(e.observations, e.actions, strict=True)
            ]
        )
    )
    record = {
        "teacher": teacher,
        "modules": len(shown),
        "decisions": sum(len(e.actions) for e in shown),
        "teacher_relative_return": float(np.mean([e.relative_return for e in shown])),
        "loss": loss,
        "greedy_matches_teacher": match,
        "seconds": time.perf_counter() - t0,
    }
    _log(
        f"warm start: {len(shown)} teacher episodes (code size "
        f"{size_change_text(record['teacher_relative_return'])}), cloned: "
        f"loss {loss:.3f}, greedy = teacher on {match * 100:.1f}% of decisions, "
        f"{record['seconds']:.1f} s",
        training.log,
    )
    returns = [e.relative_return for e in shown]
    training.record(
        0,
        {
            METRIC_MEAN: float(np.mean(returns)) * 100,
            METRIC_BEST: float(np.max(returns)) * 100,
            METRIC_LENGTH: float(np.mean([len(e.actions) for e in shown])),
            METRIC_WALL: training.wall(),
            METRIC_ROLLOUTS: training.rollouts,
        },
    )
    return record


def _fine_tune_step(
    training: _Training, policy: Any, optimizer: Any, it: int, n: int
) -> dict[str, Any]:
    """Fine-tuning iteration ``it`` (from 0): one REINFORCE update (leave-one-out baseline).

    Every episode gets a sampling seed of its own, drawn in the driver in the order of
    the tasks, so the episodes can run anywhere and finish in any order.
    """
    config, rng = training.config, training.rng
    t0 = time.perf_counter()
    tasks: list[tuple[int, int, int | None]] = []
    for module in training.draw(config.modules_per_iteration):
        for _ in range(config.episodes_per_module):
            tasks.append((0, module, int(rng.integers(2**63))))
    policy.eval()
    episodes = training.play_all([Agent("sample", weights=PolicyWeights.of(policy))], tasks)
    loss, entropy = _update(policy, optimizer, episodes, config)
    returns = np.array([e.relative_return for e in episodes])
    actions = np.concatenate([np.asarray(e.actions) for e in episodes])
    training.see(episodes)
    record = {
        "iteration": it + 1,
        "mean_relative_return": float(returns.mean()),
        "best_relative_return": float(returns.max()),
        "mean_length": float(np.mean([len(e.actions) for e in episodes])),
        "entropy": entropy,
        "loss": loss,
        "action_histogram": np.bincount(actions, minlength=n + 1).tolist(),
        "seconds": time.perf_counter() - t0,
    }
    _log(
        f"iteration {it + 1}/{config.iterations}: code size "
        f"{size_change_text(record['mean_relative_return'])} (best "
        f"{size_change_text(record['best_relative_return'])}), "
        f"{record['mean_length']:.1f} steps, entropy {entropy:.2f}, "
        f"{record['seconds']:.1f} s (total {training.wall():.0f} s)",
        training.log,
    )
    training.record(
        it + 1,
        {
            METRIC_MEAN: record["mean_relative_return"] * 100,
            METRIC_BEST: record["best_relative_return"] * 100,
            METRIC_LENGTH: record["mean_length"],
            METRIC_ENTROPY: entropy,
            METRIC_WALL: training.wall(),
            METRIC_ROLLOUTS: training.rollouts,
        },
    )
    return record


def _validate(training: _Training, tuned_policy: Any, cloned: Any) -> dict[str, Any]:
    """The validation: the greedy fine-tuned and cloned policies on the same drawn modules.

    Compares them on ``validation_modules`` modules by the pass's code-size estimate; the
    returned record's ``kept`` names the policy with the smaller total.
    """
    t0 = time.perf_counter()
    chosen = training.draw(training.config.validation_modules)
    agents = [
        Agent("greedy", weights=PolicyWeights.of(tuned_policy)),
        Agent("greedy", weights=PolicyWeights.of(cloned)),
    ]
    episodes = training.play_all(
        agents,
        [(a, m, None) for a in range(2) for m in chosen],
        _description(training, "validation"),
    )
    tuned = sum(e.final_size for e in episodes[: len(chosen)])
    base = sum(e.final_size for e in episodes[len(chosen) :])
    keep = "fine-tuned" if tuned <= base else "cloned"
    record = {
        "modules": len(chosen),
        "code_size_cloned": base,
        "code_size_fine_tuned": tuned,
        "kept": keep,
        "seconds": time.perf_counter() - t0,
    }
    _log(
        f"validation on {len(chosen)} training modules: code-size estimate after "
        f"cloning {base}, after fine-tuning {tuned}: keeping the {keep} policy",
        training.log,
    )
    return record


# -- checkpoints ----------------------------------------------------------------------


def _pack_samples(samples: Sequence[Obs]) -> str | None:
    """Observations as base64 of an ``.npz`` (one array per feature), or ``None`` if none."""
    if not samples:
        return None
    buffer = io.BytesIO()
    np.savez(
        buffer, **{name: np.stack([np.asarray(s[name]) for s in samples]) for name in samples[0]}
    )
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _unpack_samples(text: str | None) -> list[Obs]:
    if text is None:
        return []
    with np.load(io.BytesIO(base64.b64decode(text))) as data:
        arrays = {name: data[name] for name in data.files}
    count = len(next(iter(arrays.values())))
    return [{name: a[i] for name, a in arrays.items()} for i in range(count)]


@dataclass
class _Checkpoint:
    """What a resumed run continues from."""

    iteration: int
    policy: Any
    cloned: Any
    optimizer_state: dict[str, Any]
    result: dict[str, Any]
    history: list[dict[str, float]]
    samples: list[Obs]
    rng_state: dict[str, Any]
    elapsed_s: float
    rollouts: int
    path: Path


def _save(
    training: _Training,
    folder: Path,
    iteration: int,
    policy: Any,
    cloned: Any,
    optimizer: Any,
    result: dict[str, Any],
    previous: int | None,
) -> None:
    """Writes the checkpoint of ``iteration``.

    The observations seen since the ``previous`` checkpoint go into this one (all of them
    in every checkpoint would grow to gigabytes in a long run); a resume reads the chain.
    """
    new = training.samples[len(training.samples) - training.new_samples :]
    state = {
        "config": asdict(training.config),
        "modules": training.fingerprint(),
        "policy": policy.to_json(),
        "cloned": cloned.to_json(),
        "optimizer": tensors_to_json(optimizer.state_dict()["state"]),
        "result": result,
        "history": training.history,
        "rng": training.rng.bit_generator.state,
        "elapsed_s": training.wall(),
        "rollouts": training.rollouts,
        "samples": {"previous_checkpoint": previous, "new": _pack_samples(new)},
    }
    try:
        save_checkpoint(folder, CHECKPOINT_FORMAT, iteration, state)
    except CheckpointError as e:
        raise PhaseOrderError(str(e)) from e
    training.new_samples = 0


def _load(folder: Path, config: PGConfig, modules: list[dict[str, str]]) -> _Checkpoint:
    from mlbridge.phase_order.policy import PhasePolicy

    path = latest_checkpoint(folder)
    if path is None:
        raise PhaseOrderError(f"no checkpoint to resume from in {folder}")
    try:
        iteration, state = load_checkpoint(path, CHECKPOINT_FORMAT)
        saved, mine = dict(state["config"]), asdict(config)
        changed = sorted(k for k in mine if k not in _RESUMABLE_CHANGES and saved.get(k) != mine[k])
        if changed:
            diffs = ", ".join(f"{k}={saved.get(k)!r} there, {mine[k]!r} here" for k in changed)
            raise PhaseOrderError(
                f"{path} was taken with other settings ({diffs}): resume with the settings "
                "of the run (only --iterations and --workers may change)"
            )
        if state["modules"] != modules:
            raise PhaseOrderError(
                f"{path} was taken on other modules ({len(state['modules'])} there, "
                f"{len(modules)} here, or their contents differ): resume on the same "
                "corpus and selection"
            )
        # The observations of the export check, along the chain of earlier checkpoints.
        chunks = [_unpack_samples(state["samples"]["new"])]
        previous = state["samples"]["previous_checkpoint"]
        while previous is not None:
            earlier = folder / f"iteration-{previous:06d}.json"
            _, before = load_checkpoint(earlier, CHECKPOINT_FORMAT)
            chunks.append(_unpack_samples(before["samples"]["new"]))
            previous = before["samples"]["previous_checkpoint"]
        samples = [s for chunk in reversed(chunks) for s in chunk]
        return _Checkpoint(
            iteration=iteration,
            policy=PhasePolicy.from_json(state["policy"]),
            cloned=PhasePolicy.from_json(state["cloned"]),
            optimizer_state=tensors_from_json(state["optimizer"]),
            result=dict(state["result"]),
            history=[dict(h) for h in state["history"]],
            samples=samples,
            rng_state=state["rng"],
            elapsed_s=float(state["elapsed_s"]),
            rollouts=int(state["rollouts"]),
            path=path,
        )
    except CheckpointError as e:
        raise PhaseOrderError(f"{e} (the run resumes from a chain of checkpoints)") from e
    except (KeyError, TypeError, ValueError, MLBridgeError) as e:
        if isinstance(e, PhaseOrderError):
            raise
        raise PhaseOrderError(f"{path} is damaged or of another version ({e}); start anew") from e


def prepare_checkpoints(folder: str | Path, resume: bool, log: Callable[[str], None]) -> None:
    """Checks a run's checkpoint folder before the run (cheap: call it before starting Ray).

    To resume, the folder must hold a checkpoint; a new run removes a finished run's
    checkpoints and refuses an unfinished run's.

    Raises:
        PhaseOrderError: Saying what to do (resume, or remove the folder).
    """
    try:
        prepare_checkpoint_folder(folder, CHECKPOINT_FORMAT, resume=resume, say=log)
    except CheckpointError as e:
        raise PhaseOrderError(str(e)) from e


def train_phase_order(
    modules: Sequence[Path],
    config: PGConfig | None = None,
    *,
    plugin: str | Path | None = None,
    log: Callable[[str], None] | None = None,
    pool: RolloutPool | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 1,
    resume: bool = False,
    metrics: TrainingMetrics | None = None,
) -> tuple[Any, dict[str, Any], list[Obs]]:
    """Trains a :class:`~mlbridge.phase_order.policy.PhasePolicy` on ``modules``.

    Three stages: behaviour cloning of ``config.teacher`` on ``config.bc_modules``
    modules (warm start), REINFORCE fine-tuning, and the choice between the greedy
    policies after cloning and after fine-tuning on ``config.validation_modules``
    modules (the smaller total code-size estimate wins). Every episode is a rollout on
    ``pool`` (:func:`_episode_rollout`: the policy's weights, the module and the episode's
    sampling seed go to the worker, which plays it in its own :class:`PhaseOrderEnv`);
    the updates run here. The result is the same given ``config.seed``, the modules and
    the plugin, whatever the pool and however the episodes are spread over its workers.

    Args:
        modules: Training modules (bitcode).
        config: Settings (default :class:`PGConfig`).
        plugin: The opt plugin (default: the build's); on a Ray cluster every node needs
            it at this path.
        log: Called with one progress line per stage step.
        pool: Where the episodes run (default: a :class:`LocalRolloutPool` of
            ``config.jobs`` threads, closed at the end; a pool passed in stays open).
        checkpoint_dir: Where to write checkpoints (``None``: none): one after the warm
            start (iteration 0), then every ``checkpoint_every`` iterations and after the
            last.
        checkpoint_every: See ``checkpoint_dir``.
        resume: Continue from the latest checkpoint in ``checkpoint_dir`` (its settings
            must be this run's, except ``iterations`` and ``jobs``); the result is that of
            a run never interrupted.
        metrics: Gets the scalars of the warm start (step 0) and of every iteration (its
            history is replaced by the checkpoint's on resume).

    Returns:
        The trained policy (in eval mode), the training history (the warm start, per
        iteration: mean relative return, mean episode length, action histogram, seconds;
        the validation; ``pool``: what ran where; ``rollouts``, ``wall_seconds``) and the
        observations seen (samples for checking the export).

    Raises:
        MLBridgeError: If a compilation fails, a checkpoint cannot be written or resumed,
            or the pool loses every worker.
        ValueError: If the settings are inconsistent.
    """
    import copy

    import torch

    from mlbridge.phase_order.policy import PhasePolicy

    config = config or PGConfig()
    _check_training(modules, config)
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
    if resume and checkpoint_dir is None:
        raise ValueError("resume needs the checkpoint folder (checkpoint_dir)")
    plugin_path = Path(plugin) if plugin is not None else find_plugin()
    settings = EnvSettings(
        str(plugin_path),
        config.max_steps,
        config.observation,
        config.ir2vec_vocab,
        config.actions,
        config.timeout,
    )
    # The episodes run in other processes; more torch threads would only compete with them.
    torch.set_num_threads(1)
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None
    own_pool = pool is None
    if pool is None:
        pool = LocalRolloutPool(max(1, config.jobs))
    try:
        if folder is not None:
            prepare_checkpoints(folder, resume, log or (lambda _: None))
        rng = np.random.default_rng(config.seed)
        training = _Training(modules, config, pool, settings, rng, log, metrics)
        result: dict[str, Any] = {"iterations": []}
        last_saved: int | None = None
        if resume:
            assert folder is not None
            saved = _load(folder, config, training.fingerprint())
            policy, cloned = saved.policy, saved.cloned
            n = policy.n_actions
            result.update(saved.result)
            result["iterations"] = list(saved.result.get("iterations", []))
            result["resumed_from_iteration"] = saved.iteration
            training.history = saved.history
            if metrics is not None:
                metrics.history = [dict(h) for h in saved.history]
            training.samples = saved.samples
            rng.bit_generator.state = saved.rng_state
            training.elapsed_s, training.rollouts = saved.elapsed_s, saved.rollouts
            first = last_saved = saved.iteration
            _log(
                f"resuming from {saved.path} (iteration {first}/{config.iterations})",
                log,
            )
        else:
            dim, n = training.shape()
            torch.manual_seed(config.seed)
            policy = PhasePolicy(dim, n, config.hidden)
            teacher = parse_teacher(config.teacher, n)
            if teacher:
                result["warm_start"] = _warm_start(training, policy, teacher)
            cloned = copy.deepcopy(policy)
            first = 0
        optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
        if resume:
            optimizer.load_state_dict(
                {
                    "state": {int(k): v for k, v in saved.optimizer_state.items()},
                    "param_groups": optimizer.state_dict()["param_groups"],
                }
            )
        elif folder is not None:
            _save(training, folder, 0, policy, cloned, optimizer, result, None)
            last_saved = 0
        iterations: Iterable[int] = range(first, config.iterations)
        if log is not None:
            iterations = track(
                iterations, description="mlbridge train phase-order: training", unit="iteration"
            )
        for it in iterations:
            result["iterations"].append(_fine_tune_step(training, policy, optimizer, it, n))
            done = it + 1
            if folder is not None and (done % checkpoint_every == 0 or done == config.iterations):
                _save(training, folder, done, policy, cloned, optimizer, result, last_saved)
                last_saved = done
        policy.eval()
        if config.validation_modules > 0 and config.iterations > 0:
            result["validation"] = _validate(training, policy, cloned)
            if result["validation"]["kept"] == "cloned":
                policy = cloned
        result["pool"] = pool.summary()
        result["rollouts"] = training.rollouts
        result["wall_seconds"] = training.wall()
    except RolloutPoolError as e:
        hint = f" (the last checkpoint in {folder} resumes it: --resume)" if folder else ""
        raise PhaseOrderError(f"the training stopped: {e}{hint}") from e
    finally:
        if own_pool:
            pool.close()
    policy.eval()
    policy.metadata.update(
        {
            "trainer": "mlbridge train phase-order (behaviour cloning of the teacher "
            "sequence, then REINFORCE with a leave-one-out baseline)",
            "config": asdict(config),
            "training_modules": len(modules),
        }
    )
    return policy, result, training.samples


def _update(
    policy: Any, optimizer: Any, episodes: Sequence[Episode], config: PGConfig
) -> tuple[float, float]:
    import torch

    by_module: dict[Path, list[Episode]] = {}
    for e in episodes:
        by_module.setdefault(e.module, []).append(e)
    obs_rows, steps, sizes, hist, actions, advantages = [], [], [], [], [], []
    for group in by_module.values():
        returns = np.array([e.relative_return for e in group])
        for e, r in zip(group, returns, strict=True):
            # Leave-one-out: compare with the other episodes on the same module.
            others = (returns.sum() - r) / max(len(group) - 1, 1)
            adv = float(r - others) if len(group) > 1 else 0.0
            for o, a in zip(e.observations, e.actions, strict=True):
                obs_rows.append(np.asarray(o["observation"], dtype=np.float32))
                steps.append(np.asarray(o["step"], dtype=np.int64).reshape(1))
                sizes.append(np.asarray(o["code_size"], dtype=np.int64).reshape(1))
                hist.append(np.asarray(o[ACTION_HISTORY], dtype=np.float32))
                actions.append(a)
                advantages.append(adv)
    policy.train()
    logits = policy.logits(
        torch.as_tensor(np.stack(obs_rows)),
        torch.as_tensor(np.stack(steps)),
        torch.as_tensor(np.stack(sizes)),
        torch.as_tensor(np.stack(hist)),
    )
    logp = torch.log_softmax(logits, dim=-1)
    chosen = logp.gather(1, torch.as_tensor(actions, dtype=torch.int64).unsqueeze(1)).squeeze(1)
    adv = torch.as_tensor(advantages, dtype=torch.float32)
    entropy = -(logp.exp() * logp).sum(dim=-1).mean()
    # Advantages are fractions of the module (a few percent): scale them up to unit size.
    loss = -(chosen * adv).mean() * 100.0 - config.entropy * entropy
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    policy.eval()
    return float(loss.detach()), float(entropy.detach())


def agreement(policy: Any, onnx_path: str | Path, samples: Sequence[Obs]) -> tuple[float, int]:
    """How often the exported agent answers as the PyTorch policy on ``samples``.

    Returns:
        The fraction of equal decisions, and the number of samples.
    """
    ort = import_onnxruntime()

    if not samples:
        return 1.0, 0
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    equal = 0
    for s in samples:
        feeds = {
            n: np.asarray(s[n]).astype(
                np.float32 if n in (OBSERVATION, ACTION_HISTORY) else np.int64
            )
            for n in names
        }
        (got,) = session.run([ADVICE], feeds)
        equal += int(int(np.asarray(got).reshape(-1)[0]) == policy.act(s))
    return equal / len(samples), len(samples)


@dataclass
class HeldoutResult:
    """The ``.text`` bytes of one held-out module in each configuration.

    Attributes:
        module: The module.
        unoptimized: ``llc-22 -O2`` of the module as it is.
        oz: After stock ``opt-22 -passes='default<Oz>'``.
        agent: After ``mlbridge-phase-order`` with the ONNX agent in-process.
        actions: The agent's actions (from the pass's trace).
    """

    module: str
    unoptimized: int
    oz: int
    agent: int
    actions: list[int]


def _heldout_one(
    module: Path,
    onnx_path: Path,
    plugin: Path,
    max_steps: int,
    extra: dict[str, Any],
    timeout: float,
) -> HeldoutResult:
    with tempfile.TemporaryDirectory(prefix="mlbridge-po-eval-") as tmp:
        out = Path(tmp) / "agent.bc"
        argv = phase_order_command(
            module,
            out,
            plugin=plugin,
            runner="onnx",
            model=onnx_path,
            max_steps=max_steps,
            trace=True,
            **extra,
        )
        proc = run_tool(argv, timeout)
        actions = [s.action for s in parse_trace(proc.stderr) if s.action is not None]
        agent = text_size(out, timeout=timeout)
        oz_out = Path(tmp) / "oz.bc"
        run_tool(
            [find_llvm_tool("opt"), "-passes=default<Oz>", str(module), "-o", str(oz_out)],
            timeout,
        )
        oz = text_size(oz_out, timeout=timeout)
        plain = Path(tmp) / "plain.bc"
        plain.write_bytes(module.read_bytes())
        unoptimized = text_size(plain, timeout=timeout)
    return HeldoutResult(str(module), unoptimized, oz, agent, actions)


def evaluate_heldout(
    onnx_path: str | Path,
    modules: Sequence[Path],
    *,
    plugin: str | Path | None = None,
    max_steps: int = 15,
    observation: str | None = None,
    ir2vec_vocab: str | None = None,
    actions: str | None = None,
    jobs: int = 2,
    timeout: float = 300.0,
    log: Callable[[str], None] | None = None,
) -> list[HeldoutResult]:
    """Measures ``.text`` bytes of ``modules`` with the ONNX agent against stock ``-Oz``.

    Raises:
        PhaseOrderError: If a tool fails.
    """
    plugin_path = Path(plugin) if plugin is not None else find_plugin()
    extra = {"observation": observation, "ir2vec_vocab": ir2vec_vocab, "actions": actions}
    done = 0

    def one(module: Path) -> HeldoutResult:
        nonlocal done
        r = _heldout_one(Path(module), Path(onnx_path), plugin_path, max_steps, extra, timeout)
        done += 1
        _log(
            f"held-out {done}/{len(modules)} {Path(module).name}: agent {r.agent} bytes, "
            f"-Oz {r.oz}",
            log,
        )
        return r

    with ThreadPoolExecutor(max(1, jobs)) as ex:
        results: Iterable[HeldoutResult] = ex.map(one, modules)
        if log is not None:
            results = track(
                results,
                total=len(modules),
                description="mlbridge train phase-order: held-out",
                unit="module",
            )
        return list(results)


def summarize_heldout(results: Sequence[HeldoutResult]) -> dict[str, Any]:
    """Totals and ratios of a held-out evaluation."""
    total = {k: sum(getattr(r, k) for r in results) for k in ("unoptimized", "oz", "agent")}
    return {
        "modules": len(results),
        "text_bytes": total,
        "agent_vs_oz": total["agent"] / total["oz"] - 1 if total["oz"] else 0.0,
        "modules_agent_smaller": sum(r.agent < r.oz for r in results),
        "modules_agent_equal": sum(r.agent == r.oz for r in results),
        "modules_agent_larger": sum(r.agent > r.oz for r in results),
        "mean_steps": float(np.mean([len(r.actions) for r in results])) if results else 0.0,
    }


def write_metrics(path: str | Path, metrics: dict[str, Any]) -> Path:
    """Writes the training metrics as JSON (with the machine they came from)."""
    path = Path(path)
    machine = {"node": platform.node(), "python": platform.python_version()}
    metrics = {"machine": machine, **metrics}
    path.write_text(json.dumps(metrics, indent=2, default=str) + "\n")
    return path


def stderr_log(line: str) -> None:
    """The progress sink of the command line."""
    print(f"mlbridge train phase-order: {line}", file=sys.stderr, flush=True)
