"""The ML register allocator of ``llc-22`` (``-regalloc=mlbridge``): its model side.

* :mod:`mlbridge.regalloc.interface`: the features and advice the allocator's agents see
  and answer (priority, coloring and split agents over the interference graph);
* :mod:`mlbridge.regalloc.policy`: policies that need no training (the built-in basic
  policy, decision for decision, and a seeded random one), for any model side;
* :mod:`mlbridge.regalloc.programs`: corpus programs built with an allocator, run and
  compared (the correctness check);
* :mod:`mlbridge.regalloc.gnn`: the trainable agents, a graph policy in PyTorch with its
  JSON form and its ONNX export (needs PyTorch; not imported here);
* :mod:`mlbridge.regalloc.trainer` and :mod:`mlbridge.regalloc.cli`: ``mlbridge train
  regalloc`` (behaviour cloning of the basic policy, REINFORCE on the spill/reload cost,
  the held-out evaluation);
* :mod:`mlbridge.regalloc.rllib_ppo` (and :mod:`mlbridge.regalloc.ppo_settings`):
  ``--algorithm rllib-ppo``, one policy per agent by RLlib's multi-agent PPO on a
  ``MultiAgentEnv`` over the llc episode (needs the ``rllib`` extra; not imported here).

See docs/ml-regalloc.md.
"""

from __future__ import annotations

from mlbridge.regalloc.interface import (
    ADVICE,
    BLOCK_FEATURES,
    MASK,
    NODE_FEATURES,
    REGISTER_FEATURES,
    UNSPILLABLE_WEIGHT,
    Agent,
    advice_spec,
    feature_specs,
)
from mlbridge.regalloc.policy import (
    RandomPolicy,
    basic_policy,
    legal_actions,
    split_gains,
    split_policy,
)

__all__ = [
    "ADVICE",
    "BLOCK_FEATURES",
    "MASK",
    "NODE_FEATURES",
    "REGISTER_FEATURES",
    "UNSPILLABLE_WEIGHT",
    "Agent",
    "RandomPolicy",
    "advice_spec",
    "basic_policy",
    "feature_specs",
    "legal_actions",
    "split_gains",
    "split_policy",
]
