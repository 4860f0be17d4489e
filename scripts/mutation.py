#!/usr/bin/env python3
"""Mutation testing of the wire-format core with mutmut, and its kill rate per module.

mutmut (configured in ``pyproject.toml``, ``[tool.mutmut]``) copies ``mlbridge/`` into
``mutants/``, makes small changes ("mutants") to the modules every compiler/model
exchange goes through (``serdes/``, ``tensor_spec.py``, ``models/specs.py``,
``compiler/pipe.py`` and ``compiler/fifo.py``), and runs the tests that cover each
changed function against it. A mutant the tests fail on is *killed*; one they pass on
*survived*: a change of behaviour no test notices. This script runs mutmut and reports,
per module, the kill rate: killed (including timeouts and crashes) over every mutant
checked. Not part of ``make test``: a full run takes about three hours on two cores.

    make mutation                                # = the line below
    .venv/bin/python scripts/mutation.py         # run (reuses mutants/ results), report
    .venv/bin/python scripts/mutation.py --fresh # forget earlier results first
    .venv/bin/python scripts/mutation.py --sample 0.2 --seed 2026   # a fifth, per module
    .venv/bin/python scripts/mutation.py --report-only
    .venv/bin/mutmut results                     # the surviving mutants' names
    .venv/bin/mutmut show NAME                   # one mutant's diff

``--sample F`` tests a seeded random fraction ``F`` of each module's mutants (at least 12,
or all of a smaller module) instead of all of them: an estimate, reported with its 95%
confidence interval (Wilson), in about F times the time of a full run.

The report goes to ``<build>/mutation/report.md`` and ``report.json``; the exit status
is 1 when the overall kill rate is below ``--target`` (90 %).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: mutmut's exit codes of a mutant's test run (mutmut/stats.py), in words.
STATUS_BY_EXIT_CODE = {
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    35: "suspicious",
    36: "timeout",
    37: "caught by type check",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    -11: "segfault",
    -9: "segfault",
}
#: Outcomes that count as the tests noticing the mutant.
KILLED = {"killed", "timeout", "segfault", "caught by type check"}
#: Outcomes that are not a verdict on the tests (the mutant never ran).
NOT_COUNTED = {"skipped", "not checked"}


@dataclass
class ModuleResult:
    """The mutants of one module, counted by outcome."""

    module: str
    counts: Counter[str]

    @property
    def total(self) -> int:
        """Every mutant of the module, checked or not."""
        return sum(self.counts.values())

    @property
    def checked(self) -> int:
        """Mutants whose tests ran (every outcome but skipped and not checked)."""
        return sum(n for s, n in self.counts.items() if s not in NOT_COUNTED)

    @property
    def killed(self) -> int:
        """Mutants the tests noticed (failed, timed out, crashed, or type-checked)."""
        return sum(n for s, n in self.counts.items() if s in KILLED)

    @property
    def rate(self) -> float:
        """The kill rate in percent (100 for a module without mutants)."""
        return 100.0 * self.killed / self.checked if self.checked else 100.0


def read_results(mutants: Path) -> list[ModuleResult]:
    """Count the outcomes mutmut recorded in ``mutants/**/*.py.meta``."""
    results = []
    for meta in sorted(mutants.rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        codes = data.get("exit_code_by_key", {})
        if not codes:
            continue
        counts: Counter[str] = Counter(
            "not checked" if code is None else STATUS_BY_EXIT_CODE.get(code, "suspicious")
            for code in codes.values()
        )
        module = str(meta.relative_to(mutants)).removesuffix(".meta")
        results.append(ModuleResult(module, counts))
    return results


def report(results: list[ModuleResult], target: float) -> tuple[str, dict]:
    """The Markdown table and the JSON form of ``results``."""
    total: Counter[str] = Counter()
    for r in results:
        total.update(r.counts)
    overall = ModuleResult("all modules", total)
    lines = [
        "# Mutation testing (mutmut)",
        "",
        "`scripts/mutation.py`: kill rate = killed (incl. timeouts and crashes) / checked; "
        "95% interval (Wilson) where only part of a module's mutants was checked.",
        "",
        "| module | mutants | checked | killed | survived | no tests | timeout | kill rate "
        "| 95% interval |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in [*results, overall]:
        name = f"**{r.module}**" if r is overall else f"`{r.module}`"
        low, high = wilson(r.killed, r.checked)
        interval = "all checked" if r.checked == r.total else f"{low:.1f}% - {high:.1f}%"
        lines.append(
            f"| {name} | {r.total} | {r.checked} | {r.killed} | {r.counts['survived']} | "
            f"{r.counts['no tests']} | {r.counts['timeout']} | {r.rate:.1f}% | {interval} |"
        )
    verdict = "met" if overall.rate >= target else "MISSED"
    lines += ["", f"Target: at least {target:g}% overall: {overall.rate:.1f}%, {verdict}.", ""]
    data = {
        "target": target,
        "overall": {
            "mutants": overall.total,
            "checked": overall.checked,
            "killed": overall.killed,
            "rate": overall.rate,
            "interval95": wilson(overall.killed, overall.checked),
        },
        "modules": [
            {"module": r.module, "mutants": r.total, "counts": dict(r.counts), "rate": r.rate}
            for r in results
        ],
    }
    return "\n".join(lines), data


def wilson(killed: int, checked: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a kill rate, in percent (0-100 for no data)."""
    if checked == 0:
        return 0.0, 100.0
    p = killed / checked
    centre = (p + z * z / (2 * checked)) / (1 + z * z / checked)
    half = z * math.sqrt(p * (1 - p) / checked + z * z / (4 * checked * checked))
    half /= 1 + z * z / checked
    return 100.0 * max(0.0, centre - half), 100.0 * min(1.0, centre + half)


#: A mutant filter nothing matches: mutmut then only makes the mutants (and its stats).
GENERATE_ONLY = "mlbridge.__make_the_mutants_only__*"


def generate(mutmut: Path, env: dict[str, str]) -> bool:
    """Make (or refresh) ``mutants/`` without testing any mutant.

    mutmut has no command for this; ``run`` with a filter that matches nothing makes the
    mutants and collects its stats, then stops, saying that nothing matches.
    """
    done = subprocess.run(
        [str(mutmut), "run", GENERATE_ONLY], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if "nothing matches" in done.stdout + done.stderr:
        return True
    print(f"mutation: error: mutmut could not make the mutants:\n{done.stdout}{done.stderr}",
          file=sys.stderr)  # fmt: skip
    return False


def read_mutant_names(mutants: Path) -> dict[str, list[str]]:
    """Every mutant's name, by module (from ``mutants/**/*.py.meta``)."""
    names = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        keys = list(json.loads(meta.read_text()).get("exit_code_by_key", {}))
        if keys:
            names[str(meta.relative_to(mutants)).removesuffix(".meta")] = keys
    return names


def sample(names: dict[str, list[str]], fraction: float, seed: int) -> list[str]:
    """A seeded random ``fraction`` of each module's mutants: at least 12 (or all)."""
    rng = random.Random(seed)
    chosen = []
    for module in sorted(names):
        keys = names[module]  # in mutmut's order, which is deterministic
        n = len(keys) if len(keys) <= 12 else max(12, round(len(keys) * fraction))
        chosen += rng.sample(keys, n)
    return chosen


def main(argv: list[str] | None = None) -> int:
    """Run mutmut (unless ``--report-only``) and write the report; see the module doc."""
    parser = argparse.ArgumentParser(
        description="Mutation testing of mlbridge's wire-format core (mutmut) with a "
        "kill-rate report per module.",
        epilog="Configuration: [tool.mutmut] in pyproject.toml. docs/testing.md explains "
        "the outcomes.",
    )
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build",
                        help="the build folder the tests use (default: build/)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="mutants tested at once (default: the number of CPUs)")  # fmt: skip
    parser.add_argument("--fresh", action="store_true",
                        help="remove mutants/ first (forget earlier results)")  # fmt: skip
    parser.add_argument("--report-only", action="store_true",
                        help="report the results in mutants/ without running mutmut")  # fmt: skip
    parser.add_argument("--sample", type=float, metavar="F",
                        help="test a random fraction F (0-1] of each module's mutants "
                        "(at least 12) instead of all: an estimate with its interval")  # fmt: skip
    parser.add_argument("--seed", type=int, default=2026,
                        help="the seed of --sample (default: 2026)")  # fmt: skip
    parser.add_argument("--target", type=float, default=90.0,
                        help="the overall kill rate, in percent, below which the exit "
                        "status is 1 (default: 90)")  # fmt: skip
    args = parser.parse_args(argv)
    mutants = ROOT / "mutants"
    if not args.report_only:
        mutmut = Path(sys.executable).parent / "mutmut"
        if not mutmut.exists():
            print(
                f"mutation: error: {mutmut} is not installed; `make setup` installs the "
                "dev extras (or: .venv/bin/pip install 'mutmut==3.8.1')",
                file=sys.stderr,
            )
            return 2
        if not (args.build_dir / "bin" / "mlbridge-serdes-tool").exists():
            print(
                f"mutation: error: {args.build_dir} has no build (the cross-language "
                "tests need it): run `make build` first",
                file=sys.stderr,
            )
            return 2
        if args.fresh:
            shutil.rmtree(mutants, ignore_errors=True)
        env = {**os.environ, "MLBRIDGE_BUILD_DIR": str(args.build_dir.resolve())}
        names: list[str] = []
        if args.sample is not None:
            if not 0 < args.sample <= 1:
                print("mutation: error: --sample takes a fraction in (0, 1]", file=sys.stderr)
                return 2
            if not generate(mutmut, env):
                return 2
            names = sample(read_mutant_names(mutants), args.sample, args.seed)
            print(f"mutation: testing {len(names)} sampled mutants", file=sys.stderr)
        run = subprocess.run(
            [str(mutmut), "run", "--max-children", str(args.jobs), *names], cwd=ROOT, env=env
        )
        if run.returncode != 0:
            print(f"mutation: error: mutmut run exited with {run.returncode}", file=sys.stderr)
            return run.returncode
    results = read_results(mutants)
    if not results:
        print(f"mutation: error: no mutmut results in {mutants}; run without --report-only",
              file=sys.stderr)  # fmt: skip
        return 2
    text, data = report(results, args.target)
    out = args.build_dir / "mutation"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text)
    (out / "report.json").write_text(json.dumps(data, indent=2) + "\n")
    print(text)
    print(f"mutation: report in {out / 'report.md'}", file=sys.stderr)
    return 0 if data["overall"]["rate"] >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
