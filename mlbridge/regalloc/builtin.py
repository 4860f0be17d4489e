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


#: The shipped register-allocation agents. Only an ONNX form: every query has its own
#: graph sizes, and neither ``mlbridge compile`` (native: one shared dynamic batch, no
#: ``If``) nor TensorFlow's AOT path (static shapes only) takes such a model.
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
        "85.6% (lua) and 43.6% (cmark-gfm) lower spill and reload cost than LLVM's basic "
        "allocator and 0.9% and 0.3% less .text; 12.8% below greedy's spill cost on "
        "cmark-gfm, 8.0% above it on lua (docs/ml-regalloc.md)",
        to_onnx=_to_onnx,
        native=False,
        # The network and its export: the ONNX form is made anew when they change.
        exporter=(_HERE / "gnn.py", _HERE / "interface.py"),
    ),
)
