"""The ML register allocator with its model in another process: pipes and gRPC.

``mlbridge.regalloc.basic_policy`` answering over each pipe serialization, as a gRPC
model server, and as a trainer driving llc's gRPC server, gives the object the
allocator's in-process built-in policy gives, byte for byte; a policy that answers an
illegal action is refused on the model side before anything is sent, naming the mask.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import built_plugin

from mlbridge.compiler.grpc import GrpcCompilerInterface, serve, wait_for_ready_file
from mlbridge.compiler.pipe import drive_compiler
from mlbridge.errors import AdviceConstraintError
from mlbridge.regalloc import Agent, RandomPolicy, advice_spec, basic_policy, feature_specs
from mlbridge.regalloc.interface import MASK

PRESSURE = Path(__file__).resolve().parents[1] / "lit" / "Inputs" / "regalloc-pressure.c"


@pytest.fixture(scope="module")
def pressure_ll(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("regalloc-pipe") / "pressure.ll"
    subprocess.run(
        ["clang-22", "-O2", "-S", "-emit-llvm", str(PRESSURE), "-o", str(out)], check=True
    )
    return out


def _llc(module: Path, out: Path, *options: str) -> list[str]:
    return [
        "llc-22", "-O2", "-filetype=obj", f"-load-pass-plugin={built_plugin('llc')}",
        "-regalloc=mlbridge", "-verify-machineinstrs", *options, str(module), "-o", str(out),
    ]  # fmt: skip


@pytest.mark.parametrize("serdes", ["json", "bitstream", "protobuf"])
def test_python_basic_policy_gives_the_builtin_policys_object(
    serdes: str, pressure_ll: Path, tmp_path: Path
) -> None:
    subprocess.run(_llc(pressure_ll, tmp_path / "builtin.o"), check=True)
    seen: list[int] = []

    def policy(obs: dict[str, np.ndarray]) -> np.ndarray:
        seen.append(int(obs["agent"][0]))
        return basic_policy(obs)

    result = drive_compiler(
        _llc(pressure_ll, tmp_path / "pipe.o", "-mlbridge-regalloc-runner=pipe",
             "-mlbridge-regalloc-channel={base}", f"-mlbridge-regalloc-serdes={serdes}"),
        policy, serdes=serdes, timeout=60, require_end=True,
    )  # fmt: skip
    assert result.returncode == 0
    assert (tmp_path / "pipe.o").read_bytes() == (tmp_path / "builtin.o").read_bytes()
    # Both agents acted, each priority decision followed by a coloring one.
    assert seen[0] == Agent.PRIORITY and Agent.COLORING in seen
    assert result.header is not None
    assert [s.name for s in result.header.features] == [s.name for s in feature_specs()]
    assert result.header.advice.name == advice_spec().name


def test_illegal_action_is_refused_on_the_model_side_naming_the_mask(
    pressure_ll: Path, tmp_path: Path
) -> None:
    def policy(obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.array([len(obs[MASK])], np.int64)  # one past the last action

    with pytest.raises(AdviceConstraintError, match=MASK):
        drive_compiler(
            _llc(pressure_ll, tmp_path / "out.o", "-mlbridge-regalloc-runner=pipe",
                 "-mlbridge-regalloc-channel={base}", "-mlbridge-regalloc-serdes=json"),
            policy, serdes="json", timeout=60,
        )  # fmt: skip


def test_python_basic_policy_as_a_grpc_model_server_gives_the_builtin_policys_object(
    pressure_ll: Path, tmp_path: Path
) -> None:
    subprocess.run(_llc(pressure_ll, tmp_path / "builtin.o"), check=True)
    with serve(basic_policy, "127.0.0.1:0") as server:
        run = subprocess.run(
            _llc(pressure_ll, tmp_path / "grpc.o", "-mlbridge-regalloc-runner=grpc",
                 f"-mlbridge-regalloc-address={server.address}"),
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert (tmp_path / "grpc.o").read_bytes() == (tmp_path / "builtin.o").read_bytes()


def test_trainer_driving_llc_as_a_grpc_server_gives_the_builtin_policys_object(
    pressure_ll: Path, tmp_path: Path
) -> None:
    subprocess.run(_llc(pressure_ll, tmp_path / "builtin.o"), check=True)
    ready = tmp_path / "ready.txt"
    llc = subprocess.Popen(
        _llc(pressure_ll, tmp_path / "served.o", "-mlbridge-regalloc-runner=grpc-server",
             f"-mlbridge-regalloc-ready-file={ready}", "-mlbridge-regalloc-timeout-ms=60000"),
    )  # fmt: skip
    try:
        contexts = []
        with GrpcCompilerInterface(wait_for_ready_file(ready, timeout=60), timeout=60) as ci:
            while (obs := ci.evaluate()) is not None:
                contexts.append(obs.context)
                ci.respond(basic_policy(obs))
        assert llc.wait(60) == 0
    finally:
        if llc.poll() is None:
            llc.kill()
            llc.wait()
    assert (tmp_path / "served.o").read_bytes() == (tmp_path / "builtin.o").read_bytes()
    assert list(dict.fromkeys(contexts)) == ["main", "mix"]


def test_grpc_server_on_a_free_port_without_a_ready_file_is_refused(
    pressure_ll: Path, tmp_path: Path
) -> None:
    run = subprocess.run(
        _llc(pressure_ll, tmp_path / "out.o", "-mlbridge-regalloc-runner=grpc-server"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 1
    assert "-mlbridge-regalloc-ready-file=<path>" in run.stderr


def test_split_agent_acts_over_the_pipe_and_the_program_stays_correct(
    pressure_ll: Path, tmp_path: Path
) -> None:
    random = RandomPolicy(seed=4)
    splits: list[tuple[int, int]] = []

    def policy(obs: dict[str, np.ndarray]) -> np.ndarray:
        if int(obs["agent"][0]) == Agent.SPLIT:
            splits.append((obs["block_features"].shape[0], obs[MASK].size))
        return random(obs)

    asm = tmp_path / "split.s"
    drive_compiler(
        ["llc-22", "-O2", "-relocation-model=pic", f"-load-pass-plugin={built_plugin('llc')}",
         "-regalloc=mlbridge", "-mlbridge-regalloc-split", "-verify-machineinstrs",
         "-mlbridge-regalloc-runner=pipe", "-mlbridge-regalloc-channel={base}",
         str(pressure_ll), "-o", str(asm)],
        policy, serdes="bitstream", timeout=60, require_end=True,
    )  # fmt: skip
    # One row per candidate block, and one more action: spilling.
    assert splits and all(mask == rows + 1 for rows, mask in splits)
    subprocess.run(["clang-22", str(asm), "-o", str(tmp_path / "split")], check=True)
    run = subprocess.run([str(tmp_path / "split")], capture_output=True, text=True, check=True)
    assert run.stdout == "mix=3015572717912299\n"


def test_only_decisions_with_a_choice_are_asked(
    pressure_ll: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # The allocator takes an action that is the only legal one itself (the last queued
    # live range of a function, at least): every query has a choice, and the remarks
    # still name every priority decision, asked or not.
    legal: list[int] = []
    asked = 0

    def policy(obs: dict[str, np.ndarray]) -> np.ndarray:
        nonlocal asked
        legal.append(int(np.count_nonzero(obs[MASK])))
        asked += int(obs["agent"][0]) == Agent.PRIORITY
        return basic_policy(obs)

    drive_compiler(
        _llc(pressure_ll, tmp_path / "pipe.o", "-mlbridge-regalloc-runner=pipe",
             "-mlbridge-regalloc-channel={base}", "-pass-remarks-analysis=mlbridge-regalloc"),
        policy, serdes="bitstream", timeout=60, require_end=True,
    )  # fmt: skip
    remarks = capfd.readouterr().err.count("priority agent: node")
    assert legal and min(legal) >= 2
    assert remarks > asked > 0
