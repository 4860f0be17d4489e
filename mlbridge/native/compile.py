"""``mlbridge compile``: an ONNX model to a dependency-free shared object through MLIR 22.

The pipeline (docs/native.md):

1. :func:`mlbridge.native.importer.import_onnx` writes the graph as one MLIR function
   on tensors (linalg, tensor, arith, math, scf);
2. ``mlir-opt-22`` bufferizes it (one-shot, identity layouts), frees its temporaries,
   lowers linalg to loops and everything to the LLVM dialect;
3. ``mlir-translate-22 --mlir-to-llvmir`` writes LLVM IR;
4. ``clang-22 -O2`` compiles that IR with the generated C wrapper
   (:mod:`mlbridge.native.wrapper`, mlbridge's AOT C ABI) into ``<name>.so`` exporting
   only ``mlbridge_aot_*`` (needs only libc and libm), or with ``static=True`` into
   ``lib<name>_native.a`` plus ``<name>_mlbridge.h`` to link into a tool (the ELF
   version script and ``--no-undefined`` are those of ``mlbridge aot``);
5. ``<stem>.specs.json`` beside it describes the model for the registry.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from mlbridge.aot.abi import DYNAMIC_BATCH, render_linked_header
from mlbridge.llvm import find_llvm_tool
from mlbridge.native.importer import ImportedModel, NativeCompileError, TensorInfo, import_onnx
from mlbridge.native.wrapper import ELEMENT_TYPES, render_c_wrapper
from mlbridge.tensor_spec import TensorSpec

__all__ = ["MLIR_PIPELINE", "NativeOutputs", "compile_onnx", "native_specs", "run_tool"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TOOL_TIMEOUT_S = 600.0

#: The ``mlir-opt-22`` passes, in order, from tensors to the LLVM dialect.
MLIR_PIPELINE: tuple[str, ...] = (
    "--linalg-fuse-elementwise-ops",
    "--one-shot-bufferize=bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map",
    "--buffer-deallocation-pipeline",
    "--convert-linalg-to-loops",
    "--expand-strided-metadata",
    "--lower-affine",
    "--convert-scf-to-cf",
    "--convert-math-to-libm",
    "--convert-to-llvm",
    "--reconcile-unrealized-casts",
)


@dataclass(frozen=True)
class NativeOutputs:
    """What :func:`compile_onnx` wrote and how long it took."""

    path: Path
    specs_file: Path
    header: Path | None
    features: tuple[TensorSpec, ...]
    advice: tuple[TensorSpec, ...]
    ops: tuple[str, ...]
    seconds: float
    batch_symbol: str | None = None


def run_tool(tool: str, args: list[str], what: str) -> None:
    """Runs an LLVM or MLIR tool; a failure is a NativeCompileError with its last lines."""
    try:
        proc = subprocess.run(
            [tool, *args], capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NativeCompileError(f"{what}: cannot run {tool}: {exc}") from None
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
        raise NativeCompileError(
            f"{what} failed ({Path(tool).name} exit status {proc.returncode}); this is a bug "
            f"in mlbridge's native compiler, please report it with the model:\n{tail}"
        )


def native_specs(imported: ImportedModel) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """The (features, advice) tensor specs of an imported model."""

    def specs(tensors: tuple[TensorInfo, ...]) -> tuple[TensorSpec, ...]:
        return tuple(TensorSpec(t.name, ELEMENT_TYPES[t.dtype], _spec_shape(t)) for t in tensors)

    return specs(imported.inputs), specs(imported.outputs)


def _spec_shape(t: TensorInfo) -> tuple[int, ...]:
    """The shape of a tensor's spec: ``-1`` for the dynamic batch."""
    return tuple(DYNAMIC_BATCH if t.batch and k == 0 else d for k, d in enumerate(t.shape))


def _specs_path(out: Path) -> Path:
    name = out.name
    for suffix in (".so", ".a"):
        if name.endswith(suffix):
            return out.with_name(name[: -len(suffix)] + ".specs.json")
    return out.with_name(name + ".specs.json")


def compile_onnx_outputs(
    model: str | Path,
    out: str | Path,
    *,
    name: str,
    static: bool = False,
    dims: dict[str, int] | None = None,
) -> NativeOutputs:
    """Like :func:`compile_onnx`, returning everything it wrote and the operators used."""
    start = time.perf_counter()
    model, out = Path(model), Path(out)
    if not _NAME.match(name):
        raise NativeCompileError(f"model name {name!r} is not a C identifier (e.g. inliner_oz)")
    try:
        import onnx
    except ImportError as exc:
        raise NativeCompileError(
            f"compiling ONNX models needs the onnx package (pip install 'mlbridge[export]'): {exc}"
        ) from None
    if not model.is_file():
        raise NativeCompileError(f"{model} does not exist or is not a file")
    try:
        proto = onnx.load(str(model))
    except Exception as exc:  # noqa: BLE001 - protobuf DecodeError and others
        raise NativeCompileError(f"{model} is not a valid ONNX model: {exc}") from None
    imported = import_onnx(proto, name, dims)
    features, advice = native_specs(imported)
    mlir_opt = find_llvm_tool("mlir-opt")
    mlir_translate = find_llvm_tool("mlir-translate")
    clang = find_llvm_tool("clang")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mlbridge-native-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "model.mlir").write_text(imported.mlir, encoding="utf-8")
        run_tool(
            mlir_opt,
            [str(tmp / "model.mlir"), *MLIR_PIPELINE, "-o", str(tmp / "model.llvm.mlir")],
            "lowering the model with mlir-opt",
        )
        run_tool(
            mlir_translate,
            ["--mlir-to-llvmir", str(tmp / "model.llvm.mlir"), "-o", str(tmp / "model.ll")],
            "translating the model to LLVM IR",
        )
        wrapper = tmp / f"{name}_mlbridge.c"
        wrapper.write_text(
            render_c_wrapper(name, imported.function, imported.inputs, imported.outputs),
            encoding="utf-8",
        )
        flags = ["-O2", "-fPIC", "-Wno-override-module"]
        header: Path | None = None
        if static:
            prefix = f"-DMLBRIDGE_AOT_PREFIX=mlbridge_aot_{name}"
            objs = [tmp / "model.o", tmp / "wrapper.o"]
            run_tool(clang, [*flags, "-c", str(tmp / "model.ll"), "-o", str(objs[0])], "compiling")
            run_tool(
                clang,
                [*flags, "-std=c11", prefix, "-c", str(wrapper), "-o", str(objs[1])],
                "compiling the C wrapper",
            )
            out.unlink(missing_ok=True)
            run_tool(
                find_llvm_tool("llvm-ar"),
                ["rcs", str(out), *map(str, objs)],
                "archiving the model",
            )
            header = out.with_name(f"{name}_mlbridge.h")
            header.write_text(
                render_linked_header(name, dynamic_batch=imported.batch_symbol is not None),
                encoding="utf-8",
            )
        else:
            script = tmp / "exports.map"
            # As `mlbridge aot` links its models: only the ABI, under the ELF version
            # MLBRIDGE_AOT_1; an undefined symbol (a helper of MLIR's C runner library
            # the lowering left in) fails the link, not the load.
            script.write_text(
                "MLBRIDGE_AOT_1 { global: mlbridge_aot_*; local: *; };\n", encoding="utf-8"
            )
            run_tool(
                clang,
                [
                    *flags,
                    "-std=c11",
                    "-shared",
                    "-fvisibility=hidden",
                    "-DMLBRIDGE_AOT_PREFIX=mlbridge_aot",
                    "-DMLBRIDGE_AOT_EXPORT",
                    f"-Wl,--version-script={script}",
                    "-Wl,--no-undefined",
                    str(wrapper),
                    str(tmp / "model.ll"),
                    "-lm",
                    "-o",
                    str(out),
                ],
                "compiling the shared object",
            )
    specs_file = _specs_path(out)
    specs = {
        "name": name,
        "kind": "native",
        "features": [s.to_dict() for s in features],
        "advice": [s.to_dict() for s in advice],
    }
    specs_file.write_bytes(orjson.dumps(specs, option=orjson.OPT_INDENT_2) + b"\n")
    return NativeOutputs(
        path=out,
        specs_file=specs_file,
        header=header,
        features=features,
        advice=advice,
        ops=imported.ops,
        seconds=time.perf_counter() - start,
        batch_symbol=imported.batch_symbol,
    )


def compile_onnx(
    model: Path, out: Path, *, name: str, static: bool = False, dims: dict[str, int] | None = None
) -> Path:
    """Compile an ONNX model to native code with MLIR 22 and LLVM 22.

    Args:
        model: The ``.onnx`` file.
        out: The shared object to write (``.so``), or with ``static`` the archive
            (``lib<name>_native.a``; ``<name>_mlbridge.h`` is written beside it).
        name: The model name, a C identifier (``model_name()``; the linked-in symbols
            are ``mlbridge_aot_<name>_*``).
        static: Write a static library to link into a tool instead of a shared object.
        dims: Values for the model's symbolic dimensions (``{"batch": 1}``). A symbolic
            leading dimension the inputs share that ``dims`` leaves open becomes the
            object's dynamic batch (``set_batch``; docs/native.md).

    Returns:
        ``out``. ``<stem>.specs.json`` (kind ``native``) is written beside it.

    Raises:
        NativeCompileError: If the model uses something native compilation does not
            support (the message names the operator and node), has a dynamic batch that
            a node mixes across rows (named likewise), or a tool fails.
        mlbridge.llvm.LLVMToolError: If an LLVM 22 tool is missing.
    """
    return compile_onnx_outputs(model, out, name=name, static=static, dims=dims).path
