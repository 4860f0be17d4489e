"""The Python-side LLVM IR reader: statistics, functions and call sites via llvmlite.

llvmlite 0.50 embeds LLVM 22, so it reads what clang-22 and opt-22 write (bitcode or
textual IR) without starting a process. This module is the one place the rest of
mlbridge touches llvmlite for IR facts::

    from mlbridge.ir import read_module
    stats = read_module("foo.bc")
    print(stats.defined_functions, stats.calls_to_defined)

llvmlite is an optional dependency (extra ``corpus``); importing this module without it
raises an :class:`ImportError` that says how to install it.
"""

from __future__ import annotations

from mlbridge.ir.reader import (
    CallKind,
    CallSite,
    FunctionStats,
    IRError,
    ModuleStats,
    iter_call_sites,
    iter_functions,
    parse_module,
    read_module,
    stats_of,
)

__all__ = [
    "CallKind",
    "CallSite",
    "FunctionStats",
    "IRError",
    "ModuleStats",
    "iter_call_sites",
    "iter_functions",
    "parse_module",
    "read_module",
    "stats_of",
]
