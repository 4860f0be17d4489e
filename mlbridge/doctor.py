"""``mlbridge doctor``: check, in a few seconds, everything the plugins and commands need.

Each check looks at the real thing (runs the LLVM 22 tools, loads the built plugins into
them, loads ONNX Runtime's library, asks the TensorFlow environment its version, reads
the model registry and the corpus manifest) and gives one :class:`Check`: ok or not,
what it found, and the command that fixes it (``make setup``, ``mlbridge build``,
``mlbridge models install-builtin``, ``mlbridge corpus build``). See docs/doctor.md.

The ``doctor`` entry of :data:`mlbridge.cli.COMMANDS` calls :func:`add_arguments` and
:func:`run`; :func:`run_checks` is the same without printing.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from mlbridge.errors import MLBridgeError
from mlbridge.paths import BUILD_DIR_ENV, PLUGIN_FILES, default_build_dir, find_source_dir

if TYPE_CHECKING:
    from mlbridge.models.registry import RegisteredModel, Registry

__all__ = ["Check", "add_arguments", "run", "run_checks"]

_TIMEOUT_S = 30.0

#: The LLVM 22 tools the plugins and commands run (``ld.lld``: bench/thinlto_link.py).
LLVM_TOOLS = ("opt", "llc", "mlir-opt", "clang", "llvm-size", "llvm-ir2vec", "ld.lld")
#: The packages that have them (what the fix installs).
_LLVM_PACKAGES = "llvm-22-tools mlir-22-tools clang-22 lld-22"
#: How a tool's ``--version`` names LLVM 22: "LLVM version 22.1.8", "Debian LLD 22.1.8 (...)".
_LLVM_22_VERSION = re.compile(r"\b(?:version|LLD) (22\.[0-9][^\s]*)")

#: The runtime components the plugins link, and the runner modules they load on first
#: use, beside the plugins, with the CMake option that builds each.
_RUNNER_MODULES = (
    ("libMLBridgeCore.so", "MLBRIDGE_BUILD_PLUGINS"),
    ("libMLBridgePipe.so", "MLBRIDGE_BUILD_PLUGINS"),
    ("MLBridgeRunnerGrpc.so", "MLBRIDGE_ENABLE_GRPC"),
    ("MLBridgeRunnerOnnx.so", "MLBRIDGE_ENABLE_ONNX"),
)

#: The CMake option that builds each plugin (the opt and llc plugins come with the others).
_PLUGIN_OPTIONS = {"llvm": "MLBRIDGE_BUILD_PLUGINS", "llc": "MLBRIDGE_BUILD_PLUGINS"}

#: Optional Python extras: the module each needs, by extra.
_EXTRAS = (
    ("onnx", "onnx"),
    ("onnx", "onnxruntime"),
    ("grpc", "grpc"),
    ("gym", "gymnasium"),
    ("corpus", "llvmlite"),
    ("torch", "torch"),
    ("train", "tensorboardX"),
    ("train", "matplotlib"),
    # `--algorithm rllib-ppo` of `mlbridge train phase-order|regalloc`.
    ("rllib", "ray.rllib"),
)


@dataclass(frozen=True)
class Check:
    """The result of one check.

    Attributes:
        name: What was checked (``"LLVM 22 tools"``, ``"pass plugins"``, ...).
        ok: Whether it is in order.
        detail: What was found (or what is missing).
        fix: The command that fixes it, when not ``ok``.
        required: Whether the exit status depends on it (optional Python extras do not).
    """

    name: str
    ok: bool
    detail: str
    fix: str | None = None
    required: bool = True

    @property
    def status(self) -> str:
        """``ok``, ``missing`` (a required check failed) or ``warning`` (an optional one)."""
        if self.ok:
            return "ok"
        return "missing" if self.required else "warning"


def _in_checkout() -> bool:
    return find_source_dir() is not None


def _setup_fix(packages: str) -> str:
    """``make setup`` in a checkout, else the Debian packages to install."""
    return "make setup" if _in_checkout() else f"apt-get install {packages}"


def _run(argv: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=_TIMEOUT_S)


def _first_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    text = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip()
    lines = text.splitlines()
    line = next((x for x in lines if "error" in x.lower()), lines[0] if lines else "")
    return line.strip() or f"exit status {proc.returncode}"


# -- the checks ----------------------------------------------------------------------------


def check_llvm_tools() -> Check:
    """LLVM 22's tools are found (:func:`mlbridge.llvm.find_llvm_tool`) and are version 22."""
    from mlbridge.llvm import LLVM_TOOLS_DIR_ENV, LLVMToolError, find_llvm_tool

    name = "LLVM 22 tools"
    env = os.environ.get(LLVM_TOOLS_DIR_ENV)
    fix = (
        f"point ${LLVM_TOOLS_DIR_ENV} at LLVM 22's bin folder (or unset it), then "
        + _setup_fix(_LLVM_PACKAGES)
        if env
        else _setup_fix(_LLVM_PACKAGES)
    )
    missing, wrong, folders = [], [], set()
    version = ""
    for tool in LLVM_TOOLS:
        try:
            path = find_llvm_tool(tool)
        except LLVMToolError:
            missing.append(tool)
            continue
        folders.add(str(Path(path).parent))
        try:
            out = _run([path, "--version"]).stdout.decode("utf-8", "replace")
        except (OSError, subprocess.SubprocessError) as e:
            wrong.append(f"{tool} ({e})")
            continue
        found = _LLVM_22_VERSION.search(out)
        if found is None:
            first = out.strip().splitlines()[0] if out.strip() else "no version"
            wrong.append(f"{path} is not LLVM 22 ({first})")
        elif not version:
            version = found.group(1)
    where = f"{env} (${LLVM_TOOLS_DIR_ENV})" if env else ", ".join(sorted(folders))
    if missing or wrong:
        problems = []
        if missing:
            problems.append(f"not found: {', '.join(missing)} (looked in {where or 'PATH'})")
        problems += wrong
        return Check(name, False, "; ".join(problems), fix)
    return Check(name, True, f"{', '.join(LLVM_TOOLS)}: LLVM {version} ({where})")


def _cmake_cache(build: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    try:
        text = (build / "CMakeCache.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return values
    for line in text.splitlines():
        if line.startswith(("#", "//")) or "=" not in line or ":" not in line.split("=")[0]:
            continue
        key, value = line.split("=", 1)
        values[key.split(":", 1)[0]] = value
    return values


def _enabled(cache: dict[str, str], option: str) -> bool:
    return cache.get(option, "ON").upper() not in ("OFF", "0", "FALSE", "NO", "N")


def _build_fix(build: Path | None) -> str:
    if build is None:
        return "mlbridge build --build-dir DIR (or set $MLBRIDGE_BUILD_DIR to a build folder)"
    default = default_build_dir()
    if os.environ.get(BUILD_DIR_ENV) or default is None or build != default:
        return f"mlbridge build --build-dir {build}"
    return "mlbridge build"


def _plugin_loads(kind: str, plugin: Path) -> str | None:
    """Load ``plugin`` into its tool on an empty module; ``None`` when that works."""
    from mlbridge.llvm import LLVMToolError, find_llvm_tool

    tool = {"llvm": "opt", "llc": "llc", "mlir": "mlir-opt"}[kind]
    try:
        path = find_llvm_tool(tool)
    except LLVMToolError:
        return f"{tool} not found to load it"
    argv = {
        "llvm": [path, f"-load-pass-plugin={plugin}", "-passes=verify", "-disable-output"],
        "llc": [path, f"-load-pass-plugin={plugin}", "-filetype=null", "-o", os.devnull],
        "mlir": [path, f"--load-pass-plugin={plugin}", "-o", os.devnull],
    }[kind]
    try:
        proc = _run(argv)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{tool} failed to run: {e}"
    return None if proc.returncode == 0 else f"{tool} cannot load it: {_first_error_line(proc)}"


def check_plugins(build: Path | None) -> Check:
    """The pass plugins are built and load into opt-22, llc-22 and mlir-opt-22."""
    name = "pass plugins"
    if build is None:
        return Check(name, False, "no build folder (not a source checkout)", _build_fix(build))
    cache = _cmake_cache(build)
    if not cache:
        return Check(name, False, f"{build} is not a configured build folder", _build_fix(build))
    problems, loaded = [], []
    for kind, file in PLUGIN_FILES.items():
        if not _enabled(cache, _PLUGIN_OPTIONS.get(kind, "MLBRIDGE_ENABLE_MLIR")):
            continue
        plugin = build / "lib" / file
        if not plugin.is_file():
            problems.append(f"{file} is not built")
            continue
        failure = _plugin_loads(kind, plugin)
        if failure:
            problems.append(f"{file}: {failure}")
        else:
            loaded.append(file)
    if not _enabled(cache, "MLBRIDGE_BUILD_PLUGINS"):
        problems.append("the build has MLBRIDGE_BUILD_PLUGINS=OFF")
    if problems:
        return Check(name, False, f"{'; '.join(problems)} (in {build / 'lib'})", _build_fix(build))
    return Check(name, True, f"{', '.join(loaded)} load in their tools ({build / 'lib'})")


def _unresolved_libraries(path: Path) -> list[str]:
    """Shared libraries ``path`` needs that the dynamic loader cannot find (``ldd``)."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    try:
        out = _run([ldd, str(path)]).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.split()[0] for line in out.splitlines() if "not found" in line]


def check_runner_modules(build: Path | None) -> Check:
    """The plugin runtime and the gRPC and ONNX runner modules are built and resolvable."""
    name = "runner modules"
    if build is None or not _cmake_cache(build):
        where = build or "no build folder"
        return Check(name, False, f"{where}: not a configured build folder", _build_fix(build))
    cache = _cmake_cache(build)
    problems, found = [], []
    for file, option in _RUNNER_MODULES:
        if not _enabled(cache, option) or not _enabled(cache, "MLBRIDGE_BUILD_PLUGINS"):
            continue
        path = build / "lib" / file
        if not path.is_file():
            problems.append(f"{file} is not built")
            continue
        unresolved = _unresolved_libraries(path)
        if unresolved:
            problems.append(f"{file} needs {', '.join(unresolved)}, which is not found")
        else:
            found.append(file)
    if problems:
        return Check(name, False, f"{'; '.join(problems)} (in {build / 'lib'})", _build_fix(build))
    return Check(name, True, f"{', '.join(found)} ({build / 'lib'})")


class _OrtApiBase(ctypes.Structure):
    _fields_ = [
        ("GetApi", ctypes.c_void_p),
        ("GetVersionString", ctypes.CFUNCTYPE(ctypes.c_char_p)),
    ]


def _onnxruntime_library(build: Path | None) -> Path | None:
    if build is not None:
        configured = _cmake_cache(build).get("MLBRIDGE_ONNXRUNTIME_LIBRARY")
        if configured:
            return Path(configured)
    source = find_source_dir()
    if source is None:
        return None
    return source / ".deps" / "onnxruntime" / "lib" / "libonnxruntime.so"


def check_onnxruntime(build: Path | None) -> Check:
    """ONNX Runtime's library, the one the build links, loads and reports its version."""
    name = "ONNX Runtime"
    fix = _setup_fix("libonnxruntime1.21") if _in_checkout() else "pip install onnxruntime"
    if build is not None and not _enabled(_cmake_cache(build), "MLBRIDGE_ENABLE_ONNX"):
        return Check(name, True, f"not used: {build} has MLBRIDGE_ENABLE_ONNX=OFF")
    library = _onnxruntime_library(build)
    if library is None:
        return Check(name, False, "no ONNX Runtime library known (not a checkout)", fix)
    if not library.exists():
        return Check(name, False, f"{library} does not exist", fix)
    try:
        lib = ctypes.CDLL(str(library), mode=getattr(os, "RTLD_LOCAL", 0))
        lib.OrtGetApiBase.restype = ctypes.POINTER(_OrtApiBase)
        version = lib.OrtGetApiBase().contents.GetVersionString().decode()
    except (OSError, AttributeError, ValueError) as e:
        return Check(name, False, f"{library} does not load: {e}", fix)
    return Check(name, True, f"{version} ({library.resolve()})")


def check_tensorflow() -> Check:
    """The TensorFlow environment of ``mlbridge aot`` exists and has its TensorFlow."""
    from mlbridge.aot.tfenv import (
        TF_VERSION,
        TFEnvironmentError,
        default_tf_env_dir,
        find_tf_python,
        tf_subprocess_env,
    )

    name = "TensorFlow environment"
    fix = "make setup" if _in_checkout() else f"python -m mlbridge.aot.tfenv {default_tf_env_dir()}"
    try:
        python = find_tf_python(create=False)
    except TFEnvironmentError as e:
        return Check(name, False, str(e).split(";")[0], fix)
    code = "import importlib.metadata as m; print(m.version('tensorflow-cpu'))"
    try:
        proc = subprocess.run(
            [str(python), "-c", code],
            capture_output=True,
            timeout=_TIMEOUT_S,
            env=tf_subprocess_env(),
        )
    except (OSError, subprocess.SubprocessError) as e:
        return Check(name, False, f"{python} does not run: {e}", fix)
    version = proc.stdout.decode().strip()
    if proc.returncode != 0 or version != TF_VERSION:
        found = version or _first_error_line(proc)
        return Check(name, False, f"{python}: TensorFlow {TF_VERSION} expected, {found}", fix)
    cli = python.parent / "saved_model_cli"
    if not cli.is_file():
        return Check(name, False, f"{cli} is missing", fix)
    return Check(name, True, f"TensorFlow {version} ({python.parent.parent})")


def _registry_models() -> tuple[Registry, list[RegisteredModel], str | None]:
    from mlbridge.models.registry import Registry, RegistryError

    registry = Registry()
    try:
        return registry, list(registry.list()), None
    except RegistryError as e:
        return registry, [], str(e)


def check_builtin_models() -> Check:
    """The built-in models are registered, each with the task it answers."""
    from mlbridge.problems import builtin_models

    name = "built-in models"
    fix = "mlbridge models install-builtin"
    registry, models, error = _registry_models()
    if error:
        return Check(name, False, f"registry {registry.root}: {error}", fix)
    by_name = {m.name: m for m in models}
    problems, found = [], []
    for builtin in builtin_models():
        model = by_name.get(builtin.name)
        if model is None:
            problems.append(f"{builtin.name} is not registered")
            continue
        task = model.task
        if task != builtin.task:
            problems.append(f"{builtin.name} is registered for task {task}, not {builtin.task}")
        else:
            found.append(f"{builtin.name} ({task})")
        for suffix in ("-native", "-aot"):
            form = by_name.get(f"{builtin.name}{suffix}")
            if form is not None:
                found.append(f"{form.name} ({form.task})")
    if problems:
        return Check(name, False, f"{'; '.join(problems)} (registry {registry.root})", fix)
    return Check(name, True, f"{', '.join(found)} (registry {registry.root})")


def check_registered_models() -> Check:
    """Every registered model's file is there, unchanged, and its task is known."""
    from mlbridge.models.registry import RegistryError

    name = "model registry"
    registry, models, error = _registry_models()
    if error:
        fix = "mlbridge models remove NAME, or register it again with --force"
        return Check(name, False, f"{registry.root}: {error}", fix)
    broken, described = [], []
    for model in models:
        try:
            registry.verify(model.name)
        except RegistryError as e:
            broken.append(str(e))
            continue
        if model.kind == "ir2vec-vocab":
            described.append(f"{model.name} (IR2Vec vocabulary)")
        else:
            described.append(f"{model.name} ({model.kind}, task {model.task or 'unknown'})")
    if broken:
        fix = "mlbridge models register NAME FILE --force (or mlbridge models remove NAME)"
        return Check(name, False, "; ".join(broken), fix)
    if not models:
        return Check(name, True, f"{registry.root}: no models registered")
    return Check(name, True, f"{len(models)} models: {', '.join(described)} ({registry.root})")


def check_corpus() -> Check:
    """The corpus is built: its manifest reads and every compiled module's bitcode is there."""
    from mlbridge.corpus.errors import CorpusError
    from mlbridge.corpus.fetch import default_corpus_dir
    from mlbridge.corpus.manifest import load_manifest

    name = "corpus"
    root = default_corpus_dir()
    fix = "mlbridge corpus build"
    try:
        manifest = load_manifest(root)
    except CorpusError as e:
        return Check(name, False, str(e).split(":")[0] + f" ({root})", fix)
    ok = list(manifest.ok_modules())
    absent = [m.id for m in ok if not m.bitcode_path.is_file()]
    if absent:
        more = f" and {len(absent) - 3} more" if len(absent) > 3 else ""
        detail = f"{len(absent)} modules' bitcode is missing: {', '.join(absent[:3])}{more}"
        return Check(name, False, f"{detail} ({root})", fix)
    if not ok:
        return Check(name, False, f"no module compiled ({root})", fix)
    split = manifest.split
    return Check(
        name,
        True,
        f"{len(ok)} of {len(manifest.modules)} modules compiled, "
        f"{len(manifest.projects)} projects (held out: {', '.join(split['heldout'])}) "
        f"({root})",
    )


def _installed(module: str) -> bool:
    """Whether ``module`` can be found (a submodule's parent is imported to look)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # the parent package is missing
        return False


def check_python_extras() -> Check:
    """The optional Python extras (onnx, grpc, gym, corpus, torch, train, rllib) are importable."""
    missing: dict[str, list[str]] = {}
    for extra, module in _EXTRAS:
        if not _installed(module):
            missing.setdefault(extra, []).append(module)
    name = "Python extras"
    if missing:
        extras = ",".join(missing)
        fix = "make setup" if _in_checkout() else f"pip install 'mlbridge[{extras}]'"
        modules = ", ".join(m for ms in missing.values() for m in ms)
        return Check(name, False, f"not installed: {modules}", fix, required=False)
    names = sorted({extra for extra, _ in _EXTRAS})
    return Check(name, True, f"{', '.join(names)} ({Path(sys.prefix)})", required=False)


def check_ray() -> Check:
    """Ray imports (``mlbridge train`` runs its compilations on Ray by default)."""
    name = "Ray"
    fix = "make setup" if _in_checkout() else "pip install 'mlbridge[ray]'"
    try:
        import ray
    except Exception as e:  # noqa: BLE001 - any import failure is the finding
        return Check(
            name,
            False,
            f"cannot import ray ({type(e).__name__}: {e}); `mlbridge train` needs it, or --no-ray",
            fix,
            required=False,
        )
    return Check(
        name,
        True,
        f"Ray {ray.__version__}: `mlbridge train inliner` runs on a local Ray instance, "
        "or on a cluster with --ray-address",
        required=False,
    )


def run_checks(build_dir: Path | None = None) -> list[Check]:
    """Run every check; ``build_dir`` defaults to :func:`mlbridge.paths.default_build_dir`."""
    build = Path(build_dir).resolve() if build_dir is not None else default_build_dir()
    checks: list[Callable[[], Check]] = [
        check_llvm_tools,
        lambda: check_plugins(build),
        lambda: check_runner_modules(build),
        lambda: check_onnxruntime(build),
        check_tensorflow,
        check_builtin_models,
        check_registered_models,
        check_corpus,
        check_python_extras,
        check_ray,
    ]
    results = []
    for check in checks:
        try:
            results.append(check())
        except (MLBridgeError, OSError, subprocess.SubprocessError) as e:
            name = getattr(check, "__name__", "check").removeprefix("check_").replace("_", " ")
            results.append(Check(name, False, f"the check failed: {e}", "mlbridge doctor --json"))
    return results


# -- the command ---------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``mlbridge doctor``."""
    p.add_argument(
        "--build-dir",
        type=Path,
        metavar="DIR",
        help="the build folder to check (default: $MLBRIDGE_BUILD_DIR or <checkout>/build)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the checks as JSON: {ok, seconds, checks: [{name, status, ok, "
        "required, detail, fix}]}",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``mlbridge doctor``: 0 when every required check passes, else 1."""
    start = time.monotonic()
    results = run_checks(args.build_dir)
    ok = all(c.ok or not c.required for c in results)
    if args.json:
        data = {
            "ok": ok,
            "seconds": round(time.monotonic() - start, 3),
            "checks": [{**asdict(c), "status": c.status} for c in results],
        }
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0 if ok else 1
    width = max(len(c.name) for c in results)
    for c in results:
        line = f"{c.status:<8} {c.name:<{width}}  {c.detail}"
        if not c.ok and c.fix:
            line += f"\n{'':<8} {'':<{width}}  fix: {c.fix}"
        print(line)
    failed = [c for c in results if not c.ok and c.required]
    warned = [c for c in results if not c.ok and not c.required]
    seconds = time.monotonic() - start
    if failed:
        print(
            f"mlbridge doctor: {len(failed)} of {len(results)} checks failed "
            f"({', '.join(c.name for c in failed)}): run the fixes above ({seconds:.1f} s)"
        )
        return 1
    note = f", {len(warned)} optional missing" if warned else ""
    required = len(results) - len(warned)
    print(f"mlbridge doctor: all {required} required checks ok{note} ({seconds:.1f} s)")
    return 0
