"""mlbridge.corpus: recipe, fetch verification, cached build, manifest; the real corpus.

The build-logic tests use a tiny project made in tmp_path (a real tarball, real clang-22,
real llvmlite). The source-kind tests make their own archives too: local ones, and a
source distribution that pip fetches from a folder in tmp_path (pip's own configuration,
set through its environment variables, points it there). The real-corpus tests use the
archives scripts/setup.sh fetched; no test downloads anything.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import orjson
import pytest

from mlbridge.cli import main
from mlbridge.corpus import (
    ChecksumError,
    CorpusError,
    build_corpus,
    default_corpus_dir,
    default_sources_dir,
    fetch_sources,
    load_manifest,
    load_recipe,
)
from mlbridge.ir import parse_module, read_module

# 3 defined functions (sq, twice, use_ext), 2 calls to a defined function (twice -> sq,
# twice), 1 call to an external one (use_ext -> ext). Parameters only, so clang emits no
# lifetime intrinsics.
KNOWN_C = """\
#include "known.h"
static int sq(int x) { return x * x; }
int twice(int x) { return sq(x) + sq(x + OFFSET); }
int use_ext(int x) { return ext(x); }
"""
KNOWN_H = "#define OFFSET 1\nint ext(int);\n"
OTHER_C = "int f(int);\nint main(void) { return f(1); }\nint f(int x) { return x; }\n"
BROKEN_C = "int broken(void) { return 1 +; }\n"
KNOWN_STATS = {
    "defined_functions": 3,
    "declared_functions": 1,
    "intrinsic_declarations": 0,
    "calls_to_defined": 2,
    "calls_to_external": 1,
    "calls_to_intrinsics": 0,
    "indirect_calls": 0,
    "inline_asm_calls": 0,
    "call_sites": 3,
    "basic_blocks": 3,
}

FLAGS = ["-O2", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", "-g0", "-w"]


def _tarball(path: Path, top: str, files: dict[str, str]) -> str:
    mode = "w:xz" if path.name.endswith(".xz") else "w:gz"
    with tarfile.open(path, mode) as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _project(name: str, split: str, archive: Path, sha: str, **extra: object) -> dict:
    return {
        "name": name,
        "version": "1.0",
        "license": "MIT",
        "split": split,
        "source": {
            "registry": "debian",
            "package": name,
            "package_version": "1.0-1",
            "path": f"pool/main/t/{name}/{archive.name}",
            "sha256": sha,
        },
        "sources": ["src/*.c"],
        "include_dirs": ["include"],
        **extra,
    }


class Tiny:
    """A two-project corpus in tmp_path: 'tiny' (train: known.c, broken.c), 'other' (heldout)."""

    def __init__(self, root: Path) -> None:
        self.sources = root / "sources"
        self.output = root / "corpus"
        self.recipe_path = root / "recipe.json"
        self.sources.mkdir()
        self.tiny_archive = self.sources / "tiny_1.0.orig.tar.gz"
        tiny_sha = _tarball(
            self.tiny_archive,
            "tiny-1.0",
            {"src/known.c": KNOWN_C, "src/broken.c": BROKEN_C, "include/known.h": KNOWN_H},
        )
        other_archive = self.sources / "other_1.0.orig.tar.gz"
        other_sha = _tarball(
            other_archive,
            "other-1.0",
            {"src/main.c": OTHER_C},
        )
        self.data = {
            "format": 1,
            "version": "test",
            "compile_flags": FLAGS,
            "projects": [
                _project("tiny", "train", self.tiny_archive, tiny_sha),
                _project("other", "heldout", other_archive, other_sha),
            ],
        }
        self.write()

    def write(self) -> None:
        self.recipe_path.write_bytes(orjson.dumps(self.data))

    def build(self, **kwargs: object):
        return build_corpus(load_recipe(self.recipe_path), self.output, self.sources, **kwargs)


@pytest.fixture
def tiny(tmp_path: Path) -> Tiny:
    return Tiny(tmp_path)


def test_manifest_records_known_statistics_and_command(tiny: Tiny) -> None:
    report = tiny.build(jobs=2)
    assert (report.modules, report.ok, report.failed, report.compiled) == (3, 2, 1, 3)
    manifest = load_manifest(tiny.output)
    known = next(m for m in manifest.modules if m.id == "tiny/src/known.c")
    assert known.ok and known.project == "tiny" and known.split == "train"
    assert known.source_path.read_text() == KNOWN_C
    assert known.bitcode_path.is_file()
    for field, value in KNOWN_STATS.items():
        assert known.stats[field] == value, field
    # The recorded command is exact: running it again reproduces the same statistics.
    assert known.command[1:6] == tuple(FLAGS[:5])
    assert "-O0" not in known.command
    rerun = tiny.output / "rerun.bc"
    command = [*known.command[:-1], str(rerun)]
    subprocess.run(command, cwd=known.cwd, check=True)
    assert read_module(rerun).to_dict() == known.stats
    # Per-project totals are the sums over the project's modules.
    tiny_entry = next(p for p in manifest.projects if p["name"] == "tiny")
    assert tiny_entry["ok"] == 1 and tiny_entry["failed"] == 1
    assert tiny_entry["totals"]["calls_to_defined"] == 2
    assert manifest.data["totals"]["modules"] == 3
    assert manifest.data["compiler"]["version"].startswith(("Debian clang version 22", "clang"))


def test_failed_file_is_recorded_not_fatal(tiny: Tiny) -> None:
    tiny.build()
    manifest = load_manifest(tiny.output)
    broken = next(m for m in manifest.modules if m.id == "tiny/src/broken.c")
    assert broken.status == "failed"
    assert "broken.c:1" in broken.error and "error" in broken.error
    assert not broken.bitcode_path.exists()
    assert not broken.stats
    assert [m.id for m in manifest.ok_modules(project="tiny")] == ["tiny/src/known.c"]


def test_second_build_compiles_nothing(tiny: Tiny) -> None:
    first = tiny.build()
    manifest_bytes = first.manifest.read_bytes()
    bitcode = sorted((tiny.output / "bc").rglob("*.bc"))
    mtimes = [p.stat().st_mtime_ns for p in bitcode]
    second = tiny.build()
    assert second.up_to_date and second.compiled == 0 and second.reused == 3
    assert second.failed == 1  # the failure is remembered, not retried
    assert [p.stat().st_mtime_ns for p in bitcode] == mtimes
    assert second.manifest.read_bytes() == manifest_bytes


def test_recipe_change_rebuilds_only_that_project(tiny: Tiny) -> None:
    tiny.build()
    tiny.data["projects"][0]["defines"] = ["EXTRA=1"]
    tiny.write()
    report = tiny.build()
    assert report.compiled == 2 and report.reused == 1
    known = next(m for m in load_manifest(tiny.output).modules if m.id == "tiny/src/known.c")
    assert "-DEXTRA=1" in known.command


def test_deleted_bitcode_is_rebuilt(tiny: Tiny) -> None:
    tiny.build()
    (tiny.output / "bc" / "other" / "src" / "main.bc").unlink()
    report = tiny.build()
    assert report.compiled == 1
    assert (tiny.output / "bc" / "other" / "src" / "main.bc").is_file()


def test_projects_option_builds_only_those(tiny: Tiny) -> None:
    report = tiny.build(projects=["other"])
    assert report.modules == 1
    manifest = load_manifest(tiny.output)
    assert [p["name"] for p in manifest.projects] == ["other"]
    with pytest.raises(CorpusError, match="no project 'nope'.*known: tiny, other"):
        tiny.build(projects=["nope"])


def test_split_is_by_project(tiny: Tiny) -> None:
    tiny.build()
    manifest = load_manifest(tiny.output)
    assert manifest.split == {"train": ["tiny"], "heldout": ["other"]}
    for m in manifest.modules:
        assert m.split == ("train" if m.project == "tiny" else "heldout")


def test_recipe_refuses_project_in_two_places_and_bad_split(tiny: Tiny) -> None:
    again = dict(tiny.data["projects"][0], split="heldout")
    tiny.data["projects"].append(again)
    tiny.write()
    with pytest.raises(CorpusError, match="lists project 'tiny' twice"):
        load_recipe(tiny.recipe_path)
    tiny.data["projects"].pop()
    tiny.data["projects"][0]["split"] = "test"
    tiny.write()
    with pytest.raises(CorpusError, match=r"\(tiny\): split must be one of"):
        load_recipe(tiny.recipe_path)


def test_recipe_refuses_O0_and_escaping_paths(tiny: Tiny) -> None:
    tiny.data["compile_flags"] = ["-O0", "-emit-llvm", "-c"]
    tiny.write()
    with pytest.raises(CorpusError, match="must not contain -O0.*noinline"):
        load_recipe(tiny.recipe_path)
    tiny.data["compile_flags"] = FLAGS
    tiny.data["projects"][0]["sources"] = ["../*.c"]
    tiny.write()
    with pytest.raises(CorpusError, match="must be relative and stay inside"):
        load_recipe(tiny.recipe_path)


def test_checksum_mismatch_is_refused(tiny: Tiny, capsys: pytest.CaptureFixture[str]) -> None:
    with open(tiny.tiny_archive, "ab") as f:
        f.write(b"\0")
    with pytest.raises(ChecksumError, match="checksum mismatch for tiny's archive") as e:
        tiny.build()
    assert tiny.data["projects"][0]["source"]["sha256"] in str(e.value)
    assert "mlbridge corpus fetch" in str(e.value)
    assert not (tiny.output / "manifest.json").exists()
    argv = ["corpus", "build", "--offline", "--recipe", str(tiny.recipe_path)]
    argv += ["--output", str(tiny.output), "--sources", str(tiny.sources)]
    assert main(argv) == 1
    assert "mlbridge: error: checksum mismatch for tiny's archive" in capsys.readouterr().err


def test_missing_archive_says_how_to_fetch(tiny: Tiny) -> None:
    tiny.tiny_archive.unlink()
    with pytest.raises(CorpusError, match="archive of tiny is missing.*mlbridge corpus fetch"):
        tiny.build()


def test_cli_build_and_info(tiny: Tiny, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--output", str(tiny.output)]
    argv = ["corpus", "build", "--offline", "-j", "1", "--recipe", str(tiny.recipe_path)]
    assert main([*argv, *common, "--sources", str(tiny.sources)]) == 0
    err = capsys.readouterr().err
    assert "mlbridge corpus: compiling: 3/3" in err and "2 modules ok, 1 failed" in err
    assert "FAILED tiny/src/broken.c" in err
    assert "\r" not in err  # stderr is not a terminal: plain lines, no bar
    assert main([*argv, *common, "--sources", str(tiny.sources)]) == 0
    assert "nothing to compile" in capsys.readouterr().err
    assert main(["corpus", "info", *common]) == 0
    out = capsys.readouterr().out
    assert "split: train = tiny; heldout = other" in out
    assert "tiny/src/broken.c" in out and "error" in out
    assert main(["corpus", "info", "--json", *common]) == 0
    summary = orjson.loads(capsys.readouterr().out)
    assert summary["totals"]["ok"] == 2 and "modules" not in summary


def test_info_without_corpus_says_how_to_build(tmp_path: Path, capsys) -> None:
    assert main(["corpus", "info", "--output", str(tmp_path)]) == 1
    assert "mlbridge corpus build" in capsys.readouterr().err


# -- source kinds: local archives, PyPI source distributions; the configure step ----------


def _local_recipe(root: Path, source: dict, **extra: object) -> Path:
    """A one-project recipe in ``root/recipes`` whose project 'mine' has ``source``."""
    project = {
        "name": "mine",
        "version": "1.0",
        "license": "MIT",
        "split": "train",
        "source": source,
        "sources": ["src/*.c"],
        "include_dirs": ["include"],
        **extra,
    }
    path = root / "recipes" / "recipe.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": 1, "version": "t", "compile_flags": FLAGS, "projects": [project]}
    path.write_bytes(orjson.dumps(data))
    return path


def _mine_files() -> dict[str, str]:
    return {"src/known.c": KNOWN_C, "include/known.h": KNOWN_H}


@pytest.mark.parametrize("suffix", [".tar.xz", ".zip"])
def test_local_archive_relative_to_the_recipe_builds(tmp_path: Path, suffix: str) -> None:
    archive = tmp_path / "recipes" / "archives" / f"mine-1.0{suffix}"
    archive.parent.mkdir(parents=True)
    if suffix == ".zip":
        with zipfile.ZipFile(archive, "w") as z:
            for name, text in _mine_files().items():
                z.writestr(f"mine-1.0/{name}", text)
        sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    else:
        sha = _tarball(archive, "mine-1.0", _mine_files())
    source = {"registry": "local", "path": f"archives/{archive.name}", "sha256": sha}
    recipe = load_recipe(_local_recipe(tmp_path, source))
    assert recipe.projects[0].source.path == str(archive)
    # Nothing to download: fetch only verifies it where it is.
    assert fetch_sources(recipe, tmp_path / "unused") == [archive]
    report = build_corpus(recipe, tmp_path / "corpus", tmp_path / "unused")
    assert (report.ok, report.failed) == (1, 0)
    manifest = load_manifest(tmp_path / "corpus")
    module = next(manifest.ok_modules())
    assert module.id == "mine/src/known.c" and module.stats["calls_to_defined"] == 2
    entry = manifest.projects[0]["archive"]
    assert entry["registry"] == "local" and entry["file"] == str(archive)


def test_local_archive_missing_or_changed_says_what_to_fix(tmp_path: Path) -> None:
    archive = tmp_path / "recipes" / "mine.tar.gz"
    archive.parent.mkdir(parents=True)
    sha = _tarball(archive, "mine-1.0", _mine_files())
    wrong = {"registry": "local", "path": "elsewhere/mine.tar.gz", "sha256": sha}
    recipe = load_recipe(_local_recipe(tmp_path, wrong))
    with pytest.raises(CorpusError, match=r"local archive of mine is not found: .*elsewhere.*"
                       r"relative to the recipe's folder"):  # fmt: skip
        build_corpus(recipe, tmp_path / "corpus", tmp_path / "unused")
    stale = {"registry": "local", "path": "mine.tar.gz", "sha256": "0" * 64}
    recipe = load_recipe(_local_recipe(tmp_path, stale))
    with pytest.raises(
        ChecksumError, match=f"mine's archive.*set the recipe's source.sha256 to {sha}"
    ):
        fetch_sources(recipe, tmp_path / "unused")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"registry": "npm", "sha256": "0" * 64},
         r"\(mine\): source.registry 'npm' is not supported: use one of debian, pypi, local"),
        ({"registry": "pypi", "package": "x", "version": "1", "sha256": "0" * 64},
         r"\(mine\): a 'pypi' source needs package, version, filename, sha256.*missing or "
         r"empty: filename"),
        ({"registry": "debian", "package": "x", "package_version": "1", "sha256": "0" * 64},
         r"\(mine\): a 'debian' source needs .*missing or empty: path"),
        ({"registry": "local", "path": "a.tar.gz", "sha256": "0" * 64, "url": "x"},
         r"\(mine\): a 'local' source has unknown keys \['url'\]"),
        ({"registry": "local", "path": "a.rar", "sha256": "0" * 64},
         r"\(mine\): source.path 'a.rar' is not an archive the build can unpack"),
        ({"registry": "local", "path": "a.tar.gz", "sha256": "ABC"},
         r"\(mine\): source.sha256 'ABC' is not 64 lowercase hex digits.*sha256sum"),
        ({"registry": "pypi", "package": "x", "version": "1", "filename": "../x.tar.gz",
          "sha256": "0" * 64}, r"\(mine\): source.filename '../x.tar.gz' must be a file name"),
    ],
)  # fmt: skip
def test_recipe_refuses_bad_sources_naming_the_project(
    tmp_path: Path, source: dict, message: str
) -> None:
    with pytest.raises(CorpusError, match=message):
        load_recipe(_local_recipe(tmp_path, source))


def _configured(tmp_path: Path, script: str, configure: object, **extra: object) -> Path:
    """A local project whose known.h is written by ``configure.sh`` (``script``)."""
    archive = tmp_path / "recipes" / "mine.tar.gz"
    archive.parent.mkdir(parents=True, exist_ok=True)
    files = {"src/known.c": KNOWN_C, "configure.sh": script}
    sha = _tarball(archive, "mine-1.0", files)
    source = {"registry": "local", "path": "mine.tar.gz", "sha256": sha}
    return _local_recipe(tmp_path, source, configure=configure, **extra)


def test_configure_step_generates_headers_before_compiling(tmp_path: Path) -> None:
    script = (
        'echo "configuring with $CC $1"\nmkdir include\n'
        "printf '%s\\n' '#define OFFSET 1' 'int ext(int);' > include/known.h\n"
    )
    recipe = load_recipe(_configured(tmp_path, script, [["sh", "configure.sh", "--fast"]]))
    assert recipe.projects[0].configure == (("sh", "configure.sh", "--fast"),)
    report = build_corpus(recipe, tmp_path / "corpus", tmp_path / "unused")
    assert (report.ok, report.failed) == (1, 0)
    log = (tmp_path / "corpus" / "logs" / "mine-configure.log").read_text()
    assert "$ sh configure.sh --fast" in log and "configuring with" in log and "--fast" in log
    # A second build neither unpacks nor configures again.
    (tmp_path / "corpus" / "logs" / "mine-configure.log").unlink()
    assert build_corpus(recipe, tmp_path / "corpus", tmp_path / "unused").up_to_date
    assert not (tmp_path / "corpus" / "logs" / "mine-configure.log").exists()


def test_configure_failure_names_the_project_and_the_log(tmp_path: Path) -> None:
    script = "echo 'checking for a frobnicator... no' >&2\nexit 3\n"
    recipe = load_recipe(_configured(tmp_path, script, ["sh", "configure.sh"]))
    log = tmp_path / "corpus" / "logs" / "mine-configure.log"
    with pytest.raises(CorpusError, match=r"configure step of mine failed: `sh configure.sh` "
                       rf"exited with status 3; its output is in {log}"):  # fmt: skip
        build_corpus(recipe, tmp_path / "corpus", tmp_path / "unused")
    assert "checking for a frobnicator... no" in log.read_text()
    assert not (tmp_path / "corpus" / "manifest.json").exists()
    slow = load_recipe(
        _configured(tmp_path, "sleep 5\n", ["sh", "configure.sh"], configure_timeout=1)
    )
    with pytest.raises(CorpusError, match="configure step of mine failed: .* took longer than 1 s"):
        build_corpus(slow, tmp_path / "corpus", tmp_path / "unused")


@pytest.mark.parametrize("configure", [[], "sh configure", [["sh"], []], [["sh", 1]]])
def test_recipe_refuses_a_malformed_configure(tmp_path: Path, configure: object) -> None:
    with pytest.raises(CorpusError, match=r"\(mine\): 'configure' must be a command"):
        load_recipe(_configured(tmp_path, "true\n", configure))


_IN_TREE_BACKEND = '''\
"""A PEP 517 backend that needs nothing: pip can prepare this sdist's metadata offline."""
import os


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, "tiny_sdist-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\\nName: tiny-sdist\\nVersion: 1.0\\n")
    return "tiny_sdist-1.0.dist-info"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise NotImplementedError("only the source is used")
'''


@pytest.fixture
def pip_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A source distribution in a folder that pip is configured (by environment) to use."""
    index = tmp_path / "index"
    index.mkdir()
    files = {
        **_mine_files(),
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\n'
        'backend-path = ["."]\n',
        "backend.py": _IN_TREE_BACKEND,
        "PKG-INFO": "Metadata-Version: 2.1\nName: tiny-sdist\nVersion: 1.0\n",
    }
    sha = _tarball(index / "tiny_sdist-1.0.tar.gz", "tiny_sdist-1.0", files)
    # pip's configuration, not mlbridge, says where packages come from.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    return index, sha


def _pypi_source(sha: str, **change: str) -> dict:
    return {
        "registry": "pypi",
        "package": "tiny-sdist",
        "version": "1.0",
        "filename": "tiny_sdist-1.0.tar.gz",
        "sha256": sha,
        **change,
    }


def test_pypi_sdist_is_fetched_through_pip_and_built(
    tmp_path: Path, pip_index: tuple[Path, str]
) -> None:
    _, sha = pip_index
    recipe = load_recipe(_local_recipe(tmp_path, _pypi_source(sha)))
    sources = tmp_path / "sources"
    lines: list[str] = []
    assert fetch_sources(recipe, sources, progress=lines.append) == [
        sources / "tiny_sdist-1.0.tar.gz"
    ]
    assert lines == ["fetching mine 1.0: pip download tiny-sdist==1.0"]
    assert sorted(p.name for p in sources.iterdir()) == ["tiny_sdist-1.0.tar.gz"]
    report = build_corpus(recipe, tmp_path / "corpus", sources)
    assert (report.ok, report.failed) == (1, 0)
    entry = load_manifest(tmp_path / "corpus").projects[0]["archive"]
    assert (entry["registry"], entry["package"], entry["package_version"]) == (
        "pypi", "tiny-sdist", "1.0"
    )  # fmt: skip


def test_pypi_sdist_with_another_checksum_or_name_is_refused(
    tmp_path: Path, pip_index: tuple[Path, str]
) -> None:
    _, sha = pip_index
    sources = tmp_path / "sources"
    recipe = load_recipe(_local_recipe(tmp_path, _pypi_source("1" * 64)))
    with pytest.raises(
        ChecksumError, match=f"mine's tiny-sdist==1.0.*sha256 {sha}, the recipe pins 1111"
    ):
        fetch_sources(recipe, sources)
    assert not list(sources.iterdir())  # nothing half-fetched is left
    recipe = load_recipe(_local_recipe(tmp_path, _pypi_source(sha, filename="tiny-1.0.tar.gz")))
    with pytest.raises(
        CorpusError,
        match=r"saved \['tiny_sdist-1.0.tar.gz'\], not 'tiny-1.0.tar.gz'; set the recipe's "
        "source.filename",
    ):
        fetch_sources(recipe, sources)
    recipe = load_recipe(_local_recipe(tmp_path, _pypi_source(sha, version="9.9")))
    with pytest.raises(
        CorpusError, match=r"cannot download mine's source distribution tiny-sdist==9.9 with pip"
    ):
        fetch_sources(recipe, sources)


# -- the real corpus -------------------------------------------------------------------


@pytest.fixture(scope="session")
def real_corpus():
    """The corpus of corpus/recipe.json, built (or reused) from the fetched archives."""
    recipe = load_recipe()
    try:
        build_corpus(
            recipe,
            default_corpus_dir(),
            default_sources_dir(),
            jobs=2,
            fetch=False,
            progress=lambda line: print(line, flush=True),
        )
    except CorpusError as e:
        pytest.fail(f"cannot build the real corpus (run scripts/setup.sh first): {e}")
    return load_manifest(default_corpus_dir())


def test_real_corpus_size_and_split(real_corpus) -> None:
    ok = list(real_corpus.ok_modules())
    projects = {m.project for m in ok}
    # 21 projects, 779 modules when measured (docs/corpus.md).
    assert len(ok) >= 700 and len(projects) >= 20
    # Most translation units compile.
    assert len(ok) >= 0.95 * len(real_corpus.modules)
    split = real_corpus.split
    # The held-out set behind every published number; changing it is a decision of its own.
    assert split["heldout"] == ["lua", "cmark-gfm"]
    assert split["train"]
    assert not set(split["train"]) & set(split["heldout"])
    assert set(split["train"]) | set(split["heldout"]) == projects
    for m in ok:
        assert m.split == ("heldout" if m.project in split["heldout"] else "train")
    for p in real_corpus.projects:
        assert p["license"] and p["archive"]["sha256"]


def test_real_corpus_bitcode_is_valid_and_has_calls(real_corpus) -> None:
    for m in real_corpus.ok_modules():
        module = parse_module(m.bitcode_path)  # parses and verifies, or raises IRError
        module.close()
    totals = real_corpus.data["totals"]
    assert totals["call_sites"] > 0 and totals["calls_to_defined"] > 0
    for p in real_corpus.projects:
        # Every project gives the inliner candidates.
        assert p["totals"]["calls_to_defined"] > 0, p["name"]
    # The recorded statistics are what llvmlite reads now (one module per project).
    firsts = {m.project: m for m in reversed(list(real_corpus.ok_modules()))}
    for m in firsts.values():
        assert read_module(m.bitcode_path).to_dict() == m.stats


def test_real_corpus_second_build_is_a_no_op(real_corpus) -> None:
    report = build_corpus(
        load_recipe(), default_corpus_dir(), default_sources_dir(), jobs=2, fetch=False
    )
    assert report.up_to_date and report.compiled == 0
    assert report.ok == sum(1 for _ in real_corpus.ok_modules())


def test_real_corpus_module_disassembled_by_llvm_dis_22(real_corpus, tmp_path) -> None:
    tool = shutil.which("llvm-dis-22")
    assert tool, "llvm-dis-22 is not installed (Debian package llvm-22)"
    m = next(real_corpus.ok_modules(split="heldout"))
    text = tmp_path / "m.ll"
    subprocess.run([tool, str(m.bitcode_path), "-o", str(text)], check=True)
    assert read_module(text).to_dict() == m.stats


def test_select_keeps_the_size_range_and_spreads_over_projects(real_corpus) -> None:
    manifest = real_corpus
    chosen = manifest.select("train", min_instructions=50, max_instructions=3000, max_modules=12)
    assert len(chosen) == 12
    assert all(m.split == "train" and m.ok for m in chosen)
    assert all(50 <= int(m.stats["instructions"]) <= 3000 for m in chosen)
    assert len({m.project for m in chosen}) > 4
    everything = manifest.select("train", min_instructions=50, max_instructions=3000)
    assert len(everything) > 12 and set(m.id for m in chosen) <= set(m.id for m in everything)
