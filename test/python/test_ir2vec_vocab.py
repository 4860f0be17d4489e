"""``mlbridge ir2vec vocab``: llvm-ir2vec triplets, TransE in numpy, LLVM 22's JSON.

Runs the real ``llvm-ir2vec`` and ``opt`` of LLVM 22 on the lit tests' IR inputs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import orjson
import pytest
from conftest import REPO

from mlbridge.cli import main as cli_main
from mlbridge.ir2vec import (
    IR2VecError,
    TransEConfig,
    build_vocabulary,
    collect_inputs,
    read_entities,
    read_triplets,
    train_transe,
    vocabulary_sections,
)
from mlbridge.ir2vec.vocab import find_llvm_ir2vec
from mlbridge.llvm import find_llvm_tool
from mlbridge.models import Registry, RegistryError

INPUTS = REPO / "test" / "lit" / "Inputs"
IR = [INPUTS / "phase_order.ll", INPUTS / "inline.ll"]
OPT = find_llvm_tool("opt")
SMALL = TransEConfig(dim=16, epochs=30)


def test_entities_and_triplets_come_from_llvm_ir2vec() -> None:
    tool = find_llvm_ir2vec()
    entities = read_entities(tool, IR[0])
    # LLVM 22's fixed entity set: opcodes, canonical types, operand kinds, predicates.
    assert len(entities) == 110
    assert entities[0] == "Ret" and "IntegerTy" in entities and "ICMP_eq" in entities
    triplets, total = read_triplets(tool, IR[0])
    assert triplets.shape[1] == 3 and total >= triplets.shape[0] > 0
    assert len(np.unique(triplets, axis=0)) == len(triplets)
    assert triplets[:, :2].max() < len(entities)


def test_vocabulary_is_what_llvm_reads(tmp_path: Path) -> None:
    out = tmp_path / "vocab.json"
    result = build_vocabulary(IR, out, SMALL)
    assert (result.dim, result.entities, result.files) == (16, 110, 2)
    assert result.total_triplets >= result.triplets > 0
    sections = orjson.loads(out.read_bytes())
    assert set(sections) == {"Opcodes", "Types", "Arguments"}
    assert "Add" in sections["Opcodes"] and "PointerTy" in sections["Types"]
    assert {"Variable", "ICMP_slt", "FCMP_oeq"} <= set(sections["Arguments"])
    assert sum(len(s) for s in sections.values()) == 110
    assert all(len(v) == 16 for s in sections.values() for v in s.values())
    # LLVM's IR2VecVocabAnalysis loads it: every entity gets its (weighted) vector.
    printed = subprocess.run(
        [OPT, "-passes=print<ir2vec-vocab>", f"-ir2vec-vocab-path={out}", "-disable-output",
         str(IR[0])],
        capture_output=True, text=True, timeout=120, check=True,
    ).stderr  # fmt: skip
    keys = re.findall(r"^Key: (\w+):", printed, re.M)
    assert len(keys) == 110 and "ICMP_slt" in keys
    add = re.search(r"^Key: Add: +\[(.*)\]", printed, re.M)
    assert add is not None
    llvm_add = np.array(add.group(1).split(), dtype=np.float64)
    # -ir2vec-opc-weight is 1: LLVM prints the opcode vector as written (2 decimals).
    np.testing.assert_allclose(llvm_add, sections["Opcodes"]["Add"], atol=0.006)


def test_seeded_and_deterministic(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    build_vocabulary(IR, a, SMALL)
    build_vocabulary(IR, b, SMALL)
    build_vocabulary(IR, c, TransEConfig(dim=16, epochs=30, seed=1))
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_transe_learns_the_facts() -> None:
    # A chain graph: entity i --0--> i + 1. After training, true tails are nearer to
    # head + relation than random ones, and the loss fell.
    n = 20
    facts = np.array([(i, i + 1, 0) for i in range(n - 1)], dtype=np.int64)
    _, before = train_transe(facts, n, 1, TransEConfig(dim=8, epochs=1, seed=3))
    emb, after = train_transe(facts, n, 1, TransEConfig(dim=8, epochs=300, seed=3))
    assert after < before
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0)
    # Rank of the true tail among all entities for each fact, with the learnt
    # relation recovered as the mean difference.
    rel = np.mean(emb[facts[:, 1]] - emb[facts[:, 0]], axis=0)
    dists = np.linalg.norm(emb[facts[:, 0], None, :] + rel - emb[None, :, :], axis=2)
    ranks = (dists < dists[np.arange(n - 1), facts[:, 1]][:, None]).sum(axis=1)
    assert np.mean(ranks) < 2.0


def test_sections_by_entity_name() -> None:
    names = ["Add", "FloatTy", "Pointer", "FCMP_olt", "Load"]
    s = vocabulary_sections(names, np.eye(5))
    assert list(s["Opcodes"]) == ["Add", "Load"]
    assert list(s["Types"]) == ["FloatTy"]
    assert list(s["Arguments"]) == ["Pointer", "FCMP_olt"]


def test_bad_inputs_and_parameters(tmp_path: Path) -> None:
    with pytest.raises(IR2VecError, match="does not exist"):
        collect_inputs([tmp_path / "missing.ll"])
    with pytest.raises(IR2VecError, match=r"no LLVM IR found \(\*\.bc or \*\.ll\)"):
        collect_inputs([tmp_path])
    with pytest.raises(IR2VecError, match="--dim must be at least 1"):
        build_vocabulary(IR, tmp_path / "v.json", TransEConfig(dim=0))
    bad = tmp_path / "bad.ll"
    bad.write_text("this is not IR\n")
    with pytest.raises(IR2VecError, match=r"llvm-ir2vec.* triplets .*bad\.ll failed \(exit 1\)"):
        build_vocabulary([bad], tmp_path / "v.json", SMALL)


def test_cli_writes_and_registers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = tmp_path / "registry"
    argv = ["ir2vec", "vocab", str(IR[0]), "--dim", "8", "--epochs", "10",
            "--register", "po-vocab", "--registry", str(registry)]  # fmt: skip
    assert cli_main(argv) == 0
    out = capsys.readouterr()
    assert "registered po-vocab (ir2vec-vocab, dim 8)" in out.out
    assert "110 entities, dim 8, 10 epochs" in out.err
    model = Registry(registry).get("po-vocab")
    assert model.kind == "ir2vec-vocab" and model.features == () and model.advice == ()
    assert set(orjson.loads(model.path.read_bytes())) == {"Opcodes", "Types", "Arguments"}
    # A second registration under the same name needs --force.
    assert cli_main(argv) == 1
    assert "already registered" in capsys.readouterr().err
    assert cli_main([*argv, "--force"]) == 0
    # Neither -o nor --register: nothing to do.
    assert cli_main(["ir2vec", "vocab", str(IR[0])]) == 1
    assert "-o FILE, --register NAME, or both" in capsys.readouterr().err


def test_registry_refuses_a_file_that_is_no_vocabulary(tmp_path: Path) -> None:
    not_vocab = tmp_path / "x.json"
    not_vocab.write_text('{"Opcodes": {"Add": [1.0]}}')
    with pytest.raises(RegistryError, match="no 'Types' section"):
        Registry(tmp_path / "registry").register("x", not_vocab, kind="ir2vec-vocab")
