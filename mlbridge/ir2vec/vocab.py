"""Build an IR2Vec vocabulary: ``llvm-ir2vec`` triplets, TransE in numpy, LLVM's JSON.

Method (the one IR2Vec's authors describe; their published vocabularies are
75-dimensional and trained with TransE):

1. ``llvm-ir2vec triplets FILE`` lists, for every instruction, the triplets
   ``(opcode, type, 0)`` ("has type"), ``(opcode, next opcode, 1)`` ("followed by") and
   ``(opcode, operand kind or predicate, 2 + i)`` ("has argument i"), as entity and
   relation ids; ``llvm-ir2vec entities`` names the entity ids. The triplets of all
   inputs are deduplicated (a knowledge graph is a set of facts).
2. TransE learns one vector per entity and per relation so that ``head + relation``
   lies near ``tail``: minibatch SGD on the margin loss
   ``max(0, margin + |h + r - t| - |h' + r - t'|)`` (L2 distance), where ``(h', t')``
   replaces the head or the tail (chance one half each) by a uniformly drawn entity;
   entity vectors are renormalized to unit length after every batch and relation
   vectors once at the start (Bordes et al., 2013). Everything is seeded.
3. The entity vectors are written in the sections LLVM 22's ``IR2VecVocabAnalysis``
   reads: ``Opcodes``, ``Types`` and ``Arguments`` (operand kinds and comparison
   predicates), each an object from entity name to a list of numbers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from mlbridge._files import write_atomically
from mlbridge.errors import MLBridgeError
from mlbridge.llvm import LLVMToolError, find_llvm_tool

#: Environment variable naming the llvm-ir2vec binary to use.
LLVM_IR2VEC_ENV = "MLBRIDGE_LLVM_IR2VEC"
#: Bound of one llvm-ir2vec run, in seconds.
TOOL_TIMEOUT = 300.0
_OPERAND_KINDS = frozenset({"Function", "Pointer", "Constant", "Variable"})
_PREDICATE = re.compile(r"^[IF]CMP_")


class IR2VecError(MLBridgeError):
    """Building a vocabulary failed (no inputs, llvm-ir2vec failed, bad parameters)."""


@dataclass(frozen=True)
class TransEConfig:
    """TransE's parameters.

    Attributes:
        dim: The embedding dimension (IR2Vec's published vocabularies use 75).
        epochs: Passes over the deduplicated triplets.
        batch_size: Triplets per SGD step.
        learning_rate: SGD step size (per triplet; gradients are summed over a batch).
        margin: The margin of the ranking loss.
        seed: Seed of the initialization, the shuffling and the corruption.
    """

    dim: int = 75
    epochs: int = 200
    batch_size: int = 512
    learning_rate: float = 0.01
    margin: float = 1.0
    seed: int = 0

    def check(self) -> None:
        """Raise :class:`IR2VecError` naming the first parameter out of range."""
        for name in ("dim", "epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise IR2VecError(f"--{name.replace('_', '-')} must be at least 1")
        if not self.learning_rate > 0 or not self.margin > 0:
            raise IR2VecError("--learning-rate and --margin must be positive")


@dataclass(frozen=True)
class TripletSet:
    """Deduplicated triplets of some inputs.

    Attributes:
        triplets: ``int64 [N, 3]`` rows ``(head, tail, relation)``, unique.
        entities: Entity names by id.
        relations: The number of relation ids (largest id + 1).
        files: The input files read.
        total: The number of triplets before deduplication.
    """

    triplets: np.ndarray[Any, np.dtype[np.int64]]
    entities: list[str]
    relations: int
    files: list[Path]
    total: int


@dataclass(frozen=True)
class VocabularyResult:
    """What :func:`build_vocabulary` made.

    Attributes:
        path: The vocabulary JSON file.
        dim: Its dimension.
        entities: The number of entities.
        triplets: The number of unique triplets trained on.
        total_triplets: The number of triplets before deduplication.
        files: The number of input files.
        final_loss: The mean margin loss of the last epoch.
        seconds: Wall time of the whole build.
    """

    path: Path
    dim: int
    entities: int
    triplets: int
    total_triplets: int
    files: int
    final_loss: float
    seconds: float


def find_llvm_ir2vec(tool: str | None = None) -> str:
    """The llvm-ir2vec to run.

    The first of ``tool`` and ``$MLBRIDGE_LLVM_IR2VEC`` that exists, else LLVM 22's as
    :func:`mlbridge.llvm.find_llvm_tool` finds it (``$MLBRIDGE_LLVM_TOOLS_DIR``, else
    ``llvm-ir2vec-22`` on PATH, else ``/usr/lib/llvm-22/bin/llvm-ir2vec``).

    Raises:
        IR2VecError: If none exists.
    """
    for c in (tool, os.environ.get(LLVM_IR2VEC_ENV)):
        if c and shutil.which(c):
            return c
    try:
        return find_llvm_tool("llvm-ir2vec")
    except LLVMToolError as e:
        raise IR2VecError(
            f"{e} (llvm-ir2vec: the Debian package llvm-22; or set ${LLVM_IR2VEC_ENV} to its path)"
        ) from None


def collect_inputs(paths: list[Path]) -> list[Path]:
    """The IR files ``paths`` name: files as given, folders searched for ``*.bc``/``*.ll``.

    Raises:
        IR2VecError: If a path does not exist or nothing is found.
    """
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix in (".bc", ".ll") and f.is_file())
        elif p.is_file():
            files.append(p)
        else:
            raise IR2VecError(f"{p} does not exist")
    if not files:
        raise IR2VecError("no LLVM IR found (*.bc or *.ll) in " + ", ".join(str(p) for p in paths))
    return files


def _run_tool(tool: str, mode: str, file: Path) -> str:
    try:
        proc = subprocess.run(
            [tool, mode, str(file)], capture_output=True, text=True, timeout=TOOL_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise IR2VecError(f"{tool} {mode} {file} took longer than {TOOL_TIMEOUT:g} s") from None
    except OSError as e:
        raise IR2VecError(f"cannot run {tool}: {e.strerror}") from None
    if proc.returncode != 0:
        raise IR2VecError(
            f"{tool} {mode} {file} failed (exit {proc.returncode}): {proc.stderr.strip()}"
        )
    return proc.stdout


def read_entities(tool: str, file: Path) -> list[str]:
    """The entity names by id, from ``llvm-ir2vec entities`` (the same for every input)."""
    text = _run_tool(tool, "entities", file)
    lines = text.splitlines()
    count = int(lines[0]) if lines and lines[0].strip().isdigit() else None
    names: dict[int, str] = {}
    for line in lines[1:] if count is not None else lines:
        name, _, index = line.rpartition("\t")
        if name and index.strip().isdigit():
            names[int(index)] = name
    if not names or sorted(names) != list(range(len(names))):
        raise IR2VecError(f"unexpected output of {tool} entities {file}")
    return [names[i] for i in range(len(names))]


def read_triplets(tool: str, file: Path) -> tuple[np.ndarray[Any, np.dtype[np.int64]], int]:
    """The unique triplets of one file and how many it had, from ``llvm-ir2vec triplets``."""
    text = _run_tool(tool, "triplets", file)
    header, _, body = text.partition("\n")
    if not header.startswith("MAX_RELATION="):
        raise IR2VecError(f"unexpected output of {tool} triplets {file}: {header[:80]!r}")
    values = np.array(body.split(), dtype=np.int64)
    if values.size % 3:
        raise IR2VecError(f"{tool} triplets {file}: output is not rows of three ids")
    rows = values.reshape(-1, 3)
    return (np.unique(rows, axis=0) if rows.size else rows), rows.shape[0]


def gather_triplets(files: list[Path], tool: str | None = None, jobs: int = 2) -> TripletSet:
    """Run llvm-ir2vec over ``files`` (``jobs`` at a time) and deduplicate the triplets."""
    exe = find_llvm_ir2vec(tool)
    entities = read_entities(exe, files[0])
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        parts = list(pool.map(lambda f: read_triplets(exe, f), files))
    rows = [p for p, _ in parts if p.size]
    if not rows:
        raise IR2VecError("the inputs hold no instruction (no triplets)")
    triplets = np.unique(np.concatenate(rows), axis=0)
    if triplets[:, :2].max() >= len(entities) or triplets.min() < 0:
        raise IR2VecError("llvm-ir2vec returned an entity id outside its entity list")
    return TripletSet(
        triplets=triplets,
        entities=entities,
        relations=int(triplets[:, 2].max()) + 1,
        files=files,
        total=sum(n for _, n in parts),
    )


def _normalize(x: np.ndarray[Any, np.dtype[np.float64]]) -> None:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.divide(x, np.maximum(norms, 1e-12), out=x)


def train_transe(
    triplets: np.ndarray[Any, np.dtype[np.int64]],
    num_entities: int,
    num_relations: int,
    config: TransEConfig,
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], float]:
    """Learn TransE entity embeddings (see the module's docstring).

    Args:
        triplets: ``[N, 3]`` rows ``(head, tail, relation)``.
        num_entities: Entity ids are ``0..num_entities-1``.
        num_relations: Relation ids are ``0..num_relations-1``.
        config: The parameters.

    Returns:
        The entity embeddings ``[num_entities, dim]`` and the last epoch's mean loss.
    """
    config.check()
    rng = np.random.default_rng(config.seed)
    bound = 6.0 / np.sqrt(config.dim)
    ent = rng.uniform(-bound, bound, (num_entities, config.dim))
    rel = rng.uniform(-bound, bound, (num_relations, config.dim))
    _normalize(ent)
    _normalize(rel)
    n = triplets.shape[0]
    loss = 0.0
    for _ in range(config.epochs):
        order = rng.permutation(n)
        total = 0.0
        for start in range(0, n, config.batch_size):
            batch = triplets[order[start : start + config.batch_size]]
            h, t, r = batch[:, 0], batch[:, 1], batch[:, 2]
            # Corrupt the head or the tail of each positive.
            swap_head = rng.random(len(batch)) < 0.5
            random_ent = rng.integers(0, num_entities, len(batch))
            h2 = np.where(swap_head, random_ent, h)
            t2 = np.where(swap_head, t, random_ent)
            pos = ent[h] + rel[r] - ent[t]
            neg = ent[h2] + rel[r] - ent[t2]
            pos_d = np.linalg.norm(pos, axis=1)
            neg_d = np.linalg.norm(neg, axis=1)
            margin = config.margin + pos_d - neg_d
            active = margin > 0
            total += float(margin[active].sum())
            if not active.any():
                continue
            # d|x|/dx = x/|x|: pull the positive together, push the negative apart.
            gp = pos[active] / np.maximum(pos_d[active, None], 1e-12)
            gn = neg[active] / np.maximum(neg_d[active, None], 1e-12)
            step = config.learning_rate
            np.add.at(ent, h[active], -step * gp)
            np.add.at(ent, t[active], step * gp)
            np.add.at(rel, r[active], -step * (gp - gn))
            np.add.at(ent, h2[active], step * gn)
            np.add.at(ent, t2[active], -step * gn)
            _normalize(ent)
        loss = total / n
    return ent, loss


def vocabulary_sections(
    entities: list[str], embeddings: np.ndarray[Any, np.dtype[np.float64]]
) -> dict[str, dict[str, list[float]]]:
    """Sort entity vectors into LLVM 22's sections.

    ``Opcodes``, ``Types`` (names ending in ``Ty``) and ``Arguments`` (operand kinds and
    ``ICMP_``/``FCMP_`` predicates), rounded to six decimals.
    """
    sections: dict[str, dict[str, list[float]]] = {"Opcodes": {}, "Types": {}, "Arguments": {}}
    rounded = np.round(embeddings, 6)
    for name, vec in zip(entities, rounded, strict=True):
        if name in _OPERAND_KINDS or _PREDICATE.match(name):
            key = "Arguments"
        elif name.endswith("Ty"):
            key = "Types"
        else:
            key = "Opcodes"
        sections[key][name] = vec.tolist()
    return sections


def write_vocabulary(path: Path, sections: dict[str, dict[str, list[float]]]) -> None:
    """Write the vocabulary JSON (atomically: a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, orjson.dumps(sections) + b"\n")


def build_vocabulary(
    inputs: list[Path],
    output: Path,
    config: TransEConfig | None = None,
    *,
    tool: str | None = None,
    jobs: int = 2,
) -> VocabularyResult:
    """Build a vocabulary from the IR in ``inputs`` (files or folders) into ``output``.

    Raises:
        IR2VecError: If there is no input, llvm-ir2vec fails, or a parameter is bad.
    """
    config = config or TransEConfig()
    config.check()
    start = time.monotonic()
    data = gather_triplets(collect_inputs(inputs), tool, jobs)
    emb, loss = train_transe(data.triplets, len(data.entities), data.relations, config)
    write_vocabulary(output, vocabulary_sections(data.entities, emb))
    return VocabularyResult(
        path=output,
        dim=config.dim,
        entities=len(data.entities),
        triplets=int(data.triplets.shape[0]),
        total_triplets=data.total,
        files=len(data.files),
        final_loss=loss,
        seconds=time.monotonic() - start,
    )
