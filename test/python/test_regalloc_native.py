"""The register-allocation agents compiled to native code (mlbridge.regalloc.native).

The shared object, loaded by llc-22's TF AOT runner, makes the ONNX export's allocation
byte for byte on real corpus modules (the machine verifier on); it answers random queries
of every agent as the export does in ONNX Runtime; one instance answers an episode's
queries from its cache as a new instance answers each; it refuses a bad query with its
reason; and it needs nothing but the C library and libm.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from conftest import built_plugin

from mlbridge.corpus.fetch import default_corpus_dir
from mlbridge.native.importer import NativeCompileError
from mlbridge.native.runtime import NativeModel
from mlbridge.regalloc.builtin import BUILTIN_MODELS
from mlbridge.regalloc.gnn import RegallocGNN
from mlbridge.regalloc.interface import ADVICE, BLOCK_FEATURES, MASK, NODE_FEATURES
from mlbridge.regalloc.native import STATUS_MESSAGES, compile_native

#: Corpus modules with large graphs, many splits and evictions.
MODULES = ("lua/src/lvm.bc", "bzip2/compress.bc", "zstd/lib/compress/zstd_compress.bc")


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The built-in agents as a native object and as their ONNX export."""
    folder = tmp_path_factory.mktemp("regalloc-native")
    policy = RegallocGNN.load(BUILTIN_MODELS[0].policy_path)
    return compile_native(policy, folder / "agents.so"), policy.to_onnx(folder / "agents.onnx")


@pytest.fixture(scope="module")
def optimized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("regalloc-native-modules")
    out = {}
    for rel in MODULES:
        out[rel] = folder / rel.replace("/", "_")
        bc = default_corpus_dir() / "bc" / rel
        subprocess.run(["opt-22", "-O2", str(bc), "-o", str(out[rel])], check=True, timeout=300)
    return out


def _llc(module: Path, out: Path, model: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["llc-22", "-O2", "-filetype=obj", f"-load-pass-plugin={built_plugin('llc')}",
         "-regalloc=mlbridge", "-mlbridge-regalloc-split", "-verify-machineinstrs",
         f"-mlbridge-regalloc-model={model}", str(module), "-o", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.mark.parametrize("rel", MODULES)
def test_native_agents_make_the_onnx_exports_allocation_in_llc(
    rel: str, agents: tuple[Path, Path], optimized: dict[str, Path], tmp_path: Path
) -> None:
    native, onnx = agents
    ran = _llc(optimized[rel], tmp_path / "native.o", native)
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    reference = _llc(optimized[rel], tmp_path / "onnx.o", onnx)
    assert reference.returncode == 0, reference.stderr
    assert (tmp_path / "native.o").read_bytes() == (tmp_path / "onnx.o").read_bytes()


def _query(rng: np.random.Generator, agent: int) -> dict[str, np.ndarray]:
    """A random graph and query of ``agent``, with features of the allocator's ranges."""
    n = int(rng.integers(1, 60))
    e = int(rng.integers(0, 4 * n))
    nf = rng.uniform(0, 1, (n, len(NODE_FEATURES))).astype(np.float32)
    nf[:, 0] = rng.uniform(0, 50, n)  # weight
    nf[:, 2:5] = rng.uniform(0, 12, (n, 3))  # log size, segments, instructions
    nf[:, 5:8] = rng.integers(0, 2, (n, 3))  # status
    nf[:, 8] = rng.integers(0, 30, n)  # degree
    nf[:, 9] = rng.integers(1, 16, n)  # class size
    r, s = int(rng.integers(0, 16)), int(rng.integers(0, 12))
    regs = rng.uniform(-1, 40, (r, 5)).astype(np.float32)
    blocks = rng.uniform(0, 6, (s, len(BLOCK_FEATURES))).astype(np.float32)
    blocks[:, 6] = rng.integers(0, 2, s)  # region
    actions = {0: n, 1: r + 1, 2: s + 1}[agent]
    mask = rng.integers(0, 2, actions).astype(np.int64)
    mask[rng.integers(0, actions)] = 1
    return {
        "agent": np.array([agent], np.int64),
        "function_name": np.array(["f"], dtype=object),
        "node_features": nf,
        "edges": rng.integers(0, n, (e, 2)).astype(np.int64),
        "spill_weights": nf[:, 0].copy(),
        "node": np.array([-1 if agent == 0 else int(rng.integers(0, n))], np.int64),
        "register_features": regs,
        "block_features": blocks,
        MASK: mask,
    }


@pytest.mark.parametrize("agent", [0, 1, 2], ids=["priority", "coloring", "split"])
def test_native_agents_answer_random_queries_as_the_onnx_export(
    agent: int, agents: tuple[Path, Path]
) -> None:
    native, onnx = agents
    session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    model = NativeModel(native)
    rng = np.random.default_rng(agent)
    for _ in range(200):
        query = _query(rng, agent)
        want = session.run([ADVICE], query)[0]
        got = model.run({k: v for k, v in query.items() if k not in ("function_name",)})
        assert got[ADVICE].tolist() == want.tolist()


def _episode_step(
    rng: np.random.Generator, query: dict[str, np.ndarray], best: int
) -> dict[str, np.ndarray]:
    """The query after one change an allocation makes, most of them around ``best``."""
    q = {k: v.copy() for k, v in query.items()}
    nf, edges, n = q["node_features"], q["edges"], len(q["node_features"])
    near = np.unique(edges[(edges == best).any(axis=1)])
    kind = rng.choice(["dequeue", "neighbour", "remove-edge", "add-edge", "add-node"])
    if kind == "dequeue":  # colored: out of the queue
        nf[best, 5:7] = (0.0, 1.0)
        q[MASK][best] = 0
    elif kind == "neighbour":  # a neighbour (or the node) evicted, re-weighted, ...
        v = int(rng.choice(near)) if len(near) else best
        nf[v, int(rng.integers(0, len(NODE_FEATURES)))] = rng.uniform(0, 30)
    elif kind == "remove-edge" and (edges == best).any():
        q["edges"] = np.delete(edges, int(np.flatnonzero((edges == best).any(axis=1))[0]), 0)
    elif kind == "add-edge":
        at = int(rng.integers(0, len(edges) + 1))
        q["edges"] = np.insert(edges, at, [best, int(rng.integers(0, n))], axis=0)
    else:  # a split: a new queued node next to the split one
        q["node_features"] = np.vstack([nf, rng.uniform(0, 5, (1, len(NODE_FEATURES)))])
        q["node_features"][n, 5:8] = (1.0, 0.0, 0.0)
        q[MASK] = np.append(q[MASK], 1)
        q["edges"] = np.vstack([edges, [[n, best]]])
    if not q[MASK].any():
        q[MASK][int(rng.integers(0, len(q[MASK])))] = 1
    return q


def test_an_episode_is_answered_from_the_cache_as_from_scratch(
    agents: tuple[Path, Path],
) -> None:
    """One instance through an episode (scores and encodings reused between priority
    queries, coloring and split queries and refused ones between them) answers each
    query as a new instance does."""
    native = agents[0]
    rng = np.random.default_rng(7)
    reused = NativeModel(native)
    query = _query(rng, 0)
    while len(query["node_features"]) < 20:
        query = _query(rng, 0)
    others = 0
    for _ in range(300):
        feeds = {k: v for k, v in query.items() if k != "function_name"}
        with NativeModel(native) as fresh:
            want = fresh.run(feeds)[ADVICE].tolist()
        assert reused.run(feeds)[ADVICE].tolist() == want
        best = want[0]
        # A few nodes around it queued alone: their scores compared pairwise, so that a
        # stale one shows even where it is not the largest.
        edges = feeds["edges"]
        near = np.unique(np.append(edges[(edges == best).any(axis=1)], best))
        for _ in range(3):
            mask = np.zeros_like(feeds[MASK])
            mask[rng.choice(near, min(3, len(near)), replace=False)] = 1
            mask[rng.integers(0, len(mask))] = 1
            with NativeModel(native) as fresh:
                want = fresh.run({**feeds, MASK: mask})[ADVICE].tolist()
            assert reused.run({**feeds, MASK: mask})[ADVICE].tolist() == want
        roll = rng.uniform()
        if roll < 0.3:  # coloring or split queries for that node, as the allocator asks
            for _ in range(3):
                other = _query(rng, int(rng.integers(1, 3)))
                side = {**feeds, **{k: other[k] for k in ("agent", "register_features",
                                                          "block_features", MASK)}}  # fmt: skip
                side["node"] = np.array([best], np.int64)
                with NativeModel(native) as fresh:
                    want = fresh.run(side)[ADVICE].tolist()
                assert reused.run(side)[ADVICE].tolist() == want
                others += 1
        elif roll < 0.4:  # a refused query leaves the cache as it was
            bad = {**feeds, "edges": np.vstack([feeds["edges"], [[0, len(query[MASK])]]])}
            with pytest.raises(NativeCompileError, match="outside"):
                reused.run(bad)
        for _ in range(int(rng.integers(1, 4))):  # one change, or several at once
            query = _episode_step(rng, query, best)
    assert others > 150


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"edges": np.array([[0, 7]], np.int64)}, 1),
        ({MASK: np.ones(3, np.int64)}, 2),
        ({"agent": np.array([1], np.int64), "node": np.array([5], np.int64)}, 3),
    ],
    ids=["edge-outside-the-graph", "mask-of-another-length", "node-outside-the-graph"],
)
def test_a_bad_query_is_refused_with_its_reason(
    change: dict[str, np.ndarray], status: int, agents: tuple[Path, Path]
) -> None:
    query = {
        "agent": np.array([0], np.int64),
        "node_features": np.ones((2, len(NODE_FEATURES)), np.float32),
        "edges": np.array([[0, 1]], np.int64),
        "node": np.array([-1], np.int64),
        "register_features": np.zeros((0, 5), np.float32),
        "block_features": np.zeros((0, len(BLOCK_FEATURES)), np.float32),
        MASK: np.ones(2, np.int64),
    }
    model = NativeModel(agents[0])
    assert model.run(query)[ADVICE].tolist() in ([0], [1])
    with pytest.raises(
        NativeCompileError, match=re.escape(f"run failed: {STATUS_MESSAGES[status]}")
    ):
        model.run({**query, **change})
    # The instance stays usable.
    assert model.run(query)[ADVICE].tolist() in ([0], [1])


def test_the_native_agents_need_only_libc_and_libm(agents: tuple[Path, Path]) -> None:
    dynamic = subprocess.run(
        ["readelf", "-d", str(agents[0])], capture_output=True, text=True, check=True
    ).stdout
    needed = {line.split("[")[1].rstrip("]") for line in dynamic.splitlines() if "NEEDED" in line}
    assert needed == {"libc.so.6", "libm.so.6"}
    listing = subprocess.run(
        ["nm", "-D", "--defined-only", str(agents[0])], capture_output=True, text=True, check=True
    ).stdout
    exported = {line.split()[-1].split("@")[0] for line in listing.splitlines() if line.strip()}
    exported.discard("MLBRIDGE_AOT_1")  # the version node
    assert {"mlbridge_aot_set_arg_rows", "mlbridge_aot_error_message"} <= exported
    assert all(name.startswith("mlbridge_aot_") for name in exported), exported
