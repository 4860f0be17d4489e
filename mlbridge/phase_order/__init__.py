"""Phase ordering with ``mlbridge-phase-order``: command lines, trace, policy, training.

* :mod:`mlbridge.phase_order.command`: the pass's command lines and options, its trace
  (``-mlbridge-phase-order-trace``) and the ``.text`` measure;
* :mod:`mlbridge.phase_order.policy`: a small PyTorch policy and its ONNX export (needs
  PyTorch; imported on demand);
* :mod:`mlbridge.phase_order.env`: the Gymnasium environment (needs the ``gym`` extra;
  imported on demand);
* :mod:`mlbridge.phase_order.trainer`: training (``mlbridge train phase-order``) and the
  held-out evaluation.

See docs/phase-order.md (the pass) and docs/phase-order-training.md (training).
"""

from __future__ import annotations

from mlbridge.phase_order.command import (
    ACTION_COUNT,
    ACTION_HISTORY,
    ADVICE,
    CODE_SIZE,
    FEATURES,
    OBSERVATION,
    OPTION_PREFIX,
    PASS_NAME,
    STEP,
    PhaseOrderError,
    TraceStep,
    find_plugin,
    parse_pipeline,
    parse_trace,
    pass_options,
    phase_order_command,
    run_tool,
    text_size,
)

__all__ = [
    "ACTION_COUNT",
    "ACTION_HISTORY",
    "ADVICE",
    "CODE_SIZE",
    "FEATURES",
    "OBSERVATION",
    "OPTION_PREFIX",
    "PASS_NAME",
    "STEP",
    "PhaseOrderError",
    "TraceStep",
    "find_plugin",
    "parse_pipeline",
    "parse_trace",
    "pass_options",
    "phase_order_command",
    "run_tool",
    "text_size",
]
