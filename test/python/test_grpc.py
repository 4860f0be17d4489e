"""The gRPC services: the Python model server and trainer against the C++ runners.

The C++ side is ``mlbridge-grpc-tool`` (test/tools/grpc-tool), a compiler stand-in built with
the runtime, found in ``$MLBRIDGE_BUILD_DIR`` or ``<repo>/build``; a missing tool is a
failure, never a skip. Every wait is bounded; nothing asserts on speed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from conftest import REPO, built

from mlbridge import Tensor
from mlbridge.compiler.grpc import (
    GrpcCompilerInterface,
    Observation,
    load_policy,
    serve,
    wait_for_ready_file,
)
from mlbridge.compiler.observation import Observation as SharedObservation
from mlbridge.errors import GrpcError, GrpcTimeoutError
from mlbridge.serdes._proto.mlbridge.v1 import model_service_pb2 as pb
from mlbridge.serdes._proto.mlbridge.v1 import model_service_pb2_grpc as pb_grpc
from mlbridge.serdes._proto.mlbridge.v1 import tensor_pb2

TOOL_NAME = "mlbridge-grpc-tool"
GENERATED = REPO / "mlbridge" / "serdes" / "_proto" / "mlbridge" / "v1"
POLICIES = REPO / "test" / "unit" / "grpc_policies.py"
BOUND = 60  # seconds; never reached when green


@pytest.fixture(scope="module")
def tool() -> Path:
    return built(f"bin/{TOOL_NAME}")


def decisions(stdout: str) -> list[dict[str, int]]:
    return [json.loads(line) for line in stdout.splitlines()]


# -- generated code -------------------------------------------------------------------


def test_generated_grpc_code_is_current(tmp_path):
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "generate_grpc_python.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=BOUND,
    )
    for name in ("model_service_pb2.py", "model_service_pb2_grpc.py"):
        assert (tmp_path / name).read_text() == (GENERATED / name).read_text(), (
            f"{name} is stale: regenerate it with `.venv/bin/python "
            "scripts/generate_grpc_python.py`"
        )


# -- the model server, called from Python ---------------------------------------------


def observation(x: list[int], advice_type: int = tensor_pb2.ELEMENT_TYPE_INT64) -> Any:
    obs = pb.Observation(
        context="f", advice=tensor_pb2.TensorSpec(name="y", type=advice_type, shape=[1])
    )
    obs.features.id = 4
    t = obs.features.tensors.add(name="x", type=tensor_pb2.ELEMENT_TYPE_INT64, shape=[len(x)])
    t.data = np.array(x, dtype="<i8").tobytes()
    return obs


def call(address: str, request: Any) -> Any:
    with grpc.insecure_channel(address) as channel:
        return pb_grpc.ModelServiceStub(channel).Evaluate(request, timeout=BOUND)


def test_observations_are_the_one_observation_type_of_every_interface():
    # The same type the pipe interface hands a policy (mlbridge.compiler.Observation).
    seen: list[SharedObservation] = []

    def policy(obs: SharedObservation) -> int:
        seen.append(obs)
        return 0

    with serve(policy) as server:
        call(server.address, observation([2, 3]))
    (obs,) = seen
    assert Observation is SharedObservation and isinstance(obs, SharedObservation)
    assert [t.name for t in obs.tensors] == ["x"] and obs.tensors[0].array is obs["x"]
    assert repr(obs).endswith("(id=4, context='f', features=1, advice='y')")


def test_server_answers_with_the_policy_as_numpy():
    seen: list[Observation] = []

    def policy(obs: Observation) -> int:
        seen.append(obs)
        return int(obs["x"].sum())

    with serve(policy) as server:
        reply = call(server.address, observation([2, 3, 4]))
    assert reply.kind == tensor_pb2.MESSAGE_KIND_ADVICE and reply.id == 4
    assert [(t.name, t.type, list(t.shape)) for t in reply.tensors] == [
        ("y", tensor_pb2.ELEMENT_TYPE_INT64, [1])
    ]
    assert np.frombuffer(reply.tensors[0].data, "<i8").tolist() == [9]
    (obs,) = seen
    assert obs.id == 4 and obs.context == "f" and obs.advice.name == "y"
    assert obs["x"].dtype == np.int64 and obs["x"].tolist() == [2, 3, 4]
    assert server.evaluated == 1


def test_server_status_codes_name_the_problem():
    def policy(obs: Observation) -> Any:
        if obs["x"][0] == 1:
            raise KeyError("boom")
        return 0.5 if obs["x"][0] == 2 else Tensor("y", "int64_t", [1])

    with serve(policy) as server:
        for x, code, text in [
            ([1], grpc.StatusCode.INTERNAL, "the policy raised KeyError on observation 4"),
            ([2], grpc.StatusCode.INTERNAL, "does not fit the advice"),
        ]:
            with pytest.raises(grpc.RpcError) as e:
                call(server.address, observation(x))
            assert e.value.code() == code and text in e.value.details()
        bad = observation([3])
        bad.features.tensors[0].data = b"123"
        with pytest.raises(grpc.RpcError) as e:
            call(server.address, bad)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "'x'" in e.value.details()
        assert np.frombuffer(call(server.address, observation([3])).tensors[0].data, "<i8") == 1


def test_server_refuses_advice_outside_the_constraints_the_observation_carries():
    # The advice spec's range and mask travel in the Observation (a constrained C++
    # advice, such as -regalloc=mlbridge's regalloc_action): the server checks the
    # policy's answer against them, the one-element shortcut included, and sends nothing
    # that violates them.
    def policy(obs: Observation) -> Any:
        assert obs.advice.valid_range == (0, 3) and obs.advice.mask_feature == "x"
        return np.int64(obs["x"][0])

    with serve(policy) as server:
        for x, answer in [([1, 1, 0], 1), ([2, 1, 0], None), ([5, 1, 1], None)]:
            request = observation(x)
            request.advice.range.low, request.advice.range.high = 0, 3
            request.advice.mask = "x"
            if answer is not None:
                reply = call(server.address, request)
                assert np.frombuffer(reply.tensors[0].data, "<i8").tolist() == [answer]
                continue
            with pytest.raises(grpc.RpcError) as e:
                call(server.address, request)
            assert e.value.code() == grpc.StatusCode.INTERNAL
            assert "advice 'y'" in e.value.details()
        bad = observation([1])
        bad.advice.range.low, bad.advice.range.high = 3, 0
        with pytest.raises(grpc.RpcError) as e:
            call(server.address, bad)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "empty range" in e.value.details()


def test_server_refuses_messages_above_its_limit():
    with serve(lambda obs: 1, max_message_bytes=256) as server:
        with pytest.raises(grpc.RpcError) as e:
            call(server.address, observation(list(range(100))))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_serve_rejects_a_bad_address():
    with pytest.raises(ValueError, match="host:port"):
        serve(lambda obs: 0, "localhost")
    with serve(lambda obs: 0) as server, pytest.raises(GrpcError, match="cannot listen"):
        serve(lambda obs: 0, server.address)


def test_load_policy_takes_modules_files_and_classes():
    affine = load_policy(f"{POLICIES}:affine")
    counter = load_policy(f"{POLICIES}:Counter")
    assert callable(affine) and counter(None) == 1 and counter(None) == 2
    assert load_policy("os.path:basename")("/a/b") == "b"
    with pytest.raises(ValueError, match="MODULE:NAME"):
        load_policy("no-colon")
    with pytest.raises(ValueError, match="no attribute 'nope'"):
        load_policy(f"{POLICIES}:nope")
    with pytest.raises(ImportError, match="does not exist"):
        load_policy("/no/such/file.py:f")


# -- `mlbridge serve` -----------------------------------------------------------------


def test_cli_serve_reports_its_address_and_stops_on_sigterm(tmp_path, tool):
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlbridge", "serve", f"{POLICIES}:affine",
         "--ready-file", str(ready)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        address = wait_for_ready_file(ready, BOUND, alive=lambda: proc.poll() is None)
        assert address.startswith("127.0.0.1:")
        run = subprocess.run(
            [str(tool), "evaluate", "--address", address, "--rounds", "3"],
            capture_output=True, text=True, timeout=BOUND,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        # affine: 10 * x + len(v) + 1000 * id + len(context "fn<i>").
        assert [d["advice"] for d in decisions(run.stdout)] == [
            10 * i + (i % 3 + 1) + 1000 * i + 3 for i in range(3)
        ]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=BOUND)
    assert proc.returncode == 0, err
    assert out == f"mlbridge: serving on {address}\n"
    assert "stopped after 3 decisions" in err


def test_cli_serve_stops_on_sigterm_while_a_policy_call_is_stuck(tmp_path, tool):
    started = tmp_path / "started"
    (tmp_path / "stuck_policy.py").write_text(
        "import pathlib, time\n\n"
        "def stuck(obs):\n"
        f"    pathlib.Path({str(started)!r}).touch()\n"
        "    time.sleep(300)\n"
        "    return 0\n"
    )
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlbridge", "serve", f"{tmp_path / 'stuck_policy.py'}:stuck",
         "--ready-file", str(ready)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    client = None
    try:
        address = wait_for_ready_file(ready, BOUND, alive=lambda: proc.poll() is None)
        client = subprocess.Popen(
            [str(tool), "evaluate", "--address", address, "--rounds", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + BOUND
        while not started.exists():
            assert time.monotonic() < deadline, "the policy was never called"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        # The docs promise 1 s for calls in flight; the bound leaves room for a loaded
        # machine and is far below the policy's 300 s.
        out, err = proc.communicate(timeout=15)
    finally:
        for p in (proc, client):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate(timeout=BOUND)
    assert proc.returncode == 0, err
    assert "1 policy call still running" in err


def test_cli_serve_errors_are_clear():
    result = subprocess.run(
        [sys.executable, "-m", "mlbridge", "serve", "no_such_module_xyz:f"],
        capture_output=True, text=True, timeout=BOUND,
    )  # fmt: skip
    assert result.returncode == 1
    assert "cannot load the policy 'no_such_module_xyz:f'" in result.stderr


# -- inference: C++ runners against Python servers, several pairs at once -------------


def test_four_compiler_model_pairs_concurrently_without_cross_talk(tool):
    workers, rounds = 4, 40
    seen: list[list[tuple[int, str, int]]] = [[] for _ in range(workers)]

    def make_policy(w: int) -> Any:
        def policy(obs: Observation) -> int:
            seen[w].append((obs.id, obs.context, int(obs["x"][0])))
            return int(obs["x"][0]) * 10 + obs["v"].size + 1_000_000 * w

        return policy

    servers = [serve(make_policy(w)) for w in range(workers)]
    try:
        assert len({s.address for s in servers}) == workers

        def compile_(w: int) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [str(tool), "evaluate", "--address", servers[w].address,
                 "--rounds", str(rounds), "--seed", str(w + 1)],
                capture_output=True, text=True, timeout=BOUND,
            )  # fmt: skip

        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(compile_, range(workers)))
    finally:
        for s in servers:
            s.stop()
    for w, result in enumerate(results):
        assert result.returncode == 0, result.stderr
        got = decisions(result.stdout)
        assert [d["round"] for d in got] == list(range(rounds))
        for i, d in enumerate(got):
            assert d["x"] == (w + 1) * 1000 + i
            assert d["advice"] == d["x"] * 10 + d["n"] + 1_000_000 * w, (w, d)
        # Each server saw exactly its own compiler's decisions, in order.
        assert seen[w] == [(i, f"fn{i}", (w + 1) * 1000 + i) for i in range(rounds)]


# -- training: Python trainers drive C++ compiler servers ------------------------------


def start_compiler(tool: Path, ready: Path, rounds: int, seed: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(tool), "train", "--ready-file", str(ready), "--rounds", str(rounds),
         "--seed", str(seed), "--timeout-ms", str(BOUND * 1000)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_four_trainers_drive_four_compilers_concurrently(tmp_path, tool):
    workers, rounds = 4, 25
    procs = [start_compiler(tool, tmp_path / f"ready{w}", rounds, w + 1) for w in range(workers)]
    observed: list[list[tuple[int, str, int, int]]] = [[] for _ in range(workers)]
    errors: list[BaseException] = []

    def train(w: int) -> None:
        try:
            address = wait_for_ready_file(
                tmp_path / f"ready{w}", BOUND, alive=lambda: procs[w].poll() is None
            )
            with GrpcCompilerInterface(address, timeout=BOUND) as ci:
                while (obs := ci.evaluate()) is not None:
                    observed[w].append((obs.id, obs.context, int(obs["x"][0]), obs["v"].size))
                    ci.respond(np.int64(obs["x"][0] * 7 + w))
                assert ci.evaluate() is None
        except BaseException as e:  # reported below, with the worker
            errors.append(e)

    threads = [threading.Thread(target=train, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join(BOUND)
        outputs = [p.communicate(timeout=BOUND) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=BOUND)
    assert not errors, errors
    for w, (out, err) in enumerate(outputs):
        assert procs[w].returncode == 0, err
        got = decisions(out)
        assert [d["advice"] for d in got] == [((w + 1) * 1000 + i) * 7 + w for i in range(rounds)]
        assert observed[w] == [(i, f"fn{i}", (w + 1) * 1000 + i, i % 3 + 1) for i in range(rounds)]


def test_trainer_errors_name_the_problem(tmp_path, tool):
    proc = start_compiler(tool, tmp_path / "ready", 2, 0)
    try:
        address = wait_for_ready_file(tmp_path / "ready", BOUND, alive=lambda: proc.poll() is None)
        with GrpcCompilerInterface(address, timeout=BOUND) as ci:
            with pytest.raises(GrpcError, match="call evaluate"):
                ci.respond(1)
            obs = ci.evaluate()
            assert obs is not None and obs.id == 0
            with pytest.raises(ValueError, match="int64_t"):
                ci.respond(0.5)  # not convertible exactly: nothing is sent
            # A raw Act with the wrong id is refused by the compiler.
            stub = pb_grpc.CompilerServiceStub(ci._channel)
            wrong = tensor_pb2.TensorMessage(kind=tensor_pb2.MESSAGE_KIND_ADVICE, id=5)
            wrong.tensors.add(name="y", type=tensor_pb2.ELEMENT_TYPE_INT64, shape=[1],
                              data=np.int64(1).tobytes())  # fmt: skip
            with pytest.raises(grpc.RpcError) as e:
                stub.Act(wrong, timeout=BOUND)
            assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "observation 5, the pending observation is 0" in e.value.details()
            wrong.id = 0
            wrong.tensors[0].name = "z"
            with pytest.raises(grpc.RpcError) as e:
                stub.Act(wrong, timeout=BOUND)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "'z'" in e.value.details()
            # The observation is still pending: answer it properly and finish.
            assert ci.evaluate().id == 0
            ci.respond(10)
            assert ci.run(lambda obs: 20) == 1
            assert ci.answered == 2
        out, err = proc.communicate(timeout=BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=BOUND)
    assert proc.returncode == 0, err
    assert [d["advice"] for d in decisions(out)] == [10, 20]


def test_trainer_sees_a_dead_compiler_as_unavailable(tmp_path, tool):
    proc = start_compiler(tool, tmp_path / "ready", 5, 0)
    try:
        address = wait_for_ready_file(tmp_path / "ready", BOUND, alive=lambda: proc.poll() is None)
        with GrpcCompilerInterface(address, timeout=BOUND) as ci:
            assert ci.evaluate() is not None
            proc.kill()
            proc.communicate(timeout=BOUND)
            with pytest.raises(GrpcError) as e:
                ci.respond(1)
            assert e.value.code == "UNAVAILABLE"
            assert f"CompilerService/Act to {address}" in str(e.value)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=BOUND)


def test_trainer_without_a_compiler_times_out_within_its_bound(tool):
    # A port nothing listens on: the tool's server binds one, then exits.
    with serve(lambda obs: 0) as server:
        address = server.address
    ci = GrpcCompilerInterface(address, timeout=1, connect_timeout=0.5)
    with ci, pytest.raises(GrpcTimeoutError, match=f"cannot connect to the compiler at {address}"):
        ci.evaluate()


def test_ready_file_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    from mlbridge.compiler.grpc import write_ready_file

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    ready = tmp_path / "ready"
    # The temporary name the writer used to take, and the target itself.
    (tmp_path / f"ready.tmp{os.getpid()}").symlink_to(victim)
    write_ready_file(ready, "127.0.0.1:1")
    assert victim.read_text() == "precious\n"
    assert ready.read_text() == "127.0.0.1:1\n" and not ready.is_symlink()
    ready.unlink()
    ready.symlink_to(victim)
    write_ready_file(ready, "127.0.0.1:2")
    assert victim.read_text() == "precious\n"
    assert ready.read_text() == "127.0.0.1:2\n" and not ready.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ready",
        f"ready.tmp{os.getpid()}",
        "victim",
    ]


def test_run_ends_an_episode_that_asks_more_than_max_queries(tmp_path, tool):
    proc = start_compiler(tool, tmp_path / "ready", 5, 0)
    try:
        address = wait_for_ready_file(tmp_path / "ready", BOUND, alive=lambda: proc.poll() is None)
        with GrpcCompilerInterface(address, timeout=BOUND) as ci:
            with pytest.raises(GrpcError, match="more than max_queries=2 queries"):
                ci.run(lambda obs: np.int64(1), max_queries=2)
            assert ci.answered == 2
    finally:
        proc.kill()
        proc.communicate(timeout=BOUND)


def test_run_ends_an_episode_that_outlasts_its_deadline_however_quick_each_call(tmp_path, tool):
    # 50 queries of 0.1 s each would take 5 s; every call is quick, the episode is not.
    proc = start_compiler(tool, tmp_path / "ready", 50, 0)
    try:
        address = wait_for_ready_file(tmp_path / "ready", BOUND, alive=lambda: proc.poll() is None)
        with GrpcCompilerInterface(address, timeout=BOUND) as ci:

            def slow(obs: Observation) -> np.int64:
                time.sleep(0.1)
                return np.int64(1)

            with pytest.raises(GrpcTimeoutError, match="deadline"):
                ci.run(slow, deadline=1.0)
            assert 0 < ci.answered < 50
            assert ci.timeout == BOUND  # each call's own bound is back
    finally:
        proc.kill()
        proc.communicate(timeout=BOUND)


# A compiler that a signal kills mid-episode: with its process given, the interface names
# the signal and the end of its stderr instead of a bare UNAVAILABLE.
@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_a_compiler_killed_by_a_signal_is_an_error_naming_the_signal(tmp_path, tool, sig):
    proc = start_compiler(tool, tmp_path / "ready", 50, 0)
    try:
        address = wait_for_ready_file(tmp_path / "ready", BOUND, alive=lambda: proc.poll() is None)
        with GrpcCompilerInterface(address, timeout=BOUND, process=proc) as ci:

            def crash_after_two(obs: SharedObservation) -> np.int64:
                if ci.answered == 2:
                    os.kill(proc.pid, sig)
                    proc.wait(BOUND)
                return np.int64(1)

            with pytest.raises(GrpcError) as error:
                ci.run(crash_after_two)
        message = str(error.value)
        assert f"killed by {sig.name} (signal {int(sig)})" in message, message
        assert "after 2 answered queries" in message, message
        assert str(tool) in message
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=BOUND)


def test_without_its_process_a_dead_compiler_is_unavailable(tmp_path, tool):
    proc = start_compiler(tool, tmp_path / "ready", 50, 0)
    try:
        address = wait_for_ready_file(tmp_path / "ready", BOUND, alive=lambda: proc.poll() is None)
        with GrpcCompilerInterface(address, timeout=BOUND) as ci:
            assert ci.evaluate() is not None
            proc.kill()
            proc.wait(BOUND)
            with pytest.raises(GrpcError, match="UNAVAILABLE") as error:
                ci.respond(np.int64(1))
            assert "killed" not in str(error.value)
    finally:
        proc.communicate(timeout=BOUND)
