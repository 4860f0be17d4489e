"""Files other users cannot subvert: atomic writes and ownership checks.

A temporary file is created next to its target with ``O_CREAT | O_EXCL | O_NOFOLLOW``
under a random name, so a link planted at a predictable name is never followed, and is
renamed over the target (a link at the target is replaced, not written through).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from mlbridge.errors import UntrustedFileError

__all__ = ["check_private", "describe_user", "write_atomically"]


def describe_user(uid: int) -> str:
    """``'name' (uid N)``, or ``uid N`` when the user has no name."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name!r} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def write_atomically(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` through a fresh temporary file in the same folder.

    The temporary file is created exclusively (``O_EXCL | O_NOFOLLOW``, a random name),
    then renamed over ``path``: readers see the old file or the whole new one, and no
    link anyone planted is followed.

    Args:
        path: The target file.
        data: Its new contents.
        mode: The permission bits of the new file (before the umask).

    Raises:
        OSError: If the folder cannot be written.
    """
    target = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, flags, mode)
            break
        except FileExistsError:
            continue  # a name someone took (or planted): draw another
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise


def check_private(path: str | os.PathLike[str], what: str, fix: str, *, folder: bool) -> None:
    """Check that ``path`` belongs to this process's user and others may not write it.

    Links are not followed (a link is refused for a file, and checked itself).

    Args:
        path: The file or folder.
        what: What it is, for the message ("the channel folder").
        fix: How to fix it, for the message.
        folder: Whether ``path`` must be a folder (else any non-folder is checked).

    Raises:
        UntrustedFileError: If it belongs to another user, or its group or others may
            write it; the message names the owner or the mode and the fix.
        FileNotFoundError: If it does not exist.
    """
    st = os.lstat(path) if not folder else os.stat(path)
    me = os.geteuid()
    if folder and not stat.S_ISDIR(st.st_mode):
        raise UntrustedFileError(f"{what} {path} is not a folder; {fix}")
    if st.st_uid != me:
        raise UntrustedFileError(
            f"refusing {what} {path}: it belongs to user {describe_user(st.st_uid)}, not to "
            f"{describe_user(me)} who runs this, so another user could take its place; {fix}"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedFileError(
            f"refusing {what} {path}: its group or others may write it (mode "
            f"{stat.S_IMODE(st.st_mode):04o}); {fix}"
        )
