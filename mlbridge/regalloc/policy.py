"""Policies of the ML register allocator that need no training, for any model side.

Both take an observation (a mapping of feature name to numpy array, as
:class:`mlbridge.compiler.pipe.Observation` and the gRPC interfaces give it) and return the
advice ``regalloc_action`` as an int64 array of one element:

* :func:`basic_policy`: the allocator's built-in policy (``-mlbridge-regalloc-policy=basic``)
  decision for decision, in Python: the heaviest queued live range first; the first free
  register, else the one evicting the least spill weight, else spill; never split;
* :func:`split_policy`: the basic policy's priority and coloring decisions, and a split
  agent that splits a live range around the block where that saves the most: the block
  with the largest ``(uses - live_in - live_out) * frequency``, the reloads and stores
  spilling would put inside it minus the copies a split puts at its borders; spilling if
  no block saves anything (``-mlbridge-regalloc-policy=split``);
* :class:`RandomPolicy`: a uniformly random legal action, seeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mlbridge.regalloc.interface import (
    BLOCK_FEATURES,
    MASK,
    NODE_FEATURES,
    REGISTER_FEATURES,
    Agent,
)

__all__ = ["RandomPolicy", "basic_policy", "legal_actions", "split_gains", "split_policy"]

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


def split_gains(block_features: Array) -> Array:
    """Each candidate block's saving if the live range is split around it (float64).

    ``(uses - live_in - live_out) * frequency``: the reloads and stores that spilling the
    live range would put in the block, minus the copies a split puts at its borders,
    weighted by the block's frequency relative to the entry block (``2**frequency - 1``:
    the feature is ``log2(1 + frequency)``). Computed in float64 from the float32
    features, as the C++ built-in policy computes it.
    """
    rows = np.asarray(block_features, dtype=np.float32).reshape(-1, len(BLOCK_FEATURES))
    column = {name: rows[:, i].astype(np.float64) for i, name in enumerate(BLOCK_FEATURES)}
    copies = column["live_in"] + column["live_out"]
    result: Array = (column["uses"] - copies) * (np.exp2(column["frequency"]) - 1.0)
    return result


def split_policy(obs: Mapping[str, Array]) -> Array:
    """The basic policy, with a split agent that splits where it saves the most.

    Priority and coloring: :func:`basic_policy`. Split: the first legal block of the
    largest :func:`split_gains`, if that is positive; else spill. The C++ built-in
    ``-mlbridge-regalloc-policy=split`` decides the same, decision for decision.
    """
    agent = int(np.asarray(obs["agent"]).reshape(-1)[0])
    if agent != Agent.SPLIT:
        return basic_policy(obs)
    mask = np.asarray(obs[MASK]).reshape(-1) != 0
    legal_actions(obs)
    gains = split_gains(obs["block_features"])
    blocks = mask[: gains.size]
    if blocks.any():
        best = int(np.argmax(np.where(blocks, gains, -np.inf)))
        if gains[best] > 0:
            return _action(best)
    return _action(mask.size - 1)  # spill


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
