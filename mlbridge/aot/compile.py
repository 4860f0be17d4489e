"""``mlbridge aot``: compile a TensorFlow SavedModel ahead of time for the compiler.

The pipeline (docs/tfaot.md):

1. describe the signature in the TensorFlow environment (:mod:`mlbridge.aot.tfenv`);
2. ``saved_model_cli aot_compile_cpu`` writes ``<name>.h`` and objects (``<name>.o``,
   ``<name>_metadata.o``, and for larger weights ``<name>_constants.o``...);
3. the XLA runtime subset the objects need is built once per TensorFlow version and
   compiler (:mod:`mlbridge.aot.runtime`);
4. a generated wrapper gives the model mlbridge's C ABI (:mod:`mlbridge.aot.abi`); it
   is linked into ``<name>.so`` (loaded by path at run time) and archived with the
   model and runtime objects into ``lib<name>_aot.a`` (linked into a plugin), with
   ``<name>_mlbridge.h`` and ``<name>.cmake`` to use the latter;
5. ``<name>.specs.json`` describes the model for the model registry.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from mlbridge.aot import abi
from mlbridge.aot.runtime import COMPILE_FLAGS, Toolchain, build_runtime, run_tool
from mlbridge.aot.tfenv import cache_dir, find_tf_python, tf_subprocess_env
from mlbridge.errors import MLBridgeError
from mlbridge.tensor_spec import ElementType, TensorSpec

__all__ = ["AOTError", "AOTOutputs", "compile_saved_model", "inspect_saved_model"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INSPECT_SCRIPT = Path(__file__).with_name("_tf_inspect.py")
_TF_TIMEOUT_S = 900.0

# TensorFlow dtype names mlbridge can carry.
_DTYPES = {
    "int8": ElementType.INT8, "uint8": ElementType.UINT8, "int16": ElementType.INT16,
    "uint16": ElementType.UINT16, "int32": ElementType.INT32, "uint32": ElementType.UINT32,
    "int64": ElementType.INT64, "uint64": ElementType.UINT64, "float32": ElementType.FLOAT,
    "float64": ElementType.DOUBLE, "bool": ElementType.BOOL,
}  # fmt: skip


class AOTError(MLBridgeError):
    """The SavedModel cannot be compiled: missing, wrong signature, or a failed step."""


@dataclass(frozen=True)
class AOTOutputs:
    """What :func:`compile_saved_model` wrote (all in one folder)."""

    header: Path
    objects: tuple[Path, ...]
    shared_object: Path | None
    archive: Path | None
    linked_header: Path
    cmake_file: Path | None
    specs_file: Path
    features: tuple[TensorSpec, ...]
    advice: tuple[TensorSpec, ...]


@dataclass(frozen=True)
class _Signature:
    tf_version: str
    tf_dir: Path
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]


def _status(message: str, log: bool) -> None:
    if log:
        print(f"mlbridge aot: {message}", file=sys.stderr, flush=True)


def _tf_env() -> dict[str, str]:
    # The TF environment must not see the main environment's packages.
    return tf_subprocess_env()


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _to_specs(entries: list[dict[str, object]], role: str, where: str) -> tuple[TensorSpec, ...]:
    specs = []
    problems = []
    for e in entries:
        name, dtype, shape = str(e["name"]), str(e["dtype"]), e["shape"]
        if dtype not in _DTYPES:
            problems.append(f"{role} '{name}' is {dtype}, which mlbridge does not carry")
            continue
        if not isinstance(shape, list) or any(int(d) < 0 for d in shape):
            problems.append(
                f"{role} '{name}' has the shape {shape}: AOT compilation needs static "
                "shapes (save the model with a fully specified input_signature)"
            )
            continue
        specs.append(TensorSpec(name, _DTYPES[dtype], tuple(int(d) for d in shape)))
    if problems:
        raise AOTError(f"{where}: " + "; ".join(problems))
    return tuple(specs)


def inspect_saved_model(
    saved_model: Path, tf_python: Path, tag: str = "serve",
    signature: str = "serving_default",
) -> _Signature:  # fmt: skip
    """Describe a SavedModel signature with the TensorFlow environment's interpreter.

    Raises:
        AOTError: If the SavedModel, tag or signature is wrong (listing what there is),
            or an input or output has a dynamic shape or an unsupported type.
    """
    argv = [str(tf_python), str(_INSPECT_SCRIPT), str(saved_model), tag, signature]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", env=_tf_env(),
            stdin=subprocess.DEVNULL, timeout=_TF_TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AOTError(f"describing {saved_model} took over {_TF_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0:
        raise AOTError(_tail(proc.stderr, 10) or f"{argv} failed ({proc.returncode})")
    try:
        desc = orjson.loads(proc.stdout.strip().splitlines()[-1])
    except (orjson.JSONDecodeError, IndexError):
        raise AOTError(f"unexpected output from {_INSPECT_SCRIPT.name}: {proc.stdout!r}") from None
    where = f"{saved_model} signature '{signature}'"
    return _Signature(
        str(desc["tf_version"]), Path(desc["tf_dir"]),
        _to_specs(desc["inputs"], "input", where), _to_specs(desc["outputs"], "output", where),
    )  # fmt: skip


def _saved_model_cli(
    tf_python: Path, saved_model: Path, prefix: Path, xla_class: str, tag: str,
    signature: str, target_triple: str | None,
) -> None:  # fmt: skip
    argv = [
        str(tf_python), "-m", "tensorflow.python.tools.saved_model_cli", "aot_compile_cpu",
        "--dir", str(saved_model), "--tag_set", tag, "--signature_def_key", signature,
        "--output_prefix", str(prefix), "--cpp_class", xla_class,
    ]  # fmt: skip
    if target_triple:
        argv += ["--target_triple", target_triple]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", env=_tf_env(),
            stdin=subprocess.DEVNULL, timeout=_TF_TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AOTError(f"saved_model_cli took over {_TF_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0 or not prefix.with_suffix(".h").is_file():
        raise AOTError(
            f"saved_model_cli aot_compile_cpu failed (exit status {proc.returncode}) on "
            f"{saved_model}:\n{_tail(proc.stderr)}"
        )


def _is_host_triple(triple: str | None) -> bool:
    if not triple:
        return True
    arch = triple.split("-", 1)[0]
    return arch == platform.machine() or {arch, platform.machine()} <= {"x86_64", "amd64"}


def _cmake_file(name: str) -> str:
    target = f"mlbridge_aot_{name}"
    return f"""\
# Generated by `mlbridge aot` for the model '{name}'. DO NOT EDIT.
# include() this file, then link the target into a plugin or program that also
# links mlbridge's runtime, and include "{name}_mlbridge.h":
#   target_link_libraries(my_plugin PRIVATE {target})
if(NOT TARGET {target})
  add_library({target} STATIC IMPORTED)
  set_target_properties({target} PROPERTIES
    IMPORTED_LOCATION "${{CMAKE_CURRENT_LIST_DIR}}/lib{name}_aot.a"
    INTERFACE_INCLUDE_DIRECTORIES "${{CMAKE_CURRENT_LIST_DIR}}")
endif()
"""


def compile_saved_model(
    saved_model: str | Path,
    name: str,
    output_dir: str | Path,
    *,
    signature: str = "serving_default",
    tag: str = "serve",
    target_triple: str | None = None,
    tf_python: str | Path | None = None,
    create_tf_env: bool = True,
    cxx: str | None = None,
    log: bool = True,
    verbose: bool = False,
) -> AOTOutputs:
    """Compile a SavedModel signature into a shared object and a linkable library.

    Args:
        saved_model: The SavedModel folder.
        name: The model name: a C identifier; names every output file.
        output_dir: Where to write them (created).
        signature: The signature to compile.
        tag: The tag set of the meta graph (comma-separated).
        target_triple: LLVM target triple for the model code (default: the host).
        tf_python: The TensorFlow environment's interpreter (default: found or created,
            see :func:`mlbridge.aot.tfenv.find_tf_python`).
        create_tf_env: Whether a missing TensorFlow environment may be created.
        cxx: The C++ compiler (default ``$CXX`` or ``c++``).
        log: Whether to report progress on stderr (one line per step).
        verbose: With ``log``, also list every input and output spec (one line each);
            otherwise one line counts them.

    Returns:
        The files written.

    Raises:
        AOTError: On a bad name, a missing SavedModel, a wrong tag or signature, or a
            failed step (with the failing tool's output tail).
        mlbridge.aot.tfenv.TFEnvironmentError: If no TensorFlow environment can be had.
    """
    start = time.monotonic()
    if not _NAME.match(name):
        raise AOTError(
            f"model name {name!r} must be a C identifier (letters, digits, _; not "
            "starting with a digit): it names the generated class and functions"
        )
    saved_model = Path(saved_model).resolve()
    if not (saved_model / "saved_model.pb").is_file():
        raise AOTError(
            f"no SavedModel at {saved_model} (expected {saved_model / 'saved_model.pb'}); "
            "pass the folder tf.saved_model.save() wrote"
        )
    output_dir = Path(output_dir).resolve()
    toolchain = Toolchain.find(cxx)
    python = find_tf_python(tf_python, create=create_tf_env)

    _status(f"step 1/4: reading signature '{signature}' of {saved_model}", log)
    sig = inspect_saved_model(saved_model, python, tag, signature)
    if not sig.inputs or not sig.outputs:
        raise AOTError(f"{saved_model} signature '{signature}' has no inputs or no outputs")
    if verbose:
        for spec in sig.inputs:
            _status(f"  feature {spec.to_json().decode()}", log)
        for spec in sig.outputs:
            _status(f"  advice  {spec.to_json().decode()}", log)
    else:
        advice = ", ".join(s.name for s in sig.outputs)
        _status(f"  {len(sig.inputs)} features, advice: {advice}", log)

    output_dir.mkdir(parents=True, exist_ok=True)
    staging = output_dir / f".{name}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        _status(f"step 2/4: saved_model_cli aot_compile_cpu (TensorFlow {sig.tf_version})", log)
        xla_class = f"mlbridge_aot::{name}"
        _saved_model_cli(
            python, saved_model, staging / name, xla_class, tag, signature, target_triple
        )
        objects = sorted(p for p in staging.glob(f"{name}*.o"))
        (staging / f"{name}_makefile.inc").unlink(missing_ok=True)
        (staging / f"{name}_mlbridge.cc").write_text(
            abi.render_wrapper(name, f"{name}.h", xla_class, sig.inputs, sig.outputs),
            encoding="utf-8",
        )
        (staging / f"{name}_mlbridge.h").write_text(
            abi.render_linked_header(name), encoding="utf-8"
        )
        (staging / f"{name}.cmake").write_text(_cmake_file(name), encoding="utf-8")
        specs = {
            "name": name,
            "kind": "tfaot",
            "features": [s.to_dict() for s in sig.inputs],
            "advice": [s.to_dict() for s in sig.outputs],
        }
        (staging / f"{name}.specs.json").write_bytes(
            orjson.dumps(specs, option=orjson.OPT_INDENT_2) + b"\n"
        )
        host_build = _is_host_triple(target_triple)
        if not host_build:
            _status(
                f"--target-triple {target_triple} is not this machine "
                f"({platform.machine()}): writing the header, objects and wrapper source "
                "only; build the shared object and library with that target's compiler",
                log,
            )
            (staging / f"{name}.cmake").unlink()
            for item in staging.iterdir():
                item.replace(output_dir / item.name)
            return AOTOutputs(
                header=output_dir / f"{name}.h",
                objects=tuple(output_dir / o.name for o in objects),
                shared_object=None,
                archive=None,
                linked_header=output_dir / f"{name}_mlbridge.h",
                cmake_file=None,
                specs_file=output_dir / f"{name}.specs.json",
                features=sig.inputs,
                advice=sig.outputs,
            )
        _status("step 3/4: XLA AOT runtime (built once per TensorFlow and compiler)", log)
        runtime_objects = build_runtime(
            sig.tf_dir, sig.tf_version, objects, toolchain, cache_dir(), log=log
        )
        _status(f"step 4/4: linking {name}.so and lib{name}_aot.a", log)
        include = [f"-I{staging}", f"-I{sig.tf_dir / 'include'}"]
        wrapper = str(staging / f"{name}_mlbridge.cc")
        so_wrapper = staging / f"{name}_mlbridge_so.o"
        linked_wrapper = staging / f"{name}_mlbridge.o"
        run_tool(
            [toolchain.cxx, *COMPILE_FLAGS, *include, "-DMLBRIDGE_AOT_PREFIX=mlbridge_aot",
             "-DMLBRIDGE_AOT_EXPORT", "-c", wrapper, "-o", str(so_wrapper)],
            "compiling the mlbridge wrapper",
        )  # fmt: skip
        run_tool(
            [toolchain.cxx, *COMPILE_FLAGS, *include,
             f"-DMLBRIDGE_AOT_PREFIX=mlbridge_aot_{name}", "-c", wrapper,
             "-o", str(linked_wrapper)],
            "compiling the mlbridge wrapper",
        )  # fmt: skip
        version_script = staging / f"{name}.map"
        version_script.write_text(
            f"MLBRIDGE_AOT_{abi.ABI_VERSION} {{\n  global: mlbridge_aot_*;\n  local: *;\n}};\n",
            encoding="utf-8",
        )
        run_tool(
            [toolchain.cxx, "-shared", "-o", str(staging / f"{name}.so"), str(so_wrapper),
             *map(str, objects), *map(str, runtime_objects),
             f"-Wl,--version-script={version_script}", "-Wl,--no-undefined",
             f"-Wl,-soname,{name}.so", "-lm"],
            f"linking {name}.so",
        )  # fmt: skip
        so_wrapper.unlink()
        version_script.unlink()
        archive = staging / f"lib{name}_aot.a"
        run_tool(
            [toolchain.ar, "rcs", str(archive), str(linked_wrapper),
             *map(str, objects), *map(str, runtime_objects)],
            f"archiving lib{name}_aot.a",
        )  # fmt: skip
        for item in staging.iterdir():
            item.replace(output_dir / item.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    outputs = AOTOutputs(
        header=output_dir / f"{name}.h",
        objects=tuple(output_dir / o.name for o in objects),
        shared_object=output_dir / f"{name}.so",
        archive=output_dir / f"lib{name}_aot.a",
        linked_header=output_dir / f"{name}_mlbridge.h",
        cmake_file=output_dir / f"{name}.cmake",
        specs_file=output_dir / f"{name}.specs.json",
        features=sig.inputs,
        advice=sig.outputs,
    )
    _status(f"wrote {outputs.shared_object} in {time.monotonic() - start:.1f} s", log)
    return outputs
