"""What a registered model is for: the pass family (task) it answers.

Each of mlbridge's ML-guided passes asks its model with a fixed advice name, so a
model's advice tells its task: ``inlining_decision`` is the ML inline advisor's,
``action`` the phase-ordering pass's, ``priority`` the register-allocation priority
advisor's, ``unroll_factor`` the MLIR loop-unroll pass's. The registry records the task in
``model.json``; the plugins refuse a model of another task in one line that names the
option taking it (runtime/core/RunnerFactory.cpp keeps the same table), and the demo,
the benchmarks and ``mlbridge doctor`` select models by task.

This module is metadata only: it imports no pass or problem package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mlbridge.tensor_spec import TensorSpec

__all__ = ["TASKS", "Task", "get_task", "infer_task", "task_names"]


@dataclass(frozen=True)
class Task:
    """A pass family that asks a model for its decisions.

    Attributes:
        name: The task's name, as ``model.json`` and ``--task`` spell it.
        title: What the pass decides, for messages and ``mlbridge models list``.
        tool: The LLVM tool whose plugin runs the pass.
        option: The option that names the model (``-mlbridge-inline-model``, ...).
        advice: The name of the advice tensor the pass asks for.
        doc: The page that documents the pass.
    """

    name: str
    title: str
    tool: str
    option: str
    advice: str
    doc: str

    def usage(self) -> str:
        """How to give a model of this task to its pass: ``OPTION (TOOL)``."""
        return f"{self.option} ({self.tool})"


#: Every task a pass of mlbridge's plugins answers.
TASKS: tuple[Task, ...] = (
    Task(
        "inliner",
        "inlining decisions (ML inline advisor)",
        "opt",
        "-mlbridge-inline-model",
        "inlining_decision",
        "docs/inliner.md",
    ),
    Task(
        "phase-order",
        "pass ordering (mlbridge-phase-order)",
        "opt",
        "-mlbridge-phase-order-model",
        "action",
        "docs/phase-order.md",
    ),
    Task(
        "regalloc-priority",
        "register-allocation priority (ML priority advisor)",
        "llc",
        "-mlbridge-regalloc-priority-model",
        "priority",
        "docs/regalloc.md",
    ),
    Task(
        "regalloc",
        "register allocation (ML register allocator, -regalloc=mlbridge)",
        "llc",
        "-mlbridge-regalloc-model",
        "regalloc_action",
        "docs/ml-regalloc.md",
    ),
    Task(
        "mlir-loop-unroll",
        "loop unroll factors (mlbridge-loop-unroll)",
        "mlir-opt",
        "mlbridge-loop-unroll{model=...}",
        "unroll_factor",
        "docs/mlir.md",
    ),
)


def task_names() -> tuple[str, ...]:
    """The names of :data:`TASKS`."""
    return tuple(t.name for t in TASKS)


def get_task(name: str) -> Task | None:
    """The task called ``name``, or ``None`` if no pass answers it."""
    return next((t for t in TASKS if t.name == name), None)


def infer_task(advice: Sequence[TensorSpec]) -> str | None:
    """The task a model answers, told from its advice specs.

    Returns:
        The task's name when the model has exactly one output and its name is a task's
        advice name, else ``None``.
    """
    if len(advice) != 1:
        return None
    return next((t.name for t in TASKS if t.advice == advice[0].name), None)
