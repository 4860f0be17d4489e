"""The model registry: a folder of named, registered model files and their specs.

Layout (see docs/models.md)::

    <registry>/
      <NAME>/
        model.json          name, kind, task, file, sha256, size, features, advice, ...
        <file>              the model file, copied in (the registry owns it)
        <stem>.onnxruntime-<version>.ort   ONNX only: its ORT-format copy (ort_format)
        <stem>.specs.json   TF AOT only: the specs sidecar, so the .so describes itself

A model is written into a hidden staging folder first and renamed into place, so a
reader sees either the whole old model, the whole new one, or none, never half of one.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from mlbridge.errors import MLBridgeError, SpecError
from mlbridge.models.ort_format import write_ort_format_copy
from mlbridge.models.specs import (
    MODEL_KINDS,
    ModelKind,
    ModelSpecs,
    guess_kind,
    onnx_external_data_files,
    read_ir2vec_vocab_specs,
    read_onnx_specs,
    read_tfaot_specs,
    sidecar_path,
)
from mlbridge.models.tasks import get_task, infer_task, task_names
from mlbridge.tensor_spec import TensorSpec

__all__ = [
    "MODEL_JSON",
    "REGISTRY_ENV",
    "RegisteredModel",
    "Registry",
    "RegistryError",
    "check_model_name",
    "default_registry_dir",
]

#: The environment variable naming the registry folder.
REGISTRY_ENV = "MLBRIDGE_MODEL_REGISTRY"
#: The description file in each model folder.
MODEL_JSON = "model.json"
#: The version of the model.json layout; readers refuse newer ones.
FORMAT_VERSION = 1

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_LOCK_FILE = ".lock"
_LOCK_TIMEOUT_S = 30.0
_READ_ATTEMPTS = 10


class RegistryError(MLBridgeError):
    """A registry operation failed: unknown or invalid name, existing model, bad file."""


def default_registry_dir() -> Path:
    """The registry folder used when none is given.

    Returns:
        ``$MLBRIDGE_MODEL_REGISTRY`` if set, else ``$XDG_DATA_HOME/mlbridge/models`` if
        ``XDG_DATA_HOME`` is an absolute path, else ``~/.local/share/mlbridge/models``.
    """
    env = os.environ.get(REGISTRY_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore relative paths
        return Path(xdg) / "mlbridge" / "models"
    return Path.home() / ".local" / "share" / "mlbridge" / "models"


def check_model_name(name: str) -> str:
    """Return ``name`` if it can name a registered model, else raise :class:`RegistryError`.

    A name is one or more of ``A-Z a-z 0-9 _ . -`` and does not start with ``.`` (those
    folders are the registry's own).
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name.startswith("."):
        raise RegistryError(
            f"invalid model name {name!r}: use letters, digits, '_', '.' and '-' "
            "(not starting with '.'), e.g. 'inliner-v2'"
        )
    return name


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with Linux's ``renameat2(RENAME_EXCHANGE)``.

    Returns:
        False where that call is not available (the caller then renames in two steps).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False  # kernel or file system without RENAME_EXCHANGE
    raise OSError(err, os.strerror(err), str(b))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class RegisteredModel:
    """A model in the registry, as its ``model.json`` describes it.

    Attributes:
        name: The registered name.
        kind: ``"onnx"``, ``"tfaot"``, ``"native"`` or ``"ir2vec-vocab"``.
        path: The absolute path of the model file inside the registry.
        sha256: The model file's SHA-256, hex.
        size: The model file's size in bytes.
        features: The model's input specs (the compiler features it reads).
        advice: The model's output specs.
        registered_at: When it was registered (ISO 8601, UTC).
        description: A free-form description, or ``None``.
        task: The pass family the model answers (:mod:`mlbridge.models.tasks`:
            ``"inliner"``, ``"phase-order"``, ...), or ``None`` when unknown (an
            IR2Vec vocabulary, a model registered before tasks were recorded, or one
            whose advice names no task).
    """

    name: str
    kind: ModelKind
    path: Path
    sha256: str
    size: int
    features: tuple[TensorSpec, ...] = field(default=())
    advice: tuple[TensorSpec, ...] = field(default=())
    registered_at: str = ""
    description: str | None = None
    task: str | None = None

    @property
    def file(self) -> str:
        """The model file's name inside its folder."""
        return self.path.name

    def to_dict(self) -> dict[str, Any]:
        """The ``model.json`` object of this model."""
        obj: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "name": self.name,
            "kind": self.kind,
            "task": self.task,
            "file": self.file,
            "sha256": self.sha256,
            "size": self.size,
            "features": [s.to_dict() for s in self.features],
            "advice": [s.to_dict() for s in self.advice],
            "registered_at": self.registered_at,
        }
        if self.description is not None:
            obj["description"] = self.description
        return obj

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], folder: Path) -> RegisteredModel:
        """Read a parsed ``model.json`` of the model folder ``folder``.

        Raises:
            RegistryError: If a key is missing or has the wrong type; the message names
                the file and the key.
        """
        where = folder / MODEL_JSON
        if not isinstance(obj, Mapping):
            raise RegistryError(f"{where} is not a JSON object")
        version = obj.get("format", FORMAT_VERSION)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise RegistryError(
                f"{where} has format {version!r}, newer than this mlbridge reads "
                f"({FORMAT_VERSION}); upgrade mlbridge"
            )

        def get(key: str, typ: type | tuple[type, ...]) -> Any:  # noqa: ANN401
            if key not in obj or not isinstance(obj[key], typ):
                raise RegistryError(f"{where}: {key!r} is missing or not a {_type_name(typ)}")
            return obj[key]

        name = get("name", str)
        if name != folder.name:
            raise RegistryError(f"{where} names the model {name!r}, not {folder.name!r}")
        kind = get("kind", str)
        if kind not in MODEL_KINDS:
            raise RegistryError(
                f"{where}: unknown kind {kind!r} (expected {', '.join(MODEL_KINDS)})"
            )
        file = get("file", str)
        if not file or "/" in file or file in (".", ".."):
            raise RegistryError(f"{where}: 'file' must be a file name inside {folder}")
        specs: dict[str, tuple[TensorSpec, ...]] = {}
        for key in ("features", "advice"):
            try:
                specs[key] = tuple(TensorSpec.from_dict(s) for s in get(key, list))
            except SpecError as e:
                raise RegistryError(f"{where}: {key}: {e}") from None
        description = obj.get("description")
        task = obj.get("task")
        if task is not None and (not isinstance(task, str) or not _NAME_RE.fullmatch(task)):
            raise RegistryError(f"{where}: 'task' must be a task name or null, not {task!r}")
        return cls(
            name=name,
            kind=kind,
            path=(folder / file).absolute(),
            sha256=get("sha256", str),
            size=get("size", int),
            features=specs["features"],
            advice=specs["advice"],
            registered_at=obj.get("registered_at", "") or "",
            description=description if isinstance(description, str) else None,
            task=task,
        )


def _check_task(name: str, kind: str, task: str | None, specs: ModelSpecs) -> str | None:
    """The task to record for a model: ``task`` checked against the advice, or inferred."""
    if kind == "ir2vec-vocab":
        if task is not None:
            raise RegistryError(
                f"cannot register {name!r}: an IR2Vec vocabulary is data, not a model of a "
                "task; leave --task out"
            )
        return None
    inferred = infer_task(specs.advice)
    if task is None:
        return inferred
    expected = get_task(task)
    if expected is not None and specs.advice:
        names = [s.name for s in specs.advice]
        if names != [expected.advice]:
            raise RegistryError(
                f"cannot register {name!r} as a {task} model: its advice is "
                f"{', '.join(map(repr, names))}, and the {task} pass asks for one output "
                f"named {expected.advice!r}"
            )
    return task


def _type_name(typ: type | tuple[type, ...]) -> str:
    types = typ if isinstance(typ, tuple) else (typ,)
    names = {str: "string", int: "integer", list: "list", dict: "object"}
    return " or ".join(names.get(t, t.__name__) for t in types)


class Registry:
    """A model registry folder.

    Args:
        path: The registry folder; default :func:`default_registry_dir`. It is created
            on the first :meth:`register`.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.root = (Path(path) if path is not None else default_registry_dir()).absolute()

    def __repr__(self) -> str:
        return f"Registry({str(self.root)!r})"

    # -- reading ------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The registered names, sorted."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if not p.name.startswith(".") and (p / MODEL_JSON).is_file()
        )

    def get(self, name: str) -> RegisteredModel:
        """The model registered as ``name``.

        Raises:
            RegistryError: If ``name`` is invalid or not registered (the message lists the
                registered names), or its ``model.json`` is corrupt.
        """
        check_model_name(name)
        folder = self.root / name
        # A concurrent --force may swap the folder between reading model.json and
        # looking at the file: read model.json again and retry until both agree.
        problem = ""
        for _ in range(_READ_ATTEMPTS):
            data = self._read_model_json(name)
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError as e:
                raise RegistryError(f"{folder / MODEL_JSON} is not valid JSON: {e}") from None
            model = RegisteredModel.from_dict(obj, folder)
            present = model.path.is_file()
            if self._read_model_json(name) != data:
                problem = f"{folder} kept changing while it was read"
            elif not present:
                problem = (
                    f"the model file {model.path} of {name!r} is missing; register it "
                    "again with --force"
                )
            else:
                return model
        raise RegistryError(problem)

    def _read_model_json(self, name: str) -> bytes:
        path = self.root / name / MODEL_JSON
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise RegistryError(self._unknown_message(name)) from None
        except OSError as e:
            raise RegistryError(f"cannot read {path}: {e.strerror}") from None

    def list(self) -> list[RegisteredModel]:
        """Every registered model, sorted by name."""
        return [self.get(name) for name in self.names()]

    def path(self, name: str) -> Path:
        """The absolute path of the model file registered as ``name``."""
        return self.get(name).path

    def verify(self, name: str) -> RegisteredModel:
        """Like :meth:`get`, and check the model file's size and SHA-256.

        Raises:
            RegistryError: If the file was changed since it was registered.
        """
        model = self.get(name)
        size = model.path.stat().st_size
        if size != model.size or _sha256(model.path) != model.sha256:
            raise RegistryError(
                f"the model file {model.path} of {name!r} was changed after it was "
                "registered (its size or SHA-256 differs); register it again with --force"
            )
        return model

    def _unknown_message(self, name: str) -> str:
        names = self.names()
        have = f"it has: {', '.join(names)}" if names else "it is empty"
        return (
            f"no model named {name!r} in the registry {self.root} ({have}); register one "
            "with `mlbridge models register NAME FILE`"
        )

    # -- writing ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialize writers (register, remove) with a bounded wait on ``.lock``."""
        self.root.mkdir(parents=True, exist_ok=True)
        lock_path = self.root / _LOCK_FILE
        with lock_path.open("a+b") as lock:
            deadline = time.monotonic() + _LOCK_TIMEOUT_S
            while True:
                try:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as e:
                    if e.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() > deadline:
                        raise RegistryError(
                            f"another mlbridge process has held {lock_path} for more than "
                            f"{_LOCK_TIMEOUT_S:.0f} s; try again when it is done"
                        ) from None
                    time.sleep(0.05)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def register(
        self,
        name: str,
        file: str | Path,
        *,
        kind: ModelKind | None = None,
        specs: str | Path | None = None,
        force: bool = False,
        description: str | None = None,
        task: str | None = None,
    ) -> RegisteredModel:
        """Copy a model file into the registry under ``name``.

        Args:
            name: The name to register it as (see :func:`check_model_name`).
            file: The model file: an ``.onnx`` model or a TF AOT ``.so``.
            kind: ``"onnx"``, ``"tfaot"``, ``"native"`` or ``"ir2vec-vocab"`` (never
                guessed); default:
                from the file name or its bytes.
            specs: TF AOT only: the specs file; default: the sidecar beside the ``.so``.
            force: Replace a model already registered as ``name``.
            description: Stored in ``model.json`` and shown by ``mlbridge models show``.
            task: The pass family the model answers (:data:`~mlbridge.models.tasks.TASKS`);
                default: told from the model's advice name (``None`` when it names no
                task, and always for an IR2Vec vocabulary).

        Returns:
            The registered model.

        Raises:
            RegistryError: If the name is invalid or taken (without ``force``), the kind
                cannot be told, the task is unknown or does not fit the model's advice,
                or the file is not a valid model of its kind.
        """
        check_model_name(name)
        if task is not None and get_task(task) is None:
            raise RegistryError(
                f"unknown task {task!r} for {name!r} (expected one of: {', '.join(task_names())})"
            )
        source = Path(file)
        if not source.is_file():
            raise RegistryError(f"cannot register {name!r}: {source} does not exist")
        if kind is None:
            kind = guess_kind(source)
            if kind is None:
                raise RegistryError(
                    f"cannot tell what kind of model {source} is from its name; pass "
                    "--kind onnx or --kind tfaot"
                )
        if kind not in MODEL_KINDS:
            raise RegistryError(f"unknown model kind {kind!r} (expected {', '.join(MODEL_KINDS)})")
        if source.name == MODEL_JSON:
            raise RegistryError(
                f"cannot register {source}: the registry keeps its own {MODEL_JSON} beside "
                "the model file; rename the model file (e.g. model.onnx)"
            )
        if kind not in ("tfaot", "native") and specs is not None:
            raise RegistryError(
                "--specs is for TF AOT models (and native ones, which share their ABI); other "
                "kinds carry their specs in the file"
            )
        # Read the specs before taking the lock: refusing a bad file needs no lock.
        try:
            model_specs: ModelSpecs
            if kind == "ir2vec-vocab":
                model_specs = read_ir2vec_vocab_specs(source)
            elif kind == "onnx":
                model_specs = read_onnx_specs(source)
            else:
                model_specs = read_tfaot_specs(source, specs)
        except MLBridgeError as e:
            raise RegistryError(f"cannot register {name!r}: {e}") from None
        task = _check_task(name, kind, task, model_specs)

        with self._locked():
            target = self.root / name
            if (target / MODEL_JSON).exists() and not force:
                raise RegistryError(
                    f"a model named {name!r} is already registered ({target}); pass "
                    "--force to replace it, or choose another name"
                )
            staging = self.root / f".staging-{name}-{uuid.uuid4().hex}"
            staging.mkdir()
            try:
                copied = staging / source.name
                shutil.copyfile(source, copied)
                # An ONNX model's external weights travel with it (read_onnx_specs checked
                # that they are there).
                for weights in onnx_external_data_files(source) if kind == "onnx" else []:
                    (staging / weights).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source.parent / weights, staging / weights)
                if kind == "onnx":
                    # What the in-process runner loads fastest (mlbridge.models.ort_format).
                    write_ort_format_copy(copied)
                model = RegisteredModel(
                    name=name,
                    kind=kind,
                    path=(target / source.name).absolute(),
                    sha256=_sha256(copied),
                    size=copied.stat().st_size,
                    features=model_specs.features,
                    advice=model_specs.advice,
                    registered_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    description=description,
                    task=task,
                )
                if kind in ("tfaot", "native"):
                    sidecar = {
                        "name": name,
                        "kind": kind,
                        "features": [s.to_dict() for s in model.features],
                        "advice": [s.to_dict() for s in model.advice],
                    }
                    sidecar_path(copied).write_bytes(
                        orjson.dumps(sidecar, option=orjson.OPT_INDENT_2) + b"\n"
                    )
                (staging / MODEL_JSON).write_bytes(
                    orjson.dumps(model.to_dict(), option=orjson.OPT_INDENT_2) + b"\n"
                )
                self._swap_in(staging, target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        return model

    def _swap_in(self, staging: Path, target: Path) -> None:
        """Rename the complete ``staging`` folder to ``target``, replacing any old one."""
        if not target.exists():
            staging.rename(target)
            return
        if _exchange(staging, target):  # one atomic step: readers never miss the model
            shutil.rmtree(staging, ignore_errors=True)
            return
        old = self.root / f".removed-{target.name}-{uuid.uuid4().hex}"
        target.rename(old)
        try:
            staging.rename(target)
        except BaseException:
            old.rename(target)
            raise
        shutil.rmtree(old, ignore_errors=True)

    def remove(self, name: str) -> None:
        """Remove the model registered as ``name`` (its folder and files).

        A model whose ``model.json`` is corrupt can be removed too.

        Raises:
            RegistryError: If ``name`` is invalid or not registered.
        """
        check_model_name(name)
        with self._locked():
            folder = self.root / name
            if not (folder / MODEL_JSON).is_file():
                raise RegistryError(self._unknown_message(name))
            removed = self.root / f".removed-{name}-{uuid.uuid4().hex}"
            folder.rename(removed)  # atomic: readers see the model or nothing
            shutil.rmtree(removed, ignore_errors=True)
