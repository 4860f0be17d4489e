"""The Gymnasium environment (mlbridge.gym) around stock opt-22's ML inliner.

Every test runs the real opt-22 over LLVM's interactive pipe protocol; nothing is mocked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from conftest import VECTORS
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from mlbridge.gym import INLINER_ENV_ID, CompilationError, CompilerEnv, inliner_env, register
from mlbridge.gym.rewards import (
    TextSizeReward,
    find_llvm_tool,
    ir_instruction_count,
    ir_instruction_count_reward,
)
from mlbridge.logs import read_log

MODULE = VECTORS / "llvm22" / "inline-sample.ll"
BOUND = 60.0  # bound of every wait (never reached when green)
FILECHECK = find_llvm_tool("FileCheck")


def run_filecheck(tmp_path: Path, text: str, checks: str, prefix: str = "CHECK") -> None:
    check_file = tmp_path / f"{prefix}.checks"
    check_file.write_text(checks)
    proc = subprocess.run(
        [FILECHECK, f"--check-prefix={prefix}", str(check_file)],
        input=text.encode(),
        capture_output=True,
        timeout=BOUND,
    )
    assert proc.returncode == 0, proc.stderr.decode()


def make_env(tmp_path: Path, **kwargs) -> CompilerEnv:
    return inliner_env(
        MODULE, timeout=BOUND, connect_timeout=BOUND, workdir_parent=tmp_path, **kwargs
    )


def inline_small(obs: dict[str, np.ndarray]) -> int:
    return int(obs["callee_basic_block_count"][0] <= 1)


def play(env: CompilerEnv, policy) -> tuple[list[int], float, dict]:
    obs, info = env.reset()
    actions = []
    while True:
        a = policy(obs)
        actions.append(a)
        obs, reward, terminated, truncated, info = env.step(a)
        assert not truncated
        if terminated:
            return actions, reward, info


def test_check_env_passes_on_the_registered_inliner_env(tmp_path):
    register()
    register()  # idempotent
    env = gymnasium.make(
        INLINER_ENV_ID,
        module=str(MODULE),
        reward=ir_instruction_count_reward,
        timeout=BOUND,
        connect_timeout=BOUND,
        workdir_parent=tmp_path,
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # check_env reports problems as warnings
            check_env(env.unwrapped)
    finally:
        env.close()
    assert os.listdir(tmp_path) == []


def test_spaces_come_from_the_compilers_header(tmp_path):
    with make_env(tmp_path, include_default=True) as env:
        assert isinstance(env.observation_space, spaces.Dict)
        assert len(env.observation_space.spaces) == 39
        assert list(env.observation_space.spaces)[-1] == "inlining_default"
        box = env.observation_space["callee_basic_block_count"]
        assert isinstance(box, spaces.Box)
        assert box.shape == (1,) and box.dtype == np.int64
        assert env.action_space == spaces.Discrete(2)
        assert env.header.advice is not None and env.header.advice.name == "inlining_decision"
    # Without n_actions, the advice's own space; a subset of the features on request.
    with CompilerEnv(
        ["opt-22", "-passes=default<O2>", "-enable-ml-inliner=release",
         "-inliner-interactive-channel-base={base}", str(MODULE), "-o", "/dev/null"],
        features=["callee_basic_block_count", "callsite_height"],
        timeout=BOUND, connect_timeout=BOUND, workdir_parent=tmp_path,
    ) as env:  # fmt: skip
        assert list(env.observation_space.spaces) == ["callee_basic_block_count", "callsite_height"]
        assert isinstance(env.action_space, spaces.Box)
        assert env.action_space.shape == (1,) and env.action_space.dtype == np.int64
        obs, _ = env.reset()
        assert set(obs) == {"callee_basic_block_count", "callsite_height"}
        assert env.observation_space.contains(obs)
        _, _, terminated, _, _ = env.step(np.array([0]))
        assert not terminated


def test_known_policy_reproduces_the_known_inlining(tmp_path):
    size = TextSizeReward()
    with make_env(tmp_path, reward=size, include_default=True) as env:
        actions, reward, info = play(env, inline_small)
        # The lit test's decisions: inline iff the callee has one block.
        assert actions == [1, 1, 1, 0, 0, 1, 1]
        result = info["result"]
        assert result.returncode == 0 and result.decisions == 7 and result.contexts == [""]
        ir = env.output_path.read_text()
        # The reward is minus the .text size of the output, measured independently here.
        assert reward == -size.text_size(result) < 0
        assert ir_instruction_count_reward(result) == -ir_instruction_count(ir)
    run_filecheck(
        tmp_path,
        ir,
        """
; CHECK-LABEL: define dso_local i32 @ext_mid(
; CHECK-NOT:   call {{.*}}@sq(
; CHECK-NOT:   call {{.*}}@tiny_add(
; CHECK-LABEL: define dso_local i32 @driver(
; CHECK-NEXT:    call fastcc i32 @big(
; CHECK-NEXT:    call i32 @ext_mid(
; CHECK-NOT:   call
; CHECK:       ret i32
; CHECK-LABEL: define internal fastcc i32 @big(
; CHECK-NOT:   call {{.*}}@tiny_add(
; CHECK:       ret i32
""",
    )
    run_filecheck(tmp_path, ir, "; GONE-NOT: @sq(\n; GONE-NOT: @tiny_add(\n", "GONE")


def test_never_inline_keeps_every_call_and_makes_less_code_than_inlining(tmp_path):
    with make_env(tmp_path, reward=ir_instruction_count_reward) as env:
        actions, reward_none, _ = play(env, lambda obs: 0)
        ir = env.output_path.read_text()
        _, reward_small, _ = play(env, inline_small)
    assert len(actions) == 7
    run_filecheck(
        tmp_path,
        ir,
        """
; NONE-LABEL: define dso_local i32 @ext_mid(
; NONE:         call {{.*}}i32 @sq(
; NONE:         call {{.*}}i32 @tiny_add(
; NONE-LABEL: define dso_local i32 @driver(
; NONE:         call {{.*}}i32 @big(
""",
        "NONE",
    )
    # The reward is minus the instruction count. On this module inlining the small
    # callees copies their bodies into several callers: keeping every call is less code
    # (73 against 118 instructions with opt-22 at -O2).
    assert reward_none > reward_small


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _fifos_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_fifo()]


def test_close_mid_episode_leaves_no_process_or_fifo(tmp_path):
    env = make_env(tmp_path)
    env.reset()
    env.step(1)
    pid = env.compiler_pid
    base = env.channel_base
    assert pid is not None and _alive(pid)
    assert base is not None and Path(f"{base}.in").is_fifo()
    env.close()
    env.close()  # idempotent
    assert not _alive(pid)  # reaped: not even a zombie
    assert not Path(f"{base}.in").exists() and not Path(f"{base}.out").exists()
    assert _fifos_under(tmp_path) == [] and os.listdir(tmp_path) == []
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step(1)


def test_reset_mid_episode_reaps_the_previous_compiler(tmp_path):
    with make_env(tmp_path) as env:
        env.reset()
        first_pid, first_base = env.compiler_pid, env.channel_base
        obs, _ = env.reset()
        assert env.compiler_pid != first_pid
        assert not _alive(first_pid)
        assert not Path(f"{first_base}.in").exists()
        assert len(_fifos_under(tmp_path)) == 2  # only the running episode's pair
        assert obs["callee_basic_block_count"].shape == (1,)
    assert os.listdir(tmp_path) == []


def test_a_failing_reward_hook_ends_the_episode_cleanly(tmp_path):
    def broken(result):
        raise RuntimeError("reward failed")

    with make_env(tmp_path, reward=broken) as env:
        with pytest.raises(RuntimeError, match="reward failed"):
            play(env, inline_small)
        assert env.compiler_pid is None
        assert _fifos_under(tmp_path) == []
        with pytest.raises(gymnasium.error.ResetNeeded):
            env.step(1)
    assert os.listdir(tmp_path) == []


def test_a_compiler_that_fails_is_an_error_naming_it(tmp_path):
    with pytest.raises(CompilationError, match="exited with code 1.*missing.ll"):
        inliner_env(tmp_path / "missing.ll", connect_timeout=BOUND, workdir_parent=tmp_path)
    assert os.listdir(tmp_path) == []


def test_a_compiler_killed_by_a_signal_is_an_error_naming_the_signal(tmp_path):
    # The compile ends normally, then the process dies by SIGSEGV: its exit status is
    # -11, which must never read as a result.
    from mlbridge.gym.env import inliner_command

    # opt is sh's child: it dies with sh (setpriv's parent-death signal) if the
    # environment ends the episode early, instead of spinning on the closed FIFOs.
    script = 'setpriv --pdeathsig=KILL -- "$@" && kill -SEGV $$'
    command = ["sh", "-c", script, "sh", *inliner_command(MODULE)]
    env = CompilerEnv(
        command,
        n_actions=2,
        output_name="output.ll",
        timeout=BOUND,
        connect_timeout=BOUND,
        workdir_parent=tmp_path,
    )
    with env:
        env.reset()
        with pytest.raises(CompilationError, match=r"killed by SIGSEGV \(signal 11\)"):
            while True:
                _, _, terminated, _, _ = env.step(0)
                if terminated:
                    break
    assert os.listdir(tmp_path) == []


def test_max_steps_truncates_and_stops_the_compiler(tmp_path):
    with make_env(tmp_path, max_steps=2) as env:
        env.reset()
        pid = env.compiler_pid
        _, _, terminated, truncated, _ = env.step(1)
        assert not terminated and not truncated
        _, _, terminated, truncated, _ = env.step(1)
        assert truncated and not terminated
        assert not _alive(pid) and _fifos_under(tmp_path) == []


def test_episodes_can_be_captured_for_training(tmp_path):
    with make_env(tmp_path / "work", capture=tmp_path / "logs") as env:
        actions, _, _ = play(env, inline_small)
    log = read_log(tmp_path / "logs" / "episode-1.bitstream")
    assert len(log) == 7
    assert log.stacked_advice().ravel().tolist() == actions
    assert log.stacked()["callee_basic_block_count"].ravel().tolist() == [1, 1, 1, 13, 4, 1, 1]


def test_llvm_tools_are_found():
    assert Path(find_llvm_tool("llc")).is_file()
    assert shutil.which(find_llvm_tool("llvm-size"))
