"""A few cells of the fault matrix (test/python/fault_matrix.py), judged by its rules.

pipe+bitstream × {stall, exits after 1 answer, extra bytes} × {fail, fallback}: the real
``opt-22`` with the plugin's ML inliner against a model side in its own process. No cell
may crash, wait past its bound (timeout + margin), give a silent wrong result, leave files
or processes behind, or busy-wait (``fault_matrix.judge``). Beyond those rules: ``fail``
ends in exit status 1 with an error, ``fallback`` in exit status 0 with one warning and
stock opt's output (the model's policy is LLVM's own decision).
"""

from __future__ import annotations

from pathlib import Path

import fault_matrix
import pytest
from conftest import build_dir, built_plugin

TRANSPORTS, FAULTS = fault_matrix.QUICK


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> list[fault_matrix.Cell]:
    built_plugin("llvm")  # a missing plugin fails here, not as a harness error
    return fault_matrix.run_matrix(
        [fault_matrix.FAULTS_BY_NAME[name] for name in FAULTS],
        TRANSPORTS,
        fault_matrix.POLICIES,
        build_dir=build_dir(),
        out=tmp_path_factory.mktemp("fault-matrix"),
        progress=False,
    )


@pytest.mark.parametrize("policy", fault_matrix.POLICIES)
@pytest.mark.parametrize("fault", FAULTS)
def test_cell_keeps_the_rules(cells: list[fault_matrix.Cell], fault: str, policy: str) -> None:
    (cell,) = [c for c in cells if c.fault == fault and c.policy == policy]
    text = fault_matrix.cell_text(cell)
    assert not cell.harness_error, text
    assert cell.violations == [], text
    assert cell.wall <= cell.bound, text
    if policy == "fail":
        assert cell.exit == 1, text
        assert cell.diagnostic.startswith("error: "), text
    else:
        assert cell.exit == 0, text
        assert cell.same_as_stock is True, text
        assert cell.diagnostic.startswith("warning: "), text


def test_table_has_a_row_per_fault_and_a_column_per_policy(
    cells: list[fault_matrix.Cell],
) -> None:
    table = fault_matrix.markdown(cells, TRANSPORTS, fault_matrix.POLICIES)
    lines = table.splitlines()
    assert lines[0] == "| fault | pipe-bitstream fail | pipe-bitstream fallback |"
    assert len(lines) == 2 + len(FAULTS)


def test_a_fault_not_injectable_on_a_transport_is_not_applicable(tmp_path: Path) -> None:
    fault = fault_matrix.FAULTS_BY_NAME["wrong-type-raw"]
    cell = fault_matrix.run_cell(
        fault, "grpc", "fail", build_dir=build_dir(), stock=b"", out=tmp_path,
        timeout_ms=2000, margin=10.0,
    )  # fmt: skip
    assert not cell.applicable and cell.reason
    assert fault_matrix.cell_text(cell).startswith("n/a: ")


def test_judge_names_each_broken_rule() -> None:
    def judged(**fields: object) -> list[str]:
        cell = fault_matrix.Cell("stall", "pipe-bitstream", "fail", bound=12.0, wall=2.0)
        for name, value in fields.items():
            setattr(cell, name, value)
        fault_matrix.judge(cell, "")
        return cell.violations

    assert judged(exit=1) == []
    assert "killed by signal 9" in judged(exit=-9)[0]
    assert "past the bound" in judged(exit=1, wall=12.5)[0]
    assert "busy wait" in judged(exit=1, cpu=1.9)[0]
    assert "silent wrong result" in judged(exit=0, same_as_stock=False)[0]
    assert "leftover files" in judged(exit=1, leftovers=["mlbridge-pipe-1-x/channel.in"])[0]
    assert "processes left" in judged(exit=1, processes=["7 opt-22 state Z"])[0]


def test_a_protobuf_reply_cut_short_then_a_stall_is_a_timeout_not_a_truncation(
    tmp_path: Path,
) -> None:
    # The model sends part of its reply and waits: nothing ended, so the compiler must
    # say it timed out (it said "input truncated ... the input ends before byte 41").
    built_plugin("llvm")
    (cell,) = fault_matrix.run_matrix(
        [fault_matrix.FAULTS_BY_NAME["truncated"]],
        ["pipe-protobuf"],
        ["fail"],
        build_dir=build_dir(),
        out=tmp_path,
        progress=False,
    )
    text = fault_matrix.cell_text(cell)
    assert cell.exit == 1 and cell.violations == [], text
    assert "truncated" not in cell.diagnostic and "within" in cell.diagnostic, text
