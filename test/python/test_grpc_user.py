"""Training mode with a user's own service: a Python trainer drives the C++ compiler.

The compiler side is ``mlbridge-grpc-tool train-user`` (test/tools/grpc-tool), serving the
``InlinerEnv`` service of test/unit/user_service.proto through ``GrpcUserTrainingService``;
it loads the message types from a descriptor set. The trainer uses nothing of mlbridge's
but the ready file: its stub and messages are generated from the proto at test time with
``grpc_tools.protoc``. Every wait is bounded; nothing asserts on speed.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest
from conftest import REPO, built
from grpc_tools import protoc

from mlbridge.compiler.grpc import wait_for_ready_file
from mlbridge.serdes.user_message import ProtoMessageSerDes

TOOL_NAME = "mlbridge-grpc-tool"
PROTO = REPO / "test" / "unit" / "user_service.proto"
SERVICE = "/mlbridge.unittest.InlinerEnv"
BOUND = 60  # seconds; never reached when green


@pytest.fixture(scope="module")
def tool() -> Path:
    return built(f"bin/{TOOL_NAME}")


class Generated:
    """The user's proto compiled at test time: messages, stub and descriptor set."""

    def __init__(self, out: Path) -> None:
        include = str(Path(protoc.__file__).parent / "_proto")
        self.descriptor_set = out / "user_service.pb"
        args = [
            "protoc", f"-I{PROTO.parent}", f"-I{include}", f"--python_out={out}",
            f"--grpc_python_out={out}", "--include_imports",
            f"--descriptor_set_out={self.descriptor_set}", str(PROTO),
        ]  # fmt: skip
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {PROTO}")
        sys.path.insert(0, str(out))
        try:
            self.pb2: ModuleType = importlib.import_module("user_service_pb2")
            self.pb2_grpc: ModuleType = importlib.import_module("user_service_pb2_grpc")
        finally:
            sys.path.remove(str(out))


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Generated]:
    g = Generated(tmp_path_factory.mktemp("user_service"))
    yield g
    for name in ("user_service_pb2", "user_service_pb2_grpc"):
        sys.modules.pop(name, None)


def start_compiler(
    tool: Path, gen: Generated, ready: Path, rounds: int, *extra: str, timeout_ms: int = 30000
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(tool), "train-user", "--descriptor-set", str(gen.descriptor_set),
         "--observation", "mlbridge.unittest.InlinerObservation",
         "--action", "mlbridge.unittest.InlinerAction",
         "--ready-file", str(ready), "--rounds", str(rounds), "--seed", "3",
         "--timeout-ms", str(timeout_ms), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


OBSERVE_ACT = ("--observe", f"{SERVICE}/Observe", "--act", f"{SERVICE}/Act")
FIELDS = ("--done-field", "done", "--context-field", "function", "--id-field", "step")


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=BOUND)


def advised(stdout: str) -> list[int]:
    return [json.loads(line)["advice"] for line in stdout.splitlines()]


def expected_observations(rounds: int) -> list[tuple[int, str, int, list[float], str]]:
    # The tool's decision i: x = seed * 1000 + i, v = [i + k / 2 for k <= i % 3], name fn<i>.
    return [
        (i, f"fn{i}", 3000 + i, [i + k / 2 for k in range(i % 3 + 1)], f"fn{i}")
        for i in range(rounds)
    ]


def test_trainer_drives_an_episode_with_observe_and_act(tmp_path, tool, gen):
    rounds = 9
    proc = start_compiler(tool, gen, tmp_path / "ready", rounds, *OBSERVE_ACT, *FIELDS)
    seen: list[tuple[int, str, int, list[float], str]] = []
    try:
        address = wait_for_ready_file(tmp_path / "ready", BOUND, alive=lambda: proc.poll() is None)
        with grpc.insecure_channel(address) as channel:
            stub = gen.pb2_grpc.InlinerEnvStub(channel)
            while not (obs := stub.Observe(gen.pb2.Empty(), timeout=BOUND)).done:
                seen.append((obs.step, obs.function, obs.x, list(obs.v), obs.name))
                # The reflection SerDes reads the same message as numpy tensors.
                tensors = {t.name: t for t in ProtoMessageSerDes(type(obs)).from_message(obs)}
                assert tensors["v"].array.dtype.name == "float32"
                stub.Act(gen.pb2.InlinerAction(y=obs.x * 7 + obs.step, step=obs.step),
                         timeout=BOUND)  # fmt: skip
    finally:
        out, err = finish(proc)
    assert proc.returncode == 0, err
    assert seen == expected_observations(rounds)
    assert advised(out) == [(3000 + i) * 7 + i for i in range(rounds)]


def test_trainer_drives_an_episode_with_step_alone(tmp_path, tool, gen):
    rounds = 6
    proc = start_compiler(tool, gen, tmp_path / "ready", rounds, "--step", f"{SERVICE}/Step")
    seen: list[int] = []
    try:
        address = wait_for_ready_file(tmp_path / "ready", BOUND, alive=lambda: proc.poll() is None)
        with grpc.insecure_channel(address) as channel:
            stub = gen.pb2_grpc.InlinerEnvStub(channel)
            obs = stub.Step(gen.pb2.InlinerAction(), timeout=BOUND)  # no y: observe only
            with pytest.raises(grpc.RpcError) as end:
                while True:
                    seen.append(obs.x)
                    obs = stub.Step(gen.pb2.InlinerAction(y=obs.x + 1), timeout=BOUND)
    finally:
        out, err = finish(proc)
    # No DoneField: the call after the end says so with OUT_OF_RANGE.
    assert end.value.code() == grpc.StatusCode.OUT_OF_RANGE, end.value.details()
    assert "the episode is over" in end.value.details()
    assert proc.returncode == 0, err
    assert seen == [3000 + i for i in range(rounds)]
    assert advised(out) == [3000 + i + 1 for i in range(rounds)]


def test_wrong_method_and_malformed_messages_are_refused(tmp_path, tool, gen):
    proc = start_compiler(tool, gen, tmp_path / "ready", 1, *OBSERVE_ACT, *FIELDS)
    try:
        address = wait_for_ready_file(tmp_path / "ready", BOUND, alive=lambda: proc.poll() is None)
        with grpc.insecure_channel(address) as channel:
            stub = gen.pb2_grpc.InlinerEnvStub(channel)
            with pytest.raises(grpc.RpcError) as e:
                stub.Step(gen.pb2.InlinerAction(y=1), timeout=BOUND)  # not served here
            assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert f"serves {SERVICE}/Observe, {SERVICE}/Act, not {SERVICE}/Step" in (
                e.value.details()
            )
            obs = stub.Observe(gen.pb2.Empty(), timeout=BOUND)
            raw: Any = channel.unary_unary(f"{SERVICE}/Act")
            with pytest.raises(grpc.RpcError) as e:
                raw(b"\xff\xff\xff", timeout=BOUND)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "not a valid mlbridge.unittest.InlinerAction" in e.value.details()
            with pytest.raises(grpc.RpcError) as e:
                stub.Act(gen.pb2.InlinerAction(step=obs.step), timeout=BOUND)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "field 'mlbridge.unittest.InlinerAction.y' is not set" in e.value.details()
            stub.Act(gen.pb2.InlinerAction(y=5, step=obs.step), timeout=BOUND)
            assert stub.Observe(gen.pb2.Empty(), timeout=BOUND).done
    finally:
        out, err = finish(proc)
    assert proc.returncode == 0, err
    assert advised(out) == [5]


def test_trainer_gone_mid_episode_ends_the_compiler_with_a_clear_error(tmp_path, tool, gen):
    trainer = tmp_path / "trainer.py"
    # A trainer process that answers the first observation, takes the second, and dies.
    trainer.write_text(
        "import os, signal, sys\n"
        "import grpc\n"
        f"sys.path.insert(0, {str(gen.descriptor_set.parent)!r})\n"
        "import user_service_pb2 as pb2, user_service_pb2_grpc as pb2_grpc\n"
        f"address = open({str(tmp_path / 'ready')!r}).read().strip()\n"
        "stub = pb2_grpc.InlinerEnvStub(grpc.insecure_channel(address))\n"
        "obs = stub.Observe(pb2.Empty(), timeout=60)\n"
        "stub.Act(pb2.InlinerAction(y=1, step=obs.step), timeout=60)\n"
        "assert stub.Observe(pb2.Empty(), timeout=60).step == 1\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    # The compiler waits 1.5 s per decision; its third never comes.
    proc = start_compiler(tool, gen, tmp_path / "ready", 5, *OBSERVE_ACT, *FIELDS,
                          timeout_ms=1500)  # fmt: skip
    try:
        wait_for_ready_file(tmp_path / "ready", BOUND, alive=lambda: proc.poll() is None)
        run = subprocess.run([sys.executable, str(trainer)], capture_output=True, text=True,
                             timeout=BOUND)  # fmt: skip
        assert run.returncode == -9, run.stderr
    finally:
        out, err = finish(proc)
    assert proc.returncode == 1
    assert advised(out) == [1]
    assert (
        f"no action ({SERVICE}/Act) for observation 1 within 1500 ms; the trainer's last "
        f"call was {SERVICE}/Observe"
    ) in err, err


def test_compiler_never_called_fails_within_its_bound(tmp_path, tool, gen):
    proc = start_compiler(tool, gen, tmp_path / "ready", 3, *OBSERVE_ACT, timeout_ms=500)
    out, err = finish(proc)
    assert proc.returncode == 1
    assert out == ""
    assert f"no action ({SERVICE}/Act) for observation 0 within 500 ms; no trainer has " in err


def test_bad_types_are_errors_before_listening(tmp_path, tool, gen):
    proc = subprocess.run(
        [str(tool), "train-user", "--descriptor-set", str(gen.descriptor_set),
         "--observation", "mlbridge.unittest.InlinerAction",
         "--action", "mlbridge.unittest.InlinerAction", *OBSERVE_ACT,
         "--ready-file", str(tmp_path / "ready")],
        capture_output=True, text=True, timeout=BOUND,
    )  # fmt: skip
    assert proc.returncode == 1
    assert not (tmp_path / "ready").exists()
    assert (
        "the observation message mlbridge.unittest.InlinerAction has no field 'x' for "
        "feature 'x'" in proc.stderr
    ), proc.stderr
    proc = subprocess.run(
        [str(tool), "train-user", "--descriptor-set", str(gen.descriptor_set),
         "--observation", "mlbridge.unittest.Nope", "--action", "x", *OBSERVE_ACT],
        capture_output=True, text=True, timeout=BOUND,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "has no message type mlbridge.unittest.Nope" in proc.stderr
