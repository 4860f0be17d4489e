"""Multi-agent PPO for the register allocator (``mlbridge train regalloc --algorithm rllib-ppo``).

RLlib's PPO (new API stack, Ray 2.60) trains one policy per agent of ``llc-22
-regalloc=mlbridge``, priority, coloring and, with ``split``, split, on
:class:`RLlibRegallocEnv`, a :class:`~ray.rllib.env.multi_agent_env.MultiAgentEnv` over
one llc run per episode:

* **The episode.** llc drives the allocation: it asks, over the pipe, each decision of
  each function of a training module (after ``opt-22 -O2``). The environment runs llc
  (:func:`~mlbridge.compiler.pipe.drive_compiler`) in a background thread whose callback
  hands each observation to :meth:`RLlibRegallocEnv.step` through a queue and waits for
  the action in another: the agent named by the feature ``agent`` is the one in the
  observation dict (one agent acts at a time). The episode ends when llc exits; then
  ``mlbridge-regalloc-cost`` costs the MIR it wrote. :meth:`RLlibRegallocEnv.close`, or a
  new :meth:`~RLlibRegallocEnv.reset`, abandons a running episode: the callback raises,
  ``drive_compiler`` kills llc and removes its channel, the thread ends.
* **The reward**, at the end, the same for every agent that acted: the change of the
  spill/reload cost (``SpillReloadCost``) against the built-in basic policy's on the
  functions the agents allocated, in percent of the larger of the two sums
  (``100 * (basic - cost) / max(basic, cost)``, in [-100, 100], 0 if neither spills). A
  multi-agent episode's return is the sum over its agents: the reported return is the
  priority agent's (it acts in every function that has a decision). By default
  (``sample_functions`` 1) an episode is one function, so that reward is that
  function's own.
* **Fixed observations.** RLlib's spaces are fixed: each query's graph is padded to
  ``max_nodes`` live ranges, ``max_edges`` edges, ``max_registers`` candidate registers
  and ``max_blocks`` candidate blocks, with the true sizes beside it
  (:func:`observation_spaces`). A query above a bound is not given to the agents: the
  basic policy answers it in the environment, and its function is left out of the reward
  (it mixes two policies), as is the function where the agents ran out of
  ``max_decisions``. Padded actions are masked.
* **The RLModules** (:class:`RegallocAgentRLModule`) each hold a
  :class:`~mlbridge.regalloc.gnn.RegallocGNN` over the padded graph (the padded graphs of
  a batch as one disjoint union): the priority agent's logits are its priority head's,
  the coloring agent's its coloring head's, the split agent's its split heads' (a
  ``RegallocGNN`` with ``split``); illegal and padded actions get
  :data:`~mlbridge.regalloc.gnn.ILLEGAL_SCORE` (finite: a softmax gives them probability
  0 without NaNs in the entropy). A value network reads the mean node embedding (and the
  acting live range's).

After training, the modules' networks are copied into one :class:`RegallocGNN` per agent
(``priority.json``, ``coloring.json`` and, with ``split``, ``split.json``) and exported
together as one ONNX model (:func:`mlbridge.regalloc.gnn.onnx_model`, each agent's branch
running its own network), the form ``-mlbridge-regalloc-model`` runs in-process. PPO
starts from random policies, or from a ``policy.json`` (``--init-policy``).
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

from mlbridge.compiler.pipe import drive_compiler
from mlbridge.errors import MLBridgeError
from mlbridge.progress import track
from mlbridge.regalloc.gnn import ILLEGAL_SCORE, RegallocGNN, block_inputs, register_inputs
from mlbridge.regalloc.interface import (
    BLOCK_FEATURES,
    MASK,
    NODE_FEATURES,
    REGISTER_FEATURES,
    Agent,
)
from mlbridge.regalloc.policy import basic_policy
from mlbridge.regalloc.ppo_settings import (
    AGENT_IDS,
    CHECKPOINT_KIND,
    METRIC_REWARD,
    RegallocPPOSettings,
)
from mlbridge.regalloc.trainer import (
    FunctionCost,
    RegallocTrainError,
    _llc_base,
    _mlbridge,
    allocate,
    function_costs,
    optimize_module,
    sample_functions,
)
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

from ray.rllib.core.columns import Columns  # noqa: E402
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI  # noqa: E402
from ray.rllib.core.rl_module.torch import TorchRLModule  # noqa: E402
from ray.rllib.env.multi_agent_env import MultiAgentEnv  # noqa: E402

__all__ = [
    "AGENT_IDS",
    "CHECKPOINT_KIND",
    "METRIC_REWARD",
    "EpisodeSummary",
    "RLlibRegallocEnv",
    "RegallocAgentRLModule",
    "RegallocPPOResult",
    "RegallocPPOSettings",
    "action_counts",
    "build_ppo_config",
    "gnn_of_weights",
    "load_init_policy",
    "observation_spaces",
    "prepare_modules",
    "train_regalloc_ppo",
]

Obs = dict[str, np.ndarray]

#: Episodes in the reported mean return (RLlib's ``metrics_num_episodes_for_smoothing``).
_SMOOTHING = 20
#: Settings a resumed run may change: how long it runs, on how many env runners, and the
#: initial policy (the checkpoint's weights replace it).
_RESUMABLE_CHANGES = frozenset({"iterations", "workers", "init_policy"})
#: The number of columns of each agent's padded candidates (registers, blocks).
_CANDIDATE_COLUMNS = {"coloring": len(REGISTER_FEATURES), "split": len(BLOCK_FEATURES)}


# -- observations --------------------------------------------------------------------------


def observation_spaces(settings: RegallocPPOSettings) -> dict[str, gymnasium.spaces.Dict]:
    """Each agent's observation space: the padded graph of a query.

    ``node_features`` [max_nodes, 11] and ``num_nodes``; ``edges`` [max_edges, 2] and
    ``num_edges``; ``node`` (the live range being colored or split, 0 for priority);
    coloring: ``candidates`` [max_registers, 5] (``register_features``), split:
    ``candidates`` [max_blocks, 6] (``block_features``), and ``num_candidates``;
    ``action_mask`` over the agent's actions (:func:`action_counts`), 0 on padding.
    """
    from gymnasium import spaces

    n, e = settings.max_nodes, settings.max_edges
    counts = action_counts(settings)
    out = {}
    for agent in settings.agents:
        fields: dict[str, Any] = {
            "node_features": spaces.Box(-np.inf, np.inf, (n, len(NODE_FEATURES)), np.float32),
            "num_nodes": spaces.Box(0, n, (1,), np.int64),
            "edges": spaces.Box(0, n - 1, (e, 2), np.int64),
            "num_edges": spaces.Box(0, e, (1,), np.int64),
            "node": spaces.Box(0, n - 1, (1,), np.int64),
            MASK: spaces.Box(0, 1, (counts[agent],), np.int64),
        }
        if agent != "priority":
            c = counts[agent] - 1
            fields["candidates"] = spaces.Box(
                -np.inf, np.inf, (c, _CANDIDATE_COLUMNS[agent]), np.float32
            )
            fields["num_candidates"] = spaces.Box(0, c, (1,), np.int64)
        out[agent] = spaces.Dict(fields)
    return out


def action_counts(settings: RegallocPPOSettings) -> dict[str, int]:
    """Each agent's number of actions: ``max_nodes``; ``max_registers + 1``; ``max_blocks + 1``.

    The coloring and split agents' last action is spilling, whatever the query's number
    of candidates.
    """
    return {
        "priority": settings.max_nodes,
        "coloring": settings.max_registers + 1,
        "split": settings.max_blocks + 1,
    }


def _pad(
    obs: Mapping[str, Any], agent: str, settings: RegallocPPOSettings
) -> tuple[Obs, int] | None:
    """The padded observation of a query and its number of candidates, or ``None``.

    ``None`` if the query is above a bound of ``settings``.
    """
    nf = np.asarray(obs["node_features"], dtype=np.float32).reshape(-1, len(NODE_FEATURES))
    edges = np.asarray(obs["edges"], dtype=np.int64).reshape(-1, 2)
    mask = np.asarray(obs[MASK], dtype=np.int64).reshape(-1)
    n, e = nf.shape[0], edges.shape[0]
    if n > settings.max_nodes or e > settings.max_edges:
        return None
    out: Obs = {
        "node_features": np.zeros((settings.max_nodes, len(NODE_FEATURES)), np.float32),
        "num_nodes": np.array([n], np.int64),
        "edges": np.zeros((settings.max_edges, 2), np.int64),
        "num_edges": np.array([e], np.int64),
        "node": np.array([max(int(np.asarray(obs["node"]).reshape(-1)[0]), 0)], np.int64),
    }
    out["node_features"][:n] = nf
    out["edges"][:e] = edges
    width = action_counts(settings)[agent]
    padded = np.zeros(width, np.int64)
    if agent == "priority":
        padded[:n] = mask
        out[MASK] = padded
        return out, n
    name = "register_features" if agent == "coloring" else "block_features"
    columns = _CANDIDATE_COLUMNS[agent]
    cand = np.asarray(obs[name], dtype=np.float32).reshape(-1, columns)
    c = cand.shape[0]
    if c > width - 1:
        return None
    out["candidates"] = np.zeros((width - 1, columns), np.float32)
    out["candidates"][:c] = cand
    out["num_candidates"] = np.array([c], np.int64)
    padded[:c] = mask[:c]
    padded[-1] = mask[c]  # spilling
    out[MASK] = padded
    return out, c


def _llc_action(agent: str, action: int, candidates: int, width: int) -> int:
    """The allocator's action of a padded action (the last padded one is spilling)."""
    if agent != "priority" and action == width - 1:
        return candidates
    return action


# -- the environment -----------------------------------------------------------------------


@dataclass
class EpisodeSummary:
    """What an episode of :class:`RLlibRegallocEnv` did.

    Attributes:
        module: The module (its local path in the env runner).
        decisions: Each agent's decisions.
        rewarded: The functions whose cost is in the reward.
        left_out: The functions left out of it (a query above a bound, or the one where
            the agents ran out of decisions), by reason.
        cost: ``SpillReloadCost`` of :attr:`rewarded` under the agents.
        basic_cost: The basic policy's on the same functions.
        reward: The reward (see the module).
    """

    module: str
    decisions: dict[str, int] = field(default_factory=dict)
    rewarded: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    cost: float = 0.0
    basic_cost: float = 0.0
    reward: float = 0.0


class _Abandoned(Exception):
    """Raised in the llc thread's callback when the environment abandons the episode."""


class _Episode:
    """One llc run in a background thread, its queries handed over through queues."""

    def __init__(
        self,
        module: Path,
        model_functions: Sequence[str] | None,
        settings: RegallocPPOSettings,
        plugin: Path,
        folder: Path,
    ) -> None:
        self.settings = settings
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.actions: queue.Queue[int | None] = queue.Queue()
        self.abandoned = threading.Event()
        self.summary = EpisodeSummary(str(module))
        self.made = 0
        self.acted: set[str] = set()  # functions where the agents decided
        self.folder = Path(tempfile.mkdtemp(prefix="episode-", dir=folder))
        self.mir = self.folder / "out.mir"
        only = (
            [f"-mlbridge-regalloc-model-functions={','.join(sorted(model_functions))}"]
            if model_functions is not None
            else []
        )
        self.command = [
            *_llc_base(plugin),
            *_mlbridge(
                "-mlbridge-regalloc-runner=pipe", "-mlbridge-regalloc-channel={base}", *only
            ),
            *(["-mlbridge-regalloc-split"] if settings.split else []),
            *(["-verify-machineinstrs"] if settings.verify else []),
            "-stop-after=virtregrewriter", str(module), "-o", str(self.mir),
        ]  # fmt: skip
        self.model_functions = model_functions
        self.plugin = plugin
        self.thread = threading.Thread(target=self._run, name="mlbridge-regalloc-llc", daemon=True)
        self.thread.start()

    def _answer(self, obs: Any) -> np.ndarray:  # noqa: ANN401 - a pipe Observation
        if self.abandoned.is_set():
            raise _Abandoned
        name = str(obs.context)
        agent_value = int(np.asarray(obs["agent"]).reshape(-1)[0])
        agent = AGENT_IDS[agent_value] if agent_value < len(AGENT_IDS) else None
        left_out = self.summary.left_out
        reason = None
        padded = None
        if agent is None or agent not in self.settings.agents:
            reason = f"agent {agent_value} is not trained"
        elif self.made >= self.settings.max_decisions:
            reason = "the agents ran out of decisions (max_decisions)"
        else:
            padded = _pad(obs, agent, self.settings)
            if padded is None:
                reason = "a query above the observation's bounds"
        if padded is None or name in left_out:
            if name not in left_out:
                left_out[name] = reason or "left out"
            return np.asarray(basic_policy(obs), dtype=np.int64).reshape(1)
        assert agent is not None
        self.made += 1
        self.acted.add(name)
        self.summary.decisions[agent] = self.summary.decisions.get(agent, 0) + 1
        padded_obs, candidates = padded
        self.events.put(("obs", (agent, padded_obs)))
        action = self.actions.get()
        if action is None or self.abandoned.is_set():
            raise _Abandoned
        width = padded_obs[MASK].shape[0]
        if not 0 <= action < width or padded_obs[MASK][action] == 0:
            self.abandoned.set()
            raise RegallocTrainError(f"the {agent} agent chose the illegal action {action}")
        return np.array([_llc_action(agent, action, candidates, width)], dtype=np.int64)

    def _run(self) -> None:
        try:
            drive_compiler(
                self.command,
                self._answer,
                serdes="bitstream",
                timeout=self.settings.timeout,
                exit_timeout=self.settings.timeout,
                require_end=True,
                parent=self.folder,
                require_session=self.model_functions is None,
            )
            if self.abandoned.is_set():
                self.events.put(("abandoned", None))
                return
            costs = function_costs(self.mir, self.plugin, self.settings.timeout)
            self.events.put(("done", costs))
        except _Abandoned:
            self.events.put(("abandoned", None))
        except BaseException as e:  # handed to the environment's thread
            self.events.put(("error", e))

    def next_event(self) -> tuple[str, Any]:
        """The next query (``("obs", (agent, obs))``) or the end (``("done", costs)``).

        Raises:
            MLBridgeError: If llc failed or did not ask within the timeout.
        """
        try:
            kind, value = self.events.get(timeout=self.settings.timeout + 60.0)
        except queue.Empty:
            raise RegallocTrainError(
                f"llc asked nothing and did not end within {self.settings.timeout:.0f} s: "
                f"{' '.join(self.command)}"
            ) from None
        if kind == "error":
            if isinstance(value, MLBridgeError):
                raise value
            raise RegallocTrainError(f"the llc episode failed: {type(value).__name__}: {value}")
        return kind, value

    def close(self) -> None:
        """Abandons the episode if it runs: llc is killed, the thread ends, files go."""
        if self.thread.is_alive():
            self.abandoned.set()
            self.actions.put(None)
            self.thread.join(self.settings.timeout + 60.0)
        shutil.rmtree(self.folder, ignore_errors=True)


def _reward(
    costs: Mapping[str, FunctionCost],
    basic: Mapping[str, FunctionCost],
    summary: EpisodeSummary,
    acted: set[str],
) -> float:
    rewarded = sorted(f for f in acted if f not in summary.left_out and f in costs and f in basic)
    cost = sum(costs[f].spill_reload_cost for f in rewarded)
    base = sum(basic[f].spill_reload_cost for f in rewarded)
    summary.rewarded, summary.cost, summary.basic_cost = rewarded, cost, base
    top = max(cost, base)
    summary.reward = 100.0 * (base - cost) / top if top > 0 else 0.0
    return summary.reward


class RLlibRegallocEnv(MultiAgentEnv):
    """The register allocator's agents on llc, one episode a module (see the module).

    Args:
        config: RLlib's ``env_config``: ``modules`` (a list of
            :class:`~mlbridge.training.pool.SharedFile`, optimised bitcode), ``basic``
            (per module, each function's :class:`FunctionCost` under the basic policy, as
            dicts), ``plugin`` (the llc plugin) and ``settings``
            (:class:`RegallocPPOSettings` as a dict).

    Each :meth:`reset` draws a module; one with no query for the agents is skipped.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        config = dict(config or {})
        self.settings = RegallocPPOSettings(**config["settings"])
        self.plugin = Path(config["plugin"])
        self._folder = Path(tempfile.mkdtemp(prefix="mlbridge-regalloc-rllib-"))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._folder, True)
        self.modules = local_copies(config["modules"], self._folder / "modules")
        self.basic = [{f: FunctionCost(**c) for f, c in costs.items()} for costs in config["basic"]]
        if len(self.basic) != len(self.modules):
            raise ValueError(f"{len(self.modules)} modules but {len(self.basic)} basic costs")
        if not self.modules:
            raise RegallocTrainError("no module to train on")
        self.possible_agents = list(self.settings.agents)
        self.agents = list(self.possible_agents)
        self.observation_spaces = observation_spaces(self.settings)
        self.action_spaces = {
            a: gymnasium.spaces.Discrete(n)
            for a, n in action_counts(self.settings).items()
            if a in self.possible_agents
        }
        self._rng = np.random.default_rng(self.settings.seed)
        self._episode: _Episode | None = None
        self._index = 0
        self._pending: str | None = None
        self.last_summary: EpisodeSummary | None = None

    def _start(self, index: int) -> _Episode:
        module = self.modules[index]
        functions = self.basic[index]
        sample = sample_functions(
            functions, self.settings.sample_functions, int(self._rng.integers(2**31))
        )
        return _Episode(module, sample, self.settings, self.plugin, self._folder)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Obs], dict[str, Any]]:
        """Abandons a running episode and starts one on a drawn module.

        ``options``: ``module`` (an index into the modules) starts on that one.

        Raises:
            RegallocTrainError: If no module has a query for the agents, or llc fails.
        """
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._close_episode()
        first = (options or {}).get("module")
        for attempt in range(2 * len(self.modules)):
            index = (
                int(first)
                if first is not None and attempt == 0
                else int(self._rng.integers(len(self.modules)))
            )
            self._index = index
            self._episode = self._start(index)
            try:
                kind, value = self._episode.next_event()
            except BaseException:
                self._close_episode()
                raise
            if kind == "obs":
                agent, obs = value
                self._pending = agent
                return {agent: obs}, {}
            self._close_episode()  # no query for the agents: another module
        raise RegallocTrainError(
            f"no episode of {2 * len(self.modules)} on the {len(self.modules)} training "
            "modules gave the agents a decision (nothing to allocate, or every query above "
            "the observation's bounds)"
        )

    def step(
        self, action_dict: dict[str, Any]
    ) -> tuple[dict[str, Obs], dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]]:
        """The acting agent's action; the next agent's observation, or the end and reward.

        Raises:
            RegallocTrainError: If the action is not the acting agent's, or llc fails.
        """
        episode, agent = self._episode, self._pending
        if episode is None or agent is None:
            raise RegallocTrainError("step() without a running episode: call reset() first")
        if set(action_dict) != {agent}:
            raise RegallocTrainError(
                f"the {agent} agent acts now, got actions of {sorted(action_dict)}"
            )
        self._pending = None
        episode.actions.put(int(np.asarray(action_dict[agent]).reshape(-1)[0]))
        try:
            kind, value = episode.next_event()
        except BaseException:
            self._close_episode()
            raise
        if kind == "obs":
            acted, (agent, obs) = agent, value
            self._pending = agent
            # The agent that acted gets its (zero) step reward: RLlib wants one when the
            # same agent observes next (the allocator takes forced actions itself, so the
            # priority agent may follow itself).
            return {agent: obs}, {acted: 0.0}, {"__all__": False}, {"__all__": False}, {}
        reward = _reward(value, self.basic[self._index], episode.summary, episode.acted)
        self.last_summary = episode.summary
        acted = [a for a in self.possible_agents if episode.summary.decisions.get(a)]
        self._close_episode()
        return (
            {},
            dict.fromkeys(acted, reward),
            {"__all__": True, **dict.fromkeys(acted, True)},
            {"__all__": False},
            {},
        )

    def _close_episode(self) -> None:
        if self._episode is not None:
            episode, self._episode = self._episode, None
            self._pending = None
            episode.close()

    def close(self) -> None:
        """Abandons a running episode (llc is killed) and removes the folder (idempotent)."""
        try:
            self._close_episode()
        finally:
            self._finalizer()


# -- the RLModules -------------------------------------------------------------------------


class RegallocAgentRLModule(TorchRLModule, ValueFunctionAPI):
    """One agent's RLModule: a :class:`RegallocGNN` over the padded graph, and a value network.

    ``model_config``: ``agent`` (``priority``, ``coloring`` or ``split``), ``hidden`` and
    ``rounds`` (the graph network's). The observation space is the agent's of
    :func:`observation_spaces`. The logits are ``gnn``'s priority head's (one per padded
    node) or coloring head's (one per padded register, then spilling); the split agent's
    are its split heads' (one per padded block, then spilling), as ``RegallocGNN`` with
    ``split`` scores a split query, so that the network exports as it is. Padded and
    illegal actions score
    :data:`~mlbridge.regalloc.gnn.ILLEGAL_SCORE`.
    """

    def setup(self) -> None:
        """Builds the graph network (``gnn``; the split agent's has split heads) and ``vf``."""
        self.agent = str(self.model_config.get("agent", "priority"))
        if self.agent not in AGENT_IDS:
            raise ValueError(f"unknown agent {self.agent!r} (one of {', '.join(AGENT_IDS)})")
        hidden = int(self.model_config.get("hidden", 32))
        self.gnn = RegallocGNN(
            hidden, int(self.model_config.get("rounds", 2)), split=self.agent == "split"
        )
        width = hidden + len(NODE_FEATURES) + 1  # RegallocGNN.embed's [h, x]
        self.vf = torch.nn.Sequential(
            torch.nn.Linear(2 * width, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1)
        )

    def _embed(self, obs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Every padded node's ``[h, x]`` [B, N, D] and the acting node's [B, D]."""
        nf = obs["node_features"].to(torch.float32)
        b, n = nf.shape[0], nf.shape[1]
        edges = obs["edges"].to(torch.int64)
        valid = torch.arange(edges.shape[1]) < obs["num_edges"].reshape(b, 1)
        offset = (torch.arange(b) * n).reshape(b, 1, 1)
        flat = (edges + offset)[valid]
        z = self.gnn.embed(nf.reshape(b * n, -1), flat).reshape(b, n, -1)
        node = obs["node"].to(torch.int64).reshape(b).clamp(0, n - 1)
        zv = z[torch.arange(b), node]
        return z, zv

    def _logits(self, obs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        z, zv = self._embed(obs)
        b, n, d = z.shape
        if self.agent == "priority":
            scores = self.gnn.priority_scores(z.reshape(b * n, d)).reshape(b, n)
        else:
            cand = obs["candidates"].to(torch.float32)
            c = cand.shape[1]
            rows = zv.repeat_interleave(c, dim=0)
            flat = cand.reshape(b * c, -1)
            if self.agent == "coloring":
                chosen = self.gnn.register_scores(rows, register_inputs(flat))
                spill = self.gnn.spill_head(zv)
            else:
                chosen = self.gnn.block_scores(rows, block_inputs(flat))
                spill = self.gnn.split_spill_head(zv)
            scores = torch.cat([chosen.reshape(b, c), spill], dim=1)
        mask = obs[MASK]
        logits = torch.where(mask > 0, scores, torch.full_like(scores, ILLEGAL_SCORE))
        return logits, self._value_inputs(obs, z, zv)

    @staticmethod
    def _value_inputs(
        obs: Mapping[str, torch.Tensor], z: torch.Tensor, zv: torch.Tensor
    ) -> torch.Tensor:
        b, n, _ = z.shape
        count = obs["num_nodes"].to(torch.float32).reshape(b, 1)
        live = (torch.arange(n).reshape(1, n) < count).to(torch.float32).unsqueeze(2)
        mean = (z * live).sum(1) / count.clamp(min=1.0)
        return torch.cat([mean, zv], dim=1)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        logits, _ = self._logits(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        logits, inputs = self._logits(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: inputs}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:  # noqa: ANN401
        """The value estimate of each observation, ``[B]``."""
        if embeddings is None:
            obs = batch[Columns.OBS]
            z, zv = self._embed(obs)
            embeddings = self._value_inputs(obs, z, zv)
        return self.vf(embeddings).squeeze(-1)


def gnn_of_weights(weights: Mapping[str, Any], metadata: dict[str, Any]) -> RegallocGNN:
    """The :class:`RegallocGNN` of a :class:`RegallocAgentRLModule`'s state dict (``gnn.*``).

    Raises:
        RegallocTrainError: If the state dict has no graph network.
    """
    net = {k[len("gnn.") :]: v for k, v in weights.items() if k.startswith("gnn.")}
    if "encoder.0.weight" not in net:
        raise RegallocTrainError(f"the RLModule's weights have no graph network: {sorted(weights)}")
    hidden = int(np.asarray(net["encoder.0.weight"]).shape[0])
    rounds = sum(1 for k in net if k.startswith("self_layers.") and k.endswith(".weight"))
    gnn = RegallocGNN(hidden, rounds, metadata, split="block_head.0.weight" in net)
    gnn.load_state_dict(
        {k: torch.as_tensor(np.asarray(v), dtype=torch.float32) for k, v in net.items()}
    )
    gnn.eval()
    return gnn


def _map_agent(agent_id: str, episode: Any = None, **kwargs: Any) -> str:  # noqa: ANN401
    """Each agent is trained by its own policy, of the same id."""
    return agent_id


def build_ppo_config(settings: RegallocPPOSettings, env_config: dict[str, Any]) -> Any:  # noqa: ANN401 - a PPOConfig
    """RLlib's multi-agent ``PPOConfig``: one :class:`RegallocAgentRLModule` per agent.

    ``settings.workers`` env runners of one CPU and one :class:`RLlibRegallocEnv` each;
    the learner in this process (no learner actors).
    """
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    agents = settings.agents
    specs = {
        a: RLModuleSpec(
            module_class=RegallocAgentRLModule,
            model_config={"agent": a, "hidden": settings.hidden, "rounds": settings.rounds},
        )
        for a in agents
    }
    return (
        PPOConfig()
        .environment(RLlibRegallocEnv, env_config=env_config, disable_env_checking=True)
        .framework("torch")
        .env_runners(
            num_env_runners=settings.workers,
            num_envs_per_env_runner=1,
            num_cpus_per_env_runner=1,
            rollout_fragment_length="auto",
            sample_timeout_s=max(60.0, settings.timeout),
        )
        .learners(num_learners=0)
        .multi_agent(policies=set(agents), policy_mapping_fn=_map_agent)
        .training(
            lr=settings.learning_rate,
            entropy_coeff=settings.entropy,
            clip_param=settings.clip,
            gamma=settings.gamma,
            lambda_=settings.lambda_,
            train_batch_size_per_learner=settings.steps_per_iteration,
            minibatch_size=settings.minibatch_size,
            num_epochs=settings.epochs,
            # Returns are percentages: within [-100, 100].
            vf_clip_param=200.0,
        )
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
        .reporting(metrics_num_episodes_for_smoothing=_SMOOTHING)
        .debugging(seed=settings.seed, log_level="ERROR")
    )


# -- training ------------------------------------------------------------------------------


def prepare_modules(
    sources: Sequence[Path],
    plugin: Path,
    folder: Path,
    *,
    timeout: float = 300.0,
    log: Callable[[str], None] | None = None,
) -> tuple[list[Path], list[dict[str, FunctionCost]]]:
    """``opt-22 -O2`` of every module into ``folder`` and its functions' basic-policy costs.

    Raises:
        RegallocTrainError: If a tool fails.
    """
    optimized, basic = [], []
    items: Any = list(enumerate(sources))
    if log is not None:
        items = track(items, description="mlbridge train regalloc: preparation", unit="module")
    for i, source in items:
        out = optimize_module(Path(source), folder / f"{i:04d}-{Path(source).stem}.bc", timeout)
        costs, _ = allocate(out, plugin, _mlbridge(), folder, timeout=timeout)
        optimized.append(out)
        basic.append(costs)
    return optimized, basic


def _greedy_rollouts(
    priority: RegallocGNN,
    coloring: RegallocGNN,
    split: RegallocGNN | None,
    modules: Sequence[Path],
    basic: Sequence[Mapping[str, FunctionCost]],
    settings: RegallocPPOSettings,
    plugin: Path,
    folder: Path,
) -> tuple[list[dict[str, Any]], float, float]:
    """The deterministic agents over the pipe on ``modules``, in this process.

    Returns the observations (the export check's samples), the total ``SpillReloadCost``
    and the basic policy's on the same functions.
    """
    from mlbridge.regalloc.trainer import rollout

    def choose(obs: Mapping[str, Any]) -> int:
        agent = int(np.asarray(obs["agent"]).reshape(-1)[0])
        if agent == Agent.PRIORITY:
            return priority.act(obs)
        if agent == Agent.COLORING:
            return coloring.act(obs)
        if split is not None:
            return split.act(obs)
        return int(np.asarray(obs[MASK]).reshape(-1).shape[0]) - 1  # spilling, as the export

    samples: list[dict[str, Any]] = []
    cost = base = 0.0
    for module, costs in zip(modules, basic, strict=True):
        done = rollout(
            module,
            choose,
            plugin,
            folder,
            keep_per_function=16,
            rng=np.random.default_rng(0),
            max_decisions=settings.max_decisions,
            timeout=settings.timeout,
            split=split is not None,
        )
        for observations in done.observations.values():
            samples.extend(observations)
        cost += sum(c.spill_reload_cost for c in done.costs.values())
        base += sum(c.spill_reload_cost for c in costs.values())
    return samples, cost, base


@dataclass
class RegallocPPOResult:
    """What :func:`train_regalloc_ppo` trained.

    Attributes:
        priority: The priority agent's network (eval mode).
        coloring: The coloring agent's.
        split: The split agent's (a ``RegallocGNN`` with ``split``), if it acted.
        history: Per iteration RLlib's numbers, the env runners' nodes, the greedy check.
        samples: Observations of the final greedy episodes (the ONNX export's check).
    """

    priority: RegallocGNN
    coloring: RegallocGNN
    split: RegallocGNN | None
    history: dict[str, Any]
    samples: list[dict[str, Any]]


def train_regalloc_ppo(
    sources: Sequence[Path],
    settings: RegallocPPOSettings | None = None,
    *,
    plugin: str | Path,
    log: Callable[[str], None] | None = None,
    metrics: TrainingMetrics | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 1,
    resume: bool = False,
    check_modules: int = 4,
) -> RegallocPPOResult:
    """Trains one policy per register-allocation agent with RLlib's multi-agent PPO.

    Runs on the Ray session of this process (:func:`mlbridge.training.ray_pool.ray_session`;
    a local instance is started for the call when there is none).

    Args:
        sources: Training modules (bitcode, before ``opt-22 -O2``).
        settings: Settings (default :class:`RegallocPPOSettings`).
        plugin: The llc plugin; on a Ray cluster every node needs it at this path.
        log: Gets one progress line per iteration.
        metrics: Gets the scalars of every iteration (step 1 is the first).
        checkpoint_dir: Where RLlib's checkpoints go (``None``: none), every
            ``checkpoint_every`` iterations and after the last.
        checkpoint_every: See ``checkpoint_dir``.
        resume: Continue from the latest checkpoint in ``checkpoint_dir`` (same settings
            but ``iterations`` and ``workers``).
        check_modules: Training modules on which the final deterministic agents allocate
            once in this process (their observations check the ONNX export).

    Raises:
        MLBridgeError: If RLlib is missing, a compilation fails, or a checkpoint cannot
            be resumed.
        ValueError: If the settings are inconsistent.
    """
    import ray

    from mlbridge.training.ray_pool import ray_session

    settings = settings or RegallocPPOSettings()
    settings.check()
    if not sources:
        raise RegallocTrainError("no module to train on")
    if resume and checkpoint_dir is None:
        raise ValueError("resume needs the checkpoint folder (checkpoint_dir)")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
    plugin_path = Path(plugin)
    load_init_policy(settings)  # a wrong file is said before Ray starts
    say = log or (lambda _: None)
    checkpoints = RLlibCheckpoints(checkpoint_dir, CHECKPOINT_KIND) if checkpoint_dir else None
    if checkpoints is not None:
        checkpoints.prepare(resume=resume, say=say)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="mlbridge-regalloc-ppo-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        modules, basic = prepare_modules(
            sources, plugin_path, work, timeout=settings.timeout, log=log
        )
        say(
            f"prepared {len(modules)} training modules (opt-22 -O2, the basic policy's "
            f"SpillReloadCost {sum(c.spill_reload_cost for b in basic for c in b.values()):.0f})"
            f" in {time.perf_counter() - t0:.0f} s"
        )
        with ray_session(None, num_cpus=max(os.cpu_count() or 1, settings.workers)):
            if not ray.is_initialized():  # pragma: no cover - ray_session initialises it
                raise MLBridgeError("Ray did not start")
            env_config = {
                "modules": ship_files(modules),
                "basic": [{f: asdict(c) for f, c in b.items()} for b in basic],
                "plugin": str(plugin_path),
                "settings": asdict(settings),
            }
            for name in ("ray.rllib", "ray.tune", "ray._common.deprecation"):
                logging.getLogger(name).setLevel(logging.ERROR)
            # The environment once here first: a missing tool or plugin is said plainly.
            RLlibRegallocEnv(env_config).close()
            say(
                f"building RLlib's multi-agent PPO: policies {', '.join(settings.agents)}, "
                f"{settings.workers} env runners"
            )
            try:
                algo = build_ppo_config(settings, env_config).build_algo()
            except Exception as e:  # RLlib wraps the env runners' errors in its own
                raise RegallocTrainError(
                    f"RLlib could not start its env runners ({type(e).__name__}: {e}): an "
                    "env runner's environment failed; Ray's worker logs (/tmp/ray/"
                    "session_latest/logs on each node) say why. On a cluster every node "
                    f"needs LLVM 22's opt and llc and the plugin at {plugin_path}"
                ) from e
            try:
                if settings.init_policy is not None and not resume:
                    _start_from(algo, settings, say)
                history = _train(algo, settings, say, log, metrics, checkpoints,
                                 checkpoint_every, resume)  # fmt: skip
                weights = algo.learner_group.get_weights(list(settings.agents))
            finally:
                algo.stop()
        meta = {
            "trainer": "mlbridge train regalloc --algorithm rllib-ppo (RLlib's multi-agent "
            "PPO, no warm start)",
            "config": asdict(settings),
            "training_modules": len(sources),
        }
        priority = gnn_of_weights(weights["priority"], {**meta, "agent": "priority"})
        coloring = gnn_of_weights(weights["coloring"], {**meta, "agent": "coloring"})
        split = (
            gnn_of_weights(weights["split"], {**meta, "agent": "split"}) if settings.split else None
        )
        picked: list[int] = []
        if check_modules > 0:
            picked = list(
                dict.fromkeys(int(i) for i in np.linspace(0, len(modules) - 1, check_modules))
            )
        samples: list[dict[str, Any]] = []
        if picked:
            samples, cost, base = _greedy_rollouts(
                priority, coloring, split, [modules[i] for i in picked], [basic[i] for i in picked],
                settings, plugin_path, work,
            )  # fmt: skip
            top = max(cost, base)
            change = 100.0 * (base - cost) / top if top > 0 else 0.0
            history["greedy_check"] = {
                "modules": len(picked),
                "spill_reload_cost": cost,
                "basic_spill_reload_cost": base,
                "cost_change_vs_basic_pct": change,
            }
            say(
                f"the final deterministic agents on {len(picked)} training modules: "
                f"SpillReloadCost {cost:.0f} against the basic policy's {base:.0f}"
            )
    return RegallocPPOResult(priority, coloring, split, history, samples)


def load_init_policy(settings: RegallocPPOSettings) -> RegallocGNN | None:
    """The policy of ``settings.init_policy``, checked against the settings' network.

    Raises:
        MLBridgeError: If it cannot be read, or its ``hidden`` or ``rounds`` differ.
    """
    if settings.init_policy is None:
        return None
    policy = RegallocGNN.load(settings.init_policy)
    if (policy.hidden, policy.rounds) != (settings.hidden, settings.rounds):
        raise RegallocTrainError(
            f"{settings.init_policy} has hidden {policy.hidden} and {policy.rounds} rounds; "
            f"the agents have hidden {settings.hidden} and {settings.rounds} rounds (give "
            f"--hidden {policy.hidden})"
        )
    return policy


def _start_from(algo: Any, settings: RegallocPPOSettings, say: Callable[[str], None]) -> None:  # noqa: ANN401
    """Gives every agent's graph network the weights of ``settings.init_policy``."""
    policy = load_init_policy(settings)
    assert policy is not None
    agents = list(settings.agents)
    weights = algo.learner_group.get_weights(agents)
    start = {f"gnn.{k}": v.detach().cpu().numpy() for k, v in policy.state_dict().items()}
    for agent in agents:
        # Each module takes the weights it has: the split agent's also the split heads of
        # a policy.json trained with --split (else they start from random).
        mine = weights[agent]
        weights[agent] = {**mine, **{k: v for k, v in start.items() if k in mine}}
    algo.learner_group.set_weights(weights)
    algo.env_runner_group.sync_weights(
        from_worker_or_learner_group=algo.learner_group, inference_only=True
    )
    heads = "" if not settings.split else (
        ", the split agent's split heads too" if policy.split
        else "; the split agent's split heads from random: it has none"
    )  # fmt: skip
    say(
        f"every agent's graph network starts from {settings.init_policy}{heads} (the value "
        "networks from random)"
    )


def _train(
    algo: Any,  # noqa: ANN401
    settings: RegallocPPOSettings,
    say: Callable[[str], None],
    log: Callable[[str], None] | None,
    metrics: TrainingMetrics | None,
    checkpoints: RLlibCheckpoints | None,
    checkpoint_every: int,
    resume: bool,
) -> dict[str, Any]:
    from mlbridge.regalloc.trainer import METRIC_ROLLOUTS, METRIC_WALL

    nodes = env_runner_nodes(algo)
    say(
        f"{len(nodes)} env runners on {len({n.node_id for n in nodes})} node(s): "
        + "; ".join(sorted({n.describe() for n in nodes}))
    )
    result: dict[str, Any] = {
        "algorithm": "rllib-ppo",
        "agents": list(settings.agents),
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
            raise RegallocTrainError(
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
            iterations, description="mlbridge train regalloc: RLlib PPO", unit="iteration"
        )
    for it in iterations:
        t0 = time.perf_counter()
        try:
            raw = algo.train()
        except Exception as e:  # an env runner's llc episode failed: RLlib wraps it
            raise RegallocTrainError(
                f"RLlib's iteration {it + 1} failed: {type(e).__name__}: {str(e)[-3000:]}"
            ) from e
        wall = elapsed + time.perf_counter() - segment
        # The episode's return is the sum over its agents: the reward is the priority
        # agent's return (every agent that acted got the same).
        runners = raw.get("env_runners", {})
        record: dict[str, Any] = {"iteration": it + 1, "seconds": time.perf_counter() - t0}
        for key, label in (
            ("agent_episode_returns_mean", "return_mean"),
            ("episode_len_mean", "length_mean"),
            ("num_episodes", "episodes"),
            ("num_episodes_lifetime", "episodes_lifetime"),
            ("num_env_steps_sampled_lifetime", "env_steps_lifetime"),
        ):
            value = runners.get(key)
            if isinstance(value, Mapping):
                value = value.get("priority")
            if value is not None:
                record[label] = float(value)
        for agent in settings.agents:
            numbers = iteration_scalars(raw, agent)
            for name in ("entropy", "policy_loss", "vf_loss", "mean_kl"):
                if name in numbers:
                    record[f"{agent}/{name}"] = numbers[name]
        result["iterations"].append(record)
        scalars = {METRIC_WALL: wall}
        if "return_mean" in record:
            scalars[METRIC_REWARD] = record["return_mean"]
        if "episodes_lifetime" in record:
            scalars[METRIC_ROLLOUTS] = record["episodes_lifetime"]
        for agent in settings.agents:
            for name in ("entropy", "policy_loss", "vf_loss"):
                if f"{agent}/{name}" in record:
                    scalars[f"{agent}/{name}"] = record[f"{agent}/{name}"]
        history.append({"step": float(it + 1), **scalars})
        if metrics is not None:
            metrics.record(it + 1, scalars)
        mean = record.get("return_mean")
        entropies = ", ".join(
            f"{a} {record[f'{a}/entropy']:.2f}" for a in settings.agents if f"{a}/entropy" in record
        )
        say(
            f"iteration {it + 1}/{settings.iterations}: reward "
            + (
                f"{mean:+.1f} (RLlib's mean over recent episodes, up to {_SMOOTHING}: the "
                "basic policy's SpillReloadCost minus the agents', % of the larger)"
                if mean is not None
                else "(no episode ended yet)"
            )
            + f", {int(record.get('episodes', 0))} episodes ended, "
            f"{record.get('length_mean', 0.0):.0f} decisions each, entropy {entropies or 'n/a'}, "
            f"{record['seconds']:.1f} s (total {wall:.0f} s)"
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
    result["wall_seconds"] = elapsed + time.perf_counter() - segment
    result["history"] = history
    return result
