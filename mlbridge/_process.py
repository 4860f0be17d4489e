"""Child processes that do not outlive the process that started them."""

from __future__ import annotations

import os
import shutil
import signal

__all__ = ["die_with_parent", "killed_by_signal", "signal_name"]


def die_with_parent(argv: list[str], sig: int = signal.SIGKILL) -> list[str]:
    """``argv`` run so that the child gets ``sig`` when the thread that started it dies.

    Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``), set by util-linux's
    ``setpriv --pdeathsig`` just before it executes ``argv`` (the setting survives
    ``execve``): a compiler started by a trainer that is killed (even by SIGKILL) is
    killed too, instead of spinning on a closed pipe (stock LLVM's interactive mode
    busy-loops there). A trainer that dies before the signal is set leaves an orphan
    whose parent is no longer this process: a ``sh`` between ``setpriv`` and ``argv``
    checks that and exits (127) instead of running ``argv``. Unlike a ``preexec_fn``,
    this runs no Python between ``fork`` and ``exec``, which is unsafe in a process
    with threads (gRPC's fork handlers abort such a child), and lets :mod:`subprocess`
    use ``vfork``. The signal follows the
    *thread* that started the child: start compilers from a thread that lives as long
    as they should.

    Raises:
        FileNotFoundError: If ``setpriv`` (util-linux) is not installed.
    """
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise FileNotFoundError(
            "setpriv is not installed: the compilers of a gym environment need it to die "
            "with the trainer (apt install util-linux)"
        )
    sh = shutil.which("sh") or "/bin/sh"
    check = f'[ "$PPID" = {os.getpid()} ] || exit 127; exec "$@"'
    name = signal.Signals(sig).name.removeprefix("SIG")
    return [setpriv, f"--pdeathsig={name}", "--", sh, "-c", check, "sh", *argv]


def signal_name(code: int) -> str:
    """``SIGSEGV (signal 11)`` for a ``Popen`` return code of ``-11``."""
    try:
        return f"{signal.Signals(-code).name} (signal {-code})"
    except ValueError:
        return f"signal {-code}"


def killed_by_signal(argv0: str, code: int, answered: int, tail: str) -> str:
    """The error of a compiler that a signal ended: never mistaken for a result.

    Args:
        argv0: The compiler's program.
        code: Its ``Popen`` return code (negative: the signal number).
        answered: The queries answered before it died.
        tail: The end of its stderr ("" if it wrote nothing or it was not captured).
    """
    said = f"; its stderr ends with:\n{tail}" if tail else "; it wrote nothing on stderr"
    return (
        f"the compiler ({argv0}) was killed by {signal_name(code)} after "
        f"{answered} answered queries: its output is not a result{said}"
    )
