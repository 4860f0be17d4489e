"""Clean ends: what a model process or trainer leaves behind when it is ended.

Each test runs the process to end in a subprocess and checks from outside.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

BOUND = 20.0  # never reached when green


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose (its parent has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_sigterm_removes_the_channel_folder_of_a_command_at_once(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        from mlbridge import cli
        from mlbridge.compiler.pipe import FifoChannel

        def hold(args):
            with FifoChannel(parent={str(tmp_path)!r}) as ch:
                print(ch.directory, flush=True)
                time.sleep(300)
            return 0

        cli.COMMANDS.append(cli.Command("hold", "h", "h", lambda p: None, hold))
        sys.exit(cli.main(["hold"]))
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        folder = Path(proc.stdout.readline().strip())
        assert folder.is_dir() and folder.name.startswith("mlbridge-pipe-")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=BOUND)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not folder.exists(), "the FIFO folder outlived SIGTERM"


def test_pipe_clean_removes_only_folders_of_processes_that_are_gone(tmp_path: Path) -> None:
    stale_pipe = tmp_path / f"mlbridge-pipe-{_dead_pid()}-abc"
    stale_pipe.mkdir(mode=0o700)
    os.mkfifo(stale_pipe / "channel.in")
    (stale_pipe / "channel.ext").write_text("end\n")
    stale_gym = tmp_path / f"mlbridge-gym-{_dead_pid()}-xyz"
    (stale_gym / "mlbridge-pipe-1-q").mkdir(parents=True)
    (stale_gym / "stderr.txt").write_text("x")
    alive = tmp_path / f"mlbridge-gym-{os.getpid()}-live"
    alive.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "mlbridge", "pipe", "clean", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=BOUND,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == sorted([str(stale_pipe), str(stale_gym)])
    assert "removed 2 stale folders" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == [alive.name]


def test_a_killed_trainer_takes_its_compilers_and_folders_with_it(tmp_path: Path) -> None:
    # A trainer's environment starts a compiler (here one that would wait 300 s), then
    # the trainer is killed by SIGKILL: no handler of its own runs.
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from mlbridge.compiler.pipe import FifoChannel
        from mlbridge.gym.env import CompilerSession
        from pathlib import Path

        work = Path({str(tmp_path)!r}) / "work"
        work.mkdir()
        channel = FifoChannel(parent=work)
        s = CompilerSession(["sleep", "300"], channel, work, "bitstream", 5.0, 5.0)
        print(s.proc.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=BOUND)
    assert proc.returncode == -signal.SIGKILL
    compiler = int(out.strip())
    deadline = time.monotonic() + BOUND
    while _alive(compiler) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(compiler)
    if alive:
        os.kill(compiler, signal.SIGKILL)
    assert not alive, "the compiler outlived its trainer"
