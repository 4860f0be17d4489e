"""Where this machine's apt gets Debian from: the archive the corpus and the set-up use.

Nothing in mlbridge names a package mirror: the Debian archive is the one the system's
own apt sources name (``/etc/apt/sources.list`` and ``/etc/apt/sources.list.d/*.list``
in the one-line format, ``*.sources`` in the deb822 format), so that the set-up and the
corpus work behind whatever mirror or proxy the machine is configured for.

Standard library only: ``scripts/setup.sh`` runs this file with the system's Python
before mlbridge is installed (``python3 mlbridge/_apt.py`` prints the archive's URI).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AptSource", "AptSourcesError", "debian_archive_uri", "read_apt_sources"]

#: Overrides the archive apt's sources name (e.g. a local mirror).
MIRROR_ENV = "MLBRIDGE_DEBIAN_MIRROR"

_APT_DIR = Path("/etc/apt")
_OS_RELEASE = Path("/etc/os-release")
# Suites that carry only updates, never the release's source packages.
_PARTIAL_SUITE = re.compile(r"-(security|updates|backports|proposed-updates)$")


class AptSourcesError(Exception):
    """The apt sources name no Debian archive (or cannot be read)."""


@dataclass(frozen=True)
class AptSource:
    """One archive entry of the apt sources.

    Attributes:
        types: ``deb`` and/or ``deb-src``.
        uri: The archive's URI, without a trailing slash.
        suites: The suites (``bookworm``, ``bookworm-updates``, ...).
        components: The components (``main``, ...).
        origin: The file it comes from.
    """

    types: tuple[str, ...]
    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]
    origin: Path


def _one_line_entries(path: Path, text: str) -> list[AptSource]:
    entries = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        # Options in brackets ([arch=amd64 signed-by=...]) carry no archive.
        line = re.sub(r"\[[^\]]*\]", " ", line)
        parts = line.split()
        if len(parts) < 3 or parts[0] not in ("deb", "deb-src"):
            continue
        uri, suite, components = parts[1], parts[2], tuple(parts[3:])
        entries.append(AptSource((parts[0],), uri.rstrip("/"), (suite,), components, path))
    return entries


def _deb822_entries(path: Path, text: str) -> list[AptSource]:
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for raw in stanza.splitlines():
            if raw.startswith("#"):
                continue
            if raw[:1] in (" ", "\t") and key is not None:
                fields[key] += " " + raw.strip()  # a continuation line
                continue
            name, sep, value = raw.partition(":")
            if sep:
                key = name.strip().lower()
                fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        types = tuple(t for t in fields.get("types", "").split() if t in ("deb", "deb-src"))
        suites = tuple(fields.get("suites", "").split())
        if not types or not suites:
            continue
        for uri in fields.get("uris", "").split():
            entries.append(
                AptSource(
                    types,
                    uri.rstrip("/"),
                    suites,
                    tuple(fields.get("components", "").split()),
                    path,
                )
            )
    return entries


def read_apt_sources(apt_dir: Path = _APT_DIR) -> list[AptSource]:
    """Every enabled archive entry of the apt sources under ``apt_dir``, in apt's order.

    Raises:
        AptSourcesError: If a sources file exists but cannot be read.
    """
    files = [apt_dir / "sources.list"]
    parts = apt_dir / "sources.list.d"
    if parts.is_dir():
        # apt reads only these two suffixes (a '.list.disabled' file is not a source).
        files += sorted(p for p in parts.iterdir() if p.suffix in (".list", ".sources"))
    entries: list[AptSource] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        except OSError as e:
            raise AptSourcesError(f"cannot read the apt sources {path}: {e.strerror}") from None
        reader = _deb822_entries if path.suffix == ".sources" else _one_line_entries
        entries += reader(path, text)
    return entries


def _codename(os_release: Path) -> str | None:
    try:
        text = os_release.read_text()
    except OSError:
        return None
    match = re.search(r'^VERSION_CODENAME="?([A-Za-z0-9.-]+)"?\s*$', text, re.M)
    return match.group(1) if match else None


def debian_archive_uri(apt_dir: Path = _APT_DIR, os_release: Path = _OS_RELEASE) -> str:
    """The URI of the Debian archive this machine's apt uses (``$MLBRIDGE_DEBIAN_MIRROR`` first).

    The archive is the first source whose suites include the release the machine runs
    (``VERSION_CODENAME`` of ``/etc/os-release``) with the ``main`` component; without a
    codename, the first with a full (not -security, -updates, -backports) suite and
    ``main``.

    Raises:
        AptSourcesError: If no source qualifies; the message says where it looked and how
            to name the archive.
    """
    env = os.environ.get(MIRROR_ENV)
    if env:
        return env.rstrip("/")
    entries = [e for e in read_apt_sources(apt_dir) if "main" in e.components]
    codename = _codename(os_release)
    for entry in entries:
        if codename is not None and codename in entry.suites:
            return entry.uri
    for entry in entries:
        if codename is None and any(not _PARTIAL_SUITE.search(s) for s in entry.suites):
            return entry.uri
    where = f"{apt_dir / 'sources.list'} and {apt_dir / 'sources.list.d'}"
    release = f"the release '{codename}'" if codename else "a full Debian release"
    raise AptSourcesError(
        f"the apt sources ({where}) name no archive with {release} and the 'main' "
        f"component; set ${MIRROR_ENV} to a Debian archive (a mirror's URI)"
    )


if __name__ == "__main__":
    try:
        print(debian_archive_uri())
    except AptSourcesError as e:
        print(f"mlbridge: error: {e}", file=sys.stderr)
        sys.exit(1)
