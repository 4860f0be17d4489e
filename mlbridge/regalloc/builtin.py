"""The register-allocation agents mlbridge ships: ``regalloc-split``, as its training output."""

from __future__ import annotations

from pathlib import Path

from mlbridge.models.builtin import BuiltinModel

__all__ = ["BUILTIN_MODELS"]

_HERE = Path(__file__).resolve().parent
_POLICY = _HERE / "models" / "regalloc-split.json"


def _to_onnx(out: Path) -> None:
    # PyTorch exports it (the torch extra; the set-up installs it).
    from mlbridge.regalloc.gnn import RegallocGNN

    RegallocGNN.load(_POLICY).to_onnx(out)


def _to_native(out: Path, name: str) -> Path:
    from mlbridge.regalloc.gnn import RegallocGNN
    from mlbridge.regalloc.native import compile_native

    del name  # the object's functions are named for the network (regalloc_agents)
    return compile_native(RegallocGNN.load(_POLICY), out)


#: The shipped register-allocation agents: an ONNX form, and a native one compiled
#: through MLIR by the network's own compiler (:mod:`mlbridge.regalloc.native`): every
#: query has its own graph sizes, which neither ``mlbridge compile`` (one shared dynamic
#: batch, no ``If``) nor TensorFlow's AOT path (static shapes only) takes.
BUILTIN_MODELS: tuple[BuiltinModel, ...] = (
    BuiltinModel(
        name="regalloc-split",
        task="regalloc",
        policy_path=_POLICY,
        description="mlbridge's register-allocation agents for -regalloc=mlbridge with "
        "-mlbridge-regalloc-split (a graph network, one round of message passing, answering "
        "the priority, coloring and split agents; behaviour-cloned from the split policy, "
        "then two rounds of DAgger, with 'mlbridge train regalloc --split --rounds 1 "
        "--dagger-rounds 2' on the corpus's training projects): on the held-out projects "
        "86.1% (lua) and 48.9% (cmark-gfm) lower spill and reload cost than LLVM's basic "
        "allocator and 1.1% and 0.3% less .text; 21.0% below greedy's spill cost on "
        "cmark-gfm, 4.3% above it on lua (with the default region borders and moves; "
        "docs/ml-regalloc.md)",
        to_onnx=_to_onnx,
        to_native=_to_native,
        # The network and its compilers: its forms are made anew when they change.
        exporter=(_HERE / "gnn.py", _HERE / "interface.py", _HERE / "native.py"),
    ),
)
