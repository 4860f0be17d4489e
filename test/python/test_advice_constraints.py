"""Advice constraints: a policy's answer outside its range or mask never reaches a compiler.

Stock LLVM 22 trusts its model: llc-22's eviction advisor indexes its candidates with
``index_to_evict`` unchecked (99 once gives assembly that does not assemble, 33, -1 or a
masked index crash llc, 99 on every query makes it loop). The compiler-side interfaces
attach the stock advisors' constraints (mlbridge/compiler/advice_constraints.py) and
refuse such an answer with an :class:`AdviceConstraintError` before sending it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

from mlbridge.compiler.advice_constraints import with_stock_constraints
from mlbridge.compiler.grpc import _observation_from_proto, _reply_for
from mlbridge.compiler.pipe import drive_compiler
from mlbridge.errors import AdviceConstraintError
from mlbridge.serdes._proto.mlbridge.v1 import model_service_pb2 as pb
from mlbridge.serdes._proto.mlbridge.v1 import tensor_pb2
from mlbridge.serdes.base import DecodeLimits
from mlbridge.serdes.protobuf import tensor_to_proto
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType, TensorSpec

BOUND = 60.0
INPUTS = REPO / "test" / "lit" / "Inputs"
EVICT = TensorSpec("index_to_evict", ElementType.INT64, (1,))


def test_stock_eviction_advice_gets_its_range_and_mask():
    spec = with_stock_constraints(EVICT, ["mask", "progress"])
    assert spec.valid_range == (0, 33) and spec.mask_feature == "mask"
    assert spec.to_json().endswith(b',"range":[0,33],"mask":"mask"}')
    # Without the mask feature it is not llc's eviction advisor: left alone.
    assert with_stock_constraints(EVICT, ["progress"]) is EVICT


def test_stock_priority_and_inliner_advice_get_their_ranges():
    priority = TensorSpec("priority", ElementType.FLOAT, (1,))
    assert with_stock_constraints(priority, ["li_size", "stage", "weight"]).valid_range == (
        0,
        2**32,
    )
    # mlbridge's own priority advisor (no `stage`) clamps its advice itself.
    assert with_stock_constraints(priority, ["li_size", "default_priority"]) is priority
    decision = TensorSpec("inlining_decision", ElementType.INT64, (1,))
    assert with_stock_constraints(decision, []).valid_range == (0, 2)


def _eviction_observation(mask: np.ndarray) -> pb.Observation:
    msg = pb.Observation(context="f")
    msg.advice.name, msg.advice.type = "index_to_evict", ElementType.INT64.value
    msg.advice.shape.extend([1])
    msg.features.kind = tensor_pb2.MESSAGE_KIND_OBSERVATION
    tensor_to_proto(Tensor("mask", ElementType.INT64, mask), msg.features.tensors.add())
    return msg


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (99, "element 0 is 99, outside its range \\[0, 33\\)"),
        (-1, "is -1, outside its range"),
        (np.int64(5), "is 5, whose entry in its mask feature 'mask' is 0"),
        (2**40, "is 1099511627776, outside"),
    ],
)
def test_grpc_reply_outside_the_constraints_is_refused(answer, message):
    mask = np.zeros((1, 33), np.int64)
    mask[0, 3] = 1
    obs = _observation_from_proto(_eviction_observation(mask), DecodeLimits())
    assert obs.advice.mask_feature == "mask"
    with pytest.raises(AdviceConstraintError, match=message):
        _reply_for(obs, answer)
    assert _reply_for(obs, np.int64(3)).tensors[0].name == "index_to_evict"


@pytest.fixture(scope="module")
def pressure_ll(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ll = tmp_path_factory.mktemp("evict") / "pressure.ll"
    subprocess.run(
        ["clang-22", "-O2", "-S", "-emit-llvm", str(INPUTS / "regalloc-pressure.c"), "-o",
         str(ll)],
        check=True, timeout=BOUND,
    )  # fmt: skip
    return ll


def _llc_evict(ll: Path, out: Path) -> list[str]:
    return ["llc-22", "-O2", "-relocation-model=pic", "-regalloc-enable-advisor=release",
            "-regalloc-evict-interactive-channel-base={base}", str(ll), "-o", str(out)]  # fmt: skip


def _first_masked(obs) -> int:
    mask = obs["mask"].reshape(-1)
    return int(np.flatnonzero(mask == 0)[0])


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (lambda obs: 99, "advice 'index_to_evict' element 0 is 99, outside its range"),
        (lambda obs: 33, "is 33, outside its range \\[0, 33\\)"),
        (lambda obs: -1, "is -1, outside its range"),
        (lambda obs: 2**40, "is 1099511627776, outside"),
        (_first_masked, "whose entry in its mask feature 'mask' is 0"),
    ],
    ids=["99", "33", "-1", "2^40", "masked"],
)
def test_stock_llc_never_receives_an_eviction_index_outside_its_constraints(
    pressure_ll: Path, tmp_path: Path, policy, message: str
) -> None:
    capture = tmp_path / "traffic.log"
    out = tmp_path / "out.s"
    with pytest.raises(AdviceConstraintError, match=message):
        drive_compiler(_llc_evict(pressure_ll, out), policy, capture=capture, timeout=BOUND)
    # The header and the first observation were captured; no reply was sent.
    traffic = capture.read_bytes()
    assert b'"index_to_evict"' in traffic
    assert b'{"advice":' not in traffic


def test_stock_llc_accepts_eviction_indices_its_mask_allows(
    pressure_ll: Path, tmp_path: Path
) -> None:
    seen: list[TensorSpec] = []

    def evict_first(obs) -> int:
        seen.append(obs.advice)
        mask = obs["mask"].reshape(-1)
        allowed = np.flatnonzero(mask[:-1])
        return int(allowed[0]) if allowed.size else mask.size - 1

    result = drive_compiler(_llc_evict(pressure_ll, tmp_path / "out.s"), evict_first, timeout=BOUND)
    assert result.returncode == 0 and result.answered > 0
    assert seen[0].valid_range == (0, 33) and seen[0].mask_feature == "mask"
