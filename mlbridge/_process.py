"""Child processes that do not outlive the process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child gets ``sig`` when we die.

    Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``): a compiler started by a
    trainer that is killed (even by SIGKILL) is killed too, instead of spinning on a
    closed pipe (stock LLVM's interactive mode busy-loops there). The signal follows the
    *thread* that started the child: start compilers from a thread that lives as long
    as they should.
    """
    parent = os.getpid()

    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            os._exit(127)  # in the child, before exec: nothing else can report it
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(127)

    return preexec
