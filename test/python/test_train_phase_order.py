"""Phase-ordering training: a one-iteration run, the ONNX export, the held-out evaluation."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from test_phase_order_env import modules, plugin  # noqa: F401 - shared fixtures

from mlbridge.errors import MLBridgeError
from mlbridge.phase_order import parse_trace, phase_order_command, run_tool, text_size
from mlbridge.phase_order.env import PhaseOrderEnv
from mlbridge.phase_order.policy import PhasePolicy
from mlbridge.phase_order.trainer import (
    PGConfig,
    agreement,
    evaluate_heldout,
    run_episode,
    summarize_heldout,
    train_phase_order,
)


@pytest.fixture(scope="module")
def trained(modules, plugin, tmp_path_factory):  # noqa: F811
    config = PGConfig(
        teacher="0-1",
        bc_modules=2,
        bc_epochs=200,
        iterations=1,
        modules_per_iteration=2,
        episodes_per_module=2,
        validation_modules=2,
        max_steps=4,
        jobs=1,
        seed=7,
    )
    lines: list[str] = []
    policy, history, samples = train_phase_order(modules, config, plugin=plugin, log=lines.append)
    folder = tmp_path_factory.mktemp("phase-order-agent")
    return policy, history, samples, lines, policy.to_onnx(folder / "agent.onnx"), folder


def test_warm_start_one_iteration_and_validation_report(trained):
    policy, history, samples, lines, _, _ = trained
    warm = history["warm_start"]
    # The teacher: actions 0, 1, then stop, on 2 modules: 3 decisions each.
    assert warm["teacher"] == [0, 1] and warm["modules"] == 2 and warm["decisions"] == 6
    assert warm["greedy_matches_teacher"] == 1.0
    (record,) = history["iterations"]
    assert record["iteration"] == 1
    assert len(lines) == 3
    assert lines[0].startswith("warm start: 2 teacher episodes")
    assert lines[1].startswith("iteration 1/1: code size")
    assert lines[2].startswith("validation on 2 training modules")
    assert history["validation"]["kept"] in ("cloned", "fine-tuned")
    # The teacher's 6 decisions, then 2 modules x 2 episodes, each at least one decision.
    assert len(samples) >= 6 + 4
    assert sum(record["action_histogram"]) == len(samples) - 6
    assert len(record["action_histogram"]) == policy.n_actions + 1
    assert policy.metadata["config"]["seed"] == 7


def test_parse_teacher():
    from mlbridge.phase_order.trainer import parse_teacher

    assert parse_teacher("0-2,5, 7-7", 15) == [0, 1, 2, 5, 7]
    assert parse_teacher("", 15) == []
    with pytest.raises(ValueError, match="outside the action set 0..14"):
        parse_teacher("3-15", 15)
    with pytest.raises(ValueError, match="not an index or a range"):
        parse_teacher("x", 15)


def test_the_onnx_agent_has_the_contract_interface(trained):
    policy, _, _, _, onnx_path, _ = trained
    model = onnx.load(str(onnx_path))
    assert [i.name for i in model.graph.input] == [
        "observation",
        "step",
        "code_size",
        "action_history",
    ]
    (out,) = model.graph.output
    assert out.name == "action"
    assert out.type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [1]


def test_the_onnx_agent_decides_as_the_torch_policy(trained):
    policy, _, samples, _, onnx_path, _ = trained
    rng = np.random.default_rng(0)
    # Observations seen in training, and perturbed ones that reach other actions.
    more = [
        {
            "observation": (s["observation"] * rng.uniform(0, 3, s["observation"].shape)).astype(
                np.float32
            ),
            "step": np.array([rng.integers(0, 15)], dtype=np.int64),
            "code_size": np.array([rng.integers(1, 100_000)], dtype=np.int64),
            "action_history": rng.integers(0, 3, policy.n_actions).astype(np.float32),
        }
        for s in samples
        for _ in range(5)
    ]
    fraction, count = agreement(policy, onnx_path, [*samples, *more])
    assert count == len(samples) * 6
    assert fraction == 1.0


def test_in_process_onnx_episode_matches_the_python_agent_over_the_pipe(
    trained,
    modules,  # noqa: F811
    plugin,  # noqa: F811
    tmp_path,
):
    """The same policy as ONNX inside opt and as PyTorch over the pipe takes the same steps."""
    policy, _, _, _, onnx_path, _ = trained
    for module in modules:
        out = tmp_path / "onnx.bc"
        argv = phase_order_command(
            module, out, plugin=plugin, runner="onnx", model=onnx_path, max_steps=4, trace=True
        )
        onnx_actions = [s.action for s in parse_trace(run_tool(argv, 120).stderr)]
        with PhaseOrderEnv([module], plugin=plugin, max_steps=4) as env:
            ep = run_episode(env, module, policy.act, keep_output=tmp_path / "pipe.bc")
        pipe_actions = [None if a == env.stop_action else a for a in ep.actions]
        assert onnx_actions == pipe_actions
        assert text_size(out) == text_size(tmp_path / "pipe.bc")


def test_policy_json_round_trip(trained, tmp_path):
    policy, _, samples, _, _, _ = trained
    path = policy.save(tmp_path / "policy.json")
    back = PhasePolicy.load(path)
    assert (back.dim, back.n_actions, back.hidden) == (policy.dim, policy.n_actions, policy.hidden)
    for s in samples:
        np.testing.assert_array_equal(back.probabilities(s), policy.probabilities(s))
    (tmp_path / "other.json").write_text('{"format": "something-else"}')
    with pytest.raises(MLBridgeError, match="not a phase-ordering policy"):
        PhasePolicy.load(tmp_path / "other.json")


def test_heldout_evaluation_measures_text_bytes(trained, modules, plugin):  # noqa: F811
    _, _, _, _, onnx_path, _ = trained
    lines: list[str] = []
    results = evaluate_heldout(
        onnx_path, modules[:1], plugin=plugin, max_steps=4, jobs=1, log=lines.append
    )
    (r,) = results
    assert r.module == str(modules[0])
    assert r.unoptimized > 0 and r.oz > 0 and r.agent > 0
    # -Oz removes the unoptimised code's stack traffic: smaller than no optimisation.
    assert r.oz < r.unoptimized
    summary = summarize_heldout(results)
    assert summary["text_bytes"] == {"unoptimized": r.unoptimized, "oz": r.oz, "agent": r.agent}
    assert summary["mean_steps"] == len(r.actions)
    assert len(lines) == 1


def test_training_needs_two_episodes_per_module(modules, plugin):  # noqa: F811
    with pytest.raises(ValueError, match="at least 2"):
        train_phase_order(modules, PGConfig(episodes_per_module=1), plugin=plugin)


def test_cli_has_the_phase_order_problem():
    from mlbridge.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["train", "phase-order", "--help"])
    assert exc.value.code == 0


def test_size_change_text_has_one_sign():
    from mlbridge.phase_order.trainer import size_change_text

    assert size_change_text(0.124) == "-12.4%"  # 12.4 % of the code removed
    assert size_change_text(-0.124) == "+12.4%"  # the code grew
    assert size_change_text(0.0) == "+0.0%"


def test_training_log_lines_give_the_code_size_change_with_one_sign(trained):
    import re

    _, _, _, lines, _, _ = trained
    for line in lines[:2]:
        assert re.search(r"code size [+-]\d+\.\d%", line), line
        assert not re.search(r"[+-][+-]\d", line), line


def test_cli_refuses_one_episode_per_module_with_a_message(tmp_path, capsys):
    from mlbridge.cli import main

    status = main(["train", "phase-order", "-o", str(tmp_path), "--episodes-per-module", "1"])
    assert status == 1
    err = capsys.readouterr().err
    assert "--episodes-per-module must be at least 2 (got 1)" in err
    assert "Traceback" not in err


def test_checkpoints_refuse_other_settings_and_an_unfinished_run(modules, plugin, tmp_path):  # noqa: F811
    from mlbridge.phase_order import PhaseOrderError
    from mlbridge.training.pool import LocalRolloutPool

    config = PGConfig(
        teacher="0",
        bc_modules=1,
        bc_epochs=5,
        iterations=1,
        modules_per_iteration=1,
        episodes_per_module=2,
        validation_modules=0,
        max_steps=3,
        jobs=1,
        seed=1,
    )
    folder = tmp_path / "checkpoints"
    with LocalRolloutPool(1) as pool:
        train_phase_order(modules, config, plugin=plugin, pool=pool, checkpoint_dir=folder)
        assert sorted(p.name for p in folder.iterdir()) == [
            "iteration-000000.json",
            "iteration-000001.json",
        ]
        other = PGConfig(**{**vars(config), "iterations": 2, "learning_rate": 0.5})
        with pytest.raises(PhaseOrderError, match=r"other settings \(learning_rate=0.003 there"):
            train_phase_order(
                modules, other, plugin=plugin, pool=pool, checkpoint_dir=folder, resume=True
            )
        # Without the last checkpoint the run is unfinished: a new run must not mix in.
        (folder / "iteration-000001.json").unlink()
        with pytest.raises(PhaseOrderError, match="unfinished run .* pass --resume"):
            train_phase_order(modules, config, plugin=plugin, pool=pool, checkpoint_dir=folder)
