"""Command lines of the ``mlbridge-phase-order`` pass, its trace, and size measures.

The pass lives in the opt plugin (``docs/phase-order.md``); this module only builds its
command lines and reads what it prints, so that the Gymnasium environment, the trainer
and the benchmark agree on one spelling of the options.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mlbridge.errors import MLBridgeError
from mlbridge.llvm import LLVMToolError, find_llvm_tool, object_sizes
from mlbridge.paths import default_build_dir, plugin_path

__all__ = [
    "ACTION_COUNT",
    "ACTION_HISTORY",
    "ADVICE",
    "CODE_SIZE",
    "FEATURES",
    "OBSERVATION",
    "OPTION_PREFIX",
    "PASS_NAME",
    "STEP",
    "PhaseOrderError",
    "TraceStep",
    "find_plugin",
    "parse_pipeline",
    "parse_trace",
    "pass_options",
    "phase_order_command",
    "run_tool",
    "text_size",
]

#: The pass's name in ``-passes=``.
PASS_NAME = "mlbridge-phase-order"
#: The prefix of all the pass's options.
OPTION_PREFIX = "-mlbridge-phase-order-"
#: Feature names, in the order the pass sends them (docs/phase-order.md).
OBSERVATION = "observation"
STEP = "step"
CODE_SIZE = "code_size"
ACTION_COUNT = "action_count"
#: float32 [N]: how often each sub-sequence has been applied so far in the episode.
ACTION_HISTORY = "action_history"
FEATURES = (OBSERVATION, STEP, CODE_SIZE, ACTION_COUNT, ACTION_HISTORY)
#: The advice: 0..N-1 applies sub-sequence i, N stops.
ADVICE = "action"

_STEP_RE = re.compile(
    r"^mlbridge-phase-order: (?P<module>.*) step (?P<step>\d+): action (?P<action>\d+) "
    r"'(?P<pipeline>.*)' size (?P<before>-?\d+) -> (?P<after>-?\d+)\s*$"
)
_STOP_RE = re.compile(r"^mlbridge-phase-order: (?P<module>.*) step (?P<step>\d+): stop\s*$")
_PIPELINE_RE = re.compile(r"^mlbridge-phase-order: (?P<module>.*) pipeline '(?P<pipeline>.*)'\s*$")


class PhaseOrderError(MLBridgeError):
    """A phase-ordering compilation or measurement failed."""


@dataclass(frozen=True)
class TraceStep:
    """One line of ``-mlbridge-phase-order-trace``.

    Attributes:
        module: The module identifier.
        step: The 0-based step.
        action: The action index (``None`` for the stop line).
        pipeline: The applied sub-sequence (new-PM pipeline text; ``""`` for stop).
        size_before: The code-size estimate before the step (``None`` for stop).
        size_after: The code-size estimate after it (``None`` for stop).
    """

    module: str
    step: int
    action: int | None
    pipeline: str = ""
    size_before: int | None = None
    size_after: int | None = None


def parse_trace(stderr: str) -> list[TraceStep]:
    """The trace lines in ``stderr`` (other lines are ignored), in order."""
    steps = []
    for line in stderr.splitlines():
        if m := _STEP_RE.match(line):
            steps.append(
                TraceStep(
                    m["module"],
                    int(m["step"]),
                    int(m["action"]),
                    m["pipeline"],
                    int(m["before"]),
                    int(m["after"]),
                )
            )
        elif m := _STOP_RE.match(line):
            steps.append(TraceStep(m["module"], int(m["step"]), None))
    return steps


def parse_pipeline(stderr: str) -> str | None:
    """The episode's applied steps as one pipeline, from the trace in ``stderr``.

    The pass's last trace line: the sub-sequences it applied, joined by commas, which
    ``opt-22 -passes=<it>`` runs to make the same module in one process
    (docs/phase-order.md, "An episode is one pipeline"); ``""`` if none was applied.
    ``None`` if ``stderr`` has no such line (no trace, or opt stopped before the end).
    """
    found = None
    for line in stderr.splitlines():
        if m := _PIPELINE_RE.match(line):
            found = m["pipeline"]
    return found


def find_plugin(build_dir: str | Path | None = None) -> Path:
    """The opt plugin (``MLBridgeLLVMPlugin.so``) of ``build_dir``.

    Args:
        build_dir: The build folder; default ``$MLBRIDGE_BUILD_DIR``, else ``<checkout>/build``.

    Raises:
        PhaseOrderError: If it is not built.
    """
    folder = Path(build_dir) if build_dir is not None else default_build_dir()
    if folder is None:
        raise PhaseOrderError(
            "no build folder: set MLBRIDGE_BUILD_DIR or pass the plugin path explicitly"
        )
    path = plugin_path("llvm", folder)
    if not path.is_file():
        raise PhaseOrderError(
            f"{path} is not built: run `mlbridge build` (or point MLBRIDGE_BUILD_DIR at a "
            "build folder that has it)"
        )
    return path


def pass_options(
    *,
    runner: str | None = None,
    channel: str | None = None,
    model: str | Path | None = None,
    serdes: str | None = None,
    timeout_ms: int | None = None,
    max_steps: int | None = None,
    observation: str | None = None,
    ir2vec_vocab: str | Path | None = None,
    actions: str | Path | None = None,
    trace: bool = False,
) -> list[str]:
    """The ``-mlbridge-phase-order-*`` options for the given settings (``None``: the default)."""
    values: list[tuple[str, object]] = [
        ("runner", runner),
        ("channel", channel),
        ("model", model),
        ("serdes", serdes),
        ("timeout-ms", timeout_ms),
        ("max-steps", max_steps),
        ("observation", observation),
        ("ir2vec-vocab", ir2vec_vocab),
        ("actions", actions),
    ]
    args = [f"{OPTION_PREFIX}{name}={value}" for name, value in values if value is not None]
    if trace:
        args.append(f"{OPTION_PREFIX}trace")
    return args


def phase_order_command(
    module: str | Path,
    output: str | Path,
    *,
    plugin: str | Path | None = None,
    opt: str | None = None,
    **options: object,
) -> list[str]:
    """``opt-22`` running only the phase-ordering pass on ``module``, writing bitcode.

    Args:
        module: The input (bitcode or textual IR).
        output: Where opt writes the result (``{output}`` stays a placeholder).
        plugin: The opt plugin (default: :func:`find_plugin`).
        opt: The opt to run (default: LLVM 22's).
        **options: Keyword arguments of :func:`pass_options` (``channel="{base}"`` for the
            pipe runner's placeholder).
    """
    return [
        opt or find_llvm_tool("opt"),
        f"-load-pass-plugin={plugin or find_plugin()}",
        f"-passes={PASS_NAME}",
        *pass_options(**options),  # type: ignore[arg-type]
        str(module),
        "-o",
        str(output),
    ]


def run_tool(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Runs ``argv`` (bounded by ``timeout`` seconds).

    Raises:
        PhaseOrderError: If it fails or does not finish in time; names the command.
    """
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PhaseOrderError(f"{argv[0]} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        raise PhaseOrderError(
            f"{' '.join(map(str, argv))} exited with {proc.returncode}: "
            f"{proc.stderr.strip()[-2000:]}"
        )
    return proc


def text_size(bitcode: str | Path, *, timeout: float = 300) -> int:
    """The ``.text`` bytes ``llc-22 -O2 -filetype=obj`` makes of ``bitcode``.

    Raises:
        PhaseOrderError: If llc fails or its object file cannot be read.
    """
    obj = Path(bitcode).with_suffix(".o")
    run_tool([find_llvm_tool("llc"), "-O2", "-filetype=obj", str(bitcode), "-o", str(obj)], timeout)
    try:
        return object_sizes(obj).text
    except LLVMToolError as e:
        raise PhaseOrderError(str(e)) from None
    finally:
        obj.unlink(missing_ok=True)
