"""``mlbridge corpus fetch|build|info``: the command line of :mod:`mlbridge.corpus`.

The ``corpus`` entry of :data:`mlbridge.cli.COMMANDS` calls :func:`add_arguments` and
:func:`run`; errors are raised as :class:`mlbridge.errors.CLIError`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from mlbridge.corpus.build import build_corpus
from mlbridge.corpus.errors import CorpusError
from mlbridge.corpus.fetch import default_corpus_dir, default_sources_dir, fetch_sources
from mlbridge.corpus.manifest import load_manifest
from mlbridge.corpus.recipe import load_recipe
from mlbridge.errors import CLIError

__all__ = ["add_arguments", "run"]


def _status(message: str) -> None:
    print(f"mlbridge corpus: {message}", file=sys.stderr, flush=True)


def _add_common(p: argparse.ArgumentParser, *, sources: bool, output: bool) -> None:
    if output:
        p.add_argument(
            "--output",
            metavar="DIR",
            help="the corpus folder (default: $MLBRIDGE_CACHE_DIR/corpus, else "
            "<checkout>/.deps/corpus, else ~/.cache/mlbridge/corpus)",
        )
    if sources:
        p.add_argument(
            "--sources",
            metavar="DIR",
            help="where the source archives are kept (default: corpus-sources beside the "
            "default corpus folder)",
        )
        p.add_argument(
            "--recipe", metavar="FILE", help="the recipe (default: <checkout>/corpus/recipe.json)"
        )
        p.add_argument(
            "--projects",
            metavar="A,B",
            help="only these projects (comma-separated; default: every project in the recipe)",
        )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``corpus`` subcommands to ``p``."""
    sub = p.add_subparsers(dest="corpus_command", metavar="SUBCOMMAND", required=True)
    q = sub.add_parser(
        "fetch",
        help="download the pinned source archives (needs the network) and verify them",
        description="Download every project's source archive named in the recipe unless "
        "already present, and verify each sha256. scripts/setup.sh runs this.",
    )
    _add_common(q, sources=True, output=False)
    q = sub.add_parser(
        "build",
        help="compile the corpus to LLVM 22 bitcode and write its manifest (cached)",
        description="Unpack the archives, compile every translation unit with clang-22 "
        "-O2 -Xclang -disable-llvm-passes into .bc (JOBS in parallel, progress on stderr), "
        "read per-module statistics with llvmlite and write manifest.json. Modules whose "
        "command and inputs did not change are not rebuilt; a run with nothing to do says "
        "so. Missing archives are fetched first unless --offline.",
    )
    _add_common(q, sources=True, output=True)
    q.add_argument(
        "-j", "--jobs", type=int, default=2, metavar="N", help="parallel clang jobs (default 2)"
    )
    q.add_argument(
        "--offline",
        action="store_true",
        help="never download: a missing archive is an error",
    )
    q = sub.add_parser(
        "info",
        help="print the corpus summary: projects, split, modules, statistics",
        description="Print a summary of the built corpus read from its manifest.",
    )
    _add_common(q, sources=False, output=True)
    q.add_argument("--json", action="store_true", help="print the summary as JSON")


def _projects(args: argparse.Namespace) -> list[str] | None:
    if not args.projects:
        return None
    names = [n.strip() for n in args.projects.split(",") if n.strip()]
    if not names:
        raise CLIError(f"--projects {args.projects!r} names no project")
    return names


def _output(args: argparse.Namespace) -> Path:
    return Path(args.output).resolve() if args.output else default_corpus_dir()


def _sources(args: argparse.Namespace) -> Path:
    return Path(args.sources).resolve() if args.sources else default_sources_dir()


def _fetch(args: argparse.Namespace) -> int:
    recipe = load_recipe(args.recipe)
    selected = recipe.select(_projects(args))
    paths = fetch_sources(recipe, _sources(args), selected, _status)
    _status(f"{len(paths)} archives present and verified in {_sources(args)}")
    return 0


def _build(args: argparse.Namespace) -> int:
    recipe = load_recipe(args.recipe)
    report = build_corpus(
        recipe,
        _output(args),
        _sources(args),
        projects=_projects(args),
        jobs=args.jobs,
        fetch=not args.offline,
        progress=_status,
    )
    what = (
        "up to date, nothing compiled"
        if report.up_to_date
        else f"compiled {report.compiled}, reused {report.reused}"
    )
    _status(
        f"{report.ok} modules ok, {report.failed} failed ({what}) in {report.seconds:.1f} s; "
        f"manifest: {report.manifest}"
    )
    return 0


_COLUMNS = (
    ("defined_functions", "defined"),
    ("declared_functions", "declared"),
    ("call_sites", "calls"),
    ("calls_to_defined", "to-defined"),
    ("instructions", "instrs"),
    ("basic_blocks", "blocks"),
)


def _info(args: argparse.Namespace) -> int:
    manifest = load_manifest(_output(args))
    data = manifest.data
    if args.json:
        summary = {k: v for k, v in data.items() if k != "modules"}
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    print(f"corpus: {manifest.root}")
    print(f"recipe: {data['recipe']['path']} (version {data['recipe']['version']})")
    print(f"compiler: {data['compiler']['version']}: {' '.join(data['compiler']['flags'])}")
    print(f"reader: llvmlite {data['reader']['llvmlite']} (LLVM {data['reader']['llvm']})")
    header = f"{'project':<16} {'version':<14} {'split':<8} {'ok':>4} {'fail':>4}"
    header += "".join(f" {title:>10}" for _, title in _COLUMNS)
    print(header)
    rows = [*data["projects"], {"name": "total", "version": "", "split": "", **data["totals"]}]
    for p in rows:
        totals = p.get("totals", p)
        line = f"{p['name']:<16} {p['version']:<14} {p['split']:<8} {p['ok']:>4} {p['failed']:>4}"
        line += "".join(f" {totals[field]:>10}" for field, _ in _COLUMNS)
        print(line)
    split = manifest.split
    print(f"split: train = {', '.join(split['train'])}; heldout = {', '.join(split['heldout'])}")
    failed = [m for m in manifest.modules if not m.ok]
    if failed:
        print(f"failed modules ({len(failed)}):")
        for m in failed:
            lines = m.error.splitlines() or [""]
            first = next((line for line in lines if "error" in line), lines[0])
            print(f"  {m.id}: {first.strip()}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run ``mlbridge corpus SUBCOMMAND``."""
    commands = {"fetch": _fetch, "build": _build, "info": _info}
    try:
        return commands[args.corpus_command](args)
    except CorpusError as e:
        raise CLIError(str(e)) from None
