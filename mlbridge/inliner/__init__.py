"""The inlining-for-size problem: LLVM's inliner asks a model whether to inline each call.

The pass is the opt plugin's ML inline advisor (docs/inliner.md): LLVM 22's ML inliner
features, an ``int64 [1]`` decision ``inlining_decision``, legality kept by LLVM.

* :mod:`mlbridge.inliner.policy`: the linear policy over the inliner's features, its JSON
  form and its ONNX and TF AOT exports;
* :mod:`mlbridge.inliner.trainer`: evolution strategies against a real ``opt-22``
  (``mlbridge train inliner``), each evaluation answering the pass over the pipe;
* :mod:`mlbridge.inliner.cli`: the ``mlbridge train inliner`` command;
* :mod:`mlbridge.inliner.builtin`: the shipped model ``inliner-oz`` (its training output
  is ``models/inliner-oz.json`` in this package).
"""

from __future__ import annotations

from mlbridge.inliner.policy import ADVICE_NAME, DEFAULT_FEATURE, LinearPolicy

#: The task the inliner's models answer (:data:`mlbridge.models.tasks.TASKS`).
TASK = "inliner"

__all__ = ["ADVICE_NAME", "DEFAULT_FEATURE", "TASK", "LinearPolicy"]
