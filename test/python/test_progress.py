"""mlbridge.progress: plain lines off a terminal, a rich bar on one (checked through a pty)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import textwrap

import pytest

from mlbridge.progress import PROGRESS_ENV, ProgressError, track, use_bar


@pytest.fixture(autouse=True)
def _no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)


def test_track_yields_every_item_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert list(track(iter("abcde"), total=5, description="letters")) == list("abcde")


def test_plain_lines_every_tenth_and_at_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    list(track(range(25), description="corpus: compiling", unit="module"))
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"corpus: compiling: {n}/25" for n in (3, 5, 8, 10, 13, 15, 18, 20, 23, 25)
    ]
    assert "\r" not in captured.err


def test_plain_lines_for_a_small_total_once_per_item(capsys: pytest.CaptureFixture[str]) -> None:
    list(track(range(3), description="train"))
    assert capsys.readouterr().err.splitlines() == ["train: 1/3", "train: 2/3", "train: 3/3"]


def test_plain_lines_end_with_the_count_reached_when_items_run_short(
    capsys: pytest.CaptureFixture[str],
) -> None:
    list(track(iter(range(5)), total=20, description="short"))
    assert capsys.readouterr().err.splitlines() == ["short: 2/20", "short: 4/20", "short: 5/20"]


def test_plain_line_without_a_total_at_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    list(track(iter(range(7)), description="walk"))
    assert capsys.readouterr().err.splitlines() == ["walk: 7"]


def test_plain_line_for_no_work(capsys: pytest.CaptureFixture[str]) -> None:
    assert list(track([], description="nothing")) == []
    assert capsys.readouterr().err.splitlines() == ["nothing: 0/0"]


def test_override_zero_writes_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "0")
    assert use_bar() is False


def test_override_one_draws_the_bar_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "1")
    assert use_bar() is True


def test_override_with_another_value_is_an_error_naming_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "yes")
    with pytest.raises(ProgressError, match=r"MLBRIDGE_PROGRESS='yes'.*1 .*0 "):
        track([1], description="x")


_CHILD = textwrap.dedent(
    """
    import sys
    from mlbridge.progress import track
    items = list(track(range(40), description="bar-test", unit="module"))
    print("items", len(items), file=sys.stderr)
    """
)


def _run_with_stderr_on_a_pty(env: dict[str, str]) -> str:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
            env=env,
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert out == b""
    finally:
        os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_bar_with_estimate_on_a_terminal() -> None:
    env = {k: v for k, v in os.environ.items() if k != PROGRESS_ENV}
    env.update(TERM="xterm-256color", COLUMNS="120")
    env.pop("NO_COLOR", None)
    text = _run_with_stderr_on_a_pty(env)
    assert "bar-test" in text
    assert "40/40" in text
    assert "module" in text
    assert "eta" in text
    assert "━" in text  # the bar itself
    assert "bar-test: 4/40" not in text  # no plain lines on a terminal
    assert "items 40" in text


def test_override_zero_writes_plain_lines_on_a_terminal() -> None:
    env = dict(os.environ, TERM="xterm-256color", **{PROGRESS_ENV: "0"})
    text = _run_with_stderr_on_a_pty(env)
    assert "bar-test: 4/40" in text
    assert "bar-test: 40/40" in text
    assert "━" not in text
