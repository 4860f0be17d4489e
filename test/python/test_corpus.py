"""mlbridge.corpus: recipe, fetch verification, cached build, manifest; the real corpus.

The build-logic tests use a tiny project made in tmp_path (a real tarball, real clang-22,
real llvmlite). The real-corpus tests use the archives scripts/setup.sh fetched; no test
downloads anything.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
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
    with tarfile.open(path, "w:gz") as tar:
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
    assert len(ok) >= 300 and len(projects) >= 5
    # Most translation units compile.
    assert len(ok) >= 0.95 * len(real_corpus.modules)
    split = real_corpus.split
    assert split["train"] and split["heldout"]
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
