"""``mlbridge train regalloc --algorithm rllib-ppo``: multi-agent PPO on the real allocator.

One job of the command line (a local Ray instance, 2 env runners, a PPO iteration of 512
decisions with the split agent and ``-verify-machineinstrs``, on a corpus of two small
modules, no held-out evaluation), resumed for a second iteration, is shared by the tests
of what it writes. The
environment's tests play episodes of llc-22 with the plugin in this process. RLlib is a
development dependency: these tests never skip for want of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, built_plugin
from test_ray_training import VECTORS, job_env, make_corpus, scalars

from mlbridge.compiler.pipe import drive_compiler
from mlbridge.regalloc.gnn import RegallocGNN, agreement
from mlbridge.regalloc.interface import BLOCK_FEATURES, MASK
from mlbridge.training.pool import SharedFile, _share_local

PRESSURE = REPO / "test" / "lit" / "Inputs" / "regalloc-pressure.c"
SOURCES = [PRESSURE, VECTORS / "llvm22" / "inline-sample.c"]
#: A tiny job: 512 decisions per iteration in minibatches of 128, two epochs; the agents
#: make at most 200 decisions an episode (the basic policy the rest), so that each env
#: runner ends an episode in every iteration.
PPO_JOB = ["--algorithm", "rllib-ppo", "--steps-per-iteration", "512", "--minibatch-size", "128",
           "--ppo-epochs", "2", "--split", "--verify-machineinstrs", "--max-decisions", "200",
           "--seed", "1", "--no-eval"]  # fmt: skip


def train(corpus: Path, out: Path, *args: str, timeout: float = 240) -> tuple[int, str]:
    """``python -m mlbridge train regalloc --algorithm rllib-ppo``: (status, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mlbridge", "train", "regalloc", "--corpus", str(corpus),
         *PPO_JOB, *args, "-o", str(out)],
        capture_output=True, text=True, timeout=timeout, env=job_env(), cwd=out.parent,
    )  # fmt: skip
    assert proc.stdout == "", f"the command wrote to stdout: {proc.stdout!r}"
    return proc.returncode, proc.stderr


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("regalloc-ppo-corpus"), SOURCES)


@pytest.fixture(scope="module")
def ppo_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The job on 2 env runners, one iteration, then resumed for a second: (folder, stderr).

    Its agents start from a random ``RegallocGNN``'s weights (``init.json`` beside it), one
    with a split agent, as ``mlbridge train regalloc --split`` writes (the split agent takes
    its split heads too).

    The stderr is the resumed job's.
    """
    out = tmp_path_factory.mktemp("regalloc-ppo-run") / "out"
    torch.manual_seed(5)
    init = RegallocGNN(hidden=32, split=True).save(out.parent / "init.json")
    status, log = train(
        corpus, out, "--workers", "2", "--iterations", "1", "--init-policy", str(init)
    )
    assert "every agent's graph network starts from" in log
    assert status == 0, log
    status, log = train(corpus, out, "--workers", "2", "--iterations", "2", "--resume")
    assert status == 0, log
    return out, log


def test_a_resumed_job_continues_rllibs_state_from_the_checkpoint(ppo_run):
    out, log = ppo_run
    assert "iteration-000001 (iteration 1/2)" in log
    training = json.loads((out / "metrics.json").read_text())["training"]
    assert training["resumed_from_iteration"] == 1
    # RLlib's own counters went on from the checkpoint's.
    assert [r["env_steps_lifetime"] for r in training["iterations"]] == [512, 1024]
    assert [p.name for p in sorted((out / "checkpoints").iterdir())] == [
        "iteration-000001",
        "iteration-000002",
    ]


def test_each_agent_is_trained_by_its_own_policy(ppo_run):
    out, log = ppo_run
    training = json.loads((out / "metrics.json").read_text())["training"]
    assert training["algorithm"] == "rllib-ppo"
    assert training["agents"] == ["priority", "coloring", "split"]
    for record in training["iterations"]:
        for agent in ("priority", "coloring", "split"):
            assert record[f"{agent}/entropy"] > 0
    assert "policies priority, coloring, split, 2 env runners" in log
    # One RLModule per agent in RLlib's checkpoint.
    modules = out / "checkpoints" / "iteration-000002" / "learner_group" / "learner" / "rl_module"
    assert sorted(p.name for p in modules.iterdir() if p.is_dir()) == [
        "coloring",
        "priority",
        "split",
    ]
    priority = RegallocGNN.load(out / "priority.json")
    coloring = RegallocGNN.load(out / "coloring.json")
    split = RegallocGNN.load(out / "split.json")
    assert [n.metadata["agent"] for n in (priority, coloring, split)] == [
        "priority",
        "coloring",
        "split",
    ]
    assert "rllib-ppo" in priority.metadata["trainer"]
    assert split.split and not priority.split and not coloring.split
    # Trained apart: the networks differ.
    assert not torch.equal(priority.encoder[0].weight, coloring.encoder[0].weight)
    assert not torch.equal(coloring.encoder[0].weight, split.encoder[0].weight)


def test_the_agents_start_from_the_init_policy(ppo_run):
    out, _ = ppo_run
    init = RegallocGNN.load(out.parent / "init.json").state_dict()
    for agent in ("priority", "coloring", "split"):
        trained = RegallocGNN.load(out / f"{agent}.json").state_dict()
        # Two iterations of small Adam steps move each weight by far less than 0.05.
        if agent == "split":
            assert set(trained) == set(init)  # the split heads too
        else:
            assert set(trained) < set(init)  # all but the split heads
        for name, weight in trained.items():
            torch.testing.assert_close(weight, init[name], rtol=0, atol=0.05)
        assert any(not torch.equal(trained[k], init[k]) for k in trained)


def test_an_init_policy_of_another_width_is_refused(tmp_path: Path):
    from mlbridge.errors import MLBridgeError
    from mlbridge.regalloc.rllib_ppo import RegallocPPOSettings, load_init_policy

    path = RegallocGNN(hidden=8).save(tmp_path / "small.json")
    with pytest.raises(MLBridgeError, match="has hidden 8 and 2 rounds.*give --hidden 8"):
        load_init_policy(RegallocPPOSettings(init_policy=str(path)))


def test_the_reward_is_recorded_per_iteration(ppo_run):
    out, log = ppo_run
    training = json.loads((out / "metrics.json").read_text())["training"]
    first, second = training["iterations"]
    assert second["episodes_lifetime"] >= 1
    # The basic policy's cost minus the agents', in percent of the larger.
    assert -100 <= second["return_mean"] <= 100
    tags = scalars(out / "tensorboard")
    assert tags["reward/mean_cost_change_vs_basic_pct"][2] == pytest.approx(
        second["return_mean"], abs=1e-4
    )
    assert sorted(tags["coloring/entropy"]) == [1, 2]
    assert "iteration 2/2: reward " in log
    check = training["greedy_check"]
    assert check["modules"] == 2 and check["basic_spill_reload_cost"] > 0
    assert (out / "learning-curve.png").read_bytes()[:4] == b"\x89PNG"


def test_the_export_answers_as_each_agents_network_and_allocates_past_the_verifier(
    ppo_run, tmp_path: Path
):
    out, _ = ppo_run
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["export_agreement"]["fraction"] == 1.0
    assert metrics["export_agreement"]["samples"] > 0
    ll = tmp_path / "pressure.ll"
    subprocess.run(
        ["clang-22", "-O2", "-S", "-emit-llvm", str(PRESSURE), "-o", str(ll)], check=True
    )
    # The export runs each agent's own network, the split agent's too: on the queries of a
    # session of random choices with the split agent acting, it answers as each network.
    networks = [RegallocGNN.load(out / f"{a}.json") for a in ("priority", "coloring", "split")]
    rng = np.random.default_rng(3)
    samples: list[dict[str, np.ndarray]] = []

    def record(obs: dict[str, np.ndarray]) -> np.ndarray:
        samples.append({k: np.array(v) for k, v in obs.items()})
        return np.array([rng.choice(np.flatnonzero(obs[MASK]))], np.int64)

    drive_compiler(
        ["llc-22", "-O2", f"-load-pass-plugin={built_plugin('llc')}", "-regalloc=mlbridge",
         "-mlbridge-regalloc-split", "-mlbridge-regalloc-runner=pipe",
         "-mlbridge-regalloc-channel={base}", str(ll), "-o", str(tmp_path / "random.s")],
        record, serdes="bitstream", timeout=120, require_end=True,
    )  # fmt: skip
    splits = [s for s in samples if int(s["agent"][0]) == 2]
    assert splits and any(networks[2].act(s) != len(s[MASK]) - 1 for s in splits)
    priority, coloring, split = networks
    assert agreement(priority, out / "agent.onnx", samples, coloring, split) == (1.0, len(samples))
    asm = tmp_path / "out.s"
    run = subprocess.run(
        ["llc-22", "-O2", "-relocation-model=pic", f"-load-pass-plugin={built_plugin('llc')}",
         "-regalloc=mlbridge", "-mlbridge-regalloc-split",
         f"-mlbridge-regalloc-model={out / 'agent.onnx'}",
         "-verify-machineinstrs", str(ll), "-o", str(asm)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0 and run.stderr == "", run.stderr
    subprocess.run(["clang-22", str(asm), "-o", str(tmp_path / "prog")], check=True)
    done = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, check=True)
    assert done.stdout == "mix=3015572717912299\n"


def test_a_reinforce_checkpoint_folder_is_refused_by_rllib_ppo(corpus: Path, tmp_path, capsys):
    from mlbridge.cli import main

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "iteration-000001.json").write_text("{}")
    status = main(
        ["train", "regalloc", "--algorithm", "rllib-ppo", "-o", str(tmp_path),
         "--corpus", str(corpus), "--checkpoint-dir", str(folder), "--resume"]
    )  # fmt: skip
    assert status == 1
    assert f"no checkpoint to resume from in {folder}" in capsys.readouterr().err


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "new-run"])
def test_a_checkpoint_of_the_former_split_network_says_it_cannot_be_continued(
    resume: bool, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unfinished run of format 1 (before the split agent was a RegallocGNN)."""
    from mlbridge.cli import main
    from mlbridge.training.rllib import RLLIB_STATE_FILE

    folder = tmp_path / "checkpoints"
    old = folder / "iteration-000002"
    old.mkdir(parents=True)
    state = {"kind": "mlbridge-regalloc-rllib-ppo-1", "iteration": 2, "finished": False}
    (old / RLLIB_STATE_FILE).write_text(json.dumps(state))
    status = main(
        ["train", "regalloc", "--algorithm", "rllib-ppo", "-o", str(tmp_path / "out"),
         "--corpus", str(corpus), "--checkpoint-dir", str(folder),
         *(["--resume"] if resume else [])]
    )  # fmt: skip
    assert status == 1
    err = capsys.readouterr().err
    assert (
        f"{old} was written by another version of this trainer (checkpoint format 1; this "
        "one reads format 2, whose networks differ): that run cannot be continued; start a "
        f"new run with another --checkpoint-dir, or remove {folder}"
    ) in " ".join(err.split())
    assert "Traceback" not in err and old.is_dir()


# -- the environment, in this process --------------------------------------------------------


@pytest.fixture(scope="module")
def prepared(corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    """The corpus's modules after -O2 and their functions' basic-policy costs."""
    from mlbridge.regalloc.rllib_ppo import prepare_modules

    folder = tmp_path_factory.mktemp("regalloc-ppo-prepared")
    sources = sorted((corpus / "bc").glob("*.bc"))
    return prepare_modules(sources, built_plugin("llc"), folder)


def make_env(prepared, **settings):
    from mlbridge.regalloc.rllib_ppo import RegallocPPOSettings, RLlibRegallocEnv

    modules, basic = prepared
    files = [SharedFile(f.name, f.digest, f.size, f.path, None) for f in map(_share_local, modules)]
    return RLlibRegallocEnv(
        {
            "modules": files,
            "basic": [{f: asdict(c) for f, c in b.items()} for b in basic],
            "plugin": str(built_plugin("llc")),
            "settings": asdict(RegallocPPOSettings(**settings)),
        }
    )


def play(env, rng: np.random.Generator, module: int) -> tuple[list[str], dict[str, float]]:
    """One episode of random legal actions: the acting agents, in order, and the rewards."""
    obs, _ = env.reset(options={"module": module})
    agents = []
    while True:
        ((agent, o),) = obs.items()
        assert env.observation_spaces[agent].contains(o)
        agents.append(agent)
        action = int(rng.choice(np.flatnonzero(o[MASK])))
        obs, rewards, terminated, truncated, _ = env.step({agent: action})
        if terminated["__all__"]:
            assert obs == {} and not truncated["__all__"]
            return agents, rewards


def test_an_episode_of_random_agents_passes_the_verifier_and_ends_with_the_cost_reward(prepared):
    env = make_env(prepared, split=True, verify=True)
    try:
        agents, rewards = play(env, np.random.default_rng(0), module=0)
    finally:
        env.close()
    summary = env.last_summary
    assert set(agents) == {"priority", "coloring", "split"}
    assert agents[0] == "priority"
    assert summary.decisions == {a: agents.count(a) for a in set(agents)}
    assert summary.rewarded and not summary.left_out
    expected = 100 * (summary.basic_cost - summary.cost) / max(summary.basic_cost, summary.cost)
    assert rewards == dict.fromkeys(("priority", "coloring", "split"), pytest.approx(expected))


def test_an_episode_is_one_function_by_default_rewarded_for_itself(prepared):
    env = make_env(prepared)
    rewarded = set()
    try:
        for seed in range(6):
            _, rewards = play(env, np.random.default_rng(seed), module=0)
            summary = env.last_summary
            (name,) = summary.rewarded  # one function; the others are llc's basic policy's
            assert sum(summary.decisions.values()) > 0
            basic = env.basic[env.modules.index(Path(summary.module))][name]
            assert summary.basic_cost == basic.spill_reload_cost
            top = max(summary.basic_cost, summary.cost)
            expected = 100 * (summary.basic_cost - summary.cost) / top if top else 0.0
            assert rewards == dict.fromkeys(rewards, pytest.approx(expected)) and rewards
            rewarded.add((summary.module, name))
    finally:
        env.close()
    assert len(rewarded) > 1  # the episodes drew different functions


def test_a_query_above_the_bounds_goes_to_the_basic_policy_and_out_of_the_reward(prepared):
    env = make_env(prepared, max_nodes=20, sample_functions=None)
    try:
        play(env, np.random.default_rng(1), module=0)
    finally:
        env.close()
    summary = env.last_summary
    assert summary.left_out  # the larger functions
    assert set(summary.left_out.values()) == {"a query above the observation's bounds"}
    assert not set(summary.left_out) & set(summary.rewarded)


def _children(name: str) -> list[int]:
    """This process's child processes called ``name`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if comm == name and int(fields[1]) == os.getpid() and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def test_closing_in_mid_episode_kills_llc_and_leaves_no_thread_or_file(prepared):
    env = make_env(prepared)
    obs, _ = env.reset(options={"module": 0})
    for _ in range(3):
        ((agent, o),) = obs.items()
        obs, *_ = env.step({agent: int(np.flatnonzero(o[MASK])[0])})
    assert len(_children("llc-22")) == 1
    folder = env._folder
    env.close()
    assert _children("llc-22") == []
    assert not [t for t in threading.enumerate() if t.name == "mlbridge-regalloc-llc"]
    assert not folder.exists()


def test_an_llc_failure_is_a_clear_error_and_leaves_nothing_behind(tmp_path: Path):
    from mlbridge.errors import MLBridgeError
    from mlbridge.regalloc.trainer import FunctionCost

    broken = tmp_path / "broken.bc"
    broken.write_bytes(b"BC\xc0\xdenot bitcode")
    env = make_env(([broken], [{"f": FunctionCost()}]))
    try:
        with pytest.raises(MLBridgeError, match="llc-22"):
            env.reset(options={"module": 0})
        assert not [t for t in threading.enumerate() if t.name == "mlbridge-regalloc-llc"]
        assert _children("llc-22") == []
    finally:
        env.close()


@pytest.mark.parametrize("agent", ["priority", "coloring", "split"])
def test_the_rlmodule_scores_the_padded_query_as_the_graph_network_and_masks_padding(agent):
    from gymnasium import spaces

    from mlbridge.regalloc.rllib_ppo import (
        RegallocAgentRLModule,
        RegallocPPOSettings,
        _pad,
        gnn_of_weights,
        observation_spaces,
    )

    settings = RegallocPPOSettings(split=True, max_nodes=12, max_edges=20, max_registers=6)
    settings.max_blocks = 5
    rng = np.random.default_rng(2)
    n, e, c = 7, 9, 4
    value = ("priority", "coloring", "split").index(agent)
    mask = np.ones(n if agent == "priority" else c + 1, np.int64)
    mask[1] = 0
    raw = {
        "agent": np.array([value]),
        "node_features": rng.uniform(0, 5, (n, 11)).astype(np.float32),
        "edges": rng.integers(0, n, (e, 2)),
        "node": np.array([3 if value else -1]),
        "register_features": rng.uniform(0, 1, (c if value == 1 else 0, 5)).astype(np.float32),
        "block_features": rng.uniform(0, 1, (c if value == 2 else 0, len(BLOCK_FEATURES))).astype(
            np.float32
        ),
        MASK: mask,
    }
    padded, candidates = _pad(raw, agent, settings)
    space = observation_spaces(settings)[agent]
    assert space.contains(padded)
    torch.manual_seed(0)
    module = RegallocAgentRLModule(
        observation_space=space,
        action_space=spaces.Discrete(space[MASK].shape[0]),
        model_config={"agent": agent, "hidden": 8, "rounds": 2},
    )
    batch = {k: torch.as_tensor(v).unsqueeze(0) for k, v in padded.items()}
    with torch.no_grad():
        logits = module.forward_inference({"obs": batch})["action_dist_inputs"][0]
        values = module.compute_values({"obs": batch})
    assert values.shape == (1,)
    legal = np.flatnonzero(padded[MASK])
    assert (logits[np.flatnonzero(padded[MASK] == 0)] <= -1e8).all()
    if agent == "split":
        assert legal.tolist() == [0, 2, 3, settings.max_blocks]  # blocks, then spilling
    gnn = gnn_of_weights(module.state_dict(), {})
    assert gnn.split == (agent == "split")
    with torch.no_grad():
        expected = gnn.logits(raw)
    unpadded = logits[:n] if agent == "priority" else torch.cat([logits[:c], logits[-1:]])
    torch.testing.assert_close(unpadded, expected, rtol=1e-5, atol=1e-5)
    assert candidates == (n if agent == "priority" else c)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--algorithm", "rllib-ppo", "--no-ray"], "--algorithm rllib-ppo runs on Ray"),
        (
            ["--algorithm", "rllib-ppo", "--bc-epochs", "2", "--temperature", "0.5"],
            "--bc-epochs, --temperature are options of --algorithm reinforce, not of "
            "--algorithm rllib-ppo",
        ),
        (
            ["--max-nodes", "64"],
            "--max-nodes is an option of --algorithm rllib-ppo, not of --algorithm reinforce",
        ),
        (
            ["--algorithm", "rllib-ppo", "--steps-per-iteration", "32", "--minibatch-size", "64"],
            "--minibatch-size (64) must not exceed --steps-per-iteration (32)",
        ),
    ],
    ids=["rllib-without-ray", "rllib-with-cloning", "reinforce-with-max-nodes", "minibatch"],
)
def test_options_of_the_other_algorithm_are_refused(args, message, tmp_path, capsys):
    from mlbridge.cli import main

    assert main(["train", "regalloc", "-o", str(tmp_path), *args]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
