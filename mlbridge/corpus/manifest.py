"""The corpus manifest (``manifest.json`` in the corpus folder): reading and summing.

The format is described byte for byte in docs/corpus.md. Paths inside it are relative to
the corpus folder, so the folder can be moved; :class:`ModuleEntry` resolves them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mlbridge.corpus.errors import CorpusError
from mlbridge.corpus.recipe import SPLITS

__all__ = [
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "STAT_FIELDS",
    "Manifest",
    "ModuleEntry",
    "load_manifest",
    "sum_stats",
]

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1

#: The per-module statistics, in manifest order (see :class:`mlbridge.ir.ModuleStats`).
STAT_FIELDS = (
    "defined_functions",
    "declared_functions",
    "intrinsic_declarations",
    "basic_blocks",
    "instructions",
    "call_sites",
    "calls_to_defined",
    "calls_to_external",
    "calls_to_intrinsics",
    "indirect_calls",
    "inline_asm_calls",
)


def sum_stats(stats: list[dict[str, int]]) -> dict[str, int]:
    """Return the field-wise sum of per-module statistics."""
    return {f: sum(s.get(f, 0) for s in stats) for f in STAT_FIELDS}


@dataclass(frozen=True)
class ModuleEntry:
    """One translation unit of the corpus: where it came from, how it was built, its counts."""

    root: Path
    id: str
    project: str
    split: str
    source: str
    bitcode: str
    cwd: str
    command: tuple[str, ...]
    status: str
    error: str
    stats: dict[str, int]

    @property
    def ok(self) -> bool:
        """Whether it compiled to valid bitcode."""
        return self.status == "ok"

    @property
    def bitcode_path(self) -> Path:
        """The absolute path of the ``.bc`` file (exists only if :attr:`ok`)."""
        return self.root / self.bitcode

    @property
    def source_path(self) -> Path:
        """The absolute path of the C source file."""
        return self.root / self.source


@dataclass(frozen=True)
class Manifest:
    """A loaded manifest."""

    root: Path
    data: dict[str, Any]
    modules: tuple[ModuleEntry, ...]

    @property
    def split(self) -> dict[str, list[str]]:
        """Project names per split: ``{"train": [...], "heldout": [...]}``."""
        return {s: list(self.data["split"].get(s, [])) for s in SPLITS}

    @property
    def projects(self) -> list[dict[str, Any]]:
        """Per-project records: name, version, license, split, archive, counts, totals."""
        return list(self.data["projects"])

    def ok_modules(
        self, split: str | None = None, project: str | None = None
    ) -> Iterator[ModuleEntry]:
        """Yield the modules that compiled, optionally only one split or one project."""
        for m in self.modules:
            if m.ok and (split is None or m.split == split) and (project in (None, m.project)):
                yield m

    def select(
        self,
        split: str,
        *,
        min_instructions: int = 0,
        max_instructions: int | None = None,
        max_modules: int | None = None,
    ) -> list[ModuleEntry]:
        """The ``split`` modules that compiled, within an IR-instruction range.

        Args:
            split: ``train`` or ``heldout``.
            min_instructions: Leave out modules with fewer IR instructions.
            max_instructions: Leave out modules with more (``None``: no bound).
            max_modules: Keep at most this many, spread evenly over the corpus order, so
                that projects stay mixed.
        """
        modules = [
            m
            for m in self.ok_modules(split=split)
            if int(m.stats.get("instructions", 0)) >= min_instructions
            and (
                max_instructions is None or int(m.stats.get("instructions", 0)) <= max_instructions
            )
        ]
        if max_modules is not None and len(modules) > max_modules:
            stride = len(modules) / max_modules
            modules = [modules[int(i * stride)] for i in range(max_modules)]
        return modules


def load_manifest(corpus_dir: str | Path) -> Manifest:
    """Read ``<corpus_dir>/manifest.json``.

    Raises:
        CorpusError: If it is missing (says how to build it) or malformed.
    """
    root = Path(corpus_dir).resolve()
    path = root / MANIFEST_NAME
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise CorpusError(
            f"no corpus manifest at {path}: build the corpus with "
            f"`mlbridge corpus build --output {root}`"
        ) from None
    except (OSError, orjson.JSONDecodeError) as e:
        raise CorpusError(f"cannot read the corpus manifest {path}: {e}") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise CorpusError(
            f"{path} is not a format-{MANIFEST_FORMAT} corpus manifest; rebuild it with "
            "`mlbridge corpus build`"
        )
    modules = []
    try:
        for m in data["modules"]:
            modules.append(
                ModuleEntry(
                    root=root,
                    id=m["id"],
                    project=m["project"],
                    split=m["split"],
                    source=m["source"],
                    bitcode=m["bitcode"],
                    cwd=m["cwd"],
                    command=tuple(m["command"]),
                    status=m["status"],
                    error=m.get("error", ""),
                    stats=dict(m.get("stats") or {}),
                )
            )
        data["split"], data["projects"]  # noqa: B018 - presence check
    except (KeyError, TypeError) as e:
        raise CorpusError(f"the corpus manifest {path} lacks field {e}; rebuild it") from None
    return Manifest(root=root, data=data, modules=tuple(modules))
