"""scripts/run_tests.py counts what the tools report, and fails on every non-pass kind.

The outputs parsed here are produced by the real tools (lit, pytest, ctest) on small
suites made for each test, then fed to the parser ``make test`` uses.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
VENV_BIN = Path(sys.executable).parent


def load_run_tests():
    spec = importlib.util.spec_from_file_location("run_tests", ROOT / "scripts" / "run_tests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_tests"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


rt = load_run_tests()


def output(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def pytest_suite(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pt")
    (d / "test_kinds.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_ok_too(): pass\n"
        "@pytest.mark.skip(reason='x')\ndef test_skip(): pass\n"
        "@pytest.mark.xfail\ndef test_xfail(): assert False\n"
        "@pytest.mark.xfail\ndef test_xpass(): pass\n"
    )
    return d


def test_pytest_skips_xfails_and_xpasses_are_failures(pytest_suite):
    out = output([str(VENV_BIN / "pytest"), "-q", "-p", "no:cacheprovider", str(pytest_suite)],
                 pytest_suite)  # fmt: skip
    passed, failed, note = rt.parse_pytest(out)
    assert (passed, failed) == (2, 3)
    assert note == "1 skipped, 1 xfailed, 1 xpassed"


def test_pytest_counts_alike_with_make_tests_workers_and_durations(pytest_suite):
    cmd = rt.pytest_command(str(pytest_suite))
    assert "-n" in cmd and "--durations=20" in cmd
    out = output(cmd, pytest_suite)
    assert "slowest" in out  # the durations are listed
    assert rt.parse_pytest(out) == (2, 3, "1 skipped, 1 xfailed, 1 xpassed")


def test_pytest_errors_are_failures():
    out = "......\n=== 4 passed, 1 failed, 2 errors in 1.00s ==="
    assert rt.parse_pytest(out)[:2] == (4, 3)


@pytest.fixture(scope="module")
def lit_output(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("lit")
    (d / "lit.cfg.py").write_text(
        "import lit.formats\nconfig.name = 'kinds'\n"
        "config.test_format = lit.formats.ShTest(True)\nconfig.suffixes = ['.test']\n"
    )
    (d / "ok.test").write_text("RUN: true\n")
    (d / "xfail.test").write_text("XFAIL: *\nRUN: false\n")
    (d / "xpass.test").write_text("XFAIL: *\nRUN: true\n")
    (d / "unsupported.test").write_text("REQUIRES: no-such-feature\nRUN: true\n")
    (d / "fail.test").write_text("RUN: false\n")
    return output([str(VENV_BIN / "lit"), "-sv", str(d)], d)


def test_lit_expected_failures_and_unsupported_tests_are_failures(lit_output):
    passed, failed, note = rt.parse_lit(lit_output)
    assert (passed, failed) == (1, 4), lit_output
    assert note == "1 unexpectedly passed, 1 expectedly failed, 1 unsupported"


@pytest.fixture(scope="module")
def ctest_output(tmp_path_factory) -> str:
    src = tmp_path_factory.mktemp("ctest-src")
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(kinds NONE)\nenable_testing()\n"
        "add_test(NAME ok COMMAND true)\n"
        'add_test(NAME skipped COMMAND sh -c "exit 77")\n'
        "set_tests_properties(skipped PROPERTIES SKIP_RETURN_CODE 77)\n"
        "add_test(NAME missing COMMAND /nonexistent/tool)\n"
        "add_test(NAME bad COMMAND false)\n"
    )
    build = tmp_path_factory.mktemp("ctest-build")
    subprocess.run(["cmake", "-S", str(src), "-B", str(build)], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    return output(["ctest", "--test-dir", str(build), "--output-on-failure"], build)


def test_ctest_skipped_and_not_run_tests_are_failures(ctest_output):
    parsed = rt.parse_ctest(ctest_output)
    assert parsed is not None, ctest_output
    passed, failed, note = parsed
    # ok passes; skipped (did not run), missing (Not Run) and bad (Failed) fail.
    assert (passed, failed) == (1, 3), ctest_output
    assert note == "1 not run"


def test_ctest_without_a_summary_is_not_a_pass():
    assert rt.parse_ctest("ctest: no tests were found\n") is None


def test_summary_keeps_lint_tests_and_sanitizer_reruns_apart():
    lint = [rt.SuiteResult("ruff", 125, 0, 1.0, 0), rt.SuiteResult("clang-format", 110, 0, 1.0, 0)]
    tests = [rt.SuiteResult("lit", 300, 0, 1.0, 0), rt.SuiteResult("pytest", 591, 1, 1.0, 1)]
    asan = [rt.SuiteResult("ctest (ASan)", 191, 0, 1.0, 0)]
    assert rt.summary_lines(lint, tests, asan) == [
        "lint: 235 files clean, 0 failed",
        "tests: 891 passed, 1 failed",
        "sanitizer re-runs: 191 passed, 0 failed",
    ]
