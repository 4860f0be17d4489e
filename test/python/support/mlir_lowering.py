"""Lower MLIR kernels to LLVM IR with the LLVM 22 tools and run them (to check results).

A kernel is a ``func.func`` that takes one ``index`` and returns one ``i64``. The module
is lowered (``-lower-affine -convert-scf-to-cf ...`` to the LLVM dialect), translated
with ``mlir-translate --mlir-to-llvmir``, compiled with ``clang`` together with a small
generated C driver, and run; the driver prints ``<kernel>(<n>) = <result>`` per call::

    results = run_kernels(text, {"scf_dynamic_hash": [0, 5, 13]})
    # {("scf_dynamic_hash", 0): 7, ...}
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from mlbridge.errors import MLBridgeError
from mlbridge.llvm import llvm_tools_dir

__all__ = ["LOWERING_PASSES", "lower_to_llvm_ir", "run_kernels"]

#: The mlir-opt passes that take affine/scf/arith/memref/func IR to the LLVM dialect.
LOWERING_PASSES = (
    "-lower-affine",
    "-convert-scf-to-cf",
    "-convert-arith-to-llvm",
    "-finalize-memref-to-llvm",
    "-convert-func-to-llvm",
    "-convert-cf-to-llvm",
    "-reconcile-unrealized-casts",
)


def _run(argv: Sequence[str], stdin: str | None, what: str, timeout: float) -> str:
    try:
        proc = subprocess.run(
            list(argv), input=stdin, capture_output=True, text=True, timeout=timeout
        )
    except FileNotFoundError as e:
        raise MLBridgeError(f"{what}: {argv[0]} not found (install LLVM/MLIR 22)") from e
    except subprocess.TimeoutExpired as e:
        raise MLBridgeError(f"{what}: {argv[0]} did not finish within {timeout:g} s") from e
    if proc.returncode != 0:
        raise MLBridgeError(f"{what} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
    return proc.stdout


def lower_to_llvm_ir(mlir_text: str, *, timeout: float = 120.0) -> str:
    """Verifies and lowers ``mlir_text`` to LLVM IR text.

    Args:
        mlir_text: A module of affine, scf, arith, memref and func ops.
        timeout: Bound of each tool run, in seconds.

    Returns:
        The LLVM IR (``mlir-translate --mlir-to-llvmir`` output).

    Raises:
        MLBridgeError: If verification, lowering or translation fails.
    """
    tools = llvm_tools_dir()
    llvm_dialect = _run(
        [str(tools / "mlir-opt"), *LOWERING_PASSES], mlir_text, "lowering to LLVM", timeout
    )
    return _run(
        [str(tools / "mlir-translate"), "--mlir-to-llvmir"],
        llvm_dialect,
        "mlir-translate",
        timeout,
    )


def _driver(calls: Mapping[str, Sequence[int]]) -> str:
    lines = ["#include <inttypes.h>", "#include <stdio.h>"]
    lines += [f"int64_t {name}(int64_t);" for name in calls]
    lines.append("int main(void) {")
    for name, args in calls.items():
        for n in args:
            lines.append(
                f'  printf("{name}({int(n)}) = %" PRId64 "\\n", {name}((int64_t){int(n)}));'
            )
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def run_kernels(
    mlir_text: str, calls: Mapping[str, Sequence[int]], *, timeout: float = 120.0
) -> dict[tuple[str, int], int]:
    """Lowers ``mlir_text``, links it with a C driver and runs the given calls.

    Args:
        mlir_text: The module; every kernel named in ``calls`` is ``(index) -> i64``.
        calls: Kernel name to the arguments to call it with.
        timeout: Bound of each tool run and of the program's run, in seconds.

    Returns:
        ``(kernel, argument)`` to the result.

    Raises:
        MLBridgeError: If a step fails; the message names the step.
    """
    ir = lower_to_llvm_ir(mlir_text, timeout=timeout)
    with tempfile.TemporaryDirectory(prefix="mlbridge-mlir-") as tmp:
        ll = Path(tmp, "kernels.ll")
        ll.write_text(ir)
        c = Path(tmp, "driver.c")
        c.write_text(_driver(calls))
        exe = Path(tmp, "kernels")
        _run(
            [str(llvm_tools_dir() / "clang"), "-O0", "-w", str(c), str(ll), "-o", str(exe)],
            None,
            "compiling the kernels",
            timeout,
        )
        out = _run([str(exe)], None, "running the kernels", timeout)
    results: dict[tuple[str, int], int] = {}
    for line in out.splitlines():
        call, value = line.split(" = ")
        name, arg = call[:-1].split("(")
        results[(name, int(arg))] = int(value)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """``python test/python/support/mlir_lowering.py IN.mlir KERNEL=N,N...``: the results."""
    import argparse
    import sys

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("input", help="the MLIR file ('-': stdin)")
    p.add_argument("calls", nargs="+", metavar="KERNEL=N,N")
    args = p.parse_args(argv)
    text = sys.stdin.read() if args.input == "-" else Path(args.input).read_text()
    calls = {c.split("=")[0]: [int(n) for n in c.split("=")[1].split(",")] for c in args.calls}
    try:
        results = run_kernels(text, calls)
    except MLBridgeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for (name, n), value in results.items():
        print(f"{name}({n}) = {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
