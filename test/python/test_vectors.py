import subprocess
import sys

import pytest
from conftest import REPO, VECTORS
from support.vectors import case_from_json, record_to_json

from mlbridge.serdes import get_serdes

sys.path.insert(0, str(VECTORS))
import generate  # noqa: E402

CASES = generate.load_cases()
PAIRS = [(c, s) for c in CASES for s in c.serdes]


def test_cases_cover_every_serdes_and_the_required_kinds():
    names = {c.name for c in CASES}
    assert {"empty_tensors", "strings", "strings_binary", "floats_tricky", "int_extremes",
            "dynamic_shapes", "session"} <= names  # fmt: skip
    assert all(set(c.serdes) <= {"bitstream", "json", "protobuf"} for c in CASES)
    assert "json" not in next(c for c in CASES if c.name == "strings_binary").serdes


@pytest.mark.parametrize(("case", "serdes"), PAIRS, ids=[f"{c.name}.{s}" for c, s in PAIRS])
def test_python_encodes_each_case_to_the_checked_in_bytes(case, serdes):
    expected = (VECTORS / f"{case.name}.{serdes}").read_bytes()
    assert get_serdes(serdes).encode_stream(case.records) == expected


@pytest.mark.parametrize(("case", "serdes"), PAIRS, ids=[f"{c.name}.{s}" for c, s in PAIRS])
def test_python_decodes_each_checked_in_vector_back_to_the_case(case, serdes):
    data = (VECTORS / f"{case.name}.{serdes}").read_bytes()
    assert tuple(get_serdes(serdes).decode_stream(data)) == case.records


def test_case_descriptions_round_trip_exactly():
    raw = generate.orjson.loads(generate.CASES.read_bytes())["cases"]
    for obj in raw:
        case = case_from_json(obj)
        assert [record_to_json(r) for r in case.records] == obj["records"]


def test_generate_check_says_the_vectors_are_current():
    result = subprocess.run(
        [sys.executable, str(VECTORS / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr


def test_generate_check_reports_a_stale_file(tmp_path):
    for p in VECTORS.iterdir():
        if p.is_file() and p.name != "generate.py":
            (tmp_path / p.name).write_bytes(p.read_bytes())
    (tmp_path / "session.json").write_bytes(b"stale\n")
    assert generate.main(["--check", "--dir", str(tmp_path)]) == 1
