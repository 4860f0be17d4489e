"""Errors a new user meets on the Python side say what went wrong and how to fix it.

The policy server (``mlbridge serve``, :mod:`mlbridge.compiler.grpc`) finds policy modules
as ``python -m`` does and logs a policy's exception; a compiler that stops before opening
its pipe channel gets the usual causes and its own last words.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from conftest import LLVM_FIXTURE

from mlbridge.compiler.grpc import PolicyImportError, load_policy, serve, wait_for_ready_file
from mlbridge.compiler.pipe import Observation as PipeObservation
from mlbridge.compiler.pipe import drive_compiler
from mlbridge.errors import PipeClosedError, UnknownFeatureError
from mlbridge.logs import iter_records, read_log
from mlbridge.serdes import Header, Message, MessageKind
from mlbridge.serdes._proto.mlbridge.v1 import model_service_pb2 as pb
from mlbridge.serdes._proto.mlbridge.v1 import model_service_pb2_grpc as pb_grpc
from mlbridge.serdes._proto.mlbridge.v1 import tensor_pb2

BOUND = 60.0
# The installed console script, as a user runs it: its sys.path[0] is its own folder, not
# the current one (unlike `python -m mlbridge`).
MLBRIDGE = Path(sys.executable).parent / "mlbridge"

SMALL_IR = "define i32 @f(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n"


def observation(x: int) -> Any:
    obs = pb.Observation(
        context="f",
        advice=tensor_pb2.TensorSpec(name="y", type=tensor_pb2.ELEMENT_TYPE_INT64, shape=[1]),
    )
    obs.features.id = 0
    t = obs.features.tensors.add(name="x", type=tensor_pb2.ELEMENT_TYPE_INT64, shape=[1])
    t.data = np.array([x], dtype="<i8").tobytes()
    return obs


def call(address: str, request: Any) -> Any:
    with grpc.insecure_channel(address) as channel:
        return pb_grpc.ModelServiceStub(channel).Evaluate(request, timeout=BOUND)


def user_env() -> dict[str, str]:
    """The environment without PYTHONPATH: only what `mlbridge serve` itself searches."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def start_serve(policy: str, cwd: Path, ready: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(MLBRIDGE), "serve", policy, "--ready-file", str(ready)],
        cwd=cwd, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# -- mlbridge serve MODULE:NAME --------------------------------------------------------


def test_serve_finds_a_policy_module_in_the_current_folder(tmp_path):
    (tmp_path / "my_policies.py").write_text("def policy(obs):\n    return int(obs['x'][0]) + 1\n")
    ready = tmp_path / "ready"
    proc = start_serve("my_policies:policy", tmp_path, ready)
    try:
        address = wait_for_ready_file(ready, BOUND, alive=lambda: proc.poll() is None)
        reply = call(address, observation(41))
    finally:
        out, err = stop(proc)
    assert np.frombuffer(reply.tensors[0].data, "<i8").tolist() == [42]
    assert proc.returncode == 0, err


def test_serve_says_where_it_looked_for_a_missing_policy_module(tmp_path):
    result = subprocess.run(
        [str(MLBRIDGE), "serve", "no_such_policies:policy"],
        cwd=tmp_path, env=user_env(), capture_output=True, text=True, timeout=BOUND,
    )  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "mlbridge: error: cannot load the policy 'no_such_policies:policy': no module named "
        f"'no_such_policies': looked in the current folder {tmp_path} and on sys.path ("
    )
    assert "PYTHONPATH" in result.stderr
    assert "path/to/no_such_policies.py:policy" in result.stderr


def test_load_policy_names_the_missing_import_of_a_policy_module(tmp_path, monkeypatch):
    (tmp_path / "needs_a_dependency.py").write_text(
        "import no_such_dependency_of_a_policy\n\ndef policy(obs):\n    return 0\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(PolicyImportError) as info:
        load_policy("needs_a_dependency:policy")
    assert isinstance(info.value, ImportError)
    assert str(info.value).startswith(
        "importing needs_a_dependency failed: No module named "
        "'no_such_dependency_of_a_policy'; needs_a_dependency imports it and it is not "
        "installed in this Python environment"
    )


# -- a policy that raises --------------------------------------------------------------


def test_a_policy_exception_is_logged_with_its_traceback_and_named_in_the_reply(caplog):
    def broken_policy(obs: Any) -> int:
        return 1 // int(obs["x"][0])

    with caplog.at_level(logging.ERROR, logger="mlbridge.serve"), serve(broken_policy) as server:
        with pytest.raises(grpc.RpcError) as info:
            call(server.address, observation(0))
    assert info.value.code() == grpc.StatusCode.INTERNAL
    details = info.value.details()
    assert "the policy raised ZeroDivisionError on observation 0: integer division" in details
    assert "broken_policy" in details and "model server's log" in details
    (record,) = [r for r in caplog.records if r.name == "mlbridge.serve"]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert "broken_policy raised ZeroDivisionError on observation 0, context 'f'" in (
        record.getMessage()
    )
    assert "Traceback (most recent call last)" in caplog.text


def test_cli_serve_prints_a_policy_traceback_on_stderr(tmp_path):
    (tmp_path / "raising.py").write_text(
        "def policy(obs):\n    raise RuntimeError('the model file is missing')\n"
    )
    ready = tmp_path / "ready"
    proc = start_serve(f"{tmp_path / 'raising.py'}:policy", tmp_path, ready)
    try:
        address = wait_for_ready_file(ready, BOUND, alive=lambda: proc.poll() is None)
        with pytest.raises(grpc.RpcError) as info:
            call(address, observation(1))
    finally:
        out, err = stop(proc)
    assert "RuntimeError on observation 0: the model file is missing" in info.value.details()
    assert proc.returncode == 0, err
    assert "mlbridge serve: ERROR: the policy policy raised RuntimeError on observation 0" in err
    assert "Traceback (most recent call last)" in err
    assert "RuntimeError: the model file is missing" in err


# -- a compiler that stops before opening its channel -----------------------------------


@pytest.fixture
def small_ir(tmp_path: Path) -> Path:
    path = tmp_path / "small.ll"
    path.write_text(SMALL_IR)
    return path


def drive_error(command: list[str], tmp_path: Path) -> str:
    with pytest.raises(PipeClosedError) as info:
        drive_compiler(command, lambda obs: 0, connect_timeout=BOUND, parent=tmp_path)
    return str(info.value)


def test_a_compiler_failing_before_opening_the_channel_gets_causes_and_its_stderr(
    tmp_path, small_ir, capfd
):
    missing = tmp_path / "missing-plugin.so"
    message = drive_error(
        ["opt-22", f"-load-pass-plugin={missing}", "-passes=default<O2>",
         "-enable-ml-inliner=release", "-inliner-interactive-channel-base={base}",
         "-disable-output", str(small_ir)],
        tmp_path,
    )  # fmt: skip
    assert "the compiler (opt-22) exited with code 1 before opening" in message
    assert (
        ". Usual causes: the pass plugin did not load or does not define an option "
        "(-load-pass-plugin=$(mlbridge plugin-path llvm) must come first); the pipeline has "
        "no ML pass using this channel; an input file is missing or unreadable; the "
        "compiler's stderr ends with:\n"
    ) in message
    assert f"the compiler's stderr ends with:\nLLVM ERROR: Could not load library '{missing}'" in (
        message
    )
    # What the compiler said still reaches our stderr as it comes.
    assert f"Could not load library '{missing}'" in capfd.readouterr().err


def test_a_compiler_that_never_asks_is_told_to_have_no_ml_pass(tmp_path, small_ir):
    message = drive_error(
        ["opt-22", "-passes=instcombine", "-enable-ml-inliner=release",
         "-inliner-interactive-channel-base={base}", "-disable-output", str(small_ir)],
        tmp_path,
    )  # fmt: skip
    assert "the compiler (opt-22) exited with code 0 before opening" in message
    assert message.endswith(
        ". Usual causes: it finished without asking the model anything: the pipeline has no "
        "ML pass using this channel (check -passes=... and that the ML advisor is enabled, "
        "e.g. -enable-ml-inliner=release or -mlbridge-inline-runner=pipe); it wrote nothing "
        "on stderr"
    ), message
    assert "has no {base}" not in message


def test_a_command_without_base_is_named_as_the_cause(tmp_path, small_ir):
    message = drive_error(
        ["opt-22", "-passes=default<O2>", "-enable-ml-inliner=release", "-disable-output",
         str(small_ir)],
        tmp_path,
    )  # fmt: skip
    assert "the command has no {base}, so the compiler was never told the channel" in message


# -- a misspelled feature name ----------------------------------------------------------


def test_a_misspelled_feature_on_a_pipe_observation_lists_the_valid_names():
    # The first observation stock opt-22's ML inliner sent (captured bytes).
    records = list(iter_records(LLVM_FIXTURE))
    header = next(r for r in records if isinstance(r, Header))
    message = next(
        r for r in records if isinstance(r, Message) and r.kind is MessageKind.OBSERVATION
    )
    obs = PipeObservation(message, "m", header)
    with pytest.raises(KeyError) as info:
        obs["calee_users"]
    assert isinstance(info.value, UnknownFeatureError)
    names = [s.name for s in header.features]
    assert str(info.value) == (
        "no feature named 'calee_users' (did you mean 'callee_users'?); the "
        f"{len(names)} features are: {', '.join(names)}"
    )


def test_a_misspelled_feature_in_a_served_policy_reaches_the_compiler_with_the_names():
    def policy(obs: Any) -> int:
        return int(obs["X"][0])

    with serve(policy) as server, pytest.raises(grpc.RpcError) as info:
        call(server.address, observation(3))
    assert (
        "the policy raised UnknownFeatureError on observation 0: no feature named 'X' (did you "
        "mean 'x'?); the 1 features are: x"
    ) in info.value.details()


def test_a_misspelled_feature_in_a_read_log_lists_the_valid_names():
    log = read_log(LLVM_FIXTURE)
    names = [s.name for s in log.header.features]
    for features in (log.steps[0].observation, log.stacked()):
        with pytest.raises(UnknownFeatureError, match=r"no feature named 'callee_user' \(did "):
            features["callee_user"]
        with pytest.raises(KeyError, match=f"the {len(names)} features are: {names[0]}, "):
            features["callee_user"]
