"""The round-trip benchmark's model: one fully-connected layer, ``w . x + b``.

The ``mlbridge-roundtrip`` passes (``passes/roundtrip/LLVMRoundTrip.cpp`` in opt-22,
``passes/roundtrip/MLIRRoundTrip.cpp`` in mlir-opt-22) and the benchmark programs send a float
vector of length L and expect this layer's output back; the same functions compute the
inputs the passes send, so that every answer can be checked (docs/bench.md). A plain
function of an observation, it serves the pipe and the gRPC runners alike::

    mlbridge serve mlbridge.bench.roundtrip_model:RoundTripModel --ready-file ready.txt
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["RoundTripModel", "roundtrip_bias", "roundtrip_inputs", "roundtrip_weights"]


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
    ``mlbridge serve mlbridge.bench.roundtrip_model:RoundTripModel`` serves any length.
    """

    def __init__(self) -> None:
        self._weights: np.ndarray[Any, np.dtype[np.float32]] | None = None

    def __call__(self, obs: Mapping[str, Any]) -> np.float32:
        """The layer's output for ``obs["input"]``."""
        x = np.asarray(obs["input"], dtype=np.float32).reshape(-1)
        if self._weights is None or self._weights.size != x.size:
            self._weights = roundtrip_weights(x.size)
        return np.float32(np.dot(self._weights, x) + roundtrip_bias())
