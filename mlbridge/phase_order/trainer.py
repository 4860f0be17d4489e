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

After training, the greedy policy is exported to ONNX (int64 ``action`` = the argmax, in
the graph), checked against the PyTorch policy on the observations seen in training, and
evaluated on held-out modules: ``.text`` bytes of ``llc-22 -O2`` after stock
``opt-22 -passes='default<Oz>'``, after the pass with the ONNX agent in-process, and
without optimisation.
"""

from __future__ import annotations

import json
import platform
import queue
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

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

if TYPE_CHECKING:
    # Gymnasium (the gym extra) is only needed to train, not to build the command line.
    from mlbridge.phase_order.env import PhaseOrderEnv

__all__ = [
    "Episode",
    "HeldoutResult",
    "PGConfig",
    "agreement",
    "evaluate_heldout",
    "parse_teacher",
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


@contextmanager
def _env_pool(
    count: int, modules: Sequence[Path], config: PGConfig, plugin: Path
) -> Iterator[queue.Queue[PhaseOrderEnv]]:
    from mlbridge.phase_order.env import PhaseOrderEnv

    pool: queue.Queue[PhaseOrderEnv] = queue.Queue()
    envs: list[PhaseOrderEnv] = []
    try:
        for _ in range(count):
            env = PhaseOrderEnv(
                modules,
                plugin=plugin,
                max_steps=config.max_steps,
                observation=config.observation,
                ir2vec_vocab=config.ir2vec_vocab,
                actions=config.actions,
                timeout=config.timeout,
                exit_timeout=config.timeout,
            )
            envs.append(env)
            pool.put(env)
        yield pool
    finally:
        for env in envs:
            env.close()


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


class _Training:
    """What the stages of one :func:`train_phase_order` run share.

    The training modules and their draws (one generator, so a seed gives the same draws),
    the pool of environments the episodes run in, the observations seen so far (the
    export check's samples) and the progress log.
    """

    def __init__(
        self,
        modules: Sequence[Path],
        config: PGConfig,
        pool: queue.Queue[PhaseOrderEnv],
        rng: np.random.Generator,
        log: Callable[[str], None] | None,
    ) -> None:
        self.modules = modules
        self.config = config
        self.pool = pool
        self.rng = rng
        self.log = log
        self.jobs = max(1, config.jobs)
        self.samples: list[Obs] = []
        self.start = time.perf_counter()

    def draw(self, count: int) -> list[Path]:
        """``count`` distinct training modules (all if fewer), in corpus order."""
        modules = self.modules
        picks = self.rng.choice(len(modules), size=min(count, len(modules)), replace=False)
        return [modules[int(i)] for i in sorted(picks)]

    def play_all(self, tasks: Sequence[tuple[Path, Callable[[Obs], int]]]) -> list[Episode]:
        """One episode per (module, agent), ``jobs`` at a time, in the order given."""

        def one(task: tuple[Path, Callable[[Obs], int]]) -> Episode:
            env = self.pool.get()
            try:
                return run_episode(env, task[0], task[1])
            finally:
                self.pool.put(env)

        with ThreadPoolExecutor(self.jobs) as ex:
            return list(ex.map(one, tasks))


def _check_training(modules: Sequence[Path], config: PGConfig) -> None:
    if not modules:
        raise PhaseOrderError("no module to train on")
    if config.episodes_per_module < 2:
        raise ValueError("episodes_per_module must be at least 2 (leave-one-out baseline)")


def _warm_start(training: _Training, policy: Any, teacher: list[int], n: int) -> dict[str, Any]:
    """The warm start: behaviour cloning of the teacher's episodes into ``policy``.

    Plays ``teacher`` (then stop) on ``bc_modules`` drawn modules; returns the stage's record.
    """
    config = training.config
    t0 = time.perf_counter()

    def follow(obs: Obs) -> int:
        step = int(np.asarray(obs["step"]).reshape(-1)[0])
        return teacher[step] if step < len(teacher) else n

    shown = training.play_all([(m, follow) for m in training.draw(config.bc_modules)])
    training.samples.extend(o for e in shown for o in e.observations)
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
    return record


def _fine_tune(training: _Training, policy: Any, n: int) -> list[dict[str, Any]]:
    """The fine-tuning: ``iterations`` REINFORCE updates of ``policy`` (leave-one-out baseline).

    Returns one record per iteration.
    """
    import torch

    config, rng, log = training.config, training.rng, training.log
    history: list[dict[str, Any]] = []
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    iterations: Iterable[int] = range(config.iterations)
    if log is not None:
        iterations = track(
            iterations, description="mlbridge train phase-order: training", unit="iteration"
        )
    for it in iterations:
        t0 = time.perf_counter()
        tasks = []
        for module in training.draw(config.modules_per_iteration):
            for _ in range(config.episodes_per_module):
                sampler = np.random.default_rng(int(rng.integers(2**63)))

                def choose(obs: Obs, sampler: np.random.Generator = sampler) -> int:
                    p = policy.probabilities(obs)
                    return int(sampler.choice(len(p), p=p / p.sum()))

                tasks.append((module, choose))
        policy.eval()
        episodes = training.play_all(tasks)
        loss, entropy = _update(policy, optimizer, episodes, config)
        returns = np.array([e.relative_return for e in episodes])
        actions = np.concatenate([np.asarray(e.actions) for e in episodes])
        training.samples.extend(o for e in episodes for o in e.observations)
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
        history.append(record)
        _log(
            f"iteration {it + 1}/{config.iterations}: code size "
            f"{size_change_text(record['mean_relative_return'])} (best "
            f"{size_change_text(record['best_relative_return'])}), "
            f"{record['mean_length']:.1f} steps, entropy {entropy:.2f}, "
            f"{record['seconds']:.1f} s (total {time.perf_counter() - training.start:.0f} s)",
            log,
        )
    return history


def _validate(training: _Training, tuned_policy: Any, cloned: Any) -> dict[str, Any]:
    """The validation: the greedy fine-tuned and cloned policies on the same drawn modules.

    Compares them on ``validation_modules`` modules by the pass's code-size estimate; the
    returned record's ``kept`` names the policy with the smaller total.
    """
    t0 = time.perf_counter()
    chosen = training.draw(training.config.validation_modules)

    def greedy(obs: Obs) -> int:
        return tuned_policy.act(obs)

    tuned = sum(e.final_size for e in training.play_all([(m, greedy) for m in chosen]))

    def cloned_greedy(obs: Obs) -> int:
        return cloned.act(obs)

    base = sum(e.final_size for e in training.play_all([(m, cloned_greedy) for m in chosen]))
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


def train_phase_order(
    modules: Sequence[Path],
    config: PGConfig | None = None,
    *,
    plugin: str | Path | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[Any, dict[str, Any], list[Obs]]:
    """Trains a :class:`~mlbridge.phase_order.policy.PhasePolicy` on ``modules``.

    Three stages: behaviour cloning of ``config.teacher`` on ``config.bc_modules``
    modules (warm start), REINFORCE fine-tuning, and the choice between the greedy
    policies after cloning and after fine-tuning on ``config.validation_modules``
    modules (the smaller total code-size estimate wins).

    Args:
        modules: Training modules (bitcode).
        config: Settings (default :class:`PGConfig`).
        plugin: The opt plugin (default: the build's).
        log: Called with one progress line per stage step.

    Returns:
        The trained policy (in eval mode), the training history (the warm start, per
        iteration: mean relative return, mean episode length, action histogram, seconds;
        the validation) and the observations seen (samples for checking the export).

    Raises:
        MLBridgeError: If a compilation fails.
    """
    import copy

    import torch

    from mlbridge.phase_order.policy import PhasePolicy

    config = config or PGConfig()
    _check_training(modules, config)
    plugin_path = Path(plugin) if plugin is not None else find_plugin()
    torch.manual_seed(config.seed)
    # Compilations run in other processes; more torch threads would only compete with them.
    torch.set_num_threads(1)
    rng = np.random.default_rng(config.seed)
    result: dict[str, Any] = {"iterations": []}

    with _env_pool(max(1, config.jobs), modules, config, plugin_path) as pool:
        probe = pool.get()
        pool.put(probe)
        n = probe.n_actions
        policy = PhasePolicy(probe.observation_dim, n, config.hidden)
        training = _Training(modules, config, pool, rng, log)
        teacher = parse_teacher(config.teacher, n)
        if teacher:
            result["warm_start"] = _warm_start(training, policy, teacher, n)
        cloned = copy.deepcopy(policy)
        result["iterations"] = _fine_tune(training, policy, n)
        policy.eval()
        if config.validation_modules > 0 and config.iterations > 0:
            result["validation"] = _validate(training, policy, cloned)
            if result["validation"]["kept"] == "cloned":
                policy = cloned
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
    import os

    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime as ort

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
