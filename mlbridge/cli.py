"""The ``mlbridge`` command line.

Each subcommand is a :class:`Command`: a name, a help text, a function that adds its
arguments and a function that runs it. Add a command by appending to :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

import mlbridge
from mlbridge.errors import CLIError
from mlbridge.paths import PLUGIN_FILES, default_build_dir, find_source_dir, plugin_path

__all__ = ["COMMANDS", "CLIError", "Command", "main"]

PROG = "mlbridge"
_CONFIGURE_STAMP = ".mlbridge-configure.json"


@dataclass(frozen=True)
class Command:
    """A subcommand of ``mlbridge``."""

    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _status(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def _build_dir(args: argparse.Namespace) -> Path:
    if args.build_dir is not None:
        return Path(args.build_dir).resolve()
    build = default_build_dir()
    if build is None:
        raise CLIError(
            "cannot find the build folder: this mlbridge is not running from a source "
            "checkout; pass --build-dir DIR"
        )
    return build


# -- build ----------------------------------------------------------------------------


def _add_build_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--build-dir",
        metavar="DIR",
        help="the CMake build folder (default: $MLBRIDGE_BUILD_DIR or <checkout>/build)",
    )
    p.add_argument(
        "--source-dir",
        metavar="DIR",
        help="the mlbridge source checkout (default: the checkout this package runs from)",
    )
    p.add_argument(
        "--build-type",
        default="RelWithDebInfo",
        metavar="T",
        help="CMAKE_BUILD_TYPE: Debug, Release, RelWithDebInfo (default) or MinSizeRel",
    )
    p.add_argument("-j", "--jobs", type=int, metavar="N", help="parallel build jobs (Ninja -j)")
    p.add_argument(
        "--cmake-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra argument for the CMake configure step, e.g. "
        "--cmake-arg=-DMLBRIDGE_ENABLE_MLIR=OFF (repeatable)",
    )


def _source_dir(args: argparse.Namespace) -> Path:
    if args.source_dir is not None:
        source = Path(args.source_dir).resolve()
        if not (source / "CMakeLists.txt").is_file():
            raise CLIError(f"--source-dir {source} has no CMakeLists.txt")
        return source
    source = find_source_dir()
    if source is None:
        raise CLIError(
            "cannot find the mlbridge sources (this package is not running from a source "
            "checkout); pass --source-dir DIR"
        )
    return source


def _run_step(step: str, argv: list[str]) -> None:
    _status(f"{step}: {shlex.join(argv)}")
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        raise CLIError(f"{step} failed: {argv[0]} not found") from None
    assert proc.stdout is not None
    with proc:
        for line in proc.stdout:
            sys.stderr.write(line.decode("utf-8", errors="replace"))
            sys.stderr.flush()
    if proc.returncode != 0:
        raise CLIError(f"{step} failed (exit status {proc.returncode})")


def _run_build(args: argparse.Namespace) -> int:
    source = _source_dir(args)
    if args.build_dir is None and args.source_dir is not None:
        build = source / "build"
    else:
        build = _build_dir(args)
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            raise CLIError(f"{tool} is not installed (run `make setup` or install it)")
    if args.jobs is not None and args.jobs < 1:
        raise CLIError(f"-j must be at least 1, got {args.jobs}")

    configure = [
        "cmake",
        "-S",
        str(source),
        "-B",
        str(build),
        "-G",
        "Ninja",
        f"-DCMAKE_BUILD_TYPE={args.build_type}",
        f"-DMLBRIDGE_ONNXRUNTIME_ROOT={source / '.deps' / 'onnxruntime'}",
        *args.cmake_arg,
    ]
    stamp = build / _CONFIGURE_STAMP
    stamp_data = orjson.dumps({"configure": configure})
    configured = (
        (build / "build.ninja").is_file()
        and (build / "CMakeCache.txt").is_file()
        and stamp.is_file()
        and stamp.read_bytes() == stamp_data
    )
    if configured:
        _status(f"step 1/2, configure: {build} is already configured with these arguments")
    else:
        build.mkdir(parents=True, exist_ok=True)
        stamp.unlink(missing_ok=True)
        _run_step("step 1/2, configure", configure)
        stamp.write_bytes(stamp_data)

    command = ["cmake", "--build", str(build)]
    if args.jobs is not None:
        command += ["-j", str(args.jobs)]
    _run_step("step 2/2, build", command)
    _status(f"built into {build}")
    return 0


# -- plugin-path ----------------------------------------------------------------------


def _add_plugin_path_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "kind",
        choices=tuple(PLUGIN_FILES),
        help="llvm: the opt plugin; llc: the llc plugin; mlir: the mlir-opt plugin",
    )
    p.add_argument(
        "--build-dir",
        metavar="DIR",
        help="the CMake build folder (default: $MLBRIDGE_BUILD_DIR or <checkout>/build)",
    )


def _run_plugin_path(args: argparse.Namespace) -> int:
    path = plugin_path(args.kind, _build_dir(args))
    if not path.is_file():
        raise CLIError(
            f"the {args.kind} plugin is not built ({path} does not exist); "
            "run `mlbridge build` (or `make build`) first"
        )
    print(path)
    return 0


# -- serve ----------------------------------------------------------------------------


def _add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "policy",
        metavar="POLICY",
        help="MODULE:NAME or FILE.py:NAME. NAME is a function of an observation, or a class "
        "(instantiated with no arguments) whose instances are callable. MODULE is imported as "
        "`python -m` would: the current folder first, then sys.path",
    )
    p.add_argument(
        "--address",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="where to listen (default: 127.0.0.1:0, loopback with a free port)",
    )
    p.add_argument(
        "--ready-file",
        metavar="FILE",
        help="once listening, write the bound HOST:PORT and a newline to FILE (atomically)",
    )
    p.add_argument(
        "--max-message-bytes",
        type=int,
        default=64 * 1024 * 1024,
        metavar="N",
        help="largest message received or sent (default: 64 MiB)",
    )
    p.add_argument(
        "--workers", type=int, default=4, metavar="N", help="threads answering calls (default 4)"
    )


def _run_serve(args: argparse.Namespace) -> int:
    import logging

    # A policy's exception is logged with its traceback (mlbridge.compiler.grpc) on stderr.
    logging.basicConfig(format=f"{PROG} serve: %(levelname)s: %(message)s")

    try:
        from mlbridge.compiler import grpc as mlgrpc
    except ImportError as e:
        raise CLIError(f"`serve` needs grpcio (pip install 'mlbridge[grpc]'): {e}") from None
    try:
        policy = mlgrpc.load_policy(args.policy)
    except (ValueError, ImportError) as e:
        raise CLIError(f"cannot load the policy {args.policy!r}: {e}") from None
    if args.workers < 1:
        raise CLIError(f"--workers must be at least 1, got {args.workers}")
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server = mlgrpc.serve(
                policy,
                args.address,
                max_message_bytes=args.max_message_bytes,
                max_workers=args.workers,
            )
        except (ValueError, mlgrpc.GrpcError) as e:
            raise CLIError(str(e)) from None
        try:
            if args.ready_file:
                mlgrpc.write_ready_file(args.ready_file, server.address)
            print(f"{PROG}: serving on {server.address}", flush=True)
            while not stop.wait(0.5):
                pass
        finally:
            server.stop()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    stuck = server.in_flight
    if stuck:
        # A policy call that outlived the grace keeps a worker thread, which the
        # interpreter would wait for at exit: the stop would take as long as the call.
        _status(
            f"stopped after {server.evaluated} decisions; {stuck} policy "
            f"call{'' if stuck == 1 else 's'} still running after the 1 s grace "
            f"{'was' if stuck == 1 else 'were'} abandoned"
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    _status(f"stopped after {server.evaluated} decisions")
    return 0


# -- pipe ---------------------------------------------------------------------------------


def _add_pipe_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="pipe_command", metavar="ACTION", required=True)
    clean = sub.add_parser(
        "clean",
        help="remove the FIFO folders and gym working folders of processes that are gone",
        description=(
            "Remove the private channel folders (mlbridge-pipe-<pid>-*, holding only FIFOs "
            "and announcements) and gym working folders (mlbridge-gym-<pid>-*) of this user "
            "whose process no longer exists, e.g. a model killed by SIGKILL. Prints each "
            "folder removed. (Every new channel sweeps them too.)"
        ),
    )
    clean.add_argument(
        "--dir",
        metavar="DIR",
        help="where to look (default: the temporary folder, $TMPDIR or /tmp)",
    )


def _run_pipe(args: argparse.Namespace) -> int:
    from mlbridge.compiler.fifo import GYM_PREFIX, remove_stale_channels

    removed = remove_stale_channels(args.dir)
    removed += remove_stale_channels(args.dir, prefix=GYM_PREFIX)
    for path in removed:
        print(path)
    _status(f"removed {len(removed)} stale folder{'' if len(removed) == 1 else 's'}")
    return 0


def _lazy(
    module: str,
) -> tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]:
    """``add_arguments`` and ``run`` of a command whose code lives in ``module``.

    The module (``mlbridge.<x>.cli``, with an ``add_arguments(parser)`` and a
    ``run(args)``) is imported only when the command is used, so that ``mlbridge
    --help`` and the other commands do not pay for its imports (onnx, TensorFlow
    helpers, llvmlite).
    """

    def add_arguments(p: argparse.ArgumentParser) -> None:
        importlib.import_module(module).add_arguments(p)

    def run(args: argparse.Namespace) -> int:
        return int(importlib.import_module(module).run(args))

    return add_arguments, run


def _run_models(args: argparse.Namespace) -> int:
    # The registry's command knows no problem: the built-in models come from here.
    from mlbridge.models import cli as models_cli
    from mlbridge.problems import builtin_models

    return models_cli.run(args, builtin_models=builtin_models)


def _lazy_command(name: str, module: str, help: str, description: str) -> Command:
    add_arguments, run = _lazy(module)
    return Command(name, help, description, add_arguments, run)


COMMANDS: list[Command] = [
    Command(
        name="build",
        help="configure (CMake + Ninja) and build the C++ runtime and pass plugins",
        description=(
            "Configure the C++ parts with CMake and Ninja and build them. The configure "
            "step is skipped when the build folder is already configured with the same "
            "arguments. CMake and Ninja output is streamed to stderr."
        ),
        add_arguments=_add_build_arguments,
        run=_run_build,
    ),
    Command(
        name="plugin-path",
        help="print the absolute path of a built pass plugin",
        description=(
            "Print the absolute path of the built plugin for opt (llvm), llc or mlir-opt "
            "(mlir), for use with -load-pass-plugin. Fails if it has not been built."
        ),
        add_arguments=_add_plugin_path_arguments,
        run=_run_plugin_path,
    ),
    Command(
        name="serve",
        help="serve a policy to compilers over gRPC (inference)",
        description=(
            "Serve POLICY as mlbridge's gRPC ModelService (docs/grpc.md): each compiler "
            "decision (GrpcModelRunner) calls it with the features as numpy arrays. Prints "
            "`mlbridge: serving on HOST:PORT` to stdout once listening; stops cleanly on "
            "SIGINT or SIGTERM."
        ),
        add_arguments=_add_serve_arguments,
        run=_run_serve,
    ),
    Command(
        name="pipe",
        help="housekeeping of named-pipe channels ('mlbridge pipe clean')",
        description=(
            "Named-pipe channels (docs/pipe-protocol.md). 'clean' removes the folders left "
            "by model processes that are gone."
        ),
        add_arguments=_add_pipe_arguments,
        run=_run_pipe,
    ),
    Command(
        "models",
        help="list, register, show, locate, remove and check registered models",
        description=(
            "The model registry (docs/models.md): ONNX models and TF AOT shared objects "
            "kept under a name with their tensor specs, so that a plugin option can name "
            "a model instead of a path."
        ),
        add_arguments=_lazy("mlbridge.models.cli")[0],
        run=_run_models,
    ),
    _lazy_command(
        "aot",
        "mlbridge.aot.cli",
        help="compile a TensorFlow SavedModel ahead of time (shared object + linkable library)",
        description=(
            "Compile a SavedModel signature with TensorFlow's saved_model_cli aot_compile_cpu "
            "into NAME.so (loaded by path by TFAOTModelRunner::load), libNAME_aot.a with "
            "NAME_mlbridge.h and NAME.cmake (to link it into a plugin) and NAME.specs.json, "
            "in OUTPUT_DIR. TensorFlow runs in its own environment (--tf-python, "
            "$MLBRIDGE_TF_PYTHON, <checkout>/.deps/tf-venv, or one created in "
            "$MLBRIDGE_CACHE_DIR or ~/.cache/mlbridge). See docs/tfaot.md."
        ),
    ),
    _lazy_command(
        "compile",
        "mlbridge.native.cli",
        help="compile an ONNX model to a shared object through MLIR 22 (no TF, no ONNX Runtime)",
        description=(
            "Compile MODEL.onnx with MLIR 22 and LLVM 22 into a shared object that needs only "
            "libc and libm and exports mlbridge's AOT C ABI, so the plugins load it like a "
            "TF AOT model (register it with 'mlbridge models register NAME MODEL.onnx "
            "--native'). Writes OUT and OUT's NAME.specs.json. See docs/native.md."
        ),
    ),
    _lazy_command(
        "corpus",
        "mlbridge.corpus.cli",
        help="fetch, build (cached) and describe the C corpus of LLVM 22 bitcode",
        description=(
            "The corpus (docs/corpus.md): open-source C projects pinned in "
            "corpus/recipe.json, compiled with clang-22 -O2 -Xclang -disable-llvm-passes "
            "into bitcode modules, with a manifest of per-module statistics and a "
            "train/heldout split by project."
        ),
    ),
    _lazy_command(
        "ir2vec",
        "mlbridge.ir2vec.cli",
        help="build an IR2Vec vocabulary for LLVM 22's IR2Vec (llvm-ir2vec triplets, TransE)",
        description=(
            "IR2Vec vocabularies (docs/phase-order.md): 'mlbridge ir2vec vocab' runs "
            "llvm-ir2vec in triplet mode over LLVM IR (default: the corpus), trains entity "
            "embeddings with TransE in numpy and writes the JSON LLVM's IR2Vec reads; "
            "--register keeps it in the model registry for -mlbridge-phase-order-ir2vec-vocab."
        ),
    ),
    _lazy_command(
        "train",
        "mlbridge.problems",
        help="train a pass's policy on the corpus (inliner: code size against stock -Oz)",
        description=(
            "Train the policies mlbridge's passes ship with, against the real compiler: "
            "'mlbridge train inliner' (docs/inliner.md) and 'mlbridge train phase-order' "
            "(docs/phase-order-training.md). Each problem's package (mlbridge.inliner, "
            "mlbridge.phase_order) holds its trainer; mlbridge.problems lists them."
        ),
    ),
    _lazy_command(
        "bench",
        "mlbridge.bench.cli",
        help="run every benchmark on this machine; JSON, Markdown and PNG report",
        description=(
            "The one-command benchmark report (docs/bench.md): the paper's round-trip sweep "
            "on every runner from three hosts (C API program, opt-22 pass, mlir-opt-22 pass) "
            "beside their floors, in-process runners, thread scaling, memory, and the "
            "compile-time overhead of the ML inliner (and phase ordering when available). "
            "Writes report-<time>.{json,md} and PNG plots into ./bench-results (or --out "
            "DIR). A tool of the source checkout: it runs the checkout's bench/ scripts and "
            "programs, which an installed package does not ship."
        ),
    ),
    _lazy_command(
        "doctor",
        "mlbridge.doctor",
        help="check that everything the plugins and commands need is in place, with fixes",
        description=(
            "Check, in a few seconds, what the plugins and commands need (docs/doctor.md): "
            "LLVM 22's tools, the built plugins (loaded into their tools) and runner "
            "modules, ONNX Runtime, the TensorFlow environment, the model registry and "
            "its models' tasks, the corpus. One line per check, with the command that "
            "fixes what is missing; exit status 1 when a required check fails."
        ),
    ),
]


def build_parser() -> argparse.ArgumentParser:
    """Create the argument parser with every command of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="mlbridge: a bridge between compilers (LLVM, MLIR) and ML models.",
        epilog=f"Run `{PROG} COMMAND --help` for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {mlbridge.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description)
        command.add_arguments(p)
        p.set_defaults(_run=command.run)
    return parser


#: The extra that provides each optional top-level module a command may import.
_EXTRAS = {
    "onnx": "export",
    "onnxruntime": "export",
    "torch": "torch",
    "grpc": "grpc",
    "gymnasium": "gym",
    "llvmlite": "corpus",
    "mlir": "mlir",
}


def _missing_extra(e: ModuleNotFoundError) -> str | None:
    """The one-line error for an optional dependency that is not installed, else None."""
    top = (e.name or "").partition(".")[0]
    extra = _EXTRAS.get(top)
    if extra is None:
        return None
    cpu = " (the CPU build of PyTorch is enough: docs/onnx.md)" if extra == "torch" else ""
    return (
        f"this command needs the Python package {top!r}, which is not installed: "
        f"pip install 'mlbridge[{extra}]'{cpu}"
    )


def _exit_on_sigterm(signum: int, frame: object) -> None:
    """End a command on SIGTERM as an exception would.

    ``finally`` blocks and finalizers run (FIFO folders and compilers of a training run
    are removed); a second SIGTERM kills.
    """
    signal.signal(signum, signal.SIG_DFL)
    raise SystemExit(128 + signum)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    previous = None
    if threading.current_thread() is threading.main_thread():
        # Commands that install their own (serve) replace it while they run.
        previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        return _run_command(args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run_command(args: argparse.Namespace) -> int:
    try:
        return int(args._run(args))
    except CLIError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:
        message = _missing_extra(e)
        if message is None:
            raise
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    A reader that stops early (``mlbridge models show NAME | head``) ends the command
    quietly with status 141 (as if killed by SIGPIPE), without a traceback.
    """
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
    except BrokenPipeError:
        # Python's documentation (signal module, "Note on SIGPIPE"): point stdout at
        # /dev/null so that the interpreter's last flush does not fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass  # stdout is not a file descriptor: nothing is left to flush to it
        return 141


if __name__ == "__main__":
    sys.exit(main())
