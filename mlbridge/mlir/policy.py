"""Model-side policies for ``mlbridge-loop-unroll`` and ``mlbridge-roundtrip``.

Each policy is a plain function of an observation (feature name to numpy array, as
``mlbridge.compiler.pipe`` and ``mlbridge serve`` pass them) returning the advice, so the
same function serves the pipe runner and the gRPC runner::

    from mlbridge.compiler.pipe import drive_compiler
    from mlbridge.mlir.policy import unroll_by_trip_count

    drive_compiler(["mlir-opt-22", "--load-pass-plugin=...", "--mlir-disable-threading",
                    "--pass-pipeline=builtin.module(func.func("
                    "mlbridge-loop-unroll{runner=pipe channel={base}}))", "in.mlir"],
                   unroll_by_trip_count, require_end=True)

    # mlbridge serve mlbridge.mlir.policy:unroll_by_trip_count --ready-file ready.txt
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "RoundTripModel",
    "roundtrip_bias",
    "roundtrip_inputs",
    "roundtrip_weights",
    "unroll_by_trip_count",
]


def unroll_by_trip_count(obs: Mapping[str, Any]) -> int:
    """The test policy: factor 4 if the trip count is a multiple of 4, else 2.

    An unknown trip count (-1) gets 2 (``-1 % 4 == 3``), like the ONNX model that
    ``test/lit/Inputs/mlir_make_unroll_model.py`` writes (ONNX ``Mod`` has Python's sign rule).

    Args:
        obs: The observation; only ``trip_count`` is read.

    Returns:
        The unroll factor.
    """
    trip = int(np.asarray(obs["trip_count"]).reshape(-1)[0])
    return 4 if trip % 4 == 0 else 2


def roundtrip_weights(length: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    """The round-trip experiment's fully-connected layer ``[length] -> 1``.

    Args:
        length: L, the number of inputs.

    Returns:
        ``w[j] = ((31 j) mod 17 - 8) / 8`` as float32.
    """
    j = np.arange(length, dtype=np.int64)
    return (((31 * j) % 17 - 8) / 8).astype(np.float32)


def roundtrip_bias() -> np.float32:
    """The layer's bias (0.5)."""
    return np.float32(0.5)


def roundtrip_inputs(query: int, length: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    """The input the pass sends for ``query`` (``roundTripInput`` in RoundTrip.cpp).

    Args:
        query: The query index, from 0.
        length: L.

    Returns:
        ``((7 query + 13 j) mod 101) / 101 - 0.5`` as float32, computed in float32 as the
        pass does.
    """
    j = np.arange(length, dtype=np.int64)
    return (((7 * query + 13 * j) % 101).astype(np.float32) / np.float32(101)) - np.float32(0.5)


class RoundTripModel:
    """The round-trip model: one fully-connected layer, ``output = w . input + b``.

    Instantiated with no arguments it reads L from the first observation, so
    ``mlbridge serve mlbridge.mlir.policy:RoundTripModel`` serves any length.
    """

    def __init__(self) -> None:
        self._weights: np.ndarray[Any, np.dtype[np.float32]] | None = None

    def __call__(self, obs: Mapping[str, Any]) -> np.float32:
        """The layer's output for ``obs["input"]``."""
        x = np.asarray(obs["input"], dtype=np.float32).reshape(-1)
        if self._weights is None or self._weights.size != x.size:
            self._weights = roundtrip_weights(x.size)
        return np.float32(np.dot(self._weights, x) + roundtrip_bias())
