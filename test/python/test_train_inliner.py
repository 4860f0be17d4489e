"""The linear inlining policy, its ONNX export, and the evolution-strategies trainer."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from mlbridge.inliner.policy import DEFAULT_FEATURE, LinearPolicy, signed_log
from mlbridge.inliner.trainer import (
    CHECKPOINT_FORMAT,
    ESConfig,
    TrainingError,
    evaluate_policy,
    stock_text_size,
    train_inliner,
)
from mlbridge.training.checkpoints import load_checkpoint, save_checkpoint
from mlbridge.training.metrics import TrainingMetrics

FEATURES = ["callee_basic_block_count", "cost_estimate", "callsite_height", DEFAULT_FEATURE]


@pytest.fixture(scope="module")
def sample_bc(inline_sample_bc: Path) -> Path:
    return inline_sample_bc


def random_observations(n: int, seed: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "callee_basic_block_count": np.array([rng.integers(1, 200)], dtype=np.int64),
            "cost_estimate": np.array([rng.integers(-500, 5000)], dtype=np.int64),
            "callsite_height": np.array([rng.integers(0, 10)], dtype=np.int64),
            DEFAULT_FEATURE: np.array([rng.integers(0, 2)], dtype=np.int64),
            "not_used_by_the_policy": np.array([7], dtype=np.int64),
        }
        for _ in range(n)
    ]


def test_signed_log_is_odd_and_log1p_on_positives():
    x = np.array([-10, -1, 0, 1, 10])
    np.testing.assert_allclose(signed_log(x), [-np.log(11), -np.log(2), 0, np.log(2), np.log(11)])


def test_imitating_default_answers_as_the_default():
    policy = LinearPolicy.imitating_default(FEATURES)
    for obs in random_observations(50):
        assert policy(obs) == int(obs[DEFAULT_FEATURE][0])


def test_imitating_default_needs_the_default_feature():
    with pytest.raises(ValueError, match="inliner-interactive-include-default"):
        LinearPolicy.imitating_default(["cost_estimate"])


def test_json_round_trip_keeps_parameters_and_metadata():
    policy = LinearPolicy(FEATURES, np.array([0.5, -0.25, 0.0, 1.5]), -0.75, {"note": "x"})
    back = LinearPolicy.from_json(policy.to_json())
    assert back.features == FEATURES
    np.testing.assert_array_equal(back.weights, policy.weights)
    assert back.bias == -0.75 and back.metadata == {"note": "x"}


def test_from_json_refuses_another_format():
    with pytest.raises(ValueError, match="not a linear inlining policy"):
        LinearPolicy.from_json(b'{"format": "something-else"}')


def test_onnx_export_answers_as_the_policy(tmp_path: Path):
    policy = LinearPolicy(FEATURES, np.array([-0.9, 0.2, 0.0, 1.1]), 0.4)
    path = tmp_path / "policy.onnx"
    policy.to_onnx(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    # The zero-weight feature is not an input (MLGO's versioning rule: not fed).
    assert names == ["callee_basic_block_count", "cost_estimate", DEFAULT_FEATURE]
    decisions = []
    for obs in random_observations(300):
        if abs(policy.logit(obs)) < 1e-4:
            continue  # float32 vs float64 at the boundary
        (out,) = session.run(None, {n: obs[n] for n in names})
        assert out.dtype == np.int64 and out.shape == (1,)
        assert int(out[0]) == policy(obs)
        decisions.append(int(out[0]))
    assert 0 < sum(decisions) < len(decisions)  # both answers occur


def test_imitating_default_compiles_as_stock_oz(sample_bc: Path):
    policy = LinearPolicy.imitating_default(FEATURES)
    size, decisions = evaluate_policy(policy, sample_bc)
    assert decisions > 0
    assert size == stock_text_size(sample_bc)


def test_the_allocated_measure_counts_more_than_text(sample_bc: Path):
    # .rodata, .eh_frame and data besides .text: what an inliner that leaves calls in
    # place pays for in unwind information shows only here.
    policy = LinearPolicy.imitating_default(FEATURES)
    text, _ = evaluate_policy(policy, sample_bc, measure="text")
    allocated, _ = evaluate_policy(policy, sample_bc, measure="allocated")
    assert allocated > text
    assert allocated == stock_text_size(sample_bc, measure="allocated")
    with pytest.raises(ValueError, match="unknown size measure 'bss'"):
        stock_text_size(sample_bc, measure="bss")


def test_never_inlining_changes_the_size(sample_bc: Path):
    size, _ = evaluate_policy(lambda obs: 0, sample_bc)
    assert size != stock_text_size(sample_bc)


def test_training_returns_a_policy_no_worse_than_its_start(sample_bc: Path):
    messages: list[str] = []
    policy = train_inliner(
        [sample_bc],
        ESConfig(iterations=1, pairs=1, modules_per_iteration=1, jobs=1),
        progress=messages.append,
    )
    # The recorded saving is what the returned policy measures (an independent compile,
    # every allocated section: the default measure), and the best of the start (saving 0:
    # it imitates the default) and the iterate.
    assert policy.metadata["size_measure"] == "allocated"
    size, _ = evaluate_policy(policy, sample_bc, measure="allocated")
    stock = stock_text_size(sample_bc, measure="allocated")
    assert policy.metadata["mean_saving_vs_stock_Oz"] == pytest.approx((stock - size) / stock)
    # The returned policy is the better of the two it measured: the start and the iterate.
    start = next(m for m in messages if m.startswith("start: "))
    iterate = next(m for m in messages if "iteration 1/1" in m)
    start_saving = float(re.search(r"([-+][0-9.]+)%", start).group(1))
    iterate_saving, best_saving = map(float, re.findall(r"([-+][0-9.]+)%", iterate)[:2])
    assert best_saving == max(start_saving, iterate_saving)
    assert policy.metadata["mean_saving_vs_stock_Oz"] * 100 == pytest.approx(best_saving, abs=5e-4)
    assert DEFAULT_FEATURE in policy.features and len(policy.features) > 30
    assert any("iteration 1/1" in m for m in messages)


def _quiet(message: str) -> None:
    pass


def test_a_resumed_run_reaches_the_state_of_an_uninterrupted_one(sample_bc: Path, tmp_path: Path):
    # A wide sigma and step, so that every iteration moves the parameters.
    config = ESConfig(iterations=2, pairs=1, modules_per_iteration=1, jobs=1, sigma=0.5,
                      learning_rate=0.5, seed=5)  # fmt: skip
    whole_metrics = TrainingMetrics(None)
    whole = train_inliner(
        [sample_bc], config, checkpoint_dir=tmp_path / "whole", progress=_quiet,
        metrics=whole_metrics,
    )  # fmt: skip
    train_inliner(
        [sample_bc], replace(config, iterations=1), checkpoint_dir=tmp_path / "split",
        progress=_quiet,
    )  # fmt: skip
    messages: list[str] = []
    metrics = TrainingMetrics(None)
    resumed = train_inliner(
        [sample_bc], config, checkpoint_dir=tmp_path / "split", resume=True,
        progress=messages.append, metrics=metrics,
    )  # fmt: skip
    assert messages[0].startswith("resuming from ") and "(iteration 1/2" in messages[0]
    assert not any(m.startswith("measuring stock") for m in messages)
    np.testing.assert_array_equal(resumed.weights, whole.weights)
    assert resumed.bias == whole.bias
    assert resumed.metadata["resumed_from_iteration"] == 1
    _, mine = load_checkpoint(tmp_path / "split" / "iteration-000002.json", CHECKPOINT_FORMAT)
    _, theirs = load_checkpoint(tmp_path / "whole" / "iteration-000002.json", CHECKPOINT_FORMAT)
    _, before = load_checkpoint(tmp_path / "whole" / "iteration-000001.json", CHECKPOINT_FORMAT)
    assert mine["theta"] == theirs["theta"] and mine["rng"] == theirs["rng"]
    assert theirs["theta"] != before["theta"]  # iteration 2 moved: equality says something
    # The metrics of the first segment come back from the checkpoint.
    assert [h["step"] for h in metrics.history] == [0, 1, 2]
    for tag in ("reward/iterate_saving_pct", "reward/best_saving_pct"):
        assert [h[tag] for h in metrics.history] == [h[tag] for h in whole_metrics.history]


def test_a_new_run_refuses_the_checkpoints_of_an_unfinished_run(sample_bc: Path, tmp_path: Path):
    save_checkpoint(tmp_path, CHECKPOINT_FORMAT, 1, {"config": {"iterations": 3}})
    with pytest.raises(TrainingError, match=r"unfinished run \(latest: iteration-000001.json\)"):
        train_inliner([sample_bc], ESConfig(iterations=1, pairs=1, jobs=1),
                      checkpoint_dir=tmp_path, progress=_quiet)  # fmt: skip
    assert (tmp_path / "iteration-000001.json").is_file()
    with pytest.raises(TrainingError, match="no checkpoint to resume from"):
        train_inliner([sample_bc], ESConfig(iterations=1, pairs=1, jobs=1),
                      checkpoint_dir=tmp_path / "empty", resume=True, progress=_quiet)  # fmt: skip


def test_resuming_with_other_settings_is_refused_and_a_finished_run_is_replaced(
    sample_bc: Path, tmp_path: Path
):
    config = ESConfig(iterations=1, pairs=1, modules_per_iteration=1, jobs=1)
    train_inliner([sample_bc], config, checkpoint_dir=tmp_path, progress=_quiet)
    with pytest.raises(TrainingError, match=r"other settings \(pairs=1 there, 2 here\)"):
        train_inliner([sample_bc], replace(config, pairs=2, iterations=2),
                      checkpoint_dir=tmp_path, resume=True, progress=_quiet)  # fmt: skip
    messages: list[str] = []
    train_inliner([sample_bc], replace(config, seed=1), checkpoint_dir=tmp_path,
                  progress=messages.append)  # fmt: skip
    assert f"removed the 1 checkpoints of the finished run in {tmp_path}" in messages
    _, state = load_checkpoint(tmp_path / "iteration-000001.json", CHECKPOINT_FORMAT)
    assert state["config"]["seed"] == 1
