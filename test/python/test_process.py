"""mlbridge._process: how a compiler's end by a signal is worded, and parent-death."""

import signal
import subprocess

import pytest

from mlbridge._process import die_with_parent, killed_by_signal, signal_name


def test_signal_name_names_known_signals_and_numbers_unknown_ones():
    assert signal_name(-int(signal.SIGSEGV)) == "SIGSEGV (signal 11)"
    assert signal_name(-int(signal.SIGKILL)) == "SIGKILL (signal 9)"
    assert signal_name(-99) == "signal 99"


def test_killed_by_signal_quotes_the_stderr_or_says_there_was_none():
    with_tail = killed_by_signal("opt-22", -11, 3, "Stack dump:\n#0 0x1")
    assert with_tail == (
        "the compiler (opt-22) was killed by SIGSEGV (signal 11) after 3 answered queries: "
        "its output is not a result; its stderr ends with:\nStack dump:\n#0 0x1"
    )
    assert killed_by_signal("llc-22", -9, 0, "").endswith(
        "SIGKILL (signal 9) after 0 answered queries: its output is not a result; "
        "it wrote nothing on stderr"
    )


def test_die_with_parent_runs_the_command_with_its_arguments():
    argv = die_with_parent(["printf", "%s|", "a b", "c"])
    assert argv[1] == "--pdeathsig=KILL"
    assert subprocess.run(argv, capture_output=True, check=True).stdout == b"a b|c|"


def test_die_with_parent_names_the_signal_it_sets():
    assert die_with_parent(["true"], signal.SIGTERM)[1] == "--pdeathsig=TERM"


def test_die_with_parent_without_setpriv_says_what_to_install(monkeypatch):
    import shutil

    real_which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda name, *a, **k: None if name == "setpriv" else real_which(name)
    )
    with pytest.raises(FileNotFoundError) as error:
        die_with_parent(["true"])
    assert str(error.value) == (
        "setpriv is not installed: the compilers of a gym environment need it to die with "
        "the trainer (apt install util-linux)"
    )


def test_die_with_parent_runs_the_sh_found_on_path_or_bin_sh(monkeypatch, tmp_path):
    for name in ("setpriv", "sh"):
        (tmp_path / name).write_text("#!/bin/false\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    argv = die_with_parent(["true"])
    assert argv[0] == str(tmp_path / "setpriv") and argv[3] == str(tmp_path / "sh")
    (tmp_path / "sh").unlink()
    assert die_with_parent(["true"])[3] == "/bin/sh"  # none on PATH: the POSIX place
