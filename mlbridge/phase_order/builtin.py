"""The phase-ordering agent mlbridge ships: ``phase-order-oz``, kept as its training output."""

from __future__ import annotations

from pathlib import Path

from mlbridge.models.builtin import BuiltinModel

__all__ = ["BUILTIN_MODELS"]

_HERE = Path(__file__).resolve().parent
_POLICY = _HERE / "models" / "phase-order-oz.json"


def _to_onnx(out: Path) -> None:
    # PyTorch exports it (the torch extra; the set-up installs it).
    from mlbridge.phase_order.policy import PhasePolicy

    PhasePolicy.load(_POLICY).to_onnx(out)


#: The shipped phase-ordering agents (no TF AOT form: the policy is a PyTorch network).
BUILTIN_MODELS: tuple[BuiltinModel, ...] = (
    BuiltinModel(
        name="phase-order-oz",
        task="phase-order",
        policy_path=_POLICY,
        description="mlbridge's phase-ordering agent for size, opt-in, not a default: on the "
        "held-out projects its objects have 1.06% less .text than -Oz's but 2.19% more "
        "allocated bytes (docs/phase-order-training.md) (mlbridge-phase-order with the "
        "built-in action set and count observations; trained with 'mlbridge train "
        "phase-order' on the corpus's training projects)",
        to_onnx=_to_onnx,
        # The network and PyTorch's export: the ONNX form is made anew when they change.
        exporter=(_HERE / "policy.py", _HERE.parent / "export" / "torch_export.py"),
    ),
)
