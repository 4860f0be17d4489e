"""The settings of multi-agent PPO for register allocation (:mod:`mlbridge.regalloc.rllib_ppo`).

Apart from that module so that the command line can show their defaults without
importing RLlib.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AGENT_IDS",
    "CHECKPOINT_KIND",
    "METRIC_REWARD",
    "RegallocPPOSettings",
]

#: The ``kind`` of the checkpoints of :func:`mlbridge.regalloc.rllib_ppo.train_regalloc_ppo`
#: and their format: 2 since the split agent's RLModule holds a ``RegallocGNN`` with split
#: heads (format 1's split network does not load into it).
CHECKPOINT_KIND = "mlbridge-regalloc-rllib-ppo-2"

#: The metric tag of the episodes' mean reward per iteration: the basic policy's
#: ``SpillReloadCost`` minus the agents', in percent of the larger.
METRIC_REWARD = "reward/mean_cost_change_vs_basic_pct"

#: The agents' ids (and their policies' module ids), in the order of ``Agent``'s values.
AGENT_IDS: tuple[str, ...] = ("priority", "coloring", "split")


@dataclass
class RegallocPPOSettings:
    """Settings of :func:`~mlbridge.regalloc.rllib_ppo.train_regalloc_ppo`.

    Attributes:
        iterations: PPO iterations (``Algorithm.train()`` calls).
        steps_per_iteration: Decisions sampled per iteration (RLlib's
            ``train_batch_size_per_learner``, counted over every agent and env runner).
        minibatch_size: Decisions per SGD minibatch.
        epochs: Passes over each iteration's batch (RLlib's ``num_epochs``).
        learning_rate: Adam's step size.
        entropy: Weight of the entropy bonus.
        clip: PPO's clip parameter.
        gamma: Discount (1: every decision of an episode gets its whole reward).
        lambda_: GAE's lambda.
        hidden: The graph networks' embedding width.
        rounds: Their rounds of message passing.
        split: Run llc with ``-mlbridge-regalloc-split``: a third agent, ``split``.
        max_nodes: The padded observation's live ranges (the priority agent's actions).
        max_edges: Its interference edges.
        max_registers: Its candidate registers (the coloring agent's actions are these and
            spilling).
        max_blocks: Its candidate blocks (the split agent's actions are these and spilling).
        max_decisions: The most decisions the agents make per episode; the basic policy
            makes the later ones and the function where they ran out is left out of the
            reward.
        sample_functions: In a module with more functions than this, an episode lets the
            agents allocate this many, drawn by the environment, and llc's built-in basic
            policy the others (``None``: every function). The default, 1, makes an
            episode one function, whose reward is then its own: with 16, each function's
            decisions shared a reward with the others' (docs/ml-regalloc.md measures both).
        verify: Run llc with ``-verify-machineinstrs`` (llc fails on a wrong allocation).
        init_policy: A :class:`~mlbridge.regalloc.gnn.RegallocGNN` file (``policy.json``
            of the REINFORCE trainer, e.g. its cloned basic policy) whose weights every
            agent's graph network starts from (same ``hidden`` and ``rounds``); ``None``:
            random initial networks.
        seed: Seeds RLlib (the RLModules' initialisation, the env runners' environments).
        workers: Env runners (Ray actors of one CPU, one environment each).
        timeout: Bound of every wait on the compiler, seconds.
    """

    iterations: int = 20
    steps_per_iteration: int = 1024
    minibatch_size: int = 128
    epochs: int = 4
    learning_rate: float = 0.0005
    entropy: float = 0.0
    clip: float = 0.2
    gamma: float = 1.0
    lambda_: float = 0.95
    hidden: int = 32
    rounds: int = 2
    split: bool = False
    max_nodes: int = 256
    max_edges: int = 4096
    max_registers: int = 32
    max_blocks: int = 64
    max_decisions: int = 3000
    sample_functions: int | None = 1
    verify: bool = False
    init_policy: str | None = None
    seed: int = 0
    workers: int = 2
    timeout: float = 300.0

    @property
    def agents(self) -> tuple[str, ...]:
        """The agents that act: priority and coloring, and split with :attr:`split`."""
        return AGENT_IDS if self.split else AGENT_IDS[:2]

    def check(self) -> None:
        """Refuses settings RLlib or the environment would fail on later.

        Raises:
            ValueError: Naming the setting.
        """
        for name in (
            "iterations", "steps_per_iteration", "minibatch_size", "epochs", "hidden",
            "max_nodes", "max_edges", "max_registers", "max_blocks", "max_decisions",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.rounds < 0:
            raise ValueError(f"rounds must be >= 0, got {self.rounds}")
        if self.sample_functions is not None and self.sample_functions < 1:
            raise ValueError(f"sample_functions must be at least 1, got {self.sample_functions}")
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1 (env runners), got {self.workers}")
        if self.minibatch_size > self.steps_per_iteration:
            raise ValueError(
                f"minibatch_size ({self.minibatch_size}) must not exceed steps_per_iteration "
                f"({self.steps_per_iteration})"
            )
