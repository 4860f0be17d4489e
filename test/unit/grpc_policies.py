"""Policies the gRPC runner tests serve with ``mlbridge serve test/unit/grpc_policies.py:NAME``.

The features are those of GrpcModelRunnerTest.cpp: ``x`` (int64_t [1]), ``v`` (float [-1])
and ``name`` (string [1]); the advice is ``y`` (int64_t [1]).
"""

from __future__ import annotations

import time
from typing import Any


def affine(obs: Any) -> int:
    """10 * x + len(v) + 1000 * id + len(context): every input shows in the answer."""
    return int(obs["x"][0]) * 10 + obs["v"].size + 1000 * obs.id + len(obs.context)


def sleepy(obs: Any) -> int:
    """Sleeps 3 s (longer than the test's deadline), then answers."""
    time.sleep(3)
    return 0


def raises(obs: Any) -> int:
    """Fails on every call."""
    raise RuntimeError("policy exploded on purpose")


def wrong_type(obs: Any) -> float:
    """Answers a float for an int64_t advice: not convertible exactly."""
    return 0.5


class Counter:
    """A class policy: counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, obs: Any) -> int:
        self.calls += 1
        return self.calls
