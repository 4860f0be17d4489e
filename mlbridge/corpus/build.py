"""Build the corpus: unpack, compile to LLVM 22 bitcode, read statistics, write the manifest.

Every translation unit is compiled in parallel; llvmlite reads the statistics of each.

Layout of the corpus folder::

    manifest.json                 the manifest (docs/corpus.md)
    src/<project>/...             the unpacked sources (+ the recipe's generated headers
                                  and what its configure step wrote)
    logs/<project>-configure.log  the output of the project's configure step, if it has one
    bc/<project>/<path>.bc        one bitcode module per translation unit
    bc/<project>/<path>.bc.json   its build record: cache key, command, status, statistics

Caching is per module: the key is a hash of the exact command, the archive's sha256,
the project's recipe entry and clang's version. A module whose record has the same key
is not rebuilt (a file that failed to compile is not retried either), so a second run
with nothing changed starts no compiler.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import subprocess
import tarfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mlbridge.corpus.errors import CorpusError
from mlbridge.corpus.fetch import archive_path, fetch_sources, verify_archive
from mlbridge.corpus.manifest import MANIFEST_FORMAT, MANIFEST_NAME, sum_stats
from mlbridge.corpus.recipe import Project, Recipe
from mlbridge.llvm import LLVMToolError, find_llvm_tool
from mlbridge.progress import track

__all__ = ["CLANG_ENV", "BuildReport", "build_corpus", "find_clang"]

#: Overrides the clang used to compile the corpus.
CLANG_ENV = "MLBRIDGE_CLANG"

_COMPILE_TIMEOUT_S = 300
_ERROR_LINES = 20
_SOURCE_STAMP = ".mlbridge-source.json"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildReport:
    """What a build did."""

    output: Path
    manifest: Path
    modules: int
    ok: int
    failed: int
    compiled: int
    reused: int
    seconds: float

    @property
    def up_to_date(self) -> bool:
        """Whether nothing had to be compiled."""
        return self.compiled == 0


def find_clang(clang: str | None = None) -> tuple[str, str]:
    """Return the clang to use and the first line of its ``--version``.

    Order: ``clang``, ``$MLBRIDGE_CLANG``, then LLVM 22's clang as
    :func:`mlbridge.llvm.find_llvm_tool` finds it (``$MLBRIDGE_LLVM_TOOLS_DIR``, else
    ``clang-22`` on PATH, else ``/usr/lib/llvm-22/bin/clang``).

    Raises:
        CorpusError: If none runs or it is not clang 22.
    """
    candidates = [clang, os.environ.get(CLANG_ENV)]
    path = next((c for c in candidates if c and shutil.which(c)), None)
    if path is None:
        try:
            path = find_llvm_tool("clang")
        except LLVMToolError as e:
            raise CorpusError(
                f"{e} (clang-22: the Debian package clang-22; or set ${CLANG_ENV})"
            ) from None
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise CorpusError(f"cannot run {path} --version: {e}") from None
    version = out.splitlines()[0] if out else ""
    if "version 22." not in version:
        raise CorpusError(
            f"{path} is {version!r}, not clang 22: the corpus must be LLVM 22 bitcode "
            f"(llvmlite 0.50 and opt-22 read it); set ${CLANG_ENV} to clang-22"
        )
    return str(Path(path).resolve()) if os.sep in path else path, version


def _extract(archive: Path, scratch: Path) -> None:
    """Extract a tar (any compression) or zip archive into ``scratch``, refusing escapes."""
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                parts = Path(name).parts
                if Path(name).is_absolute() or ".." in parts:
                    raise CorpusError(f"{archive} has an entry outside its folder: {name!r}")
            z.extractall(scratch)
        return
    with tarfile.open(archive) as tar:
        tar.extractall(scratch, filter="data")


def _configure(project: Project, root: Path, log: Path, clang: str) -> None:
    """Run the project's configure commands in ``root``; all output goes to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    # The configure step probes the compiler the corpus is built with.
    env = {**os.environ, "CC": clang}
    with open(log, "w") as out:
        for argv in project.configure:
            out.write(f"$ {' '.join(argv)}\n")
            out.flush()
            try:
                proc = subprocess.run(
                    argv,
                    cwd=root,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=project.configure_timeout,
                    stdin=subprocess.DEVNULL,
                )
            except subprocess.TimeoutExpired:
                failure = f"took longer than {project.configure_timeout} s"
            except OSError as e:
                failure = f"could not start: {e.strerror}"
            else:
                if proc.returncode == 0:
                    continue
                failure = f"exited with status {proc.returncode}"
            raise CorpusError(
                f"the configure step of {project.name} failed: `{' '.join(argv)}` {failure}; "
                f"its output is in {log}. Fix the recipe's 'configure' (or install what it "
                "needs) and build again."
            )


def _unpack(archive: Path, project: Project, src_root: Path, clang: str) -> Path:
    """Unpack ``archive`` (stripping its single top folder) into ``src_root/<name>``.

    Then write the recipe's generated files and run its configure step, if any.
    """
    target = src_root / project.name
    stamp = target / _SOURCE_STAMP
    want = {"sha256": project.source.sha256, "recipe": project.digest}
    if stamp.is_file():
        try:
            if orjson.loads(stamp.read_bytes()) == want:
                return target
        except orjson.JSONDecodeError:
            pass
    scratch = src_root / f".unpack-{project.name}"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        _extract(archive, scratch)
    except CorpusError:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as e:
        shutil.rmtree(scratch, ignore_errors=True)
        raise CorpusError(f"cannot unpack {archive}: {e}") from None
    tops = list(scratch.iterdir())
    if len(tops) != 1 or not tops[0].is_dir():
        shutil.rmtree(scratch, ignore_errors=True)
        raise CorpusError(
            f"{archive} does not hold exactly one top folder (found {len(tops)} entries); "
            "the recipe's archives must"
        )
    tops[0].rename(target)
    scratch.rmdir()
    for rel, text in project.generated_files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if project.configure:
        # No stamp until it succeeds: a failed configure step is retried on a fresh tree.
        _configure(
            project, target, src_root.parent / "logs" / f"{project.name}-configure.log", clang
        )
    stamp.write_bytes(orjson.dumps(want))
    return target


def _translation_units(project: Project, root: Path) -> list[str]:
    excluded = {p for pattern in project.exclude for p in root.glob(pattern)}
    units: dict[str, None] = {}
    for pattern in project.sources:
        for path in sorted(root.glob(pattern)):
            if path.is_file() and path not in excluded:
                units[path.relative_to(root).as_posix()] = None
    if not units:
        raise CorpusError(
            f"project {project.name}: the source globs {list(project.sources)} match no file "
            f"under {root}; fix 'sources' in the recipe"
        )
    return list(units)


def _tasks(
    recipe: Recipe, project: Project, root: Path, output: Path, clang: str, clang_version: str
) -> list[dict[str, Any]]:
    tasks = []
    for rel in _translation_units(project, root):
        bitcode = Path("bc") / project.name / Path(rel).with_suffix(".bc")
        argv = [clang, *recipe.compile_flags, *project.flags]
        argv += project.file_flags.get(rel, ())
        argv += [f"-D{d}" for d in project.defines]
        argv += [f"-I{root / d}" for d in project.include_dirs]
        argv += [rel, "-o", str(output / bitcode)]
        key_data = {
            "argv": argv,
            "cwd": str(root),
            "archive": project.source.sha256,
            "recipe": project.digest,
            "clang": clang_version,
        }
        tasks.append(
            {
                "id": f"{project.name}/{rel}",
                "project": project.name,
                "split": project.split,
                "source": (Path("src") / project.name / rel).as_posix(),
                "bitcode": bitcode.as_posix(),
                "cwd": str(root),
                "command": argv,
                "key": hashlib.sha256(orjson.dumps(key_data)).hexdigest(),
            }
        )
    return tasks


def _record_path(output: Path, task: dict[str, Any]) -> Path:
    return output / (task["bitcode"] + ".json")


def _cached(output: Path, task: dict[str, Any]) -> dict[str, Any] | None:
    """Return the module's build record if it is current, else ``None``."""
    try:
        record = orjson.loads(_record_path(output, task).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("key") != task["key"]:
        return None
    if record.get("status") == "ok" and not (output / task["bitcode"]).is_file():
        return None
    return record


def _build_module(output: str, task: dict[str, Any]) -> dict[str, Any]:
    """Compile one translation unit and read its statistics (runs in a worker process)."""
    from mlbridge.ir import IRError, read_module

    out = Path(output)
    bitcode = out / task["bitcode"]
    bitcode.parent.mkdir(parents=True, exist_ok=True)
    # Compile to a temporary name so that an interrupted build never leaves a partial file.
    partial = bitcode.with_name(bitcode.name + ".partial")
    argv = list(task["command"])
    argv[-1] = str(partial)
    record = {**task, "status": "ok", "error": "", "stats": None}
    try:
        proc = subprocess.run(
            argv,
            cwd=task["cwd"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_COMPILE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        failure = (
            ""
            if proc.returncode == 0
            else "\n".join(proc.stderr.strip().splitlines()[-_ERROR_LINES:])
            or f"clang exited with status {proc.returncode}"
        )
    except subprocess.TimeoutExpired:
        failure = f"clang took longer than {_COMPILE_TIMEOUT_S} s"
    if not failure:
        try:
            record["stats"] = read_module(partial).to_dict()
        except IRError as e:
            failure = f"clang wrote invalid bitcode: {e}"
    if failure:
        partial.unlink(missing_ok=True)
        bitcode.unlink(missing_ok=True)
        record.update(status="failed", error=failure)
    else:
        partial.replace(bitcode)
    _record_path(out, task).write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
    return record


def _completed(output: Path, tasks: list[dict[str, Any]], jobs: int) -> Iterator[dict[str, Any]]:
    """Compile ``tasks`` in ``jobs`` worker processes; yield each build record as it is done."""
    # Larger files first, so that the last job does not start alone at the end.
    order = sorted(tasks, key=lambda t: -(Path(t["cwd"]) / t["id"].split("/", 1)[1]).stat().st_size)
    # spawn: workers must not inherit the caller's threads or llvmlite state.
    context = multiprocessing.get_context("spawn")
    pending: set[Future[dict[str, Any]]] = set()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        try:
            queue = iter(order)
            for task in queue:
                pending.add(pool.submit(_build_module, str(output), task))
                if len(pending) >= 2 * jobs:
                    break
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield future.result()
                for task in queue:
                    pending.add(pool.submit(_build_module, str(output), task))
                    if len(pending) >= 2 * jobs:
                        break
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _run_tasks(
    output: Path, tasks: list[dict[str, Any]], jobs: int, progress: Progress | None
) -> list[dict[str, Any]]:
    done: list[dict[str, Any]] = []
    if not tasks:
        return done
    records = _completed(output, tasks, jobs)
    if progress:  # one bar (plain lines every 10% off a terminal), one line per failure
        records = track(
            records, total=len(tasks), description="mlbridge corpus: compiling", unit="module"
        )
    for record in records:
        done.append(record)
        if progress and record["status"] != "ok":
            progress(f"FAILED {record['id']} (its error is in the manifest; mlbridge corpus info)")
    return done


def _manifest(
    recipe: Recipe,
    projects: Sequence[Project],
    records: list[dict[str, Any]],
    clang: str,
    clang_version: str,
    sources_dir: Path,
) -> dict[str, Any]:
    import llvmlite
    import llvmlite.binding as llvm

    by_project: dict[str, list[dict[str, Any]]] = {p.name: [] for p in projects}
    for r in records:
        by_project[r["project"]].append(r)
    project_entries = []
    for p in projects:
        rs = by_project[p.name]
        ok = [r for r in rs if r["status"] == "ok"]
        project_entries.append(
            {
                "name": p.name,
                "version": p.version,
                "license": p.license,
                "homepage": p.homepage,
                "split": p.split,
                "archive": {
                    "registry": p.source.registry,
                    "package": p.source.package,
                    "package_version": p.source.package_version,
                    "path": p.source.path,
                    "sha256": p.source.sha256,
                    "file": str(archive_path(sources_dir, p)),
                },
                "modules": len(rs),
                "ok": len(ok),
                "failed": len(rs) - len(ok),
                "totals": sum_stats([r["stats"] for r in ok]),
            }
        )
    modules = [{k: v for k, v in r.items() if k != "key"} for r in records]
    return {
        "format": MANIFEST_FORMAT,
        "recipe": {"path": str(recipe.path), "version": recipe.version, "sha256": recipe.sha256},
        "compiler": {"path": clang, "version": clang_version, "flags": list(recipe.compile_flags)},
        "reader": {
            "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm.llvm_version_info)),
        },
        "split": {s: [p.name for p in projects if p.split == s] for s in ("train", "heldout")},
        "projects": project_entries,
        "totals": {
            "projects": len(projects),
            "modules": len(records),
            "ok": sum(e["ok"] for e in project_entries),
            "failed": sum(e["failed"] for e in project_entries),
            **sum_stats([r["stats"] for r in records if r["status"] == "ok"]),
        },
        "modules": modules,
    }


def build_corpus(
    recipe: Recipe,
    output: Path,
    sources_dir: Path,
    *,
    projects: list[str] | None = None,
    jobs: int = 2,
    fetch: bool = False,
    clang: str | None = None,
    progress: Progress | None = None,
) -> BuildReport:
    """Build (or bring up to date) the corpus of ``projects`` (all by default) in ``output``.

    Args:
        recipe: The loaded recipe.
        output: The corpus folder.
        sources_dir: Where the pinned archives are (see :func:`fetch_sources`).
        projects: Project names to build; ``None`` for all. The manifest lists exactly these.
        jobs: Parallel clang processes.
        fetch: Download missing archives first (needs the network); otherwise a missing
            archive is an error that says how to fetch it.
        clang: The clang to use (default: :func:`find_clang`).
        progress: Called with one line per step and per failed module (e.g. print to
            stderr); when given, the compilation also shows a progress bar on stderr
            (:func:`mlbridge.progress.track`).

    Returns:
        What was done; :attr:`BuildReport.up_to_date` when nothing was compiled.

    Raises:
        CorpusError: A missing or mismatching archive, no clang 22, a bad recipe glob, a
            failed configure step (the message names its log).
    """
    if jobs < 1:
        raise CorpusError(f"jobs must be at least 1, got {jobs}")
    start = time.monotonic()
    output = Path(output).resolve()
    sources_dir = Path(sources_dir).resolve()
    selected = recipe.select(projects)
    clang_path, clang_version = find_clang(clang)
    if fetch:
        fetch_sources(recipe, sources_dir, selected, progress)
    tasks: list[dict[str, Any]] = []
    for project in selected:
        archive = archive_path(sources_dir, project)
        verify_archive(archive, project)
        root = _unpack(archive, project, output / "src", clang_path)
        tasks += _tasks(recipe, project, root, output, clang_path, clang_version)

    cached = {t["id"]: _cached(output, t) for t in tasks}
    todo = [t for t in tasks if cached[t["id"]] is None]
    if progress:
        if todo:
            progress(
                f"compiling {len(todo)} of {len(tasks)} modules with {jobs} jobs "
                f"({len(tasks) - len(todo)} up to date) into {output}"
            )
        else:
            progress(f"all {len(tasks)} modules are up to date in {output}: nothing to compile")
    records = {r["id"]: r for r in _run_tasks(output, todo, jobs, progress)}
    records.update((k, v) for k, v in cached.items() if v is not None)
    ordered = [records[t["id"]] for t in tasks]

    manifest = _manifest(recipe, selected, ordered, clang_path, clang_version, sources_dir)
    path = output / MANIFEST_NAME
    data = orjson.dumps(manifest, option=orjson.OPT_INDENT_2)
    if not path.is_file() or path.read_bytes() != data:
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(data)
        partial.replace(path)
    ok = manifest["totals"]["ok"]
    return BuildReport(
        output=output,
        manifest=path,
        modules=len(ordered),
        ok=ok,
        failed=len(ordered) - ok,
        compiled=len(todo),
        reused=len(tasks) - len(todo),
        seconds=time.monotonic() - start,
    )
