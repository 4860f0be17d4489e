"""Where the corpus lives, and fetching its pinned source archives.

Debian archives (the upstream ``.orig`` tarballs of source packages) come through apt's
own downloader, ``apt-helper download-file``, from the archive the apt sources name, so
apt's proxy settings apply and apt checks the pinned sha256 itself. PyPI source
distributions come through ``pip download`` of the running Python, so pip's index, proxy
and certificate settings apply. Local archives are read where the recipe says. mlbridge
checks every sha256 itself.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from mlbridge import _apt
from mlbridge.corpus.errors import ChecksumError, CorpusError
from mlbridge.corpus.recipe import Project, Recipe
from mlbridge.paths import find_source_dir

__all__ = [
    "CACHE_DIR_ENV",
    "MIRROR_ENV",
    "archive_path",
    "default_corpus_dir",
    "default_sources_dir",
    "fetch_sources",
    "sha256_of",
    "verify_archive",
]

#: mlbridge's cache folder, used for the corpus outside a source checkout.
CACHE_DIR_ENV = "MLBRIDGE_CACHE_DIR"
#: Overrides the Debian archive the apt sources name (e.g. a local mirror).
MIRROR_ENV = _apt.MIRROR_ENV

_APT_HELPER = "/usr/lib/apt/apt-helper"
_DOWNLOAD_TIMEOUT_S = 600
# pip prepares a source distribution's metadata, which may install its build backend.
_PIP_TIMEOUT_S = 900

Progress = Callable[[str], None]


def _archive(recipe: Recipe) -> str:
    """The Debian archive to download from.

    ``$MLBRIDGE_DEBIAN_MIRROR``, else the recipe's own ``mirror`` if it names one, else the
    archive of the system's apt sources.
    """
    if recipe.mirror and not os.environ.get(MIRROR_ENV):
        return recipe.mirror
    try:
        return _apt.debian_archive_uri()
    except _apt.AptSourcesError as e:
        raise CorpusError(f"cannot tell where to download the corpus from: {e}") from None


def _cache_root() -> Path:
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).resolve()
    source = find_source_dir()
    if source is not None:
        return source / ".deps"
    return Path.home() / ".cache" / "mlbridge"


def default_corpus_dir() -> Path:
    """Return where the built corpus goes by default.

    ``$MLBRIDGE_CACHE_DIR/corpus`` if that variable is set, else ``<checkout>/.deps/corpus``
    (ignored by git, kept by ``make clean``), else ``~/.cache/mlbridge/corpus``.
    """
    return _cache_root() / "corpus"


def default_sources_dir() -> Path:
    """Return where fetched archives go by default (``corpus-sources`` beside the corpus)."""
    return _cache_root() / "corpus-sources"


def archive_path(sources_dir: Path, project: Project) -> Path:
    """Return where ``project``'s archive is (or will be).

    In ``sources_dir`` for downloaded archives; a ``local`` archive stays where it is.
    """
    if project.source.registry == "local":
        return Path(project.source.path)
    return Path(sources_dir) / project.source.file_name


def sha256_of(path: Path) -> str:
    """Return the hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_archive(path: Path, project: Project) -> None:
    """Check that ``path`` exists and has the sha256 the recipe pins for ``project``.

    Raises:
        CorpusError: If the archive is missing (says how to fetch it).
        ChecksumError: If its sha256 differs (says which file, both sums, and what to do).
    """
    local = project.source.registry == "local"
    if not path.is_file():
        if local:
            raise CorpusError(
                f"the local archive of {project.name} is not found: {path} (the recipe's "
                "source.path, relative to the recipe's folder); put the archive there or "
                "fix the path"
            )
        raise CorpusError(
            f"the source archive of {project.name} is missing: {path} "
            "(run `mlbridge corpus fetch` or scripts/setup.sh, which need the network)"
        )
    actual = sha256_of(path)
    if actual != project.source.sha256:
        fix = (
            f"If this archive is the intended one, set the recipe's source.sha256 to {actual}."
            if local
            else "Delete the file and run `mlbridge corpus fetch` again, or fix the recipe "
            "if the new archive is intended."
        )
        raise ChecksumError(
            f"checksum mismatch for {project.name}'s archive {path}: expected sha256 "
            f"{project.source.sha256} (pinned in the recipe), got {actual}; refusing to use "
            f"it. {fix}"
        )


def _download(url: str, dest: Path, sha256: str) -> None:
    helper = shutil.which("apt-helper") or _APT_HELPER
    if not Path(helper).is_file():
        raise CorpusError(f"cannot download {url}: {_APT_HELPER} (package apt) is missing")
    partial = dest.with_name(dest.name + ".partial")
    partial.unlink(missing_ok=True)
    argv = [
        helper,
        # Writing into a folder owned by the invoking user, not apt's sandbox user.
        "-o",
        "APT::Sandbox::User=" + ("root" if os.geteuid() == 0 else os.environ.get("USER", "")),
        "-o",
        "Acquire::http::Timeout=60",
        "-o",
        "Acquire::Retries=2",
        "download-file",
        url,
        str(partial),
        f"SHA256:{sha256}",
    ]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_DOWNLOAD_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        partial.unlink(missing_ok=True)
        raise CorpusError(
            f"downloading {url} took longer than {_DOWNLOAD_TIMEOUT_S} s; gave up"
        ) from None
    if proc.returncode != 0:
        for leftover in (partial, partial.with_name(partial.name + ".FAILED")):
            leftover.unlink(missing_ok=True)
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        if any("Hash Sum mismatch" in line for line in detail):
            raise ChecksumError(
                f"checksum mismatch downloading {url}: the registry's file is not the one "
                f"pinned in the recipe (sha256 {sha256}); refusing it"
            )
        raise CorpusError(f"cannot download {url}: {' '.join(detail[-3:]) or 'no detail'}")
    partial.replace(dest)


def _pip_download(project: Project, dest: Path) -> None:
    """Download ``project``'s source distribution with pip into ``dest``.

    pip is the running Python's, so its configuration (index, proxy, certificates) applies
    and nothing here names an index.
    """
    src = project.source
    requirement = f"{src.package}=={src.package_version}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pip-", dir=dest.parent) as scratch:
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        argv += ["--disable-pip-version-check", "--quiet", "--dest", scratch, requirement]
        try:
            proc = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=_PIP_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise CorpusError(
                f"pip download {requirement} (project {project.name}) took longer than "
                f"{_PIP_TIMEOUT_S} s; gave up"
            ) from None
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise CorpusError(
                f"cannot download {project.name}'s source distribution {requirement} with "
                f"pip ({sys.executable} -m pip): {' '.join(detail[-3:]) or 'no detail'}; "
                "check pip's index settings (`pip config list`) and the recipe's package "
                "and version"
            )
        got = Path(scratch) / src.file_name
        if not got.is_file():
            saved = sorted(p.name for p in Path(scratch).iterdir())
            raise CorpusError(
                f"pip download {requirement} (project {project.name}) saved {saved}, not "
                f"{src.file_name!r}; set the recipe's source.filename to the file pip saves"
            )
        actual = sha256_of(got)
        if actual != src.sha256:
            raise ChecksumError(
                f"checksum mismatch downloading {project.name}'s {requirement}: pip's index "
                f"served {src.file_name} with sha256 {actual}, the recipe pins {src.sha256}; "
                "refusing it"
            )
        got.replace(dest)


def fetch_sources(
    recipe: Recipe,
    sources_dir: Path,
    projects: Sequence[Project] | None = None,
    progress: Progress | None = None,
) -> list[Path]:
    """Download each project's archive unless present, and verify every checksum.

    An archive already present is verified, never replaced: a mismatch is an error.
    ``local`` archives are only verified.

    Returns:
        The archive paths, in project order.

    Raises:
        CorpusError: If a download fails.
        ChecksumError: If a present or downloaded archive has the wrong sha256.
    """
    sources_dir = Path(sources_dir)
    selected = projects if projects is not None else recipe.projects
    if any(p.source.registry != "local" for p in selected):
        sources_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    mirror: str | None = None
    for project in selected:
        path = archive_path(sources_dir, project)
        registry = project.source.registry
        if not path.is_file() and registry == "pypi":
            if progress:
                progress(
                    f"fetching {project.name} {project.version}: "
                    f"pip download {project.source.package}=={project.source.package_version}"
                )
            _pip_download(project, path)
        elif not path.is_file() and registry == "debian":
            if mirror is None:
                mirror = _archive(recipe)
            url = f"{mirror}/{project.source.path}"
            if progress:
                progress(f"fetching {project.name} {project.version}: {url}")
            _download(url, path, project.source.sha256)
        verify_archive(path, project)
        paths.append(path)
    return paths
