#!/usr/bin/env python3
"""Run every mlbridge test suite and fail if any fails or runs nothing.

Suites, in order: ruff and clang-format (style), lit (opt/llc/mlir-opt with the plugins), the C++
unit tests and the C API test (ctest in the release build), pytest (a worker per CPU, at
most four), and the C++ unit tests plus the bounded libFuzzer runs under AddressSanitizer and
UndefinedBehaviorSanitizer with leak detection (ctest in the sanitizer build).

Each suite's own output streams through; a summary table and three closing lines come
last: lint (files clean), tests (lit, ctest and pytest: the real test total) and the
sanitizer re-runs, never added up. A skipped, unsupported, expected-to-fail or
unexpectedly passing test counts as a failure. ``make test`` runs this after building.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = ROOT / ".venv" / "bin"


@dataclass
class SuiteResult:
    """Outcome of one suite: counts parsed from its output and its exit code."""

    name: str
    passed: int
    failed: int
    seconds: float
    returncode: int
    note: str = ""

    @property
    def ok(self) -> bool:
        """A suite is green only if it exited 0, failed nothing and ran something."""
        return self.returncode == 0 and self.failed == 0 and self.passed > 0


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[int, str]:
    """Run a command, echo its output as it comes, and return (exit code, output)."""
    print(f"\n$ {' '.join(cmd)}", flush=True)
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    sys.stdout.flush()
    return proc.wait(), "".join(lines)


def count(pattern: str, text: str) -> int:
    """Sum every integer captured by ``pattern`` in ``text``."""
    return sum(int(m) for m in re.findall(pattern, text, flags=re.MULTILINE))


def suite_ruff() -> SuiteResult:
    """Ruff lint and format check over the Python code (counted as files checked)."""
    start = time.monotonic()
    rc1, _ = run([str(VENV_BIN / "ruff"), "check", "."])
    rc2, out = run(
        [str(VENV_BIN / "ruff"), "format", "--check", "mlbridge", "test/python", "scripts"]
    )
    files = count(r"^(\d+) files? already formatted", out)
    rc = rc1 or rc2
    return SuiteResult(
        "ruff",
        files if rc == 0 else 0,
        0 if rc == 0 else 1,
        time.monotonic() - start,
        rc,
        "files clean",
    )


def suite_clang_format() -> SuiteResult:
    """clang-format (LLVM style, .clang-format) over the C and C++ sources."""
    start = time.monotonic()
    listed = subprocess.run(
        ["git", "ls-files", "*.c", "*.cpp", "*.h"], cwd=ROOT, capture_output=True, text=True
    )
    # Test inputs are compiled as given (their line numbers may be checked).
    files = [
        f for f in listed.stdout.split() if not f.startswith(("test/lit/Inputs/", "test/vectors/"))
    ]
    rc, _ = run([str(VENV_BIN / "clang-format"), "--dry-run", "-Werror", *files])
    return SuiteResult(
        "clang-format",
        len(files) if rc == 0 else 0,
        0 if rc == 0 else 1,
        time.monotonic() - start,
        rc,
        "files clean",
    )


#: lit result kinds that are not a plain pass: each is a failure here (a test that is
#: expected to fail, or unsupported because a dependency is missing, proves nothing).
LIT_FAILING = (
    "Failed", "Unresolved", "Timed Out", "Unexpectedly Passed", "Expectedly Failed",
    "Unsupported", "Excluded", "Skipped",
)  # fmt: skip


def parse_lit(out: str) -> tuple[int, int, str]:
    """(passed, failed, note) from lit's closing counts; every non-pass kind fails."""
    passed = count(r"^\s*Passed\s*:\s*(\d+)", out)
    failed, notes = 0, []
    for kind in LIT_FAILING:
        n = count(rf"^\s*{kind}\s*:\s*(\d+)", out)
        failed += n
        if n and kind != "Failed":
            notes.append(f"{n} {kind.lower()}")
    return passed, failed, ", ".join(notes)


def suite_lit(build: Path) -> SuiteResult:
    """The lit suite configured into the release build."""
    start = time.monotonic()
    lit = VENV_BIN / "lit"
    rc, out = run([str(lit), "-sv", str(build / "test" / "lit")])
    passed, failed, note = parse_lit(out)
    return SuiteResult("lit", passed, failed, time.monotonic() - start, rc, note)


def parse_ctest(out: str) -> tuple[int, int, str] | None:
    """(passed, failed, note) from ctest's output, or None without its summary line.

    ctest counts a skipped (or disabled) test as passed in its percentage; the tests it
    lists as not run are failures here.
    """
    m = re.search(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", out)
    if not m:
        return None
    failed, total = int(m.group(2)), int(m.group(3))
    # ctest lists them under "did not run" (a missing executable is under FAILED).
    section = re.search(r"^The following tests did not run:\n((?:[ \t]+\d+ - .*\n?)+)", out, re.M)
    not_run = len(section.group(1).strip().splitlines()) if section else 0
    note = f"{not_run} not run" if not_run else ""
    return total - failed - not_run, failed + not_run, note


def suite_ctest(name: str, build: Path, env: dict[str, str] | None = None) -> SuiteResult:
    """Every ctest test of a build folder."""
    start = time.monotonic()
    jobs = str(os.cpu_count() or 2)
    rc, out = run(["ctest", "--test-dir", str(build), "--output-on-failure", "-j", jobs], env=env)
    parsed = parse_ctest(out)
    if parsed is None:
        return SuiteResult(name, 0, 1, time.monotonic() - start, rc or 1, "no ctest summary")
    passed, failed, note = parsed
    return SuiteResult(name, passed, failed, time.monotonic() - start, rc, note)


def parse_pytest(out: str) -> tuple[int, int, str]:
    """(passed, failed, note) from pytest's closing line.

    Skipped, xfailed and xpassed tests are failures here: a skip is a missing dependency,
    an expected failure proves nothing and an unexpected pass is a stale mark.
    """
    last = out.rstrip().splitlines()[-1] if out.strip() else ""
    passed = count(r"(\d+) passed", last)
    failed = count(r"(\d+) (?:failed|errors?)\b", last)
    notes = []
    for kind in ("skipped", "xfailed", "xpassed"):
        n = count(rf"(\d+) {kind}", last)
        failed += n
        if n:
            notes.append(f"{n} {kind}")
    return passed, failed, ", ".join(notes)


#: pytest's workers at most: many tests run compilers on every CPU themselves or start a
#: Ray instance; more workers would only share the same CPUs.
MAX_PYTEST_WORKERS = 4


def pytest_workers() -> int:
    """One pytest worker per CPU this process may run on, at most MAX_PYTEST_WORKERS."""
    return max(1, min(len(os.sched_getaffinity(0)), MAX_PYTEST_WORKERS))


def pytest_command(*paths: str) -> list[str]:
    """The pytest command ``make test`` runs, on ``paths`` (default: the configured ones)."""
    workers = ["-n", str(pytest_workers()), "--dist", "loadfile"]
    return [str(VENV_BIN / "pytest"), "-q", "-p", "no:cacheprovider", *workers, "--durations=20",
            *paths]  # fmt: skip


def suite_pytest(build: Path) -> SuiteResult:
    """The Python tests, pointed at the release build for the C++ tools.

    In parallel (pytest-xdist), each test file on one worker, so that a file's module
    fixtures (an optimized corpus, a trained policy) are made once; the slowest tests are
    listed, for whoever next has to keep the suite within its time.
    """
    start = time.monotonic()
    rc, out = run(pytest_command(), env={"MLBRIDGE_BUILD_DIR": str(build)})
    passed, failed, note = parse_pytest(out)
    return SuiteResult("pytest", passed, failed, time.monotonic() - start, rc, note)


def summary_lines(lint: list[SuiteResult], tests: list[SuiteResult],
                  sanitizer: list[SuiteResult]) -> list[str]:  # fmt: skip
    """The closing lines: lint, tests and sanitizer re-runs apart, never added up."""

    def failed(results: list[SuiteResult]) -> int:
        return sum(r.failed for r in results) + sum(1 for r in results if not r.ok and not r.failed)

    return [
        f"lint: {sum(r.passed for r in lint)} files clean, {failed(lint)} failed",
        f"tests: {sum(r.passed for r in tests)} passed, {failed(tests)} failed",
        f"sanitizer re-runs: {sum(r.passed for r in sanitizer)} passed, {failed(sanitizer)} failed",
    ]


def main() -> int:
    """Run the suites and print the summary; exit 1 if any suite is not green."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build")
    parser.add_argument("--asan-build-dir", type=Path, default=ROOT / "build-asan")
    args = parser.parse_args()

    sanitizer_env = {
        "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:strict_string_checks=1",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    }
    lint = [suite_ruff(), suite_clang_format()]
    tests = [
        suite_lit(args.build_dir),
        suite_ctest("ctest (unit + C API)", args.build_dir),
        suite_pytest(args.build_dir),
    ]
    sanitizer = [suite_ctest("ctest (ASan+UBSan, fuzz)", args.asan_build_dir, sanitizer_env)]
    results = lint + tests + sanitizer

    print("\n== mlbridge test summary")
    for r in results:
        status = "ok  " if r.ok else "FAIL"
        unit = "clean " if r in lint else "passed"
        note = f"  ({r.note})" if r.note else ""
        print(
            f"{status} {r.name:<28} {r.passed:>5} {unit} {r.failed:>4} failed "
            f"{r.seconds:7.1f}s{note}"
        )
    for line in summary_lines(lint, tests, sanitizer):
        print(line)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
