"""The round-trip experiment from inside the compilers: ``opt-22`` and ``mlir-opt-22``.

Both run the plugins' ``mlbridge-roundtrip`` pass (``passes/roundtrip/RoundTrip.h``): per run,
Q queries of L floats each to one runner; the pass checks every answer (opt) or records them
for ``bench/mlir_roundtrip.py`` to check (mlir-opt). The opt pass times each query itself
(``-mlbridge-roundtrip-report``); a size's time is the median of its queries after the
first (which includes connecting). The MLIR pass records its per-query times in the output
module (``mlbridge.roundtrip_seconds``); the runs, the ONNX models, the gRPC server and the
checks of its answers are ``bench/mlir_roundtrip.py``'s.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlbridge.bench.scripts import load_script
from mlbridge.llvm import find_llvm_tool
from mlbridge.paths import plugin_path

__all__ = ["MLIR_RUNNERS", "OPT_RUNNERS", "run_mlir_host", "run_opt_host"]

#: The runners of the opt host (each an option set of the plugin, see _opt_runner_args).
OPT_RUNNERS = ("callback", "pipe-bitstream", "pipe-json", "pipe-protobuf", "grpc", "onnx")
#: The runners of the mlir-opt host (bench/mlir_roundtrip.py's modes).
MLIR_RUNNERS = ("callback", "pipe-bitstream", "pipe-json", "grpc", "onnx")


def _opt_runner_args(runner: str, tmp: Path, length: int, address: str | None) -> list[str]:
    prefix = "-mlbridge-roundtrip-"
    if runner == "callback":
        return [f"{prefix}runner=callback"]
    if runner.startswith("pipe-"):
        serdes = runner.split("-", 1)[1]
        return [f"{prefix}runner=pipe", f"{prefix}channel={{base}}", f"{prefix}serdes={serdes}"]
    if runner == "grpc":
        return [f"{prefix}runner=grpc", f"{prefix}address={address}"]
    if runner == "onnx":
        return [f"{prefix}runner=onnx", f"{prefix}model={tmp / f'dense{length}.onnx'}"]
    raise ValueError(f"unknown opt host runner {runner!r}; choose from {OPT_RUNNERS}")


def _opt_once(
    build: Path,
    runner: str,
    length: int,
    queries: int,
    tmp: Path,
    timeout: float,
    address: str | None,
) -> dict[str, Any]:
    """One opt-22 run of the pass; its JSON report (every answer checked by the pass)."""
    from mlbridge.bench.roundtrip_model import RoundTripModel
    from mlbridge.compiler.pipe import drive_compiler

    report = tmp / "report.json"
    report.unlink(missing_ok=True)
    src = tmp / "empty.ll"
    src.write_text("")
    argv = [
        find_llvm_tool("opt"),
        f"-load-pass-plugin={plugin_path('llvm', build)}",
        "-passes=mlbridge-roundtrip",
        f"-mlbridge-roundtrip-length={length}",
        f"-mlbridge-roundtrip-queries={queries}",
        f"-mlbridge-roundtrip-report={report}",
        f"-mlbridge-roundtrip-timeout-ms={int(timeout * 1000)}",
        *_opt_runner_args(runner, tmp, length, address),
        "-disable-output",
        str(src),
    ]
    err_path = tmp / "opt-stderr.txt"
    with open(err_path, "w") as err:
        if runner.startswith("pipe-"):
            # drive_compiler inherits our stderr: send opt's messages to the file.
            saved = os.dup(2)
            os.dup2(err.fileno(), 2)
            try:
                code = drive_compiler(
                    argv,
                    RoundTripModel(),
                    serdes=runner.split("-", 1)[1],
                    timeout=timeout,
                    require_end=True,
                    parent=tmp,
                ).returncode
            finally:
                os.dup2(saved, 2)
                os.close(saved)
        else:
            code = subprocess.run(argv, stderr=err, timeout=timeout).returncode
    if code != 0 or not report.is_file():
        raise RuntimeError(
            f"opt host, {runner}, L={length}: opt exit {code}:\n{err_path.read_text()[-2000:]}"
        )
    result: dict[str, Any] = json.loads(report.read_text())
    if result["mismatches"] or result["checked"] != queries:
        raise RuntimeError(f"opt host, {runner}, L={length}: wrong answers: {result}")
    return result


def _per_query(seconds: list[float]) -> float:
    """A run's time per query: the median after the first (connection) query."""
    return statistics.median(seconds[1:] if len(seconds) > 1 else seconds)


def _sweep(
    host: str,
    once: Callable[..., dict[str, Any]],
    build: Path,
    runners: list[str],
    sizes: list[int],
    queries: int,
    reps: int,
    timeout: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    mlir_roundtrip = load_script("mlir_roundtrip")
    runs: dict[str, dict[int, list[float]]] = {r: {} for r in runners}
    checked: dict[str, int] = dict.fromkeys(runners, 0)
    with tempfile.TemporaryDirectory(prefix="mlbridge-bench-host-") as tmp_name:
        tmp = Path(tmp_name)
        server = mlir_roundtrip.GrpcServer(tmp, timeout) if "grpc" in runners else None
        try:
            for length in sizes:
                if "onnx" in runners:
                    mlir_roundtrip.write_onnx(tmp / f"dense{length}.onnx", length)
                for _rep in range(reps):  # interleaved: drift hits every runner alike
                    for runner in runners:
                        r = once(
                            build,
                            runner,
                            length,
                            queries,
                            tmp,
                            timeout,
                            server.address if server else None,
                        )
                        runs[runner].setdefault(length, []).append(_per_query(r["seconds"]))
                        checked[runner] += r["checked"]
                for runner in runners:
                    log(
                        f"{host:8s} {runner:15s} L={length:6d}: "
                        f"{statistics.median(runs[runner][length]) * 1e3:8.3f} ms/query"
                    )
        finally:
            if server is not None:
                server.close()
    return {"runs": runs, "checked": checked}


def run_opt_host(
    build: Path,
    runners: list[str],
    sizes: list[int],
    queries: int,
    reps: int,
    timeout: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The sweep through ``opt-22``: per runner and size, ``reps`` runs of ``queries``.

    Returns:
        ``{"runs": {runner: {L: [seconds per query, one per rep]}}, "checked": {runner: n}}``.
    """
    return _sweep("opt", _opt_once, build, runners, sizes, queries, reps, timeout, log)


_SECONDS = re.compile(r"mlbridge\.roundtrip_seconds = array<f64:([^>]*)>")


def _mlir_once(
    build: Path,
    runner: str,
    length: int,
    queries: int,
    tmp: Path,
    timeout: float,
    address: str | None,
) -> dict[str, Any]:
    """One mlir-opt-22 run with ``bench/mlir_roundtrip.py`` (which checks every answer).

    Returns the per-query seconds the pass recorded in the output module.
    """
    mlir_roundtrip = load_script("mlir_roundtrip")
    plugin = plugin_path("mlir", build)
    _, answers = mlir_roundtrip.run_once(runner, plugin, length, queries, tmp, timeout, address)
    mlir_roundtrip.check(runner, length, queries, answers)
    found = _SECONDS.search((tmp / "out.mlir").read_text())
    if found is None:
        raise RuntimeError(
            f"mlir-opt host, {runner}, L={length}: no mlbridge.roundtrip_seconds in the output "
            f"(is {plugin} older than passes/roundtrip/MLIRRoundTrip.cpp? rebuild it)"
        )
    return {"seconds": [float(v) for v in found.group(1).split(",")], "checked": len(answers)}


def run_mlir_host(
    build: Path,
    runners: list[str],
    sizes: list[int],
    queries: int,
    reps: int,
    timeout: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The sweep through ``mlir-opt-22`` with ``bench/mlir_roundtrip.py``'s runs and checks.

    One run per runner, size and rep, as for :func:`run_opt_host`.

    Returns:
        ``{"runs": {runner: {L: [seconds per query, one per rep]}}, "checked": {runner: n}}``.
    """
    return _sweep("mlir-opt", _mlir_once, build, runners, sizes, queries, reps, timeout, log)
