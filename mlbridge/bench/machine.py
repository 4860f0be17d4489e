"""What machine a benchmark ran on: CPU, cores, load, kernel, tool and library versions."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from mlbridge.llvm import LLVMToolError, find_llvm_tool
from mlbridge.paths import find_source_dir

__all__ = ["describe_machine", "load_average"]

_PACKAGES = ("mlbridge", "numpy", "grpcio", "protobuf", "onnxruntime", "matplotlib")


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _tool_version(tool: str) -> str:
    try:
        out = subprocess.run(
            [find_llvm_tool(tool), "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (LLVMToolError, OSError, subprocess.TimeoutExpired):
        return "not found"
    for line in out.splitlines():
        if "version" in line.lower():
            return line.strip()
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def _git_commit() -> str:
    source = find_source_dir()
    if source is None:
        return "unknown"
    try:
        out = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


def describe_machine() -> dict[str, Any]:
    """The machine and software a run measured, for the report's JSON and Markdown."""
    versions: dict[str, str] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    versions["opt"] = _tool_version("opt")
    versions["mlir-opt"] = _tool_version("mlir-opt")
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "load_average_start": load_average(),
        "kernel": f"{platform.system()} {platform.release()}",
        "node": platform.node(),
        "git_commit": _git_commit(),
        "versions": versions,
    }
