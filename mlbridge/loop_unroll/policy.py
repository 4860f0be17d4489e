"""Model-side policies for ``mlbridge-loop-unroll``.

Each policy is a plain function of an observation (feature name to numpy array, as
``mlbridge.compiler.pipe`` and ``mlbridge serve`` pass them) returning the advice, so the
same function serves the pipe runner and the gRPC runner::

    from mlbridge.compiler.pipe import drive_compiler
    from mlbridge.loop_unroll.policy import unroll_by_trip_count

    drive_compiler(["mlir-opt-22", "--load-pass-plugin=...", "--mlir-disable-threading",
                    "--pass-pipeline=builtin.module(func.func("
                    "mlbridge-loop-unroll{runner=pipe channel={base}}))", "in.mlir"],
                   unroll_by_trip_count, require_end=True)

    # mlbridge serve mlbridge.loop_unroll.policy:unroll_by_trip_count --ready-file ready.txt

The round-trip benchmark's model (``mlbridge-roundtrip``) is
:class:`mlbridge.bench.roundtrip_model.RoundTripModel`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["unroll_by_trip_count"]


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
