"""The register allocator's part of ``make demo``: its built-in models against greedy.

The demo's main table compares ``opt`` configurations under a stock ``llc``; a register
allocator acts in ``llc``, and its measure is the spills and reloads it leaves as much as
the code size. So each registered model of task ``regalloc`` gets a section of its own:
the held-out evaluation of ``mlbridge train regalloc`` (docs/ml-regalloc.md) over the
demo's modules, with the model in-process (ONNX Runtime) and the split agent acting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlbridge.regalloc.trainer import (
    evaluate_heldout,
    heldout_table,
    summarize_heldout,
)

__all__ = ["demo_report"]


def demo_report(entries: Sequence[Any], models: Sequence[Any], *, jobs: int = 2) -> str:
    """A Markdown section per model: spill and reload cost and sizes on ``entries``.

    Args:
        entries: Corpus modules (:class:`mlbridge.corpus.ModuleEntry`: ``.bitcode_path``,
            ``.project``, ``.id``).
        models: Registered models of task ``regalloc``
            (:class:`mlbridge.models.registry.RegisteredModel`), ONNX ones.
        jobs: Compilations at once.

    Raises:
        mlbridge.regalloc.trainer.RegallocTrainError: If a tool fails.
    """
    sections = []
    for model in models:
        if model.kind != "onnx":
            continue
        rows = evaluate_heldout(model.path, entries, jobs=jobs, split=True)
        for row in rows:
            if row.allocator == "trained model":
                row.allocator = f"'{model.name}' (ONNX Runtime)"
        sections.append(
            f"Register allocation, llc-22 -O2 -regalloc=mlbridge -mlbridge-regalloc-split "
            f"-mlbridge-regalloc-model={model.name} after opt-22 -O2, against greedy (stock "
            "llc), LLVM's basic allocator and the built-in basic and split policies. "
            "SpillReloadCost: spill and reload instructions weighted by block frequency "
            "(lower is better); allocated bytes: every section of the objects that occupies "
            "memory, .text beside it.\n\n" + heldout_table(summarize_heldout(rows))
        )
    return "\n\n".join(sections)
