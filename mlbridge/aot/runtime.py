"""The XLA AOT runtime: the few C++ sources a compiled model calls into, built once.

Every TensorFlow wheel ships the runtime's sources in ``tensorflow/xla_aot_runtime_src``.
A model needs only a handful of them: the :data:`CORE_SOURCES` (the
``XlaCompiledCpuFunction`` base class and buffer allocation) plus the file of each
``__xla_cpu_runtime_*`` routine its objects call (matrix products, sorting, ...). Each
source is compiled once into a cache folder keyed by the TensorFlow version and the
compiler (path, ``--version`` and flags), so a second model costs nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mlbridge.errors import MLBridgeError

__all__ = [
    "CORE_SOURCES",
    "COMPILE_FLAGS",
    "AOTBuildError",
    "Toolchain",
    "build_runtime",
    "undefined_symbols",
]

#: Runtime sources every model needs, relative to ``xla_aot_runtime_src``.
CORE_SOURCES = (
    "tensorflow/compiler/tf2xla/xla_compiled_cpu_function.cc",
    "xla/cpu_function_runtime.cc",
    "xla/executable_run_options.cc",
    "xla/service/custom_call_status.cc",
    "xla/service/cpu/runtime_custom_call_status.cc",
)

#: Flags for the runtime and the mlbridge wrapper: position independent (the same
#: objects go into the shared object and into plugins), hidden symbols.
COMPILE_FLAGS = (
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-fvisibility=hidden",
    "-fvisibility-inlines-hidden",
    "-DNDEBUG",
    "-w",
)

_RUNTIME_SYMBOL = re.compile(rb"\b(__xla_cpu_runtime_\w+)\s*\(")
_LOCK_TIMEOUT_S = 600.0


class AOTBuildError(MLBridgeError):
    """Compiling or linking an AOT model or its runtime failed."""


@dataclass(frozen=True)
class Toolchain:
    """The C++ compiler and archiver used for the runtime and the wrappers."""

    cxx: str
    ar: str
    nm: str

    @classmethod
    def find(cls, cxx: str | None = None) -> Toolchain:
        """Find the tools: ``cxx`` or ``$CXX`` or ``c++``, and ``ar``/``nm`` (or LLVM's).

        Raises:
            AOTBuildError: If a tool is missing (the message says what to install).
        """
        compiler = cxx or os.environ.get("CXX") or "c++"
        found = shutil.which(compiler)
        if found is None:
            raise AOTBuildError(
                f"C++ compiler {compiler!r} not found: install g++ or clang, or set $CXX"
            )
        tools = []
        for names in (("ar", "llvm-ar-22", "llvm-ar"), ("nm", "llvm-nm-22", "llvm-nm")):
            path = next((shutil.which(n) for n in names if shutil.which(n)), None)
            if path is None:
                raise AOTBuildError(f"{names[0]} not found: install binutils or llvm-22")
            tools.append(path)
        return cls(found, tools[0], tools[1])

    def identity(self) -> str:
        """A string that changes whenever the compiler does (path and ``--version``)."""
        proc = subprocess.run(
            [self.cxx, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL
        )
        return f"{os.path.realpath(self.cxx)}\n{proc.stdout}"


def run_tool(argv: Sequence[str], what: str, cwd: Path | None = None) -> None:
    """Run a build tool; on failure raise :class:`AOTBuildError` with its output tail."""
    proc = subprocess.run(
        list(argv), capture_output=True, text=True, errors="replace",
        stdin=subprocess.DEVNULL, cwd=cwd,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise AOTBuildError(
            f"{what} failed (exit status {proc.returncode}): {' '.join(argv)}\n{tail}"
        )


def undefined_symbols(nm: str, objects: Iterable[Path]) -> set[str]:
    """Return the undefined symbols of ``objects`` (raw, not demangled)."""
    paths = [str(o) for o in objects]
    if not paths:
        return set()
    proc = subprocess.run(
        [nm, "-u", *paths], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise AOTBuildError(f"{nm} -u failed: {proc.stderr.strip()}")
    return {line.split()[-1] for line in proc.stdout.splitlines() if line.strip().startswith("U ")}


def _definers(src_dir: Path) -> dict[str, str]:
    """Map each ``__xla_cpu_runtime_*`` routine to the runtime source that defines it."""
    result: dict[str, str] = {}
    for path in sorted(src_dir.rglob("*.cc")):
        for match in _RUNTIME_SYMBOL.finditer(path.read_bytes()):
            result.setdefault(match.group(1).decode(), str(path.relative_to(src_dir)))
    return result


class _FileLock:
    """An exclusive ``flock`` on a file, waited for at most ``timeout`` seconds."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.fd = -1

    def __enter__(self) -> _FileLock:
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    raise AOTBuildError(
                        f"waited {self.timeout:.0f} s for the lock {self.path} held by "
                        "another mlbridge aot; remove it if no build is running"
                    ) from None
                time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def runtime_cache_key(tf_version: str, toolchain: Toolchain) -> str:
    """The cache folder name for this TensorFlow version and compiler."""
    digest = hashlib.sha256(
        "\n".join([tf_version, toolchain.identity(), *COMPILE_FLAGS]).encode()
    ).hexdigest()[:16]
    return f"tf-{tf_version}-{digest}"


def build_runtime(
    tf_dir: Path,
    tf_version: str,
    model_objects: Sequence[Path],
    toolchain: Toolchain,
    cache_root: Path,
    *,
    log: bool = True,
) -> list[Path]:
    """Compile (or reuse) the runtime sources ``model_objects`` need; return their objects.

    Args:
        tf_dir: The ``tensorflow`` package folder (has ``include/`` and
            ``xla_aot_runtime_src/``).
        tf_version: TensorFlow's version, part of the cache key.
        model_objects: The objects ``saved_model_cli`` wrote.
        toolchain: The compiler and binary tools.
        cache_root: The cache folder (``<cache>/xla-aot-runtime`` is used below it).
        log: Whether to report progress on stderr.

    Raises:
        AOTBuildError: If the TensorFlow package has no runtime sources, or compiling one
            fails (with the compiler's output tail).
    """
    src_dir = tf_dir / "xla_aot_runtime_src"
    include_dir = tf_dir / "include"
    if not src_dir.is_dir() or not include_dir.is_dir():
        raise AOTBuildError(
            f"{tf_dir} has no xla_aot_runtime_src/ or include/: this TensorFlow cannot "
            "link AOT models; use the environment `python -m mlbridge.aot.tfenv` creates"
        )
    out_dir = cache_root / "xla-aot-runtime" / runtime_cache_key(tf_version, toolchain)
    out_dir.mkdir(parents=True, exist_ok=True)
    definers = _definers(src_dir)

    def object_path(source: str) -> Path:
        return out_dir / (source.replace("/", "__")[: -len(".cc")] + ".o")

    with _FileLock(out_dir / ".lock", _LOCK_TIMEOUT_S):
        wanted: list[str] = list(CORE_SOURCES)
        done: set[str] = set()
        pending = set(undefined_symbols(toolchain.nm, model_objects))
        while True:
            for symbol in sorted(pending):
                source = definers.get(symbol)
                if source is not None and source not in wanted:
                    wanted.append(source)
            todo = [s for s in wanted if s not in done]
            if not todo:
                break
            for source in todo:
                obj = object_path(source)
                if not obj.is_file():
                    if log:
                        print(f"mlbridge aot: compiling XLA runtime {source}", file=sys.stderr)
                    tmp = obj.with_suffix(f".tmp{os.getpid()}.o")
                    run_tool(
                        [toolchain.cxx, *COMPILE_FLAGS, f"-I{include_dir}", "-c",
                         str(src_dir / source), "-o", str(tmp)],
                        f"compiling the XLA runtime source {source}",
                    )  # fmt: skip
                    tmp.replace(obj)
                done.add(source)
            pending = undefined_symbols(toolchain.nm, [object_path(s) for s in todo])
    return [object_path(s) for s in wanted]
