"""The corpus recipe: which projects, at which version and checksum, built how.

The recipe is a JSON file (``corpus/recipe.json`` in the checkout, described in
docs/corpus.md). It names source archives by registry path and sha256, and gives per
project the source globs, include folders, defines and flags; it never holds code.
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

__all__ = ["SPLITS", "Project", "Recipe", "SourceArchive", "default_recipe_path", "load_recipe"]

#: The splits a project can be in. A project is in exactly one.
SPLITS = ("train", "heldout")

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_REGISTRIES = ("debian",)


@dataclass(frozen=True)
class SourceArchive:
    """A source archive in a registry, pinned by path and sha256."""

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
    "notes",
}


def _project(where: str, data: Any) -> Project:
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
    src = data.get("source")
    if not isinstance(src, dict):
        raise CorpusError(f"{where}: 'source' must be an object")
    registry = _text(where, src, "registry")
    if registry not in _REGISTRIES:
        raise CorpusError(f"{where}: registry {registry!r} is not supported ({_REGISTRIES})")
    sha = _text(where, src, "sha256")
    if not _SHA256.match(sha):
        raise CorpusError(f"{where}: sha256 {sha!r} is not 64 lowercase hex digits")
    archive = SourceArchive(
        registry=registry,
        package=_text(where, src, "package"),
        package_version=_text(where, src, "package_version"),
        path=_relative(f"{where}: source.path", src.get("path")),
        sha256=sha,
    )
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
    projects = tuple(_project(f"{path}: projects[{i}]", p) for i, p in enumerate(projects_raw))
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
