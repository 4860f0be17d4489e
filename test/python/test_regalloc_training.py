"""The ML register allocator's trainable agents: the graph policy, its export, the trainer.

The graph policy (mlbridge.regalloc.gnn) takes graphs without edges and coloring queries
without candidates, never picks an illegal action, reads back from JSON exactly, and its
ONNX export (one model, an If on agent) answers as PyTorch on the observations of real llc
sessions and allocates inside llc a program that prints the right result. A tiny
`mlbridge train regalloc` run writes its outputs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from conftest import REPO, built_plugin

from mlbridge.compiler.pipe import drive_compiler
from mlbridge.errors import MLBridgeError
from mlbridge.regalloc import (
    ADVICE,
    BLOCK_FEATURES,
    NODE_FEATURES,
    REGISTER_FEATURES,
    basic_policy,
)
from mlbridge.regalloc.gnn import (
    ILLEGAL_SCORE,
    RegallocGNN,
    agreement,
    collate,
    compact_observation,
    onnx_feeds,
)
from mlbridge.regalloc.interface import MESSAGE_ROUNDS_METADATA
from mlbridge.regalloc.trainer import parse_cost_remarks

PRESSURE = REPO / "test" / "lit" / "Inputs" / "regalloc-pressure.c"
DEGREE = NODE_FEATURES.index("degree")


def _observation(
    rng: np.random.Generator, agent: int, n: int, e: int, r: int, legal: float = 0.5
) -> dict[str, np.ndarray]:
    """A random observation of the allocator's interface (at least one legal action)."""
    features = (rng.random((n, len(NODE_FEATURES))) * 5).astype(np.float32)
    edges = np.sort(rng.integers(0, n, (e, 2)), axis=1).astype(np.int64)
    # As the allocator's: the degree column counts each node's edges.
    features[:, DEGREE] = np.bincount(edges.reshape(-1), minlength=n)
    size = n if agent == 0 else r + 1
    blocks = r if agent == 2 else 0
    mask = (rng.random(size) < legal).astype(np.int64)
    mask[rng.integers(size)] = 1
    return {
        "agent": np.array([agent], np.int64),
        "function_name": np.array(["f"], dtype=object),
        "node_features": features,
        "edges": edges.reshape(-1, 2),
        "spill_weights": features[:, 0].copy(),
        "node": np.array([rng.integers(n) if agent else -1], np.int64),
        "register_features": rng.random((r if agent == 1 else 0, len(REGISTER_FEATURES))).astype(
            np.float32
        ),
        # Split candidates: blocks (log2 frequencies up to 10, up to 4 uses, 0/1
        # liveness) and regions (frequency 1, weighted uses and copies).
        "block_features": np.column_stack(
            [
                np.where(region := rng.integers(0, 2, blocks), 1.0, rng.random(blocks) * 10),
                np.where(region, rng.random(blocks) * 400, rng.integers(0, 5, blocks)),
                np.where(region, rng.random(blocks) * 100, rng.integers(0, 2, blocks)),
                np.where(region, rng.random(blocks) * 100, rng.integers(0, 2, blocks)),
                rng.random(blocks),
                rng.integers(0, 3, blocks),
                region,
            ]
        )
        .reshape(-1, len(BLOCK_FEATURES))
        .astype(np.float32),
        "action_mask": mask,
    }


@pytest.fixture(scope="module")
def policy() -> RegallocGNN:
    torch.manual_seed(3)
    return RegallocGNN(hidden=16).eval()


@pytest.fixture(scope="module")
def split_policy_gnn() -> RegallocGNN:
    torch.manual_seed(4)
    return RegallocGNN(hidden=16, split=True).eval()


@pytest.fixture(scope="module")
def exported(policy: RegallocGNN, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return policy.to_onnx(tmp_path_factory.mktemp("regalloc-gnn") / "agent.onnx")


@pytest.fixture(scope="module")
def pressure_ll(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("regalloc-pressure") / "pressure.ll"
    subprocess.run(
        ["clang-22", "-O2", "-S", "-emit-llvm", str(PRESSURE), "-o", str(out)], check=True
    )
    return out


def test_forward_shapes_with_no_edges_and_no_registers(policy: RegallocGNN) -> None:
    rng = np.random.default_rng(0)
    priority = _observation(rng, 0, 5, 0, 0)
    assert policy.logits(priority).shape == (5,)
    coloring = _observation(rng, 1, 4, 0, 0)
    assert policy.logits(coloring).shape == (1,)  # spilling only
    assert policy.act(coloring) == 0
    one = _observation(rng, 1, 1, 0, 3)
    assert policy.logits(one).shape == (4,)


def test_onnx_export_runs_with_no_edges_and_no_registers(
    policy: RegallocGNN, exported: Path
) -> None:
    session = ort.InferenceSession(str(exported), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for obs in (_observation(rng, 0, 3, 0, 0), _observation(rng, 1, 3, 0, 0)):
        (got,) = session.run([ADVICE], onnx_feeds(obs))
        assert got.dtype == np.int64 and got.shape == (1,)
        assert int(got[0]) == policy.act(obs)


def test_an_agent_other_than_priority_and_coloring_gets_the_last_action(
    policy: RegallocGNN, exported: Path
) -> None:
    # Allocators with a split agent (agent 2) ask it with block candidates; the last
    # action spills, the basic policy's answer.
    obs = _observation(np.random.default_rng(7), 1, 6, 5, 0)
    obs["agent"] = np.array([2], np.int64)
    obs["action_mask"] = np.ones(4, np.int64)
    session = ort.InferenceSession(str(exported), providers=["CPUExecutionProvider"])
    (got,) = session.run([ADVICE], onnx_feeds(obs))
    assert int(got[0]) == policy.act(obs) == 3


def test_masking_never_picks_an_illegal_action(policy: RegallocGNN) -> None:
    rng = np.random.default_rng(2)
    for i in range(120):
        obs = _observation(rng, i % 2, int(rng.integers(1, 40)), int(rng.integers(0, 80)),
                           int(rng.integers(0, 17)), legal=0.2)  # fmt: skip
        mask = obs["action_mask"]
        assert mask[policy.act(obs)] == 1
        p = policy.probabilities(obs)
        assert p[mask == 0].sum() == 0.0 and p.sum() == pytest.approx(1.0)
        logits = policy.logits(obs).detach().numpy()
        assert (logits[mask == 0] == ILLEGAL_SCORE).all()


def test_batched_log_probs_equal_each_observations_log_softmax(policy: RegallocGNN) -> None:
    rng = np.random.default_rng(4)
    samples = [
        _observation(rng, i % 2, int(rng.integers(1, 30)), int(rng.integers(0, 60)),
                     int(rng.integers(0, 17)))
        for i in range(24)
    ]  # fmt: skip
    actions = [int(rng.choice(np.flatnonzero(s["action_mask"]))) for s in samples]
    batch = collate(samples, actions)
    logp, entropy = policy.batch_log_probs(batch)
    expected = torch.stack(
        [torch.log_softmax(policy.logits(s), 0)[a] for s, a in zip(samples, actions, strict=True)]
    )
    assert torch.allclose(logp, expected, atol=1e-5)
    assert (entropy >= -1e-6).all()
    assert policy.batch_actions(batch).tolist() == [policy.act(s) for s in samples]


def test_a_policy_with_a_split_agent_scores_each_candidate_block_and_spilling(
    split_policy_gnn: RegallocGNN,
) -> None:
    rng = np.random.default_rng(8)
    obs = _observation(rng, 2, 9, 12, 5, legal=0.5)
    logits = split_policy_gnn.logits(obs)
    assert logits.shape == (6,)  # 5 blocks, then spilling
    mask = obs["action_mask"]
    assert (logits.detach().numpy()[mask == 0] == ILLEGAL_SCORE).all()
    assert mask[split_policy_gnn.act(obs)] == 1


def test_batched_log_probs_with_split_samples_equal_each_observations_log_softmax(
    split_policy_gnn: RegallocGNN,
) -> None:
    rng = np.random.default_rng(9)
    samples = [
        compact_observation(_observation(rng, i % 3, int(rng.integers(1, 30)),
                                         int(rng.integers(0, 60)), int(rng.integers(0, 9))))
        for i in range(30)
    ]  # fmt: skip
    actions = [int(rng.choice(np.flatnonzero(s["action_mask"]))) for s in samples]
    batch = collate(samples, actions)
    logp, _ = split_policy_gnn.batch_log_probs(batch)
    expected = torch.stack(
        [
            torch.log_softmax(split_policy_gnn.logits(s), 0)[a]
            for s, a in zip(samples, actions, strict=True)
        ]
    )
    assert torch.allclose(logp, expected, atol=1e-5)
    assert split_policy_gnn.batch_actions(batch).tolist() == [
        split_policy_gnn.act(s) for s in samples
    ]


def test_a_batch_with_split_samples_is_refused_by_a_policy_without_a_split_agent(
    policy: RegallocGNN,
) -> None:
    obs = compact_observation(_observation(np.random.default_rng(10), 2, 5, 4, 3))
    with pytest.raises(ValueError, match="no split agent"):
        policy.batch_log_probs(collate([obs], [int(np.flatnonzero(obs["action_mask"])[0])]))


def test_the_split_agents_onnx_branch_agrees_with_pytorch_and_survives_json(
    split_policy_gnn: RegallocGNN, tmp_path: Path
) -> None:
    rng = np.random.default_rng(11)
    samples = [
        _observation(rng, i % 3, int(rng.integers(1, 25)), int(rng.integers(0, 40)),
                     int(rng.integers(0, 9)))
        for i in range(45)
    ]  # fmt: skip
    exported = split_policy_gnn.to_onnx(tmp_path / "split.onnx")
    assert agreement(split_policy_gnn, exported, samples) == (1.0, len(samples))
    loaded = RegallocGNN.load(split_policy_gnn.save(tmp_path / "split.json"))
    assert loaded.split
    assert [loaded.act(s) for s in samples] == [split_policy_gnn.act(s) for s in samples]


@pytest.mark.parametrize("rounds", [0, 1, 3])
def test_the_export_agrees_with_pytorch_with_any_number_of_rounds(
    rounds: int, tmp_path: Path
) -> None:
    torch.manual_seed(30 + rounds)
    policy = RegallocGNN(hidden=16, rounds=rounds, split=True).eval()
    rng = np.random.default_rng(30 + rounds)
    samples = [
        _observation(rng, i % 3, int(rng.integers(1, 40)), int(rng.integers(0, 90)),
                     int(rng.integers(0, 9)))
        for i in range(45)
    ]  # fmt: skip
    exported = policy.to_onnx(tmp_path / "agent.onnx")
    assert agreement(policy, exported, samples) == (1.0, len(samples))


def test_the_split_agents_block_inputs_carry_the_split_policys_saving() -> None:
    # The last transformed columns order blocks as split_gains does: cloning the split
    # policy is one weight and one threshold away.
    from mlbridge.regalloc import split_gains
    from mlbridge.regalloc.gnn import block_inputs

    obs = _observation(np.random.default_rng(12), 2, 4, 3, 40)
    inputs = block_inputs(torch.from_numpy(obs["block_features"])).numpy()
    saving, positive = inputs[:, -2], inputs[:, -1]
    gains = split_gains(obs["block_features"])
    assert (np.sign(saving) == np.sign(gains)).all()
    assert (positive == (gains > 0)).all()
    assert (np.argsort(saving, kind="stable") == np.argsort(gains, kind="stable")).all()


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_the_narrowed_embedding_equals_the_whole_graphs_on_the_needed_nodes(rounds: int) -> None:
    # A decision about some nodes passes messages only into their neighbourhood, along
    # the same edges in the same order: their rows are the same floats.
    torch.manual_seed(rounds)
    policy = RegallocGNN(hidden=16, rounds=rounds).eval()
    rng = np.random.default_rng(20 + rounds)
    for i in range(30):
        obs = _observation(rng, i % 2, int(rng.integers(1, 60)), int(rng.integers(0, 150)), 4)
        nf = torch.from_numpy(obs["node_features"])
        edges = torch.from_numpy(obs["edges"])
        needed = torch.from_numpy(rng.random(len(nf)) < 0.1)
        node = torch.tensor([int(rng.integers(len(nf)))])
        with torch.no_grad():
            whole = policy.embed(nf, edges)
            narrowed = policy.embed(nf, edges, needed=needed)
            assert torch.equal(narrowed[needed], whole[needed])
            # One node's row alone: the same layers over fewer rows, which PyTorch may
            # round differently in the last bit.
            torch.testing.assert_close(
                policy.embed_node(nf, edges, node), whole[node], rtol=1e-6, atol=1e-6
            )


def test_json_round_trip_gives_identical_outputs(policy: RegallocGNN, tmp_path: Path) -> None:
    policy.metadata["note"] = "round trip"
    loaded = RegallocGNN.load(policy.save(tmp_path / "policy.json"))
    assert loaded.metadata["note"] == "round trip"
    assert (loaded.hidden, loaded.rounds) == (policy.hidden, policy.rounds)
    rng = np.random.default_rng(5)
    for i in range(20):
        obs = _observation(rng, i % 2, 12, 20, 6)
        assert torch.equal(loaded.logits(obs), policy.logits(obs))


def test_load_refuses_a_file_that_is_not_a_policy(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"format": "mlbridge-phase-order-policy-2"}))
    with pytest.raises(MLBridgeError, match="not a register-allocation policy"):
        RegallocGNN.load(path)


def test_onnx_export_is_one_model_with_an_if_on_agent(exported: Path) -> None:
    model = onnx.load(str(exported))
    assert [i.name for i in model.graph.input] == [
        "agent", "function_name", "node_features", "edges", "spill_weights", "node",
        "register_features", "block_features", "action_mask",
    ]  # fmt: skip
    assert [o.name for o in model.graph.output] == [ADVICE]
    assert [n.op_type for n in model.graph.node][-1] == "If"
    assert model.ir_version == 8


def test_onnx_export_agrees_with_pytorch_on_a_real_llc_session(
    policy: RegallocGNN, exported: Path, pressure_ll: Path, tmp_path: Path
) -> None:
    # The policy itself allocates, so that the states are those it reaches.
    samples: list[dict[str, np.ndarray]] = []

    def record(obs: dict[str, np.ndarray]) -> np.ndarray:
        samples.append(compact_observation(obs))
        return np.array([basic_policy(obs)[0] if len(samples) % 3 else policy.act(obs)])

    drive_compiler(
        ["llc-22", "-O2", f"-load-pass-plugin={built_plugin('llc')}", "-regalloc=mlbridge",
         "-mlbridge-regalloc-runner=pipe", "-mlbridge-regalloc-channel={base}",
         str(pressure_ll), "-o", str(tmp_path / "out.s")],
        record, serdes="bitstream", timeout=120, require_end=True,
    )  # fmt: skip
    agents = {int(s["agent"][0]) for s in samples}
    assert agents == {0, 1} and len(samples) > 50
    assert any(len(s["edges"]) for s in samples)
    fraction, count = agreement(policy, exported, samples)
    assert (fraction, count) == (1.0, len(samples))


def _edges_within(obs: dict[str, np.ndarray], rounds: int) -> np.ndarray:
    """The edges of ``obs`` a model passing ``rounds`` rounds of messages reads."""
    edges = np.asarray(obs["edges"]).reshape(-1, 2)
    n = len(np.asarray(obs["node_features"]).reshape(-1, len(NODE_FEATURES)))
    near = np.zeros(n, bool)
    if int(obs["agent"][0]) == 0:
        near[:] = np.asarray(obs["action_mask"]) != 0
    else:
        near[int(obs["node"][0])] = True
    for _ in range(rounds - 1):
        reached = near.copy()
        reached[edges[:, 1][near[edges[:, 0]]]] = True
        reached[edges[:, 0][near[edges[:, 1]]]] = True
        near = reached
    return edges[near[edges[:, 0]] | near[edges[:, 1]]] if rounds else edges[:0]


@pytest.mark.parametrize("rounds", [1, 2])
def test_queries_carry_only_the_edges_the_models_rounds_reach_and_it_decides_alike(
    rounds: int, pressure_ll: Path, tmp_path: Path
) -> None:
    torch.manual_seed(5)
    model = RegallocGNN(hidden=16, rounds=rounds, split=True).eval()

    def session(*options: str) -> list[dict[str, np.ndarray]]:
        # The same seeded random choices in both sessions: the same states.
        rng = np.random.default_rng(21)
        seen: list[dict[str, np.ndarray]] = []

        def record(obs: dict[str, np.ndarray]) -> np.ndarray:
            seen.append({k: np.array(v) for k, v in obs.items()})
            return np.array([rng.choice(np.flatnonzero(obs["action_mask"]))], np.int64)

        drive_compiler(
            ["llc-22", "-O2", f"-load-pass-plugin={built_plugin('llc')}", "-regalloc=mlbridge",
             "-mlbridge-regalloc-split", "-mlbridge-regalloc-runner=pipe",
             "-mlbridge-regalloc-channel={base}", *options, str(pressure_ll),
             "-o", str(tmp_path / "out.s")],
            record, serdes="bitstream", timeout=120, require_end=True,
        )  # fmt: skip
        return seen

    whole = session()
    narrowed = session(f"-mlbridge-regalloc-message-rounds={rounds}")
    assert len(whole) == len(narrowed) > 50
    assert {int(o["agent"][0]) for o in whole} == {0, 1, 2}
    left_out = 0
    for full, sent in zip(whole, narrowed, strict=True):
        expected = _edges_within(full, rounds)
        assert np.array_equal(sent["edges"].reshape(-1, 2), expected)
        left_out += len(full["edges"].reshape(-1, 2)) - len(expected)
        assert np.array_equal(sent["node_features"], full["node_features"])
        # The model reads nothing it was not sent: the same scores where legal.
        legal = full["action_mask"] != 0
        with torch.no_grad():
            a, b = model.logits(full).numpy(), model.logits(sent).numpy()
        np.testing.assert_allclose(a[legal], b[legal], rtol=1e-5, atol=1e-5)
        assert model.act(full) == model.act(sent)
    assert left_out > 0


def test_the_export_declares_its_rounds_of_message_passing(exported: Path) -> None:
    props = {p.key: p.value for p in onnx.load(str(exported)).metadata_props}
    assert props == {MESSAGE_ROUNDS_METADATA: "2"}


def test_in_process_the_declared_rounds_allocate_as_every_edge_does(
    split_policy_gnn: RegallocGNN, pressure_ll: Path, tmp_path: Path
) -> None:
    declared = split_policy_gnn.to_onnx(tmp_path / "declared.onnx")
    model = onnx.load(str(declared))
    del model.metadata_props[:]
    onnx.save(model, str(tmp_path / "every-edge.onnx"))
    objects = []
    for name in ("declared.onnx", "every-edge.onnx"):
        out = tmp_path / f"{name}.o"
        subprocess.run(
            ["llc-22", "-O2", "-filetype=obj", f"-load-pass-plugin={built_plugin('llc')}",
             "-regalloc=mlbridge", "-mlbridge-regalloc-split", "-verify-machineinstrs",
             f"-mlbridge-regalloc-model={tmp_path / name}", str(pressure_ll), "-o", str(out)],
            check=True, timeout=120,
        )  # fmt: skip
        objects.append(out.read_bytes())
    assert objects[0] == objects[1]


def test_fewer_rounds_than_the_model_declares_is_an_error_naming_both(
    exported: Path, pressure_ll: Path, tmp_path: Path
) -> None:
    run = subprocess.run(
        ["llc-22", "-O2", f"-load-pass-plugin={built_plugin('llc')}", "-regalloc=mlbridge",
         f"-mlbridge-regalloc-model={exported}", "-mlbridge-regalloc-message-rounds=1",
         str(pressure_ll), "-o", str(tmp_path / "out.s")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode != 0
    assert "queries with the edges of 1 rounds of messages" in run.stderr
    assert f"it passes 2 (its metadata '{MESSAGE_ROUNDS_METADATA}')" in run.stderr
    assert "ask for at least 2" in run.stderr
    assert run.stderr.count("mlbridge-regalloc:") == 1


def test_a_model_declaring_rounds_that_are_not_a_number_is_an_error_naming_the_key(
    exported: Path, pressure_ll: Path, tmp_path: Path
) -> None:
    model = onnx.load(str(exported))
    (prop,) = model.metadata_props
    prop.value = "two"
    onnx.save(model, str(tmp_path / "bad.onnx"))
    run = subprocess.run(
        ["llc-22", "-O2", f"-load-pass-plugin={built_plugin('llc')}", "-regalloc=mlbridge",
         f"-mlbridge-regalloc-model={tmp_path / 'bad.onnx'}", str(pressure_ll),
         "-o", str(tmp_path / "out.s")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode != 0
    assert (
        f"the model's metadata '{MESSAGE_ROUNDS_METADATA}' is 'two', not a number of rounds"
        in run.stderr
    )
    assert "export the model again" in run.stderr


def test_the_allocators_degree_column_counts_each_nodes_edges(
    pressure_ll: Path, tmp_path: Path
) -> None:
    # The network's mean over the neighbours divides by this column: it must be each
    # node's number of edges in every query, through splits, evictions and spills.
    rng = np.random.default_rng(13)
    checked: list[int] = []

    def check(obs: dict[str, np.ndarray]) -> np.ndarray:
        nodes = np.asarray(obs["node_features"]).reshape(-1, len(NODE_FEATURES))
        edges = np.asarray(obs["edges"]).reshape(-1)
        counts = np.bincount(edges, minlength=len(nodes))
        assert (nodes[:, DEGREE] == counts).all()
        checked.append(len(edges))
        return np.array([rng.choice(np.flatnonzero(obs["action_mask"]))], np.int64)

    drive_compiler(
        ["llc-22", "-O2", f"-load-pass-plugin={built_plugin('llc')}", "-regalloc=mlbridge",
         "-mlbridge-regalloc-split", "-mlbridge-regalloc-runner=pipe",
         "-mlbridge-regalloc-channel={base}", str(pressure_ll), "-o", str(tmp_path / "out.s")],
        check, serdes="bitstream", timeout=120, require_end=True,
    )  # fmt: skip
    assert len(checked) > 50 and max(checked) > 0


def test_parse_cost_remarks_reads_each_functions_cost() -> None:
    text = """--- !Analysis
Pass:            mlbridge-regalloc-cost
Name:            AllocationCost
Function:        'it''s'
Args:
  - String:          'spills '
  - Spills:          '4'
  - Reloads:         '3'
  - FoldedSpills:    '1'
  - FoldedReloads:   '0'
  - Copies:          '6'
  - SpillReloadCost: '231.500'
  - CopyCost:        '161.000'
...
--- !Missed
Pass:            other
Function:        main
Args:
  - SpillReloadCost: '9'
...
--- !Analysis
Pass:            mlbridge-regalloc-cost
Name:            AllocationCost
Function:        main
Args:
  - SpillReloadCost: '0.000'
...
"""
    costs = parse_cost_remarks(text)
    assert set(costs) == {"it's", "main"}
    assert costs["it's"].spill_reload_cost == 231.5 and costs["it's"].spills == 4
    assert costs["it's"].folded_spills == 1 and costs["it's"].copy_cost == 161.0
    assert costs["main"].spill_reload_cost == 0.0


# -- the command ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny `mlbridge train regalloc` run: 2 modules, a DAgger round, 1 iteration, 1
    held-out module each.

    In threads (--no-ray): test_ray_training.py runs the trainer on Ray.
    """
    from mlbridge.cli import main

    out = tmp_path_factory.mktemp("train-regalloc")
    options = "--max-modules 2 --bc-modules 2 --bc-epochs 2 --dagger-rounds 1 --dagger-epochs 1 "
    options += "--iterations 1 --seed 1 "
    options += "--modules-per-iteration 2 --validation-modules 2 --heldout-max-modules 1 --no-ray"
    status = main(["train", "regalloc", "-o", str(out), *options.split()])
    assert status == 0
    return out


def test_train_regalloc_writes_policy_model_metrics_and_curve(trained: Path) -> None:
    metrics = json.loads((trained / "metrics.json").read_text())
    assert metrics["export_agreement"]["fraction"] == 1.0
    assert metrics["export_agreement"]["samples"] > 0
    assert len(metrics["training"]["iterations"]) == 1
    cloning = metrics["training"]["cloning"]
    assert cloning["decisions"] > 0
    # One DAgger round: the cloned policy's own rollouts, labelled, join the teacher's.
    (dagger,) = cloning["dagger"]
    assert dagger["decisions"] > 0 and 0.0 <= dagger["agreement_before"] <= 1.0
    assert cloning["decisions"] > dagger["decisions"]
    summary = metrics["heldout"]["summary"]
    assert set(summary) == {"lua", "cmark-gfm", "all"}
    assert set(summary["all"]) == {"greedy", "LLVM basic", "basic policy", "trained model"}
    assert all(s["modules"] == 2 and s["text_bytes"] > 0 for s in summary["all"].values())
    policy = RegallocGNN.load(trained / "policy.json")
    assert policy.metadata["config"]["iterations"] == 1
    onnx.checker.check_model(onnx.load(str(trained / "agent.onnx")))
    assert (trained / "learning-curve.png").read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in sorted((trained / "checkpoints").iterdir())] == [
        "iteration-000000.json",
        "iteration-000001.json",
    ]
    assert metrics["training"]["pool"]["backend"] == "local"


def test_trained_model_allocates_inside_llc_and_the_program_prints_the_right_result(
    trained: Path, pressure_ll: Path, tmp_path: Path
) -> None:
    asm = tmp_path / "out.s"
    run = subprocess.run(
        ["llc-22", "-O2", "-relocation-model=pic", f"-load-pass-plugin={built_plugin('llc')}",
         "-regalloc=mlbridge", f"-mlbridge-regalloc-model={trained / 'agent.onnx'}",
         "-verify-machineinstrs", str(pressure_ll), "-o", str(asm)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0 and run.stderr == "", run.stderr
    subprocess.run(["clang-22", str(asm), "-o", str(tmp_path / "prog")], check=True)
    out = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, check=True)
    assert out.stdout == "mix=3015572717912299\n"


def test_cli_lists_the_regalloc_trainer(capsys: pytest.CaptureFixture[str]) -> None:
    from mlbridge.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["train", "regalloc", "--help"])
    assert exc.value.code == 0
    assert "--iterations" in capsys.readouterr().out


def test_reinforce_step_raises_the_probability_of_actions_that_did_better() -> None:
    from mlbridge.regalloc.trainer import RegallocTrainConfig, _reinforce_step

    torch.manual_seed(0)
    policy = RegallocGNN(hidden=8).eval()
    rng = np.random.default_rng(6)
    samples = [_observation(rng, i % 2, 10, 15, 4, legal=1.0) for i in range(8)]
    better = [int(rng.choice(np.flatnonzero(s["action_mask"]))) for s in samples]
    worse = [(b + 1) % len(s["action_mask"]) for s, b in zip(samples, better, strict=True)]

    def logp(actions: list[int]) -> float:
        with torch.no_grad():
            return float(policy.batch_log_probs(collate(samples, actions))[0].sum())

    before_better, before_worse = logp(better), logp(worse)
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.01)
    # One function whose sampled actions beat the basic policy, one whose actions lost.
    items = [(1.0, 1.0, samples, better), (-1.0, 1.0, samples, worse)]
    _reinforce_step(policy, optimizer, items, RegallocTrainConfig())
    assert logp(better) - before_better > logp(worse) - before_worse


def test_a_checkpoints_recorded_observations_keep_the_split_agents_blocks() -> None:
    from mlbridge.regalloc.trainer import _pack_samples, _unpack_samples

    rng = np.random.default_rng(13)
    samples = [compact_observation(_observation(rng, i % 3, 6, 5, 3)) for i in range(9)]
    back = _unpack_samples(_pack_samples(samples))
    assert len(back) == len(samples)
    for got, want in zip(back, samples, strict=True):
        for name in ("agent", "node", "node_features", "register_features", "block_features"):
            assert np.array_equal(got[name], want[name]), name
    assert sum(s["block_features"].shape[0] for s in back) > 0
