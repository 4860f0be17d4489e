"""The settings of phase ordering with RLlib's PPO (:mod:`mlbridge.phase_order.rllib_ppo`).

Apart from that module so that the command line can show their defaults without
importing RLlib.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHECKPOINT_KIND", "PPOSettings"]

#: The ``kind`` of the checkpoints of :func:`mlbridge.phase_order.rllib_ppo.train_phase_order_ppo`.
CHECKPOINT_KIND = "mlbridge-phase-order-rllib-ppo-1"


@dataclass
class PPOSettings:
    """Settings of :func:`train_phase_order_ppo`.

    Attributes:
        iterations: PPO iterations (``Algorithm.train()`` calls).
        steps_per_iteration: Decisions sampled per iteration (RLlib's
            ``train_batch_size_per_learner``), over every env runner.
        minibatch_size: Decisions per SGD minibatch.
        epochs: Passes over each iteration's batch (RLlib's ``num_epochs``).
        learning_rate: Adam's step size.
        entropy: Weight of the entropy bonus.
        clip: PPO's clip parameter.
        gamma: Discount (1: the return is the module's whole size reduction).
        lambda_: GAE's lambda.
        max_steps: The pass's step limit per episode.
        hidden: The policy's (and value network's) hidden width.
        seed: Seeds RLlib (the RLModule's initialisation, the env runners' environments).
        workers: Env runners (Ray actors of one CPU, one environment each).
        observation: The pass's observation (``counts`` or ``ir2vec``).
        ir2vec_vocab: The vocabulary for ``ir2vec``.
        actions: A file of sub-sequences; default the pass's built-in set.
        timeout: Bound of every wait on the compiler, seconds.
        init_policy: A :class:`~mlbridge.phase_order.policy.PhasePolicy` file
            (``policy.json`` of either trainer, e.g. one warm-started by behaviour cloning)
            whose weights the policy network starts from; the value network starts from
            random. ``None``: both from random.
    """

    iterations: int = 120
    steps_per_iteration: int = 256
    minibatch_size: int = 64
    epochs: int = 8
    learning_rate: float = 0.003
    entropy: float = 0.01
    clip: float = 0.2
    gamma: float = 1.0
    lambda_: float = 0.95
    max_steps: int = 15
    hidden: int = 64
    seed: int = 0
    workers: int = 2
    observation: str = "counts"
    ir2vec_vocab: str | None = None
    actions: str | None = None
    timeout: float = 300.0
    init_policy: str | None = None

    def check(self) -> None:
        """Refuses settings RLlib would fail on later.

        Raises:
            ValueError: Naming the setting.
        """
        for name in ("iterations", "steps_per_iteration", "minibatch_size", "epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1 (env runners), got {self.workers}")
        if self.minibatch_size > self.steps_per_iteration:
            raise ValueError(
                f"minibatch_size ({self.minibatch_size}) must not exceed steps_per_iteration "
                f"({self.steps_per_iteration})"
            )
