"""mlbridge.ir: statistics, functions and call sites of clang-22 and opt-22 output."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mlbridge.ir import (
    CallKind,
    IRError,
    iter_call_sites,
    iter_functions,
    parse_module,
    read_module,
)

SOURCE = """\
int printf(const char *, ...);
static int sq(int x) { return x * x; }
int add(int a, int b) { return sq(a) + b; }
int main(void) {
  int (*fp)(int, int) = add;
  printf("%d\\n", add(1, 2));
  return fp(3, 4);
}
"""


def _compile(tmp_path: Path, *extra: str) -> Path:
    c = tmp_path / "k.c"
    c.write_text(SOURCE)
    bc = tmp_path / "k.bc"
    argv = ["clang-22", "-O2", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c"]
    subprocess.run([*argv, *extra, str(c), "-o", str(bc)], check=True)
    return bc


def test_read_module_counts(tmp_path: Path) -> None:
    stats = read_module(_compile(tmp_path))
    assert stats.defined_functions == 3  # sq, add, main
    assert stats.declared_functions == 1  # printf
    assert stats.calls_to_defined == 2  # add -> sq, main -> add
    assert stats.calls_to_external == 1  # printf
    assert stats.indirect_calls == 1  # fp(3, 4)
    assert stats.calls_to_intrinsics == 2  # lifetime start/end of fp
    assert stats.call_sites == 6
    assert stats.basic_blocks == 3
    assert stats.instructions > stats.call_sites


def test_call_sites_and_functions(tmp_path: Path) -> None:
    module = parse_module(_compile(tmp_path))
    sites = [(s.caller, s.callee, s.kind) for s in iter_call_sites(module)]
    assert ("add", "sq", CallKind.DEFINED) in sites
    assert ("main", "add", CallKind.DEFINED) in sites
    assert ("main", "printf", CallKind.EXTERNAL) in sites
    assert ("main", None, CallKind.INDIRECT) in sites
    functions = {f.name: f for f in iter_functions(module)}
    assert functions["sq"].linkage == "internal" and not functions["sq"].is_declaration
    assert functions["printf"].is_declaration and functions["printf"].instructions == 0
    assert functions["main"].call_sites == 5 and functions["main"].calls_to_defined == 1
    module.close()


def test_textual_ir_of_opt_22_after_inlining(tmp_path: Path) -> None:
    bc = _compile(tmp_path)
    before = read_module(bc)
    text = tmp_path / "k.opt.ll"
    subprocess.run(["opt-22", "-passes=default<O2>", "-S", str(bc), "-o", str(text)], check=True)
    after = read_module(text)
    # The inliner folded sq into add and add into main: no call to a defined function left.
    assert before.calls_to_defined == 2 and after.calls_to_defined == 0
    assert after.calls_to_external == 1


def test_invalid_ir_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ll"
    bad.write_text("define i32 @f() {\n  ret i64 0\n}\n")
    with pytest.raises(IRError, match=r"bad\.ll is not valid LLVM 22 IR"):
        read_module(bad)
    truncated = tmp_path / "t.bc"
    truncated.write_bytes(_compile(tmp_path).read_bytes()[:100])
    with pytest.raises(IRError, match=r"t\.bc is not valid"):
        read_module(truncated)
    with pytest.raises(IRError, match="cannot read the IR file"):
        read_module(tmp_path / "missing.bc")


def test_stats_round_trip_through_dict(tmp_path: Path) -> None:
    stats = read_module(_compile(tmp_path))
    assert type(stats).from_dict(stats.to_dict()) == stats
    with pytest.raises(IRError, match="'instructions' is None"):
        type(stats).from_dict({**stats.to_dict(), "instructions": None})
