"""The phase-ordering Gymnasium environment against the real opt-22 and mlbridge plugin."""

from __future__ import annotations

import os
import subprocess
import warnings
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from conftest import built_plugin, compile_to_bitcode
from gymnasium.utils.env_checker import check_env

from mlbridge.llvm import find_llvm_tool
from mlbridge.phase_order import PhaseOrderError, find_plugin, parse_pipeline, parse_trace
from mlbridge.phase_order.env import PHASE_ORDER_ENV_ID, PhaseOrderEnv, register

# Two small modules with work for the usual sub-sequences: allocas for mem2reg, a loop,
# calls to inline, constants to fold.
SOURCES = {
    "sum.c": """
static int add(int a, int b) { return a + b; }
int sum(const int *v, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s = add(s, v[i]);
  return s;
}
int twice(int x) { int y = x; y = add(y, x); return y * 1; }
""",
    "table.c": """
struct point { int x, y; };
static int dist2(struct point p) { return p.x * p.x + p.y * p.y; }
int farthest(const struct point *ps, int n) {
  int best = -1, where = -1;
  for (int i = 0; i < n; ++i) {
    int d = dist2(ps[i]);
    if (d > best) { best = d; where = i; }
  }
  return where;
}
int unused_branch(int a) { if (0) return a * 3; return a + 0; }
""",
}


@pytest.fixture(scope="session")
def plugin() -> Path:
    return built_plugin("llvm")


@pytest.fixture(scope="session")
def modules(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("phase-order-modules")
    out = []
    for name, text in SOURCES.items():
        src = folder / name
        src.write_text(text)
        out.append(compile_to_bitcode(src, src.with_suffix(".bc")))
    return out


def ir_body(path: Path) -> list[str]:
    """Textual IR without the lines that name the input file."""
    text = subprocess.run(
        [find_llvm_tool("llvm-dis"), str(path), "-o", "-"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [
        line for line in text.splitlines() if not line.startswith(("; ModuleID", "source_filename"))
    ]


def test_the_registered_environment_passes_gymnasiums_checker(modules, plugin, tmp_path):
    register()
    register()  # idempotent
    env = gymnasium.make(
        PHASE_ORDER_ENV_ID, modules=modules, plugin=plugin, max_steps=3, workdir_parent=tmp_path
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # check_env reports problems as warnings
            check_env(env.unwrapped)
    finally:
        env.close()
    assert os.listdir(tmp_path) == []  # opt reaped, FIFOs and the private folder removed


def test_spaces_come_from_the_pass(modules, plugin):
    with PhaseOrderEnv(modules, plugin=plugin, max_steps=3) as env:
        obs, info = env.reset(seed=0, options={"module": modules[0]})
        assert info["module"] == str(modules[0])
        n = int(obs["action_count"][0])
        assert n == env.n_actions and n >= 1
        assert env.action_space.n == n + 1 and env.stop_action == n
        assert obs["observation"].shape == (env.observation_dim,)
        assert obs["observation"].dtype == np.float32
        assert int(obs["step"][0]) == 0 and int(obs["code_size"][0]) > 0
        assert obs["action_history"].shape == (n,) and obs["action_history"].dtype == np.float32
        assert not obs["action_history"].any()
        assert env.observation_space.contains(obs)


def test_an_episode_with_known_actions(modules, plugin, tmp_path):
    """Actions 0, 1, stop: rewards are the size decreases, and the output is what opt
    makes of the two sub-sequences run one after the other."""
    module = modules[0]
    with PhaseOrderEnv(modules, plugin=plugin, max_steps=5) as env:
        obs, _ = env.reset(options={"module": module})
        first_size = int(obs["code_size"][0])
        obs, r0, term, trunc, _ = env.step(0)
        assert (term, trunc) == (False, False) and int(obs["step"][0]) == 1
        assert obs["action_history"][0] == 1 and obs["action_history"].sum() == 1
        obs, r1, term, trunc, _ = env.step(1)
        assert (term, trunc) == (False, False) and int(obs["step"][0]) == 2
        # The history counts each applied sub-sequence.
        assert obs["action_history"][:2].tolist() == [1, 1] and obs["action_history"].sum() == 2
        size_before_stop = int(obs["code_size"][0])
        _, r2, term, trunc, info = env.step(env.stop_action)
        assert (term, trunc) == (True, False) and r2 == 0.0
        ep = info["episode"]
        assert ep.actions == [0, 1, env.stop_action]
        assert ep.initial_size == first_size and ep.final_size == size_before_stop
        assert r0 + r1 == first_size - size_before_stop
        trace = ep.trace
        assert [t.action for t in trace] == [0, 1, None]
        assert [t.step for t in trace] == [0, 1, 2]
        assert [t.size_before - t.size_after for t in trace[:2]] == [r0, r1]
        assert all(t.pipeline for t in trace[:2])
        agent_out = tmp_path / "episode.bc"
        agent_out.write_bytes(ep.output.read_bytes())

    # An episode is its steps as one pipeline: one opt run of the sub-sequences joined
    # by commas makes the same module (docs/phase-order.md).
    opt = find_llvm_tool("opt")
    end = tmp_path / "end.bc"
    assert ep.pipeline == ",".join(t.pipeline for t in trace[:2])
    subprocess.run([opt, f"-passes={ep.pipeline}", str(module), "-o", str(end)], check=True)
    assert ir_body(agent_out) == ir_body(end)


def test_the_step_limit_truncates(modules, plugin):
    with PhaseOrderEnv(modules, plugin=plugin, max_steps=2) as env:
        env.reset(options={"module": modules[1]})
        _, _, term, trunc, _ = env.step(0)
        assert (term, trunc) == (False, False)
        _, _, term, trunc, info = env.step(0)
        assert (term, trunc) == (False, True)
        assert info["episode"].actions == [0, 0]
        assert [t.action for t in info["episode"].trace] == [0, 0]


def test_reset_is_seeded_and_the_compiler_is_reaped(modules, plugin):
    with PhaseOrderEnv(modules, plugin=plugin, max_steps=2) as env:
        picks = []
        for seed in (3, 3, 4, 4):
            _, info = env.reset(seed=seed)
            picks.append(info["module"])
            proc = env._run.proc  # the running opt
        assert picks[0] == picks[1] and picks[2] == picks[3]
    assert proc.poll() is not None  # close() reaped the last one
    assert not env.workdir.exists()


def test_bad_actions_and_steps_out_of_order_are_refused(modules, plugin):
    with PhaseOrderEnv(modules, plugin=plugin, max_steps=2) as env:
        with pytest.raises(gymnasium.error.ResetNeeded):
            env.step(0)
        env.reset(options={"module": modules[0]})
        with pytest.raises(ValueError, match=rf"outside 0\.\.{env.n_actions}"):
            env.step(env.n_actions + 1)


def test_missing_modules_and_plugins_are_named(tmp_path, modules):
    with pytest.raises(FileNotFoundError, match="nope.bc"):
        PhaseOrderEnv([tmp_path / "nope.bc"], plugin=tmp_path / "x.so")
    with pytest.raises(PhaseOrderError, match="is not built"):
        find_plugin(tmp_path)


def test_parse_trace_reads_steps_and_stop():
    text = (
        "warning: something else\n"
        "mlbridge-phase-order: m.bc step 0: action 3 'function(sroa,early-cse)' size 120 -> 80\n"
        "mlbridge-phase-order: m.bc step 1: stop\n"
        "mlbridge-phase-order: m.bc pipeline 'function(sroa,early-cse)'\n"
    )
    steps = parse_trace(text)
    assert [(s.step, s.action, s.pipeline, s.size_before, s.size_after) for s in steps] == [
        (0, 3, "function(sroa,early-cse)", 120, 80),
        (1, None, "", None, None),
    ]


def test_parse_pipeline_reads_the_trace_last_line():
    text = (
        "mlbridge-phase-order: m.bc step 0: action 3 'function(sroa)' size 120 -> 80\n"
        "mlbridge-phase-order: m.bc step 1: action 0 'globaldce' size 80 -> 78\n"
        "mlbridge-phase-order: m.bc step 2: stop\n"
        "mlbridge-phase-order: m.bc pipeline 'function(sroa),globaldce'\n"
    )
    assert parse_pipeline(text) == "function(sroa),globaldce"
    # An episode that applied nothing; a stderr without the line (no trace, or opt died).
    assert (
        parse_pipeline(
            "mlbridge-phase-order: m.bc step 0: stop\nmlbridge-phase-order: m.bc pipeline ''\n"
        )
        == ""
    )
    assert parse_pipeline("mlbridge-phase-order: m.bc step 0: stop\n") is None
