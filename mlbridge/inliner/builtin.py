"""The inliner model mlbridge ships: ``inliner-oz``, kept as its training output."""

from __future__ import annotations

from pathlib import Path

from mlbridge.inliner.policy import LinearPolicy
from mlbridge.models.builtin import BuiltinModel

__all__ = ["BUILTIN_MODELS"]

_HERE = Path(__file__).resolve().parent
_MODELS = _HERE / "models"


def _to_onnx(policy_path: Path, out: Path) -> None:
    LinearPolicy.load(policy_path).to_onnx(out)


def _to_tfaot(policy_path: Path, folder: Path, name: str, log: bool) -> Path:
    return LinearPolicy.load(policy_path).to_tfaot(folder, name=name, log=log)


def _builtin(name: str, description: str) -> BuiltinModel:
    path = _MODELS / f"{name}.json"
    return BuiltinModel(
        name=name,
        task="inliner",
        policy_path=path,
        description=description,
        to_onnx=lambda out: _to_onnx(path, out),
        to_tfaot=lambda folder, c_name, log: _to_tfaot(path, folder, c_name, log),
        # The policy's ONNX and TensorFlow forms: they are made anew when these change.
        exporter=(_HERE / "policy.py", _HERE / "_tf_linear_policy.py"),
    )


#: The shipped inliner models.
BUILTIN_MODELS: tuple[BuiltinModel, ...] = (
    _builtin(
        "inliner-oz",
        "mlbridge's default inlining-for-size policy (linear over LLVM 22's ML inliner "
        "features; trained with 'mlbridge train inliner' on the corpus's training projects)",
    ),
)
