"""``mlbridge train phase-order --algorithm rllib-ppo``: RLlib's PPO on the real pass.

One job of the command line (a local Ray instance, 2 env runners, 2 PPO iterations of 32
decisions on a corpus of three small modules, no held-out evaluation) is shared by the
tests of what it writes; a second job of one iteration is resumed for a second. RLlib is a
development dependency: these tests never skip for want of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_phase_order_env import plugin  # noqa: F401 - shared fixture
from test_ray_training import SOURCES, job_env, make_corpus, scalars

from mlbridge.phase_order import parse_trace, phase_order_command, run_tool
from mlbridge.phase_order.env import PhaseOrderEnv
from mlbridge.phase_order.policy import PhasePolicy
from mlbridge.phase_order.trainer import run_episode

#: A tiny PPO job: 32 decisions per iteration in minibatches of 16, two epochs, <= 4 steps.
PPO_JOB = ["--algorithm", "rllib-ppo", "--steps-per-iteration", "32", "--minibatch-size", "16",
           "--ppo-epochs", "2", "--max-steps", "4", "--seed", "3", "--no-eval"]  # fmt: skip


def train(corpus: Path, out: Path, *args: str, timeout: float = 240) -> tuple[int, str]:
    """``python -m mlbridge train phase-order --algorithm rllib-ppo``: (status, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mlbridge", "train", "phase-order", "--corpus", str(corpus),
         *PPO_JOB, *args, "-o", str(out)],
        capture_output=True, text=True, timeout=timeout, env=job_env(), cwd=out.parent,
    )  # fmt: skip
    assert proc.stdout == "", f"the command wrote to stdout: {proc.stdout!r}"
    return proc.returncode, proc.stderr


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("ppo-corpus"), SOURCES)


@pytest.fixture(scope="module")
def ppo_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The two-iteration job on 2 env runners: (output folder, stderr)."""
    out = tmp_path_factory.mktemp("ppo-run") / "out"
    status, log = train(corpus, out, "--workers", "2", "--iterations", "2")
    assert status == 0, log
    return out, log


def test_the_trained_policy_runs_in_the_pass_as_onnx_and_decides_as_over_the_pipe(
    ppo_run,
    corpus: Path,
    plugin: Path,  # noqa: F811
    tmp_path: Path,
):
    out, _ = ppo_run
    policy = PhasePolicy.load(out / "policy.json")
    assert "rllib-ppo" in policy.metadata["trainer"]
    module = corpus / "bc" / "phase_order.bc"
    argv = phase_order_command(
        module,
        tmp_path / "onnx.bc",
        plugin=plugin,
        runner="onnx",
        model=out / "agent.onnx",
        max_steps=4,
        trace=True,
    )
    onnx_actions = [s.action for s in parse_trace(run_tool(argv, 120).stderr)]
    with PhaseOrderEnv([module], plugin=plugin, max_steps=4) as env:
        episode = run_episode(env, module, policy.act)
    assert onnx_actions == [None if a == env.stop_action else a for a in episode.actions]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["export_agreement"]["fraction"] == 1.0
    assert metrics["export_agreement"]["samples"] > 0


def test_workers_2_runs_two_env_runners(ppo_run):
    out, log = ppo_run
    training = json.loads((out / "metrics.json").read_text())["training"]
    assert training["algorithm"] == "rllib-ppo"
    assert len(training["env_runners"]) == 2
    assert "RLlib's PPO with 2 env runners" in log
    assert "2 env runners on 1 node(s)" in log


def test_the_training_reward_is_recorded_per_iteration(ppo_run):
    out, log = ppo_run
    training = json.loads((out / "metrics.json").read_text())["training"]
    first, second = training["iterations"]
    # Every iteration samples 32 decisions (RLlib's train batch) over the env runners.
    assert (first["env_steps_lifetime"], second["env_steps_lifetime"]) == (32, 64)
    assert first["episodes"] >= 8  # at most 4 steps an episode
    assert 0 < first["return_mean"] <= 100  # the modules' size reduction, in percent
    tags = scalars(out / "tensorboard")
    assert sorted(tags["reward/mean_size_reduction_pct"]) == [1, 2]
    assert tags["reward/mean_size_reduction_pct"][2] == pytest.approx(
        second["return_mean"], abs=1e-4
    )
    assert sorted(tags["policy/entropy"]) == [1, 2]
    assert "iteration 2/2: code size -" in log
    png = (out / "curve.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert [p.name for p in sorted((out / "checkpoints").iterdir())] == [
        "iteration-000001",
        "iteration-000002",
    ]


def test_a_resumed_job_continues_rllibs_state_from_the_checkpoint(corpus: Path, tmp_path: Path):
    out = tmp_path / "out"
    status, log = train(corpus, out, "--workers", "1", "--iterations", "1")
    assert status == 0, log
    status, log = train(corpus, out, "--workers", "1", "--iterations", "2", "--resume")
    assert status == 0, log
    assert "resuming from" in log and "iteration-000001 (iteration 1/2)" in log
    training = json.loads((out / "metrics.json").read_text())["training"]
    assert training["resumed_from_iteration"] == 1
    # RLlib's own counters went on from the checkpoint's.
    assert [r["env_steps_lifetime"] for r in training["iterations"]] == [32, 64]


def test_the_rlmodule_acts_with_the_weights_of_the_converted_policy():
    from gymnasium import spaces

    from mlbridge.phase_order.rllib_ppo import PhasePolicyRLModule, policy_of_weights

    dim, n = 5, 3
    obs_space = spaces.Dict(
        {
            "observation": spaces.Box(-1e6, 1e6, (dim,), np.float32),
            "step": spaces.Box(0, 15, (1,), np.int64),
            "code_size": spaces.Box(0, 10**9, (1,), np.int64),
            "action_count": spaces.Box(0, 10**9, (1,), np.int64),
            "action_history": spaces.Box(0, 15, (n,), np.float32),
        }
    )
    torch.manual_seed(0)
    module = PhasePolicyRLModule(
        observation_space=obs_space, action_space=spaces.Discrete(n + 1), model_config={"hidden": 8}
    )
    policy = policy_of_weights(module.state_dict(), {})
    assert (policy.dim, policy.n_actions, policy.hidden) == (dim, n, 8)
    rng = np.random.default_rng(1)
    batch = {
        "observation": torch.as_tensor(rng.uniform(0, 50, (6, dim)).astype(np.float32)),
        "step": torch.as_tensor(rng.integers(0, 4, (6, 1))),
        "code_size": torch.as_tensor(rng.integers(1, 5000, (6, 1))),
        "action_count": torch.full((6, 1), n),
        "action_history": torch.as_tensor(rng.integers(0, 2, (6, n)).astype(np.float32)),
    }
    with torch.no_grad():
        logits = module.forward_inference({"obs": batch})["action_dist_inputs"]
        values = module.compute_values({"obs": batch})
    expected = policy.logits(
        batch["observation"], batch["step"], batch["code_size"], batch["action_history"]
    )
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)
    assert values.shape == (6,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--algorithm", "rllib-ppo", "--no-ray"], "--algorithm rllib-ppo runs on Ray"),
        (
            ["--algorithm", "rllib-ppo", "--teacher", "0-3", "--bc-epochs", "5"],
            "--teacher, --bc-epochs are options of --algorithm reinforce, not of --algorithm "
            "rllib-ppo",
        ),
        (
            ["--steps-per-iteration", "64"],
            "--steps-per-iteration is an option of --algorithm rllib-ppo, not of --algorithm "
            "reinforce",
        ),
    ],
    ids=["rllib-without-ray", "rllib-with-teacher", "reinforce-with-ppo-option"],
)
def test_options_of_the_other_algorithm_are_refused(args, message, tmp_path, capsys):
    from mlbridge.cli import main

    assert main(["train", "phase-order", "-o", str(tmp_path), *args]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_a_reinforce_checkpoint_folder_is_refused_by_rllib_ppo(corpus: Path, tmp_path, capsys):
    from mlbridge.cli import main

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "iteration-000001.json").write_text("{}")
    status = main(
        ["train", "phase-order", "--algorithm", "rllib-ppo", "-o", str(tmp_path),
         "--corpus", str(corpus), "--checkpoint-dir", str(folder), "--resume"]
    )  # fmt: skip
    assert status == 1
    assert f"no checkpoint to resume from in {folder}" in capsys.readouterr().err


def test_ppo_starts_its_policy_network_from_the_init_policy(ppo_run, corpus: Path, tmp_path):
    trained, _ = ppo_run
    start = PhasePolicy.load(trained / "policy.json")
    out = tmp_path / "out"
    # With a step size of 0 PPO's updates change nothing: what comes out is where it started.
    status, log = train(corpus, out, "--workers", "1", "--iterations", "1", "--learning-rate",
                        "0", "--init-policy", str(trained / "policy.json"))  # fmt: skip
    assert status == 0, log
    assert "the policy network starts from" in log
    end = PhasePolicy.load(out / "policy.json")
    for name, value in start.state_dict().items():
        assert torch.equal(end.state_dict()[name], value), name


def test_an_init_policy_of_another_hidden_width_is_refused(ppo_run, tmp_path, capsys):
    from mlbridge.cli import main

    trained, _ = ppo_run
    status = main(
        ["train", "phase-order", "--algorithm", "rllib-ppo", "-o", str(tmp_path / "out"),
         "--hidden", "32", "--init-policy", str(trained / "policy.json")]
    )  # fmt: skip
    assert status == 1
    err = capsys.readouterr().err
    assert "has hidden width 64, the policy to train 32: give --hidden 64" in err
    assert "Traceback" not in err
