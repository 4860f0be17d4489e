"""drive_compiler against stock opt-22: a signal, a deadline and a query limit end a session
with an error that says so, never with a result."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import VECTORS

from mlbridge.compiler.pipe import drive_compiler
from mlbridge.errors import PipeClosedError, PipeError, PipeTimeoutError

MODULE = VECTORS / "llvm22" / "inline-sample.ll"
BOUND = 60.0
QUERIES = 7  # the inliner's decisions on inline-sample.ll


def opt_command(tmp_path: Path) -> list[str]:
    return [
        "opt-22", "-S", "-passes=default<O2>", "-enable-ml-inliner=release",
        "-inliner-interactive-channel-base={base}", "-inliner-interactive-include-default",
        str(MODULE), "-o", str(tmp_path / "out.ll"),
    ]  # fmt: skip


def child_compiler() -> int:
    """The pid of this process's opt-22 child."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        if comm == "opt-22" and rest.split()[1] == me:
            return int(entry.name)
    raise AssertionError("no opt-22 child found")


def run(tmp_path: Path, policy, **kw):
    return drive_compiler(
        opt_command(tmp_path), policy, timeout=BOUND, connect_timeout=BOUND,
        exit_timeout=BOUND, parent=tmp_path, **kw,
    )  # fmt: skip


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_a_compiler_killed_by_a_signal_is_an_error_naming_the_signal(tmp_path, sig):
    def policy(obs):
        if obs.id == 2:
            os.kill(child_compiler(), sig)
        return 0

    with pytest.raises(PipeClosedError, match=rf"killed by {sig.name} \(signal {int(sig)}\)"):
        run(tmp_path, policy)


def test_the_signal_error_ends_with_the_compilers_stderr(tmp_path):
    def policy(obs):
        os.kill(child_compiler(), signal.SIGSEGV)
        return 0

    # LLVM's crash handler prints the stack on SIGSEGV; the error ends with its frames.
    with pytest.raises(PipeClosedError, match=r"(?s)stderr ends with:.*#\d+ 0x[0-9a-f]+ "):
        run(tmp_path, policy)


def test_a_session_past_its_deadline_ends_though_each_read_is_quick(tmp_path):
    def slow(obs):
        time.sleep(0.4)  # every wait is far inside the 60 s timeout
        return 0

    start = time.monotonic()
    with pytest.raises(PipeTimeoutError, match="deadline of 1 s"):
        run(tmp_path, slow, deadline=1.0)
    # Ended by the deadline, not by running to its end (7 x 0.4 s) or a 60 s timeout.
    assert time.monotonic() - start < QUERIES * 0.4


def test_a_query_limit_ends_a_longer_session(tmp_path):
    asked = []

    def policy(obs):
        asked.append(obs.id)
        return 0

    with pytest.raises(PipeError, match="max_queries=3"):
        run(tmp_path, policy, max_queries=3)
    assert len(asked) == 3


def test_a_session_within_its_limits_is_a_normal_result(tmp_path):
    result = run(tmp_path, lambda obs: 0, deadline=BOUND, max_queries=QUERIES)
    assert (result.returncode, result.answered) == (0, QUERIES)


def test_a_compiler_with_nothing_to_ask_is_an_empty_session_when_allowed(tmp_path):
    command = ["sh", "-c", "exit 0", "{base}"]
    bounds = {"timeout": BOUND, "connect_timeout": BOUND, "parent": tmp_path}
    result = drive_compiler(command, lambda obs: 0, require_session=False, **bounds)
    assert (result.returncode, result.answered, result.contexts) == (0, 0, [])
    with pytest.raises(PipeClosedError, match="exited with code 0 before opening"):
        drive_compiler(command, lambda obs: 0, **bounds)
    # A failing compiler is an error either way.
    with pytest.raises(PipeClosedError, match="exited with code 3"):
        drive_compiler(["sh", "-c", "exit 3", "{base}"], lambda obs: 0,
                       require_session=False, **bounds)  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_a_compiler_killed_before_opening_the_channel_names_the_signal(tmp_path, capfd):
    # Thirty lines of stderr, one not UTF-8, then SIGSEGV before the FIFOs are opened.
    script = (
        'for i in $(seq 30); do echo "line $i" >&2; done; printf "bad \\377\\n" >&2; kill -SEGV $$'
    )
    with pytest.raises(PipeClosedError) as error:
        drive_compiler(["sh", "-c", script, "{base}"], lambda obs: 0, timeout=BOUND,
                       connect_timeout=BOUND, exit_timeout=BOUND, parent=tmp_path)  # fmt: skip
    message = str(error.value)
    assert message.startswith(
        "the compiler (sh) was killed by SIGSEGV (signal 11) after 0 answered queries"
    ), message
    tail = message.split("stderr ends with:\n", 1)[1]
    assert tail.splitlines() == [f"line {i}" for i in range(12, 31)] + ["bad \ufffd"]
    # All of it also reached our stderr as it came, the bad byte replaced.
    forwarded = capfd.readouterr().err.splitlines()
    assert forwarded[:30] == [f"line {i}" for i in range(1, 31)]
    assert "bad \ufffd" in forwarded


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"deadline": -1.0}, "deadline must be"),
        ({"exit_timeout": 0.0}, "exit_timeout must be"),
        ({"max_queries": -1}, "^max_queries must be >= 0, got -1$"),
    ],
)
def test_bad_bounds_are_refused_naming_the_argument(tmp_path, option, message):
    with pytest.raises(ValueError, match=message):
        drive_compiler(["true", "{base}"], lambda obs: 0, parent=tmp_path, **option)


def test_require_end_reaches_the_interface(tmp_path):
    # Stock opt ends its sessions by exiting, without mlbridge's end record.
    with pytest.raises(PipeClosedError, match="no end record"):
        run(tmp_path, lambda obs: 0, require_end=True)


def test_a_compiler_that_does_not_exit_after_the_session_is_a_timeout(tmp_path):
    # A compiler that opens the channel as LLVM does, ends the session at once by closing
    # it, then lingers: one process (exec), so nothing can outlive the driver's kill.
    script = 'exec 3<"$0.in" 4>"$0.out"; exec 3<&- 4>&-; exec sleep 60'
    command = ["sh", "-c", script, "{base}"]
    start = time.monotonic()
    with pytest.raises(PipeTimeoutError) as error:
        drive_compiler(command, lambda obs: 0, timeout=BOUND, connect_timeout=BOUND,
                       exit_timeout=0.5, parent=tmp_path)  # fmt: skip
    assert str(error.value) == (
        "the compiler (sh) did not exit within 0.5 s after the session ended"
    )
    assert time.monotonic() - start < 30  # killed, not waited for


def test_a_killed_driver_leaves_no_compiler_behind(tmp_path):
    # The driver is SIGKILLed mid-session (no finally runs); stock opt would spin on the
    # closed FIFOs for ever (LLVM's interactive mode busy-loops there).
    ready = tmp_path / "asked"
    driver = subprocess.Popen([sys.executable, "-c", f"""
import time
from pathlib import Path
from mlbridge.compiler.pipe import drive_compiler
def policy(obs):
    Path({str(ready)!r}).write_text("x")
    time.sleep(3600)
drive_compiler({opt_command(tmp_path)!r}, policy, parent={str(tmp_path)!r})
"""])  # fmt: skip
    try:
        deadline = time.monotonic() + BOUND
        while not ready.exists():
            assert driver.poll() is None, "the driver ended before the first query"
            assert time.monotonic() < deadline, "no query within the bound"
            time.sleep(0.05)
        compilers = children_named(driver.pid, "opt-22")
        assert len(compilers) == 1
        driver.kill()
        driver.wait(BOUND)
        deadline = time.monotonic() + BOUND
        while Path(f"/proc/{compilers[0]}").exists() and not is_zombie(compilers[0]):
            assert time.monotonic() < deadline, "the compiler outlived its driver"
            time.sleep(0.05)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(BOUND)


def children_named(parent: int, name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
            if comm == name and rest.split()[1] == str(parent):
                found.append(int(entry.name))
    return found


def is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :].split()[0] == "Z"
