"""Reward hooks for :class:`mlbridge.gym.CompilerEnv`: measures of a finished compilation.

A reward hook is any callable taking a :class:`~mlbridge.gym.CompilationResult` and
returning a float; it runs once per episode, after the compiler has exited. Smaller code
is better, so these return the *negative* size:

- :func:`ir_instruction_count_reward`: minus the number of instructions in the output's
  textual LLVM IR (no tools needed);
- :class:`TextSizeReward`: minus the ``.text`` size of the output compiled by ``llc``
  and measured by ``llvm-size`` (LLVM 22's tools by default).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mlbridge.errors import MLBridgeError
from mlbridge.llvm import find_llvm_tool

if TYPE_CHECKING:
    from mlbridge.gym.env import CompilationResult

__all__ = [
    "RewardError",
    "TextSizeReward",
    "find_llvm_tool",
    "ir_instruction_count",
    "ir_instruction_count_reward",
    "object_text_size",
]

# A line inside a function body that is not an instruction: a label, a comment, blank.
_NOT_INSTRUCTION = re.compile(r"^\s*(?:$|;|[-\w.$\"]+:)")


class RewardError(MLBridgeError):
    """A reward could not be measured (a tool failed or is missing)."""


def ir_instruction_count(ir: str) -> int:
    """The number of instructions in the function bodies of textual LLVM IR."""
    count = 0
    in_body = False
    for line in ir.splitlines():
        if not in_body:
            if line.startswith("define ") and line.rstrip().endswith("{"):
                in_body = True
            continue
        if line.startswith("}"):
            in_body = False
        elif not _NOT_INSTRUCTION.match(line):
            count += 1
    return count


def _output(result: CompilationResult) -> Path:
    if result.output is None or not result.output.is_file():
        raise RewardError(
            f"the compilation wrote no output file ({result.output}); put {{output}} in the command"
        )
    return result.output


def ir_instruction_count_reward(result: CompilationResult) -> float:
    """Minus the number of IR instructions in the output (textual IR: ``opt -S``)."""
    return -float(ir_instruction_count(_output(result).read_text()))


def object_text_size(obj: str | Path, *, llvm_size: str | None = None, timeout: float = 60) -> int:
    """The size in bytes of the ``.text`` sections of an object file (``llvm-size -A``).

    Raises:
        RewardError: If ``llvm-size`` fails or does not finish within ``timeout`` seconds.
    """
    tool = llvm_size or find_llvm_tool("llvm-size")
    try:
        proc = subprocess.run(
            [tool, "-A", str(obj)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise RewardError(f"{tool} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        raise RewardError(f"{tool} -A {obj} failed: {proc.stderr.strip()}")
    total = 0
    for line in proc.stdout.splitlines():
        parts = line.split()
        if parts and (parts[0] == ".text" or parts[0].startswith(".text.")):
            total += int(parts[1])
    return total


class TextSizeReward:
    """Minus the ``.text`` size of the output, compiled to an object file by ``llc``.

    Args:
        llc: The ``llc`` to use (default: LLVM 22's).
        llvm_size: The ``llvm-size`` to use (default: LLVM 22's).
        llc_args: Extra ``llc`` arguments (default ``-O2``).
        timeout: Bound of each tool run, seconds.
    """

    def __init__(
        self,
        *,
        llc: str | None = None,
        llvm_size: str | None = None,
        llc_args: Sequence[str] = ("-O2",),
        timeout: float = 120.0,
    ) -> None:
        self.llc = llc or find_llvm_tool("llc")
        self.llvm_size = llvm_size or find_llvm_tool("llvm-size")
        self.llc_args = tuple(llc_args)
        self.timeout = timeout

    def text_size(self, result: CompilationResult) -> int:
        """The ``.text`` size in bytes of the compilation's output."""
        source = _output(result)
        obj = source.with_suffix(".o")
        argv = [self.llc, *self.llc_args, "-filetype=obj", str(source), "-o", str(obj)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise RewardError(f"{self.llc} did not finish within {self.timeout:g} s") from None
        if proc.returncode != 0:
            raise RewardError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
        return object_text_size(obj, llvm_size=self.llvm_size, timeout=self.timeout)

    def __call__(self, result: CompilationResult) -> float:
        """Minus the ``.text`` size in bytes."""
        return -float(self.text_size(result))
