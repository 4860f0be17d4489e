"""Summary statistics shared by the benchmark scripts and the report."""

from __future__ import annotations

import statistics

__all__ = ["WIDE_SPREAD", "spread_stats"]

#: A spread above this (25% of the median) is reported as a warning: the machine was busy.
WIDE_SPREAD = 0.25


def spread_stats(values: list[float]) -> dict[str, float]:
    """Median, minimum, maximum and spread of repeated measurements.

    Args:
        values: The measurements (at least one).

    Returns:
        ``median``, ``min``, ``max`` and ``spread`` = (max - min) / median (0 if the median
        is not positive).
    """
    med = statistics.median(values)
    return {
        "median": med,
        "min": min(values),
        "max": max(values),
        "spread": (max(values) - min(values)) / med if med > 0 else 0.0,
    }
