#!/usr/bin/env python3
"""Run every mlbridge test suite and fail if any fails or runs nothing.

Suites, in order: ruff and clang-format (style), lit (opt/llc/mlir-opt with the plugins), the C++
unit tests and the C API test (ctest in the release build), pytest, and the
C++ unit tests plus the bounded libFuzzer runs under AddressSanitizer and
UndefinedBehaviorSanitizer with leak detection (ctest in the sanitizer build).

Each suite's own output streams through; a summary table and the closing line
``N passed, M failed`` come last. ``make test`` runs this after building.
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
        f
        for f in listed.stdout.split()
        if not f.startswith(("test/lit/Inputs/", "test/vectors/", "examples/"))
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


def suite_lit(build: Path) -> SuiteResult:
    """The lit suite configured into the release build."""
    start = time.monotonic()
    lit = VENV_BIN / "lit"
    rc, out = run([str(lit), "-sv", str(build / "test" / "lit")])
    passed = count(r"^\s*Passed\s*:\s*(\d+)", out)
    failed = count(r"^\s*(?:Failed|Unresolved|Timed Out|Unexpectedly Passed)\s*:\s*(\d+)", out)
    # An unsupported test is one whose dependency is missing: a failure here.
    unsupported = count(r"^\s*Unsupported\s*:\s*(\d+)", out)
    return SuiteResult(
        "lit",
        passed,
        failed + unsupported,
        time.monotonic() - start,
        rc,
        f"{unsupported} unsupported" if unsupported else "",
    )


def suite_ctest(name: str, build: Path, env: dict[str, str] | None = None) -> SuiteResult:
    """Every ctest test of a build folder."""
    start = time.monotonic()
    jobs = str(os.cpu_count() or 2)
    rc, out = run(["ctest", "--test-dir", str(build), "--output-on-failure", "-j", jobs], env=env)
    m = re.search(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", out)
    if not m:
        return SuiteResult(name, 0, 1, time.monotonic() - start, rc or 1, "no ctest summary")
    failed, total = int(m.group(2)), int(m.group(3))
    return SuiteResult(name, total - failed, failed, time.monotonic() - start, rc)


def suite_pytest(build: Path) -> SuiteResult:
    """The Python tests, pointed at the release build for the C++ tools."""
    start = time.monotonic()
    rc, out = run(
        [str(VENV_BIN / "pytest"), "-q", "-p", "no:cacheprovider"],
        env={"MLBRIDGE_BUILD_DIR": str(build)},
    )
    passed = count(r"(\d+) passed", out.splitlines()[-1] if out else "")
    failed = count(r"(\d+) (?:failed|error)", out.splitlines()[-1] if out else "")
    skipped = count(r"(\d+) skipped", out.splitlines()[-1] if out else "")
    # A skip means a dependency was missing: that is a failure here.
    return SuiteResult(
        "pytest",
        passed,
        failed + skipped,
        time.monotonic() - start,
        rc,
        f"{skipped} skipped" if skipped else "",
    )


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
    results = [
        suite_ruff(),
        suite_clang_format(),
        suite_lit(args.build_dir),
        suite_ctest("ctest (unit + C API)", args.build_dir),
        suite_pytest(args.build_dir),
        suite_ctest("ctest (ASan+UBSan, fuzz)", args.asan_build_dir, sanitizer_env),
    ]

    print("\n== mlbridge test summary")
    for r in results:
        status = "ok  " if r.ok else "FAIL"
        note = f"  ({r.note})" if r.note else ""
        print(
            f"{status} {r.name:<28} {r.passed:>5} passed {r.failed:>4} failed "
            f"{r.seconds:7.1f}s{note}"
        )
    passed = sum(r.passed for r in results)
    failed = sum(r.failed for r in results) + sum(1 for r in results if not r.ok and r.failed == 0)
    print(f"{passed} passed, {failed} failed")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
