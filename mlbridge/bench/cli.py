"""``mlbridge bench``: run every benchmark, write the report (docs/bench.md).

A tool of the source checkout: the measurements are the checkout's ``bench/*.py`` scripts
and the benchmark programs built from ``bench/`` into the build folder, neither of which
the wheel ships. From an installed package it says so and stops.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from mlbridge.errors import CLIError
from mlbridge.paths import default_build_dir, find_source_dir

__all__ = ["DEFAULT_OUT", "README_BEGIN", "README_END", "add_arguments", "run", "update_readme"]

#: Where the report goes without ``--out``: this folder in the current directory.
DEFAULT_OUT = Path("bench-results")

README_BEGIN = "<!-- mlbridge-bench:begin -->"
README_END = "<!-- mlbridge-bench:end -->"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``mlbridge bench``."""
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        action="store_true",
        help="3 repetitions of the C/C++ sweep, 3 sizes inside the compilers, the in-process "
        "sweep on 10 sizes, 10,000 memory queries, the inliner on 2 modules (under 2 minutes)",
    )
    mode.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, one repetition, every host and "
        "runner, every answer checked: correctness only (make test)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"where the report goes (default: ./{DEFAULT_OUT} in the current folder; "
        "make bench passes <checkout>/bench/results)",
    )
    p.add_argument(
        "--build-dir",
        type=Path,
        default=None,
        help="the build folder (default: $MLBRIDGE_BUILD_DIR or <checkout>/build)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="bound of every wait for a benchmark process, seconds (default 300)",
    )
    p.add_argument(
        "--update-readme",
        action="store_true",
        help="also replace README.md's benchmark section (between "
        f"'{README_BEGIN}' and '{README_END}') with this run's table and plots",
    )


def update_readme(readme: Path, section: str) -> None:
    """Replace the text between the benchmark markers of ``readme`` with ``section``.

    Raises:
        ValueError: The markers are missing or out of order.
    """
    text = readme.read_text()
    begin, end = text.find(README_BEGIN), text.find(README_END)
    if begin < 0 or end < begin:
        raise ValueError(
            f"{readme} has no '{README_BEGIN}' ... '{README_END}' section: add the two "
            "markers where the benchmark table should go"
        )
    head = text[: begin + len(README_BEGIN)]
    readme.write_text(head + "\n" + section + text[end:])


def run(args: argparse.Namespace) -> int:
    """Run the benchmark report; 0 when every measurement ran and every answer was right.

    Raises:
        CLIError: mlbridge is not running from a source checkout (installed from a wheel).
    """
    source = find_source_dir()
    if source is None:
        raise CLIError(
            "mlbridge bench needs a source checkout: it runs the checkout's bench/ scripts "
            "and the benchmark programs built from bench/, which the installed package does "
            "not ship; clone the repository, `pip install -e .` in it and `mlbridge build`"
        )
    out = (args.out or DEFAULT_OUT).resolve()
    if args.update_readme and (args.smoke or not out.is_relative_to(source)):
        raise CLIError(
            "--update-readme needs a quick or full run whose report stays in the checkout "
            f"(the README links its plots): pass --out {source / 'bench' / 'results'}, as "
            "make bench does"
        )
    from mlbridge.bench.markdown import readme_section
    from mlbridge.bench.report import Progress, profile, run_report, write_outputs

    build = (
        args.build_dir
        or (
            Path(os.environ["MLBRIDGE_BUILD_DIR"]) if os.environ.get("MLBRIDGE_BUILD_DIR") else None
        )
        or default_build_dir()
    )
    if build is None or not build.is_dir():
        print(
            f"mlbridge bench: no build folder ({build}): run `mlbridge build` or pass --build-dir",
            file=sys.stderr,
        )
        return 1
    prof = profile("smoke" if args.smoke else "quick" if args.quick else "full")
    log = Progress()
    try:
        report = run_report(build.resolve(), prof, args.timeout, log)
    except (RuntimeError, FileNotFoundError, OSError) as e:
        print(f"mlbridge bench: error: {e}", file=sys.stderr)
        return 1
    stamp = ("smoke-" if args.smoke else "") + time.strftime("%Y%m%d-%H%M%S")
    paths = write_outputs(report, out, stamp)
    log(
        f"wrote {paths['json']}, {paths['md'].name}, {paths['sweep_png'].name}, "
        f"{paths['totals_png'].name}"
    )
    if args.update_readme:
        readme = source / "README.md"
        rel = os.path.relpath(out, source)
        update_readme(
            readme,
            readme_section(
                report, f"{rel}/report-latest-sweep.png", f"{rel}/report-latest-totals.png"
            ),
        )
        log(f"updated the benchmark section of {readme}")
    log(
        f"done in {report['meta']['duration_seconds']:.0f} s; "
        f"{report['answers']['checked']} answers checked, all correct"
    )
    return 0
