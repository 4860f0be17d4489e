"""The models mlbridge ships with, kept as their training output (JSON) in this folder.

:func:`ensure_builtin_models` builds each one's deployable form (an ONNX model) and
registers it under its name, so that ``-mlbridge-inline-model=inliner-oz`` works after
``make demo`` or ``mlbridge models install-builtin``. Registering is skipped when the
registry already holds the same bytes.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlbridge.models.registry import RegisteredModel, Registry, RegistryError

__all__ = ["BUILTIN_MODELS", "BuiltinModel", "ensure_builtin_models"]

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class BuiltinModel:
    """A model shipped with mlbridge.

    Attributes:
        name: The registry name.
        policy: The training output in this folder (a linear inlining policy).
        description: What it is, for ``mlbridge models show``.
    """

    name: str
    policy: str
    description: str

    @property
    def policy_path(self) -> Path:
        """The training output's path."""
        return _HERE / self.policy


BUILTIN_MODELS: tuple[BuiltinModel, ...] = (
    BuiltinModel(
        "inliner-oz",
        "inliner-oz.json",
        "mlbridge's default inlining-for-size policy (linear over LLVM 22's ML inliner "
        "features; trained with 'mlbridge train inliner' on the corpus's training projects)",
    ),
)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ensure_builtin_models(registry: Registry | None = None) -> list[RegisteredModel]:
    """Registers every built-in model whose current form the registry does not hold yet.

    Returns:
        The registered built-in models.

    Raises:
        RegistryError: If a model cannot be built or registered.
    """
    from mlbridge.train.linear_policy import LinearPolicy

    reg = registry if registry is not None else Registry()
    out: list[RegisteredModel] = []
    with tempfile.TemporaryDirectory(prefix="mlbridge-builtin-") as tmp:
        for model in BUILTIN_MODELS:
            onnx_path = Path(tmp) / f"{model.name}.onnx"
            try:
                LinearPolicy.load(model.policy_path).to_onnx(onnx_path)
            except (OSError, ValueError) as e:
                raise RegistryError(f"cannot build built-in model {model.name!r}: {e}") from e
            if model.name in reg.names():
                current = reg.get(model.name)
                if current.sha256 == _sha256(onnx_path):
                    out.append(current)
                    continue
            out.append(
                reg.register(
                    model.name, onnx_path, kind="onnx", force=True, description=model.description
                )
            )
    return out
