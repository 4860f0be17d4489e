"""What every trainer needs beside its problem: rollout pools, checkpoints and metrics.

* :mod:`mlbridge.training.pool`: the :class:`~mlbridge.training.pool.RolloutPool`
  interface (``map(fn, items)``, results in order, each with the node it ran on), the
  files its workers read (:class:`~mlbridge.training.pool.SharedFile`) and the local pool
  (threads in this process);
* :mod:`mlbridge.training.ray_pool`: the same on Ray, one actor per worker, the files
  shipped through Ray's object store, rollouts of a lost worker retried elsewhere
  (needs the ``ray`` extra; imported only when used);
* :mod:`mlbridge.training.checkpoints`: numbered JSON checkpoints written atomically, and
  the check of a run's checkpoint folder before it starts;
* :mod:`mlbridge.training.metrics`: per-iteration scalars to TensorBoard event files and a
  PNG learning curve;
* :mod:`mlbridge.training.run_options`: the options every ``mlbridge train`` command
  shares (where the rollouts run, checkpoints, metrics) and the opening of its pool;
* :mod:`mlbridge.training.rllib`: what a trainer needs to run RLlib's algorithms on its
  environment (files through Ray's object store, the numbers of a result, RLlib's
  checkpoints; needs the ``rllib`` extra; imported only when used).

Nothing here knows a problem: a trainer (``mlbridge.inliner.trainer``, ...) passes its
rollout function and its checks in.
"""

from __future__ import annotations

from mlbridge.training.pool import (
    LocalRolloutPool,
    NodeInfo,
    Rollout,
    RolloutPool,
    RolloutPoolError,
    SharedFile,
    WorkerContext,
)

__all__ = [
    "LocalRolloutPool",
    "NodeInfo",
    "Rollout",
    "RolloutPool",
    "RolloutPoolError",
    "SharedFile",
    "WorkerContext",
]
