"""Phase ordering with RLlib's PPO (``mlbridge train phase-order --algorithm rllib-ppo``).

RLlib's PPO (new API stack, Ray 2.60) trains on :class:`RLlibPhaseOrderEnv`, the
:class:`~mlbridge.phase_order.env.PhaseOrderEnv` of the training modules (``opt-22``
running ``mlbridge-phase-order`` over the pipe, one compilation per episode) with its
reward made relative: a step's reward is the code-size decrease it brought in percent of
the module's size before the first step, so an episode's return is the module's size
reduction in percent, whatever its size (what :mod:`mlbridge.phase_order.trainer`'s
REINFORCE maximises too).

The environments live in RLlib's *env runners*, one Ray actor each (``--workers``), on the
Ray instance or cluster of the job; the modules reach them through Ray's object store
(:func:`mlbridge.training.rllib.ship_files`). The learner runs in this process.

The RLModule (:class:`PhasePolicyRLModule`) holds a
:class:`~mlbridge.phase_order.policy.PhasePolicy` as its policy network (the action
logits are that policy's) and a value network of the same shape over the same scaled
features. After training, the policy network's weights are copied into a
:class:`PhasePolicy`: the same ``policy.json`` and ONNX agent as the REINFORCE trainer's,
which the pass runs in-process. PPO here starts from a random policy: there is no warm
start by behaviour cloning.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

from mlbridge.errors import MLBridgeError
from mlbridge.phase_order.command import (
    ACTION_HISTORY,
    CODE_SIZE,
    OBSERVATION,
    STEP,
    PhaseOrderError,
    find_plugin,
)
from mlbridge.phase_order.env import PhaseOrderEnv
from mlbridge.phase_order.policy import PhasePolicy
from mlbridge.phase_order.ppo_settings import CHECKPOINT_KIND, PPOSettings
from mlbridge.progress import track
from mlbridge.training.metrics import TrainingMetrics
from mlbridge.training.rllib import (
    RLlibCheckpoints,
    env_runner_nodes,
    import_rllib,
    iteration_scalars,
    local_copies,
    ship_files,
)

import_rllib()  # noqa: E402 - a clear error before RLlib's own imports fail

from ray.rllib.core import DEFAULT_MODULE_ID  # noqa: E402
from ray.rllib.core.columns import Columns  # noqa: E402
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI  # noqa: E402
from ray.rllib.core.rl_module.torch import TorchRLModule  # noqa: E402

__all__ = [
    "CHECKPOINT_KIND",
    "PPOSettings",
    "PhasePolicyRLModule",
    "RLlibPhaseOrderEnv",
    "build_ppo_config",
    "policy_of_weights",
    "train_phase_order_ppo",
]

Obs = dict[str, np.ndarray]

#: Settings a resumed run may change: how long it runs and on how many env runners (and
#: the start policy, which a resumed run does not read: its weights come from the checkpoint).
_RESUMABLE_CHANGES = frozenset({"iterations", "workers", "init_policy"})


class RLlibPhaseOrderEnv(gymnasium.Wrapper):  # type: ignore[type-arg]
    """:class:`PhaseOrderEnv` as an env runner makes it, the reward in percent.

    The modules come from Ray's object store; the reward is in percent of the module's size.

    Args:
        config: RLlib's ``env_config``: ``modules`` (a list of
            :class:`~mlbridge.training.pool.SharedFile`), ``plugin`` and the
            :class:`PhaseOrderEnv` keywords ``max_steps``, ``observation``,
            ``ir2vec_vocab``, ``actions``, ``timeout``.

    A step's reward is ``100 * (size before - size after) / size_0``, where ``size_0`` is
    the code-size estimate of the episode's first observation; ``info`` holds the module
    and, at the end, ``size_reduction_pct``.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="mlbridge-po-rllib-"))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._folder, True)
        modules = local_copies(config["modules"], self._folder / "modules")
        env = PhaseOrderEnv(
            modules,
            plugin=config["plugin"],
            max_steps=config["max_steps"],
            observation=config["observation"],
            ir2vec_vocab=config.get("ir2vec_vocab"),
            actions=config.get("actions"),
            timeout=config["timeout"],
            exit_timeout=config["timeout"],
            workdir_parent=self._folder,
        )
        super().__init__(env)
        self._size0 = 1

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Starts an episode on a module drawn by the environment's generator."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._size0 = max(int(obs[CODE_SIZE][0]), 1)
        return obs, {"module": info["module"]}

    def step(self, action: Any) -> tuple[Obs, float, bool, bool, dict[str, Any]]:  # noqa: ANN401
        """One decision; the reward in percent of the module's size (see the class)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        out: dict[str, Any] = {"module": info["module"]}
        if "episode" in info:
            summary = info["episode"]
            out["size_reduction_pct"] = (
                100.0 * (summary.initial_size - summary.final_size) / self._size0
            )
        return obs, 100.0 * float(reward) / self._size0, terminated, truncated, out

    def close(self) -> None:
        """Closes the environment and removes its folder (idempotent)."""
        try:
            self.env.close()
        finally:
            self._finalizer()


class PhasePolicyRLModule(TorchRLModule, ValueFunctionAPI):
    """PPO's RLModule: a :class:`PhasePolicy` for the action logits, and a value network.

    ``model_config``: ``hidden`` (both networks' hidden width). The observation space is
    :class:`PhaseOrderEnv`'s (``observation`` [D], ``step``, ``code_size``,
    ``action_history`` [N]); the action space ``Discrete(N + 1)``.
    """

    def setup(self) -> None:
        """Builds the policy network (``pi``) and the value network (``vf``)."""
        dim = int(self.observation_space[OBSERVATION].shape[0])
        n_actions = int(self.action_space.n) - 1
        hidden = int(self.model_config.get("hidden", 64))
        self.pi = PhasePolicy(dim, n_actions, hidden)
        self.vf = torch.nn.Sequential(
            torch.nn.Linear(self.pi.feature_width, hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(hidden, 1),
        )

    @staticmethod
    def _inputs(obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return (
            obs[OBSERVATION].to(torch.float32),
            obs[STEP].reshape(*obs[STEP].shape[:-1], 1),
            obs[CODE_SIZE].reshape(*obs[CODE_SIZE].shape[:-1], 1),
            obs[ACTION_HISTORY].to(torch.float32),
        )

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.pi.logits(*self._inputs(batch[Columns.OBS]))}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:  # noqa: ANN401
        """The value estimate of each observation, ``[B]``."""
        x = PhasePolicy.features(*self._inputs(batch[Columns.OBS]))
        return self.vf(x).squeeze(-1)


def build_ppo_config(settings: PPOSettings, env_config: dict[str, Any]) -> Any:  # noqa: ANN401 - a PPOConfig
    """RLlib's ``PPOConfig`` for :class:`RLlibPhaseOrderEnv` and :class:`PhasePolicyRLModule`.

    ``settings.workers`` env runners of one CPU and one environment each; the learner in
    this process (no learner actors).
    """
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    # About one iteration's episodes in the reported mean return.
    episodes = max(1, settings.steps_per_iteration // max(1, settings.max_steps // 2))
    return (
        PPOConfig()
        .environment(RLlibPhaseOrderEnv, env_config=env_config, disable_env_checking=True)
        .framework("torch")
        .env_runners(
            num_env_runners=settings.workers,
            num_envs_per_env_runner=1,
            num_cpus_per_env_runner=1,
            rollout_fragment_length="auto",
            sample_timeout_s=max(60.0, settings.timeout),
        )
        .learners(num_learners=0)
        .training(
            lr=settings.learning_rate,
            entropy_coeff=settings.entropy,
            clip_param=settings.clip,
            gamma=settings.gamma,
            lambda_=settings.lambda_,
            train_batch_size_per_learner=settings.steps_per_iteration,
            minibatch_size=settings.minibatch_size,
            num_epochs=settings.epochs,
            # Returns are percentages of a module's size: tens at most.
            vf_clip_param=100.0,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=PhasePolicyRLModule, model_config={"hidden": settings.hidden}
            )
        )
        .reporting(metrics_num_episodes_for_smoothing=episodes)
        .debugging(seed=settings.seed, log_level="ERROR")
    )


def policy_of_weights(weights: dict[str, Any], metadata: dict[str, Any]) -> PhasePolicy:
    """The :class:`PhasePolicy` of a :class:`PhasePolicyRLModule`'s state dict (``pi.*``).

    Raises:
        PhaseOrderError: If the state dict has no policy network.
    """
    pi = {k[len("pi.") :]: v for k, v in weights.items() if k.startswith("pi.")}
    if "layer1.weight" not in pi or "layer2.weight" not in pi:
        raise PhaseOrderError(f"the RLModule's weights have no policy network: {sorted(weights)}")
    w1, w2 = np.asarray(pi["layer1.weight"]), np.asarray(pi["layer2.weight"])
    hidden, width = w1.shape
    n_actions = int(w2.shape[0]) - 1
    dim = width - 2 - 2 * n_actions
    policy = PhasePolicy(dim, n_actions, hidden, metadata)
    policy.load_state_dict(
        {k: torch.as_tensor(np.asarray(v), dtype=torch.float32) for k, v in pi.items()}
    )
    policy.eval()
    return policy


def _collect_samples(
    policy: PhasePolicy,
    modules: Sequence[Path],
    settings: PPOSettings,
    plugin: Path,
) -> tuple[list[Obs], list[float]]:
    """Greedy episodes of ``policy`` on ``modules`` in this process.

    Returns their observations (the export check's samples) and relative returns (the
    final policy's reward).
    """
    from mlbridge.phase_order.trainer import run_episode

    samples: list[Obs] = []
    returns = []
    with PhaseOrderEnv(
        modules,
        plugin=plugin,
        max_steps=settings.max_steps,
        observation=settings.observation,
        ir2vec_vocab=settings.ir2vec_vocab,
        actions=settings.actions,
        timeout=settings.timeout,
        exit_timeout=settings.timeout,
    ) as env:
        for module in modules:
            episode = run_episode(env, module, policy.act)
            samples.extend(episode.observations)
            returns.append(episode.relative_return)
    return samples, returns


def train_phase_order_ppo(
    modules: Sequence[Path],
    settings: PPOSettings | None = None,
    *,
    plugin: str | Path | None = None,
    log: Callable[[str], None] | None = None,
    metrics: TrainingMetrics | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 1,
    resume: bool = False,
    check_modules: int = 4,
) -> tuple[PhasePolicy, dict[str, Any], list[Obs]]:
    """Trains a :class:`PhasePolicy` on ``modules`` with RLlib's PPO.

    Runs on the Ray session of this process (:func:`mlbridge.training.ray_pool.ray_session`;
    a local instance is started for the call when there is none).

    Args:
        modules: Training modules (bitcode).
        settings: Settings (default :class:`PPOSettings`).
        plugin: The opt plugin (default: the build's); on a Ray cluster every node needs
            it at this path.
        log: Gets one progress line per iteration.
        metrics: Gets the scalars of every iteration (step 1 is the first; the
            ``reward/*`` tags are the episodes' size reduction in percent).
        checkpoint_dir: Where RLlib's checkpoints go (``None``: none), every
            ``checkpoint_every`` iterations and after the last.
        checkpoint_every: See ``checkpoint_dir``.
        resume: Continue from the latest checkpoint in ``checkpoint_dir`` (same settings
            but ``iterations`` and ``workers``).
        check_modules: Training modules on which the final greedy policy plays one
            episode in this process (its observations check the ONNX export).

    Returns:
        The policy (eval mode), the history (per iteration: RLlib's numbers; the env
        runners' nodes; the final greedy episodes' mean relative return) and the
        observations of the final greedy episodes.

    Raises:
        MLBridgeError: If RLlib is missing, a compilation fails, or a checkpoint cannot
            be resumed.
        ValueError: If the settings are inconsistent.
    """
    import ray

    from mlbridge.training.ray_pool import ray_session

    settings = settings or PPOSettings()
    settings.check()
    if not modules:
        raise PhaseOrderError("no module to train on")
    if resume and checkpoint_dir is None:
        raise ValueError("resume needs the checkpoint folder (checkpoint_dir)")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
    plugin_path = Path(plugin) if plugin is not None else find_plugin()
    say = log or (lambda _: None)
    checkpoints = RLlibCheckpoints(checkpoint_dir, CHECKPOINT_KIND) if checkpoint_dir else None
    if checkpoints is not None:
        checkpoints.prepare(resume=resume, say=say)
    torch.set_num_threads(1)
    with ray_session(None, num_cpus=max(os.cpu_count() or 1, settings.workers)):
        if not ray.is_initialized():  # pragma: no cover - ray_session initialises it
            raise MLBridgeError("Ray did not start")
        env_config = {
            "modules": ship_files(modules),
            "plugin": str(plugin_path),
            "max_steps": settings.max_steps,
            "observation": settings.observation,
            "ir2vec_vocab": settings.ir2vec_vocab,
            "actions": settings.actions,
            "timeout": settings.timeout,
        }
        # RLlib's warnings about its own API (the new stack is its default, deprecations
        # inside RLlib) are nothing a user of this command can act on.
        for name in ("ray.rllib", "ray.tune", "ray._common.deprecation"):
            logging.getLogger(name).setLevel(logging.ERROR)
        # The environment once here first: a missing tool, plugin or module is said
        # plainly, not as RLlib's error about env runners that did not start.
        RLlibPhaseOrderEnv(env_config).close()
        say(f"building RLlib's PPO: {settings.workers} env runners")
        try:
            algo = build_ppo_config(settings, env_config).build_algo()
        except Exception as e:  # RLlib wraps the env runners' errors in its own
            raise PhaseOrderError(
                f"RLlib could not start its env runners ({type(e).__name__}: {e}): an env "
                "runner's environment failed; Ray's worker logs (/tmp/ray/session_latest/"
                "logs on each node) say why. On a cluster every node needs LLVM 22's opt "
                f"and the plugin at {plugin_path}"
            ) from e
        try:
            if settings.init_policy is not None and not resume:
                _start_from(algo, settings.init_policy, say)
            return _train(
                algo, modules, settings, plugin_path, say, log, metrics, checkpoints,
                checkpoint_every, resume, check_modules,
            )  # fmt: skip
        finally:
            algo.stop()


def _start_from(algo: Any, path: str, say: Callable[[str], None]) -> None:  # noqa: ANN401
    """Gives the policy network the weights of the :class:`PhasePolicy` at ``path``.

    The value network keeps its random start. The env runners get the weights before the
    first episode.

    Raises:
        PhaseOrderError: If the policy's shapes are not the network's (another
            observation, action set or hidden width).
    """
    policy = PhasePolicy.load(path)
    weights = algo.learner_group.get_weights([DEFAULT_MODULE_ID])
    current = weights[DEFAULT_MODULE_ID]
    start = {f"pi.{k}": v.detach().cpu().numpy() for k, v in policy.state_dict().items()}
    wrong = [
        f"{k} {tuple(v.shape)} against {tuple(np.shape(current[k]))}"
        for k, v in start.items()
        if k not in current or tuple(v.shape) != tuple(np.shape(current[k]))
    ]
    if wrong:
        raise PhaseOrderError(
            f"{path} does not fit this training's policy network ({'; '.join(wrong)}): it "
            "was trained with another observation, action set or --hidden; train with the "
            "settings it was made with"
        )
    weights[DEFAULT_MODULE_ID] = {**current, **start}
    algo.learner_group.set_weights(weights)
    algo.env_runner_group.sync_weights(
        from_worker_or_learner_group=algo.learner_group, inference_only=True
    )
    say(f"the policy network starts from {path} (the value network from random)")


def _train(
    algo: Any,  # noqa: ANN401
    modules: Sequence[Path],
    settings: PPOSettings,
    plugin: Path,
    say: Callable[[str], None],
    log: Callable[[str], None] | None,
    metrics: TrainingMetrics | None,
    checkpoints: RLlibCheckpoints | None,
    checkpoint_every: int,
    resume: bool,
    check_modules: int,
) -> tuple[PhasePolicy, dict[str, Any], list[Obs]]:
    from mlbridge.phase_order.trainer import (
        METRIC_BEST,
        METRIC_ENTROPY,
        METRIC_LENGTH,
        METRIC_MEAN,
        METRIC_ROLLOUTS,
        METRIC_WALL,
        size_change_text,
    )

    nodes = env_runner_nodes(algo)
    say(
        f"{len(nodes)} env runners on {len({n.node_id for n in nodes})} node(s): "
        + "; ".join(sorted({n.describe() for n in nodes}))
    )
    result: dict[str, Any] = {
        "algorithm": "rllib-ppo",
        "env_runners": [n.to_dict() for n in nodes],
        "iterations": [],
    }
    history: list[dict[str, float]] = []
    elapsed = 0.0
    first = 0
    if resume:
        assert checkpoints is not None
        path = checkpoints.latest()
        assert path is not None
        state = checkpoints.state(path)
        saved, mine = dict(state["settings"]), asdict(settings)
        changed = sorted(k for k in mine if k not in _RESUMABLE_CHANGES and saved.get(k) != mine[k])
        if changed:
            diffs = ", ".join(f"{k}={saved.get(k)!r} there, {mine[k]!r} here" for k in changed)
            raise PhaseOrderError(
                f"{path} was taken with other settings ({diffs}): resume with the settings "
                "of the run (only --iterations and --workers may change)"
            )
        algo.restore_from_path(str(path.resolve()))
        first = int(state["iteration"])
        history = [dict(h) for h in state["history"]]
        result["iterations"] = list(state["iterations"])
        result["resumed_from_iteration"] = first
        elapsed = float(state["elapsed_s"])
        if metrics is not None:
            metrics.history = [dict(h) for h in history]
        say(f"resuming from {path} (iteration {first}/{settings.iterations})")
    segment = time.perf_counter()
    iterations: Any = range(first, settings.iterations)
    if log is not None:
        iterations = track(
            iterations, description="mlbridge train phase-order: RLlib PPO", unit="iteration"
        )
    for it in iterations:
        t0 = time.perf_counter()
        numbers = iteration_scalars(algo.train(), DEFAULT_MODULE_ID)
        wall = elapsed + time.perf_counter() - segment
        record = {"iteration": it + 1, **numbers, "seconds": time.perf_counter() - t0}
        result["iterations"].append(record)
        scalars = {METRIC_WALL: wall}
        for tag, name in (
            (METRIC_MEAN, "return_mean"),
            (METRIC_BEST, "return_max"),
            (METRIC_LENGTH, "length_mean"),
            (METRIC_ENTROPY, "entropy"),
            (METRIC_ROLLOUTS, "episodes_lifetime"),
            ("ppo/policy_loss", "policy_loss"),
            ("ppo/vf_loss", "vf_loss"),
            ("ppo/mean_kl", "mean_kl"),
        ):
            if name in numbers:
                scalars[tag] = numbers[name]
        history.append({"step": float(it + 1), **scalars})
        if metrics is not None:
            metrics.record(it + 1, scalars)
        mean = numbers.get("return_mean")
        say(
            f"iteration {it + 1}/{settings.iterations}: code size "
            + (size_change_text(mean / 100) if mean is not None else "(no episode yet)")
            + f" over the last {int(numbers.get('episodes', 0))} episodes, "
            f"{numbers.get('length_mean', 0.0):.1f} steps, entropy "
            f"{numbers.get('entropy', float('nan')):.2f}, {record['seconds']:.1f} s "
            f"(total {wall:.0f} s)"
        )
        done = it + 1
        if checkpoints is not None and (
            done % checkpoint_every == 0 or done == settings.iterations
        ):
            checkpoints.save(
                algo,
                done,
                {
                    "settings": asdict(settings),
                    "history": history,
                    "iterations": result["iterations"],
                    "elapsed_s": wall,
                    "finished": done == settings.iterations,
                },
            )
    weights = algo.learner_group.get_weights([DEFAULT_MODULE_ID])[DEFAULT_MODULE_ID]
    policy = policy_of_weights(
        weights,
        {
            "trainer": "mlbridge train phase-order --algorithm rllib-ppo (RLlib's PPO, "
            "no warm start)",
            "config": asdict(settings),
            "training_modules": len(modules),
        },
    )
    picked = [modules[int(i)] for i in np.linspace(0, len(modules) - 1, check_modules)]
    picked = list(dict.fromkeys(picked)) if check_modules > 0 else []
    samples, returns = _collect_samples(policy, picked, settings, plugin) if picked else ([], [])
    if returns:
        result["greedy_check"] = {
            "modules": len(picked),
            "mean_relative_return": float(np.mean(returns)),
        }
        say(
            f"the final greedy policy on {len(picked)} training modules: code size "
            f"{size_change_text(float(np.mean(returns)))}"
        )
    result["wall_seconds"] = elapsed + time.perf_counter() - segment
    result["history"] = history
    return policy, result, samples
