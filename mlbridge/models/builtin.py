"""Registering the models mlbridge ships with: from their training output to the registry.

Each problem package defines its built-in models (``mlbridge.inliner.builtin``,
``mlbridge.phase_order.builtin``) as :class:`BuiltinModel` objects: a name, the task it
answers, the training output it is built from, and how to build its deployable forms.
:func:`ensure_builtin_models` builds and registers them; :mod:`mlbridge.problems` lists
every problem's built-ins, and ``mlbridge models install-builtin`` and ``make demo`` call
this with that list. This module knows no problem.

Each model is registered as ``<name>`` (ONNX), ``<name>-native`` (the ONNX form compiled
through MLIR by :func:`mlbridge.native.compile_onnx`, where the model's operators allow it)
and, where the model has a TF AOT form, ``<name>-aot`` (``mlbridge aot``, which needs the
TensorFlow environment the set-up makes). Every registered form carries the SHA-256 of the
training output it was built from, so a form built from the same output is not built again.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mlbridge.errors import MLBridgeError
from mlbridge.models.ort_format import lacks_ort_format_copy
from mlbridge.models.registry import RegisteredModel, Registry, RegistryError

__all__ = ["BuiltinModel", "ensure_builtin_models", "find_builtin"]

#: Errors a model's builder may raise besides mlbridge's own (a bad file, an exporter's).
_BUILD_ERRORS = (MLBridgeError, OSError, ValueError, RuntimeError)


@dataclass(frozen=True)
class BuiltinModel:
    """A model mlbridge ships with, kept as its training output in its problem's package.

    Attributes:
        name: The registry name of its ONNX form (``<name>-native``, ``<name>-aot``: the
            other forms).
        task: The pass family it answers (:data:`mlbridge.models.tasks.TASKS`).
        policy_path: The training output it is built from.
        description: What it is, for ``mlbridge models show``.
        to_onnx: Writes the ONNX form to the given path.
        to_tfaot: Compiles the TF AOT form into the given folder under the given C name,
            logging when the flag is true, and returns the shared object; ``None`` when the
            model has no TF AOT form.
        native: Whether the model has a native form (``mlbridge compile`` takes no
            control flow, so a model with an ``If`` has none unless ``to_native`` makes it).
        to_native: Compiles the native form into the given shared object under the given
            C name and returns it (with its ``.specs.json`` beside it); ``None``: the ONNX
            form through ``mlbridge compile``.
        exporter: The source files whose code makes its forms from the training output
            (the network and its export): a registered form built before one of them
            changed is built again, as one built from other training output is.
    """

    name: str
    task: str
    policy_path: Path
    description: str
    to_onnx: Callable[[Path], object]
    to_tfaot: Callable[[Path, str, bool], Path] | None = None
    native: bool = True
    exporter: tuple[Path, ...] = ()
    to_native: Callable[[Path, str], Path] | None = None


def find_builtin(models: Sequence[BuiltinModel], task: str) -> BuiltinModel:
    """The built-in model of ``task`` among ``models``.

    Raises:
        RegistryError: If none of them answers ``task``.
    """
    for model in models:
        if model.task == task:
            return model
    shipped = ", ".join(sorted({m.task for m in models}))
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
    # Registered before the registry wrote ORT-format copies, or for another ONNX Runtime.
    if model.kind == "onnx" and lacks_ort_format_copy(model.path):
        return None
    return model if current else None


def _register_built(
    reg: Registry,
    name: str,
    model: BuiltinModel,
    description: str,
    kind: str,
    build: Callable[[], Path],
    what: str,
) -> RegisteredModel:
    try:
        path = build()
    except _BUILD_ERRORS as e:
        raise RegistryError(f"cannot build the {what} of built-in model {model.name!r}: {e}") from e
    return reg.register(name, path, kind=kind, force=True, description=description, task=model.task)


def ensure_builtin_models(
    models: Sequence[BuiltinModel],
    registry: Registry | None = None,
    *,
    tfaot: bool = True,
    native: bool = True,
    log: bool = False,
) -> list[RegisteredModel]:
    """Registers every form of ``models`` that the registry does not hold yet.

    Args:
        models: The built-in models (:func:`mlbridge.problems.builtin_models`).
        registry: The registry; default: the user's.
        tfaot: Also the TF AOT forms (needs the TensorFlow environment).
        native: Also the native forms (needs LLVM and MLIR 22's tools).
        log: Let the TF AOT compiler say what it does.

    Returns:
        The registered forms, for each model: ONNX, native, TF AOT (those asked for).

    Raises:
        RegistryError: If a model cannot be read, built or registered.
    """
    reg = registry if registry is not None else Registry()
    out: list[RegisteredModel] = []
    with tempfile.TemporaryDirectory(prefix="mlbridge-builtin-") as tmp_name:
        tmp = Path(tmp_name)
        for model in models:
            try:
                stamp = f"[policy sha256 {_sha256(model.policy_path)}]"
                if model.exporter:
                    code = hashlib.sha256(b"".join(f.read_bytes() for f in model.exporter))
                    stamp += f" [exporter sha256 {code.hexdigest()}]"
            except OSError as e:
                raise RegistryError(
                    f"cannot read built-in model {model.name!r}: {e.filename}: {e.strerror}"
                ) from None
            description = f"{model.description} {stamp}"
            onnx_model = _current(reg, model.name, stamp, model.task)
            if onnx_model is None:
                onnx_path = tmp / f"{model.name}.onnx"

                def build_onnx(m: BuiltinModel = model, path: Path = onnx_path) -> Path:
                    m.to_onnx(path)
                    return path

                onnx_model = _register_built(
                    reg, model.name, model, description, "onnx", build_onnx, "ONNX form"
                )
            out.append(onnx_model)
            c_name = model.name.replace("-", "_")
            if native and model.native:
                name = f"{model.name}-native"
                found = _current(reg, name, stamp, model.task)
                if found is None:
                    from mlbridge.native import compile_onnx

                    source = onnx_model.path
                    target = tmp / "native" / f"{c_name}.so"
                    to_native = model.to_native
                    found = _register_built(
                        reg,
                        name,
                        model,
                        description,
                        "native",
                        (lambda t=target, n=c_name, b=to_native: b(t, n))
                        if to_native is not None
                        else (lambda s=source, t=target, n=c_name: compile_onnx(s, t, name=n)),
                        "native form",
                    )
                out.append(found)
            if tfaot and model.to_tfaot is not None:
                name = f"{model.name}-aot"
                found = _current(reg, name, stamp, model.task)
                if found is None:
                    to_tfaot = model.to_tfaot
                    folder = tmp / "aot"
                    found = _register_built(
                        reg,
                        name,
                        model,
                        description,
                        "tfaot",
                        lambda f=folder, n=c_name, b=to_tfaot: b(f, n, log),
                        "TF AOT form",
                    )
                out.append(found)
    return out
