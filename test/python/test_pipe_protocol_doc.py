"""docs/pipe-protocol.md's priority-advisor rows match the headers llc-22 sends.

Each ``llc`` row whose flags name a priority advisor is run: stock ``llc-22`` (LLVM's
advisor) and ``llc-22`` with mlbridge's plugin, over a real pipe, and the features and
the advice of the header the compiler sent are compared with the row.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO, built

from mlbridge.compiler.pipe import drive_compiler

DOC = REPO / "docs" / "pipe-protocol.md"
PRESSURE = REPO / "test" / "lit" / "Inputs" / "regalloc-pressure.c"
TYPES = {"int64": "int64_t", "float": "float", "double": "double"}
# `name` [type `[shape]`]: a type and shape apply to the names since the last one.
SPEC = re.compile(r"`(\w+)`(?:\s+(int64|float|double)\s+`\[([\d, ]+)\]`)?")


def parse_specs(cell: str) -> list[tuple[str, str, tuple[int, ...]]]:
    specs: list[tuple[str, str, tuple[int, ...]]] = []
    pending: list[str] = []
    for name, type_, shape in SPEC.findall(cell):
        pending.append(name)
        if type_:
            dims = tuple(int(d) for d in shape.split(","))
            specs += [(n, TYPES[type_], dims) for n in pending]
            pending = []
    assert not pending, f"no type for {pending} in {cell!r}"
    return specs


def priority_rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`llc`") and "priority" in cells[1]:
            rows.append((cells[1].strip("`"), cells[2], cells[3]))
    return rows


def test_the_doc_has_both_priority_advisors():
    flags = [row[0] for row in priority_rows()]
    assert len(flags) == 2
    assert any("-regalloc-enable-priority-advisor=release" in f for f in flags)
    assert any("-mlbridge-regalloc-priority-runner=pipe" in f for f in flags)


@pytest.fixture(scope="module")
def pressure_ll(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import subprocess

    out = tmp_path_factory.mktemp("regalloc") / "pressure.ll"
    subprocess.run(
        ["clang-22", "-O2", "-S", "-emit-llvm", str(PRESSURE), "-o", str(out)], check=True
    )
    return out


@pytest.mark.parametrize("row", priority_rows(), ids=lambda row: row[0].split()[0])
def test_a_priority_row_lists_what_llc_sends(row, pressure_ll, tmp_path):
    flags, features, advice = row
    flags = flags.replace("<base>", "{base}")
    if "$(mlbridge plugin-path llc)" in flags:
        flags = flags.replace("$(mlbridge plugin-path llc)", str(built("lib/MLBridgeLLCPlugin.so")))
    command = ["llc-22", "-O2", "-relocation-model=pic", *flags.split(), str(pressure_ll),
               "-o", str(tmp_path / "out.s")]  # fmt: skip
    result = drive_compiler(command, lambda obs: 1.0, timeout=60, parent=tmp_path)
    assert result.returncode == 0 and result.answered > 0
    header = result.header
    assert header is not None and header.advice is not None
    sent = [(s.name, s.type.llvm_name, s.shape) for s in header.features]
    assert sent == parse_specs(features)
    (documented_advice,) = parse_specs(advice.split("(")[0].replace(",", "", 1))
    assert (header.advice.name, header.advice.type.llvm_name, header.advice.shape) == (
        documented_advice
    )
