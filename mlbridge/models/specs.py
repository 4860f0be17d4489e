"""Reading a model file's tensor specs: ONNX graphs and TF AOT ``.specs.json`` sidecars.

Nothing here copies or registers anything: these functions only look at a file and
say which inputs (features) and outputs (advice) the model has, or why the file is not
a model mlbridge can run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import orjson

from mlbridge.errors import MLBridgeError, SpecError
from mlbridge.tensor_spec import DYNAMIC, ElementType, TensorSpec

__all__ = [
    "MODEL_KINDS",
    "ModelFileError",
    "ModelKind",
    "ModelSpecs",
    "guess_kind",
    "onnx_external_data_files",
    "read_ir2vec_vocab_specs",
    "read_onnx_specs",
    "read_specs_file",
    "read_tfaot_abi_specs",
    "read_tfaot_specs",
    "sidecar_path",
]

#: The kinds of model file the registry keeps. ``ir2vec-vocab`` is an IR2Vec vocabulary
#: (``mlbridge ir2vec vocab``), data for a pass rather than a runnable model. ``native`` is
#: a shared object ``mlbridge compile`` built from an ONNX model through MLIR
#: (docs/native.md); it has the TF AOT C ABI and sidecar, and the same runner loads it.
ModelKind = Literal["onnx", "tfaot", "native", "ir2vec-vocab"]
MODEL_KINDS: tuple[str, ...] = ("onnx", "tfaot", "native", "ir2vec-vocab")

#: The file-name suffix of the specs sidecar ``mlbridge aot`` writes beside ``NAME.so``.
SIDECAR_SUFFIX = ".specs.json"

_ELF_MAGIC = b"\x7fELF"
_ET_DYN = 3


class ModelFileError(MLBridgeError, ValueError):
    """A file is not a model mlbridge can run (or its specs cannot be read)."""


# ONNX TensorProto.DataType numbers (stable across onnx versions) -> element types.
_ONNX_ELEMENT_TYPES: dict[int, ElementType] = {
    1: ElementType.FLOAT,
    2: ElementType.UINT8,
    3: ElementType.INT8,
    4: ElementType.UINT16,
    5: ElementType.INT16,
    6: ElementType.INT32,
    7: ElementType.INT64,
    8: ElementType.STRING,
    9: ElementType.BOOL,
    11: ElementType.DOUBLE,
    12: ElementType.UINT32,
    13: ElementType.UINT64,
}


class ModelSpecs:
    """A model's input specs (the features it reads) and output specs (its advice).

    Attributes:
        features: The input specs, in the model's order.
        advice: The output specs, in the model's order.
    """

    __slots__ = ("advice", "features")

    def __init__(self, features: tuple[TensorSpec, ...], advice: tuple[TensorSpec, ...]) -> None:
        self.features = features
        self.advice = advice

    def __repr__(self) -> str:
        return f"ModelSpecs(features={self.features!r}, advice={self.advice!r})"


def guess_kind(path: Path) -> ModelKind | None:
    """The kind of model ``path`` holds, from its name or first bytes; ``None`` if unknown."""
    if path.suffix == ".onnx":
        return "onnx"
    if path.suffix == ".so" or ".so." in path.name:
        return _shared_object_kind(path)
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError:
        return None
    return _shared_object_kind(path) if head == _ELF_MAGIC else None


def _shared_object_kind(path: Path) -> ModelKind:
    # `mlbridge compile` marks its sidecar kind native; anything else is TF AOT.
    try:
        kind = orjson.loads(sidecar_path(path).read_bytes()).get("kind")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return "tfaot"
    return "native" if kind == "native" else "tfaot"


def read_ir2vec_vocab_specs(path: Path) -> ModelSpecs:
    """Check that ``path`` is an IR2Vec vocabulary; it has no tensor specs.

    LLVM 22's JSON has the sections ``Opcodes``, ``Types`` and ``Arguments``, each an
    object of entity name to number list. Both spec lists returned are empty.

    Raises:
        ModelFileError: If it is not one.
    """
    try:
        obj = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise ModelFileError(f"{path} is not an IR2Vec vocabulary: {e}") from None
    for key in ("Opcodes", "Types", "Arguments"):
        section = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(section, dict) or not section:
            raise ModelFileError(
                f"{path} is not an IR2Vec vocabulary: no {key!r} section (make one with "
                "`mlbridge ir2vec vocab`)"
            )
    return ModelSpecs((), ())


def sidecar_path(shared_object: Path) -> Path:
    """The specs sidecar of an AOT shared object: ``dir/NAME.so`` -> ``dir/NAME.specs.json``."""
    name = shared_object.name
    stem = name[: -len(".so")] if name.endswith(".so") else shared_object.stem
    return shared_object.with_name(stem + SIDECAR_SUFFIX)


def _onnx_value_spec(value: Any, role: str, path: Path) -> TensorSpec:  # noqa: ANN401
    what = f"{path}: {role} '{value.name}'"
    if value.type.WhichOneof("value") != "tensor_type":
        raise ModelFileError(
            f"{what} is not a tensor (it is a {value.type.WhichOneof('value')}); "
            "mlbridge feeds and reads only tensors"
        )
    tensor = value.type.tensor_type
    elem = _ONNX_ELEMENT_TYPES.get(tensor.elem_type)
    if elem is None:
        import onnx

        type_name = onnx.TensorProto.DataType.Name(tensor.elem_type)
        raise ModelFileError(
            f"{what} has ONNX element type {type_name}, which mlbridge has no element type "
            "for (supported: float, double, bool, string, signed and unsigned 8..64-bit ints)"
        )
    if not tensor.HasField("shape"):
        raise ModelFileError(
            f"{what} has no shape (its rank is unknown); export the model with input and "
            "output shapes (symbolic dimensions are fine)"
        )
    shape = tuple(
        d.dim_value if d.WhichOneof("value") == "dim_value" else DYNAMIC for d in tensor.shape.dim
    )
    try:
        return TensorSpec(value.name, elem, shape)
    except SpecError as e:
        raise ModelFileError(f"{what}: {e}") from None


def onnx_external_data_files(path: str | os.PathLike[str]) -> list[str]:
    """The files that hold ONNX model ``path``'s external weights, relative to its folder.

    (``onnx.checker``, which :func:`read_onnx_specs` runs, refuses a location outside the
    model's folder.)

    Raises:
        ModelFileError: If the model cannot be read.
    """
    path = Path(path)
    try:
        import onnx
    except ImportError as e:
        raise ModelFileError(
            f"reading ONNX models needs the onnx package (pip install 'mlbridge[onnx]'): {e}"
        ) from None
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - onnx raises protobuf's DecodeError and others
        raise ModelFileError(f"{path} is not a valid ONNX model: cannot parse it ({e})") from None
    files: list[str] = []
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = next(e.value for e in tensor.external_data if e.key == "location")
            if location not in files:
                files.append(location)
    return files


def read_onnx_specs(path: str | Path) -> ModelSpecs:
    """Read the input and output specs of an ONNX model file.

    ONNX element types map to mlbridge's (``FLOAT`` -> ``float``, ``INT64`` ->
    ``int64_t``, ...); symbolic or unknown dimensions become ``-1``. Graph inputs that
    are initializers (weights listed as inputs by old exporters) are not model inputs.

    Args:
        path: The ``.onnx`` file.

    Returns:
        The model's specs.

    Raises:
        ModelFileError: If the file is missing, is not a valid ONNX model, or has an
            input or output mlbridge cannot feed or read (the message names it).
    """
    path = Path(path)
    try:
        import onnx
    except ImportError as e:
        raise ModelFileError(
            f"reading ONNX models needs the onnx package (pip install 'mlbridge[onnx]'): {e}"
        ) from None
    if not path.is_file():
        raise ModelFileError(f"{path} does not exist or is not a file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - onnx raises protobuf's DecodeError and others
        raise ModelFileError(f"{path} is not a valid ONNX model: cannot parse it ({e})") from None
    try:
        # Given the path, the checker looks for external weights beside the model, not in
        # the working folder (it checks that they exist; it does not read them).
        onnx.checker.check_model(str(path))
    except Exception as e:  # noqa: BLE001 - ValidationError and C++ checker errors
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelFileError(f"{path} is not a valid ONNX model: {first_line}") from None
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    inputs = tuple(
        _onnx_value_spec(v, "input", path) for v in graph.input if v.name not in initializers
    )
    outputs = tuple(_onnx_value_spec(v, "output", path) for v in graph.output)
    if not inputs:
        raise ModelFileError(f"{path} is not a usable model: its graph has no inputs")
    if not outputs:
        raise ModelFileError(f"{path} is not a usable model: its graph has no outputs")
    return ModelSpecs(inputs, outputs)


def _spec_list(obj: Mapping[str, Any], key: str, where: str) -> tuple[TensorSpec, ...]:
    if key not in obj:
        raise ModelFileError(f"{where} has no {key!r} list")
    value = obj[key]
    if isinstance(value, Mapping):  # one spec written without its list
        value = [value]
    if not isinstance(value, list):
        raise ModelFileError(f"{where}: {key!r} must be a list of tensor specs")
    specs: list[TensorSpec] = []
    for i, item in enumerate(value):
        try:
            specs.append(TensorSpec.from_dict(item))
        except SpecError as e:
            raise ModelFileError(f"{where}: {key}[{i}]: {e}") from None
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ModelFileError(f"{where}: {key!r} names {', '.join(duplicates)} more than once")
    return tuple(specs)


def read_specs_file(path: str | Path) -> ModelSpecs:
    """Read a specs file: ``{"features":[spec,...], "advice":[spec,...]}``.

    This is the ``NAME.specs.json`` sidecar ``mlbridge aot`` or ``mlbridge compile``
    writes (its ``name`` and ``kind`` keys are allowed; ``kind``, if present, must be
    ``tfaot`` or ``native``).

    Args:
        path: The JSON file.

    Returns:
        The specs it lists.

    Raises:
        ModelFileError: If the file is missing or not such an object (the message says
            which key is wrong).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelFileError(f"cannot read the specs file {path}: {e.strerror}") from None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ModelFileError(f"the specs file {path} is not valid JSON: {e}") from None
    where = f"the specs file {path}"
    if not isinstance(obj, dict):
        raise ModelFileError(f'{where} must be a JSON object {{"features":[...],"advice":[...]}}')
    kind = obj.get("kind", "tfaot")
    if kind not in ("tfaot", "native"):
        raise ModelFileError(f"{where} is for a model of kind {kind!r}, not 'tfaot' or 'native'")
    return ModelSpecs(_spec_list(obj, "features", where), _spec_list(obj, "advice", where))


def _check_shared_object(path: Path) -> None:
    try:
        with path.open("rb") as f:
            header = f.read(18)
    except OSError as e:
        raise ModelFileError(f"cannot read {path}: {e.strerror}") from None
    # Shorter than the 18 bytes up to e_type, it is no ELF file (as C++'s checkSharedObject).
    if len(header) < 18 or header[:4] != _ELF_MAGIC:
        raise ModelFileError(
            f"{path} is not a TF AOT model: it is not an ELF shared object "
            "(build one with `mlbridge aot`)"
        )
    # e_type (ET_DYN = 3) is at offset 16 in the byte order of EI_DATA (1: little endian).
    byteorder: Literal["little", "big"] = "little" if header[5] == 1 else "big"
    if int.from_bytes(header[16:18], byteorder) != _ET_DYN:
        raise ModelFileError(
            f"{path} is not a TF AOT model: it is an ELF file but not a shared object "
            "(build one with `mlbridge aot`)"
        )


def read_tfaot_specs(path: str | Path, specs: str | Path | None = None) -> ModelSpecs:
    """Read the specs of a TF AOT shared object built by ``mlbridge aot``.

    Args:
        path: The ``.so`` file.
        specs: The specs file; default: the ``NAME.specs.json`` sidecar beside ``path``.

    Returns:
        The model's specs.

    Raises:
        ModelFileError: If ``path`` is not an ELF shared object, or the specs file is
            missing or invalid.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"{path} does not exist or is not a file")
    _check_shared_object(path)
    specs_path = Path(specs) if specs is not None else sidecar_path(path)
    if specs is None and not specs_path.is_file():
        abi_specs = read_tfaot_abi_specs(path)
        if abi_specs is None:
            raise ModelFileError(
                f"{path} has no specs sidecar {specs_path.name} beside it and does not "
                f"export the mlbridge AOT ABI ({_ABI_PREFIX}abi_version); pass --specs "
                "SPECS.json (the file `mlbridge aot` writes) to say which features and "
                "advice it has"
            )
        return abi_specs
    return read_specs_file(specs_path)


_ABI_PREFIX = "mlbridge_aot_"
#: The version of the C ABI read here (TFAOTAbiVersion in TFAOTModelRunner.h).
_ABI_VERSION = 1


def read_tfaot_abi_specs(path: str | Path) -> ModelSpecs | None:
    """Read a TF AOT shared object's specs from the C ABI ``mlbridge aot`` gives it.

    The shared object is loaded into this process (``RTLD_LOCAL``) and its
    ``mlbridge_aot_{num_args,arg_name,arg_type,arg_rank,arg_shape}`` (and ``result_``)
    functions are called; no model instance is created.

    Args:
        path: The ``.so`` file.

    Returns:
        The specs, or ``None`` if the file does not export
        ``mlbridge_aot_abi_version``.

    Raises:
        ModelFileError: If it cannot be loaded, has another ABI version, or describes
            an invalid tensor.
    """
    import ctypes

    path = Path(path)
    try:
        lib = ctypes.CDLL(str(path.absolute()), mode=os.RTLD_LOCAL)
    except OSError as e:
        raise ModelFileError(f"cannot load {path}: {e}") from None
    try:
        version_fn = getattr(lib, _ABI_PREFIX + "abi_version")
    except AttributeError:
        return None
    version_fn.restype = ctypes.c_uint32
    version = version_fn()
    if version != _ABI_VERSION:
        raise ModelFileError(
            f"{path} has mlbridge AOT ABI version {version}, but this mlbridge reads "
            f"version {_ABI_VERSION}; rebuild it with this mlbridge's `mlbridge aot`"
        )

    def fn(suffix: str, restype: Any, *argtypes: Any) -> Any:  # noqa: ANN401
        try:
            f = getattr(lib, _ABI_PREFIX + suffix)
        except AttributeError:
            raise ModelFileError(
                f"{path} exports {_ABI_PREFIX}abi_version but not {_ABI_PREFIX}{suffix}"
            ) from None
        f.restype, f.argtypes = restype, list(argtypes)
        return f

    types = list(ElementType)

    def read(kind: str) -> tuple[TensorSpec, ...]:
        i32, i64p = ctypes.c_int32, ctypes.POINTER(ctypes.c_int64)
        count = fn(f"num_{kind}s", i32)()
        name, typ = fn(f"{kind}_name", ctypes.c_char_p, i32), fn(f"{kind}_type", i32, i32)
        rank, shape = fn(f"{kind}_rank", i32, i32), fn(f"{kind}_shape", i64p, i32)
        specs = []
        for i in range(count):
            type_number = typ(i)
            if not 0 <= type_number < len(types):
                raise ModelFileError(f"{path}: {kind} {i} has unknown element type {type_number}")
            dims = shape(i)
            try:
                specs.append(
                    TensorSpec(
                        (name(i) or b"").decode("utf-8", errors="replace"),
                        types[type_number],
                        tuple(dims[d] for d in range(rank(i))),
                    )
                )
            except SpecError as e:
                raise ModelFileError(f"{path}: {kind} {i}: {e}") from None
        return tuple(specs)

    return ModelSpecs(read("arg"), read("result"))
