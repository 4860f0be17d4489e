"""Policies of the ML register allocator that need no training, for any model side.

Both take an observation (a mapping of feature name to numpy array, as
:class:`mlbridge.compiler.pipe.Observation` and the gRPC interfaces give it) and return the
advice ``regalloc_action`` as an int64 array of one element:

* :func:`basic_policy`: the allocator's built-in policy (``-mlbridge-regalloc-policy=basic``)
  decision for decision, in Python: the heaviest queued live range first; the first free
  register, else the one evicting the least spill weight, else spill; never split;
* :class:`RandomPolicy`: a uniformly random legal action, seeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mlbridge.regalloc.interface import MASK, NODE_FEATURES, REGISTER_FEATURES, Agent

__all__ = ["RandomPolicy", "basic_policy", "legal_actions"]

_WEIGHT = NODE_FEATURES.index("weight")
_FREE = REGISTER_FEATURES.index("free")
_EVICT_COST = REGISTER_FEATURES.index("evict_cost")

Array = np.ndarray[Any, np.dtype[Any]]


def legal_actions(obs: Mapping[str, Array]) -> Array:
    """The indices of the nonzero ``action_mask`` elements.

    Raises:
        ValueError: If no action is legal (the allocator never asks then).
    """
    legal = np.flatnonzero(np.asarray(obs[MASK]).reshape(-1))
    if legal.size == 0:
        raise ValueError("no legal action: action_mask is all zero")
    return legal


def _action(index: int) -> Array:
    return np.array([index], dtype=np.int64)


def basic_policy(obs: Mapping[str, Array]) -> Array:
    """The built-in policy's decision (C++ ``builtinRegAllocPolicy``), in Python."""
    mask = np.asarray(obs[MASK]).reshape(-1) != 0
    legal_actions(obs)
    agent = int(np.asarray(obs["agent"]).reshape(-1)[0])
    if agent == Agent.SPLIT:
        return _action(mask.size - 1)  # spill: LLVM's basic allocator never splits
    if agent == Agent.PRIORITY:
        weights = np.asarray(obs["node_features"], dtype=np.float32)[:, _WEIGHT]
        # The first of the heaviest queued live ranges.
        return _action(int(np.argmax(np.where(mask, weights, -np.inf))))
    rows = np.asarray(obs["register_features"], dtype=np.float32).reshape(
        -1, len(REGISTER_FEATURES)
    )
    registers = mask[: rows.shape[0]]
    free = np.flatnonzero(registers & (rows[:, _FREE] != 0))
    if free.size:
        return _action(int(free[0]))
    evictable = np.flatnonzero(registers)
    if evictable.size:
        costs = rows[evictable, _EVICT_COST]
        return _action(int(evictable[int(np.argmin(costs))]))
    return _action(rows.shape[0])  # spill: legal, since something is


class RandomPolicy:
    """A uniformly random legal action (``-mlbridge-regalloc-policy=random``'s kind).

    Args:
        seed: The seed of its generator (:func:`numpy.random.default_rng`).
    """

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: Mapping[str, Array]) -> Array:
        """A random index among :func:`legal_actions`."""
        return _action(int(self.rng.choice(legal_actions(obs))))
