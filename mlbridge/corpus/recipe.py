"""The corpus recipe: which projects, at which version and checksum, built how.

The recipe is a JSON file (``corpus/recipe.json`` in the checkout, described in
docs/corpus.md). It names source archives (a Debian source package's upstream tarball, a
PyPI source distribution, or a local archive) by location and sha256, and gives per
project the source globs, include folders, defines, flags and an optional configure step;
it never holds code.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from mlbridge.corpus.errors import CorpusError
from mlbridge.paths import find_source_dir

__all__ = [
    "ARCHIVE_SUFFIXES",
    "REGISTRIES",
    "SPLITS",
    "Project",
    "Recipe",
    "SourceArchive",
    "default_recipe_path",
    "load_recipe",
]

#: The splits a project can be in. A project is in exactly one.
SPLITS = ("train", "heldout")

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: Where a project's archive comes from, and the keys each kind of ``source`` needs.
REGISTRIES: dict[str, tuple[str, ...]] = {
    # A Debian source package's upstream tarball, by pool path in the apt sources' archive.
    "debian": ("package", "package_version", "path", "sha256"),
    # A source distribution from the package index pip is configured for.
    "pypi": ("package", "version", "filename", "sha256"),
    # An archive on this machine; a relative path is relative to the recipe's folder.
    "local": ("path", "sha256"),
}
#: The archive formats the build unpacks.
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".tar.bz2", ".zip")
#: Seconds each configure command may take unless the project says otherwise.
DEFAULT_CONFIGURE_TIMEOUT_S = 600


@dataclass(frozen=True)
class SourceArchive:
    """A project's source archive, pinned by sha256.

    Attributes:
        registry: ``debian``, ``pypi`` or ``local`` (see :data:`REGISTRIES`).
        package: The Debian source package or PyPI project (``""`` for ``local``).
        package_version: The Debian package version or the PyPI release (``""`` for
            ``local``).
        path: The pool path (``debian``), the file name (``pypi``), or the archive's
            absolute path (``local``, resolved against the recipe's folder).
        sha256: The archive's pinned sha256.
    """

    registry: str
    package: str
    package_version: str
    path: str
    sha256: str

    @property
    def file_name(self) -> str:
        """The archive's file name (the last part of its path)."""
        return PurePosixPath(self.path).name


@dataclass(frozen=True)
class Project:
    """One project of the corpus and its build rules (paths relative to its source root)."""

    name: str
    version: str
    license: str
    homepage: str
    split: str
    source: SourceArchive
    sources: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    file_flags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    generated_files: dict[str, str] = field(default_factory=dict)
    #: Commands (argv lists) run in order in the unpacked source root before compiling.
    configure: tuple[tuple[str, ...], ...] = ()
    #: Seconds each configure command may take.
    configure_timeout: int = DEFAULT_CONFIGURE_TIMEOUT_S
    notes: str = ""
    #: sha256 of the project's recipe entry: any change to it rebuilds the project.
    digest: str = ""


@dataclass(frozen=True)
class Recipe:
    """A parsed, validated recipe."""

    path: Path
    version: str
    #: A Debian archive this recipe pins (rare: by default the apt sources' archive).
    mirror: str | None
    compile_flags: tuple[str, ...]
    projects: tuple[Project, ...]
    sha256: str

    def project(self, name: str) -> Project:
        """Return the project called ``name``.

        Raises:
            CorpusError: If there is none (the message lists the known names).
        """
        for p in self.projects:
            if p.name == name:
                return p
        raise CorpusError(
            f"the recipe {self.path} has no project {name!r} "
            f"(known: {', '.join(p.name for p in self.projects)})"
        )

    def select(self, names: list[str] | None) -> tuple[Project, ...]:
        """Return the named projects in recipe order (all of them for ``None``).

        Raises:
            CorpusError: If a name is unknown.
        """
        if names is None:
            return self.projects
        wanted = {self.project(n).name for n in names}
        return tuple(p for p in self.projects if p.name in wanted)

    def split_of(self) -> dict[str, list[str]]:
        """Return ``{"train": [...], "heldout": [...]}``: project names per split."""
        return {s: [p.name for p in self.projects if p.split == s] for s in SPLITS}


def default_recipe_path() -> Path:
    """Return ``<checkout>/corpus/recipe.json``.

    Raises:
        CorpusError: If mlbridge does not run from a source checkout.
    """
    source = find_source_dir()
    if source is None:
        raise CorpusError(
            "no recipe given and mlbridge is not running from a source checkout: "
            "pass --recipe FILE (the checkout's corpus/recipe.json)"
        )
    return source / "corpus" / "recipe.json"


def _relative(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise CorpusError(f"{where}: expected a non-empty relative path, got {value!r}")
    p = PurePosixPath(value)
    if p.is_absolute() or ".." in p.parts:
        raise CorpusError(f"{where}: {value!r} must be relative and stay inside the project")
    return value


def _strings(where: str, value: Any, *, paths: bool = False) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CorpusError(f"{where}: expected a list of non-empty strings, got {value!r}")
    return tuple(_relative(where, v) for v in value) if paths else tuple(value)


def _text(where: str, data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise CorpusError(f"{where}: {key!r} must be a non-empty string, got {value!r}")
    return value


_PROJECT_KEYS = {
    "name",
    "version",
    "license",
    "homepage",
    "split",
    "source",
    "sources",
    "exclude",
    "include_dirs",
    "defines",
    "flags",
    "file_flags",
    "generated_files",
    "configure",
    "configure_timeout",
    "notes",
}


def _archive_name(where: str, name: str) -> str:
    if not name.endswith(ARCHIVE_SUFFIXES):
        raise CorpusError(
            f"{where} {name!r} is not an archive the build can unpack "
            f"(one of {', '.join(ARCHIVE_SUFFIXES)})"
        )
    return name


def _source(where: str, src: Any, base: Path) -> SourceArchive:
    """Validate a project's ``source`` object; ``base`` is the recipe's folder."""
    if not isinstance(src, dict):
        raise CorpusError(f"{where}: 'source' must be an object with a 'registry'")
    registry = src.get("registry")
    if registry not in REGISTRIES:
        raise CorpusError(
            f"{where}: source.registry {registry!r} is not supported: use one of "
            f"{', '.join(REGISTRIES)} (docs/corpus.md, 'Add your own project')"
        )
    needed = REGISTRIES[registry]
    missing = [k for k in needed if not isinstance(src.get(k), str) or not src.get(k)]
    if missing:
        raise CorpusError(
            f"{where}: a {registry!r} source needs {', '.join(needed)} as non-empty "
            f"strings; missing or empty: {', '.join(missing)}"
        )
    unknown = set(src) - {"registry", *needed}
    if unknown:
        raise CorpusError(
            f"{where}: a {registry!r} source has unknown keys {sorted(unknown)} "
            f"(allowed: registry, {', '.join(needed)})"
        )
    sha = src["sha256"]
    if not _SHA256.match(sha):
        raise CorpusError(
            f"{where}: source.sha256 {sha!r} is not 64 lowercase hex digits "
            "(take it with `sha256sum ARCHIVE`)"
        )
    if registry == "debian":
        path = _relative(f"{where}: source.path", src["path"])
        return SourceArchive(registry, src["package"], src["package_version"], path, sha)
    if registry == "pypi":
        name = src["filename"]
        if "/" in name or name in (".", ".."):
            raise CorpusError(f"{where}: source.filename {name!r} must be a file name")
        _archive_name(f"{where}: source.filename", name)
        return SourceArchive(registry, src["package"], src["version"], name, sha)
    path = (base / src["path"]).resolve()
    _archive_name(f"{where}: source.path", path.name)
    return SourceArchive(registry, "", "", str(path), sha)


def _configure(where: str, value: Any) -> tuple[tuple[str, ...], ...]:
    """One command (a list of strings) or a list of commands; none for ``None``."""
    if value is None:
        return ()
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        value = [value]
    if (
        not isinstance(value, list)
        or not value
        or not all(
            isinstance(c, list) and c and all(isinstance(a, str) and a for a in c) for c in value
        )
    ):
        raise CorpusError(
            f"{where}: 'configure' must be a command (a list of strings, e.g. "
            '["sh", "configure"]) or a list of such commands, got ' + repr(value)
        )
    return tuple(tuple(c) for c in value)


def _project(where: str, data: Any, base: Path) -> Project:
    if not isinstance(data, dict):
        raise CorpusError(f"{where}: expected an object")
    unknown = set(data) - _PROJECT_KEYS
    if unknown:
        raise CorpusError(
            f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(_PROJECT_KEYS)})"
        )
    name = _text(where, data, "name")
    if not _NAME.match(name):
        raise CorpusError(f"{where}: name {name!r} must match {_NAME.pattern}")
    where = f"{where} ({name})"
    split = data.get("split")
    if split not in SPLITS:
        raise CorpusError(f"{where}: split must be one of {SPLITS}, got {split!r}")
    archive = _source(where, data.get("source"), base)
    timeout = data.get("configure_timeout", DEFAULT_CONFIGURE_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
        raise CorpusError(f"{where}: 'configure_timeout' must be a positive number of seconds")
    sources = _strings(f"{where}: sources", data.get("sources"), paths=True)
    if not sources:
        raise CorpusError(f"{where}: 'sources' must list at least one glob")
    file_flags_raw = data.get("file_flags") or {}
    generated_raw = data.get("generated_files") or {}
    if not isinstance(file_flags_raw, dict) or not isinstance(generated_raw, dict):
        raise CorpusError(f"{where}: 'file_flags' and 'generated_files' must be objects")
    file_flags = {
        _relative(f"{where}: file_flags", k): _strings(f"{where}: file_flags[{k}]", v)
        for k, v in file_flags_raw.items()
    }
    generated: dict[str, str] = {}
    for k, v in generated_raw.items():
        if not isinstance(v, str):
            raise CorpusError(f"{where}: generated_files[{k!r}] must be a string")
        generated[_relative(f"{where}: generated_files", k)] = v
    return Project(
        name=name,
        version=_text(where, data, "version"),
        license=_text(where, data, "license"),
        homepage=str(data.get("homepage", "")),
        split=split,
        source=archive,
        sources=sources,
        exclude=_strings(f"{where}: exclude", data.get("exclude"), paths=True),
        include_dirs=_strings(f"{where}: include_dirs", data.get("include_dirs"), paths=True),
        defines=_strings(f"{where}: defines", data.get("defines")),
        flags=_strings(f"{where}: flags", data.get("flags")),
        file_flags=file_flags,
        generated_files=generated,
        configure=_configure(where, data.get("configure")),
        configure_timeout=timeout,
        notes=str(data.get("notes", "")),
        digest=hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest(),
    )


def load_recipe(path: str | Path | None = None) -> Recipe:
    """Read and validate a recipe (default: :func:`default_recipe_path`).

    Raises:
        CorpusError: If the file is missing, not JSON, or breaks a rule (the message
            names the project and the key).
    """
    path = Path(path) if path is not None else default_recipe_path()
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise CorpusError(f"cannot read the corpus recipe {path}: {e.strerror}") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise CorpusError(f"the corpus recipe {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != 1:
        raise CorpusError(f'the corpus recipe {path} must be an object with "format": 1')
    projects_raw = data.get("projects")
    if not isinstance(projects_raw, list) or not projects_raw:
        raise CorpusError(f"the corpus recipe {path}: 'projects' must be a non-empty list")
    base = path.resolve().parent
    projects = tuple(
        _project(f"{path}: projects[{i}]", p, base) for i, p in enumerate(projects_raw)
    )
    seen: set[str] = set()
    for p in projects:
        if p.name in seen:
            # One name, one split: a project listed twice could land in both splits.
            raise CorpusError(f"the corpus recipe {path} lists project {p.name!r} twice")
        seen.add(p.name)
    flags = _strings(f"{path}: compile_flags", data.get("compile_flags"))
    if "-O0" in flags:
        raise CorpusError(
            f"{path}: compile_flags must not contain -O0 (clang marks every function "
            "noinline at -O0); use -O2 -Xclang -disable-llvm-passes"
        )
    return Recipe(
        path=path.resolve(),
        version=str(data.get("version", "")),
        mirror=str(data["mirror"]).rstrip("/") if data.get("mirror") else None,
        compile_flags=flags,
        projects=projects,
        sha256=hashlib.sha256(raw).hexdigest(),
    )
