"""``mlbridge bench``: the one-command benchmark report (docs/bench.md).

It runs, in one invocation, the round-trip sweep of the ML-Compiler-Bridge paper on every
runner and serialization from three hosts (a C program through the C API, a pass inside
``opt-22``, a pass inside ``mlir-opt-22``) beside their floors, the in-process runners
against direct calls, thread scaling, memory, and the compile-time overhead of the ML
inliner and of phase ordering against stock opt-22; then writes a JSON file with every figure,
a Markdown summary and PNG plots. The measurement code lives in the scripts of ``bench/``;
this package drives them and reports.
"""

from __future__ import annotations

__all__: list[str] = []
