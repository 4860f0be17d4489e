"""Network weights as JSON: float32 values as the shortest decimals that read back exactly."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["shortest_decimals"]


def shortest_decimals(weights: Any) -> Any:  # noqa: ANN401 (a tensor or an array)
    """``weights`` (a PyTorch tensor or a numpy array) as nested lists of float32 decimals.

    Each value is the shortest decimal that reads back as the same float32, about half the
    JSON of full doubles; loading the lists as float32 gives the same weights.
    """
    if hasattr(weights, "detach"):
        weights = weights.detach().cpu().numpy()
    values = np.asarray(weights).astype(np.float32)
    flat = [float(str(x)) for x in values.reshape(-1)]
    return np.array(flat, dtype=object).reshape(values.shape).tolist()
