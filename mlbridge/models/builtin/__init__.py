"""The models mlbridge ships with, kept as their training output (JSON) in this folder.

:func:`ensure_builtin_models` builds each one's deployable form (an ONNX model) and
registers it under its name, so that ``-mlbridge-inline-model=inliner-oz`` works after
``make demo`` or ``mlbridge models install-builtin``; the TensorFlow AOT build of the same
policy is registered as ``<name>-aot``, and every model's ONNX form compiled to native code
through MLIR (``mlbridge compile``, docs/native.md) as ``<name>-native``. Registering is
skipped when the registry already holds models built from the same training output.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlbridge.errors import MLBridgeError
from mlbridge.models.registry import RegisteredModel, Registry, RegistryError

__all__ = ["BUILTIN_MODELS", "BuiltinModel", "builtin_model", "ensure_builtin_models"]

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class BuiltinModel:
    """A model shipped with mlbridge.

    Attributes:
        name: The registry name.
        policy: The training output in this folder (a linear inlining policy).
        description: What it is, for ``mlbridge models show``.
        task: The pass family it answers (:data:`mlbridge.models.tasks.TASKS`):
            ``"inliner"``: a linear inlining policy (ONNX and TF AOT);
            ``"phase-order"``: a phase-ordering policy (``PhasePolicy``, ONNX only).
    """

    name: str
    policy: str
    description: str
    task: str = "inliner"

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
    BuiltinModel(
        "phase-order-oz",
        "phase-order-oz.json",
        "mlbridge's default phase-ordering agent for size (mlbridge-phase-order with the "
        "built-in action set and count observations; trained with 'mlbridge train "
        "phase-order' on the corpus's training projects)",
        task="phase-order",
    ),
)


def builtin_model(task: str) -> BuiltinModel:
    """The built-in model of ``task`` (the default a pass of that task ships with).

    Raises:
        RegistryError: If mlbridge ships no model for ``task``.
    """
    for model in BUILTIN_MODELS:
        if model.task == task:
            return model
    shipped = ", ".join(sorted({m.task for m in BUILTIN_MODELS}))
    raise RegistryError(f"mlbridge ships no built-in model for task {task!r} (it has: {shipped})")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _current(reg: Registry, name: str, stamp: str, task: str) -> RegisteredModel | None:
    # A registered model built from the same training output carries its stamp (and,
    # since tasks are recorded, its task).
    if name not in reg.names():
        return None
    model = reg.get(name)
    current = model.description and stamp in model.description and model.task == task
    return model if current else None


def _ensure_phase_order(
    reg: Registry, model: BuiltinModel, description: str, stamp: str, tmp: Path
) -> RegisteredModel:
    found = _current(reg, model.name, stamp, model.task)
    if found is not None:
        return found
    # PyTorch exports it (the dev extra, which the set-up installs).
    from mlbridge.phase_order.policy import PhasePolicy

    try:
        policy = PhasePolicy.load(model.policy_path)
        onnx_path = policy.to_onnx(tmp / f"{model.name}.onnx")
    except (MLBridgeError, OSError, ValueError, RuntimeError) as e:
        raise RegistryError(f"cannot build built-in model {model.name!r}: {e}") from e
    return reg.register(
        model.name,
        onnx_path,
        kind="onnx",
        force=True,
        description=description,
        task=model.task,
    )


def _ensure_native(
    reg: Registry, model: BuiltinModel, onnx_model: RegisteredModel, description: str, stamp: str,
    tmp: Path,
) -> RegisteredModel:  # fmt: skip
    native_name = f"{model.name}-native"
    found = _current(reg, native_name, stamp, model.task)
    if found is not None:
        return found
    from mlbridge.native import compile_onnx

    c_name = model.name.replace("-", "_")
    try:
        so = compile_onnx(onnx_model.path, tmp / "native" / f"{c_name}.so", name=c_name)
    except MLBridgeError as e:
        raise RegistryError(f"cannot compile built-in model {model.name!r} natively: {e}") from e
    return reg.register(
        native_name, so, kind="native", force=True, description=description, task=model.task
    )


def ensure_builtin_models(
    registry: Registry | None = None, *, tfaot: bool = True, log: bool = False
) -> list[RegisteredModel]:
    """Registers every built-in model whose current form the registry does not hold yet.

    Each model is registered as ``<name>`` (ONNX), as ``<name>-native`` (the ONNX form
    compiled through MLIR by :func:`mlbridge.native.compile_onnx`) and, with ``tfaot``, an
    inlining policy also as ``<name>-aot``
    (compiled ahead of time by TensorFlow: ``mlbridge aot``, which needs the TensorFlow
    environment the set-up makes). A model built from the same training output is not
    built again.

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
            stamp = f"[policy sha256 {_sha256(model.policy_path)}]"
            description = f"{model.description} {stamp}"
            if model.task == "phase-order":
                found = _ensure_phase_order(reg, model, description, stamp, Path(tmp))
                out.append(found)
                out.append(_ensure_native(reg, model, found, description, stamp, Path(tmp)))
                continue
            try:
                policy = LinearPolicy.load(model.policy_path)
            except (OSError, ValueError) as e:
                raise RegistryError(f"cannot read built-in model {model.name!r}: {e}") from e
            found = _current(reg, model.name, stamp, model.task)
            if found is None:
                onnx_path = Path(tmp) / f"{model.name}.onnx"
                policy.to_onnx(onnx_path)
                found = reg.register(
                    model.name,
                    onnx_path,
                    kind="onnx",
                    force=True,
                    description=description,
                    task=model.task,
                )
            out.append(found)
            out.append(_ensure_native(reg, model, found, description, stamp, Path(tmp)))
            if not tfaot:
                continue
            aot_name = f"{model.name}-aot"
            found = _current(reg, aot_name, stamp, model.task)
            if found is None:
                try:
                    so = policy.to_tfaot(
                        Path(tmp) / "aot", name=model.name.replace("-", "_"), log=log
                    )
                except (MLBridgeError, RuntimeError) as e:
                    raise RegistryError(
                        f"cannot compile built-in model {model.name!r} ahead of time: {e}"
                    ) from e
                found = reg.register(
                    aot_name, so, kind="tfaot", force=True, description=description, task=model.task
                )
            out.append(found)
    return out
