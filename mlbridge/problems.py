"""The problems mlbridge ships, one package each, and the ``mlbridge train`` command.

A problem is one compiler decision a pass asks a model for. Its package holds its
features, policy, trainer, the ``mlbridge train`` subcommand and its built-in models:

==================  ======================  ========================================
problem             task                    package
==================  ======================  ========================================
inliner             ``inliner``             :mod:`mlbridge.inliner`
phase-order         ``phase-order``         :mod:`mlbridge.phase_order`
mlir-loop-unroll    ``mlir-loop-unroll``    :mod:`mlbridge.loop_unroll`
regalloc            ``regalloc``            :mod:`mlbridge.regalloc`
==================  ======================  ========================================

The MLIR loop unroll has no trainer and no built-in model yet, so no ``mlbridge train``
subcommand; the ML register allocator's built-in model has an ONNX form only (its graph
has an ``If``, which the native form cannot take).
The register-allocation priority (task ``regalloc-priority``) has no Python code of its
own (any model side answers it: docs/regalloc.md), so no package and no entry.
This module sits above the problems, beside the command line: the generic layers
(registry, SerDes, compiler interfaces, ...) never import it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mlbridge.models.builtin import BuiltinModel, find_builtin

__all__ = ["PROBLEMS", "Problem", "add_arguments", "builtin_model", "builtin_models", "run"]


@dataclass(frozen=True)
class Problem:
    """One problem's entry points.

    Attributes:
        name: The problem's name, also its ``mlbridge train`` subcommand.
        task: The task its models answer (:data:`mlbridge.models.tasks.TASKS`).
        add_train_parser: Adds its ``mlbridge train`` subcommand to a subparsers object
            (``None``: the problem has no trainer).
        run_train: Runs that subcommand (``None`` with ``add_train_parser``).
        builtin_models: Its shipped models.
        demo_report: For a problem whose models the demo's opt table cannot show (they
            act in llc): given the demo's corpus entries and the registered models of its
            task, a Markdown section measuring them (``None``: the opt table shows them).
    """

    name: str
    task: str
    add_train_parser: Callable[[Any], argparse.ArgumentParser] | None
    run_train: Callable[[argparse.Namespace], int] | None
    builtin_models: Callable[[], tuple[BuiltinModel, ...]]
    demo_report: Callable[[Sequence[Any], Sequence[Any]], str] | None = None


def _inliner_models() -> tuple[BuiltinModel, ...]:
    from mlbridge.inliner.builtin import BUILTIN_MODELS

    return BUILTIN_MODELS


def _phase_order_models() -> tuple[BuiltinModel, ...]:
    from mlbridge.phase_order.builtin import BUILTIN_MODELS

    return BUILTIN_MODELS


def _inliner_parser(sub: Any) -> argparse.ArgumentParser:  # noqa: ANN401
    from mlbridge.inliner.cli import add_train_parser

    return add_train_parser(sub)


def _inliner_run(args: argparse.Namespace) -> int:
    from mlbridge.inliner.cli import run_train

    return run_train(args)


def _phase_order_parser(sub: Any) -> argparse.ArgumentParser:  # noqa: ANN401
    from mlbridge.phase_order.cli import add_train_parser

    return add_train_parser(sub)


def _phase_order_run(args: argparse.Namespace) -> int:
    from mlbridge.phase_order.cli import run_train

    return run_train(args)


def _regalloc_parser(sub: Any) -> argparse.ArgumentParser:  # noqa: ANN401
    from mlbridge.regalloc.cli import add_train_parser

    return add_train_parser(sub)


def _regalloc_run(args: argparse.Namespace) -> int:
    from mlbridge.regalloc.cli import run_train

    return run_train(args)


def _regalloc_models() -> tuple[BuiltinModel, ...]:
    from mlbridge.regalloc.builtin import BUILTIN_MODELS

    return BUILTIN_MODELS


def _regalloc_demo(entries: Sequence[Any], models: Sequence[Any]) -> str:
    from mlbridge.regalloc.demo import demo_report

    return demo_report(entries, models)


def _no_models() -> tuple[BuiltinModel, ...]:
    return ()


#: Every problem, in the order ``mlbridge train --help`` lists those with a trainer.
PROBLEMS: tuple[Problem, ...] = (
    Problem("inliner", "inliner", _inliner_parser, _inliner_run, _inliner_models),
    Problem(
        "phase-order", "phase-order", _phase_order_parser, _phase_order_run, _phase_order_models
    ),
    Problem("mlir-loop-unroll", "mlir-loop-unroll", None, None, _no_models),
    Problem(
        "regalloc",
        "regalloc",
        _regalloc_parser,
        _regalloc_run,
        _regalloc_models,
        demo_report=_regalloc_demo,
    ),
)


def builtin_models() -> tuple[BuiltinModel, ...]:
    """Every problem's built-in models (what ``mlbridge models install-builtin`` registers)."""
    return tuple(m for p in PROBLEMS for m in p.builtin_models())


def builtin_model(task: str) -> BuiltinModel:
    """The built-in model of ``task``.

    Raises:
        mlbridge.models.registry.RegistryError: If mlbridge ships none for ``task``.
    """
    return find_builtin(builtin_models(), task)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds the ``train`` subcommands (one per problem with a trainer) to ``p``."""
    sub = p.add_subparsers(dest="problem", metavar="PROBLEM", required=True)
    for problem in PROBLEMS:
        if problem.add_train_parser is not None:
            problem.add_train_parser(sub)


def run(args: argparse.Namespace) -> int:
    """Runs ``mlbridge train PROBLEM``."""
    for problem in PROBLEMS:
        if problem.name == args.problem and problem.run_train is not None:
            return problem.run_train(args)
    raise AssertionError(f"argparse let an unknown problem through: {args.problem!r}")
