"""Gymnasium environments around real compilers (needs the ``gym`` extra: ``gymnasium``).

    >>> from mlbridge.gym import inliner_env
    >>> from mlbridge.gym.rewards import TextSizeReward
    >>> env = inliner_env("in.ll", reward=TextSizeReward())
    >>> obs, info = env.reset()
    >>> obs, reward, terminated, truncated, info = env.step(1)   # inline this call site

Nothing is registered with Gymnasium on import; :func:`register` does it on request
(``gymnasium.make("mlbridge/Compiler-v0", command=[...])``).
"""

from __future__ import annotations

import gymnasium

from mlbridge.gym.env import (
    CompilationError,
    CompilationResult,
    CompilerEnv,
    RewardFn,
    inliner_command,
    inliner_env,
    observation_space_for,
)

__all__ = [
    "ENV_ID",
    "INLINER_ENV_ID",
    "CompilationError",
    "CompilationResult",
    "CompilerEnv",
    "RewardFn",
    "inliner_command",
    "inliner_env",
    "observation_space_for",
    "register",
]

#: The id :func:`register` gives :class:`CompilerEnv`.
ENV_ID = "mlbridge/Compiler-v0"
#: The id :func:`register` gives :func:`inliner_env`.
INLINER_ENV_ID = "mlbridge/Inliner-v0"


def register() -> None:
    """Register :data:`ENV_ID` and :data:`INLINER_ENV_ID` with Gymnasium (idempotent)."""
    for env_id, entry in (
        (ENV_ID, "mlbridge.gym.env:CompilerEnv"),
        (INLINER_ENV_ID, "mlbridge.gym.env:inliner_env"),
    ):
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry, disable_env_checker=True)
