"""``make demo``: the ML inline advisor on the built-in default model, against stock ``-Oz``.

Compiles every held-out module of the corpus twice with ``opt-22 -passes='default<Oz>'``:
once stock, then with the mlbridge plugin's ML inline advisor asking the built-in default
model in-process (through ONNX Runtime, and compiled ahead of time by TensorFlow), then
makes object files with ``llc-22 -O2`` and prints, for each
configuration, the number of modules, the total ``.text`` size and the total ``opt`` time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mlbridge.errors import MLBridgeError
from mlbridge.gym.rewards import find_llvm_tool, object_text_size

__all__ = ["CompileStats", "DemoError", "compile_module", "main"]

_KIND_LABEL = {"onnx": "ONNX Runtime", "tfaot": "TF AOT"}


class DemoError(MLBridgeError):
    """A step of the demo failed."""


@dataclass
class CompileStats:
    """Totals of one configuration over the modules."""

    name: str
    modules: int = 0
    text_bytes: int = 0
    opt_seconds: float = 0.0


def compile_module(
    module: Path, opt_args: Sequence[str], workdir: Path, *, timeout: float = 600
) -> tuple[int, float]:
    """``opt-22 <opt_args> module``, then ``llc-22 -O2``.

    Returns:
        The ``.text`` size in bytes and the wall time of ``opt`` in seconds.

    Raises:
        DemoError: If a tool fails or times out.
    """
    out = workdir / "out.bc"
    obj = workdir / "out.o"
    argv = [find_llvm_tool("opt"), *opt_args, str(module), "-o", str(out)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DemoError(f"opt did not finish within {timeout:g} s on {module}") from None
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise DemoError(f"{' '.join(argv)} failed:\n{proc.stderr.strip()[-3000:]}")
    llc = [find_llvm_tool("llc"), "-O2", "-filetype=obj", str(out), "-o", str(obj)]
    proc = subprocess.run(llc, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise DemoError(f"{' '.join(llc)} failed:\n{proc.stderr.strip()[-3000:]}")
    return object_text_size(obj), seconds


def _table(rows: Sequence[CompileStats]) -> str:
    base = rows[0]
    lines = [
        "| configuration | modules | .text bytes | vs stock | opt time (s) | vs stock |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        size = (r.text_bytes / base.text_bytes - 1) * 100 if base.text_bytes else 0.0
        t = r.opt_seconds / base.opt_seconds if base.opt_seconds else 0.0
        lines.append(
            f"| {r.name} | {r.modules} | {r.text_bytes} | {size:+.2f}% | "
            f"{r.opt_seconds:.2f} | {t:.2f}x |"
        )
    return "\n".join(lines)


def run_demo(
    modules: Sequence[Path],
    configurations: Sequence[tuple[str, Sequence[str]]],
    *,
    progress: bool = True,
) -> list[CompileStats]:
    """Compiles every module in every configuration and returns the totals per configuration.

    The configurations are interleaved module by module, so that load on the machine
    affects all of them alike.
    """
    stats = [CompileStats(name) for name, _ in configurations]
    with tempfile.TemporaryDirectory(prefix="mlbridge-demo-") as tmp:
        for i, module in enumerate(modules):
            for s, (_, args) in zip(stats, configurations, strict=True):
                size, seconds = compile_module(module, args, Path(tmp))
                s.modules += 1
                s.text_bytes += size
                s.opt_seconds += seconds
            if progress:
                _progress(i + 1, len(modules))
    return stats


def _progress(done: int, total: int) -> None:
    # A live counter on a terminal; one line per tenth of the work in a log.
    if sys.stderr.isatty():
        end = "\n" if done == total else ""
        print(f"\rmlbridge demo: compiled {done}/{total} modules", end=end, file=sys.stderr)
    elif done == total or done % max(1, total // 10) == 0:
        print(f"mlbridge demo: compiled {done}/{total} modules", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the demo; see the module docstring."""
    from mlbridge.corpus import default_corpus_dir, load_manifest
    from mlbridge.models.builtin import ensure_builtin_models
    from mlbridge.paths import default_build_dir, plugin_path

    p = argparse.ArgumentParser(prog="mlbridge-demo", description=__doc__)
    p.add_argument("--build-dir", type=Path, default=default_build_dir())
    p.add_argument("--corpus", type=Path, default=None)
    p.add_argument("--split", default="heldout", choices=["train", "heldout"])
    args = p.parse_args(argv)
    if args.build_dir is None:
        p.error("no build folder: pass --build-dir")
    try:
        corpus = args.corpus or default_corpus_dir()
        manifest = load_manifest(corpus)
        modules = [m.bitcode_path for m in manifest.ok_modules(split=args.split)]
        projects = sorted({m.project for m in manifest.ok_modules(split=args.split)})
        models = ensure_builtin_models(log=True)
        plugin = plugin_path("llvm", args.build_dir)
        if not plugin.is_file():
            raise DemoError(f"the opt plugin is not built: {plugin} (run 'make build')")
        configurations: list[tuple[str, Sequence[str]]] = [
            ("stock opt-22 -Oz", ["-passes=default<Oz>"]),
        ]
        for model in models:
            configurations.append(
                (
                    f"ML inline advisor, {_KIND_LABEL[model.kind]} '{model.name}'",
                    [
                        f"-load-pass-plugin={plugin}",
                        "-passes=default<Oz>",
                        f"-mlbridge-inline-model={model.name}",
                    ],
                )
            )
        print(
            f"mlbridge demo: {len(modules)} {args.split} modules of {', '.join(projects)}, "
            f"{len(configurations)} configurations",
            file=sys.stderr,
        )
        stats = run_demo(modules, configurations)
    except MLBridgeError as e:
        print(f"mlbridge demo: error: {e}", file=sys.stderr)
        return 1
    print()
    print(_table(stats))
    print(
        f"""
Where to go next:
  - train your own policy:   .venv/bin/mlbridge train inliner -o my-policy.json --onnx my.onnx
                             .venv/bin/mlbridge models register my-inliner my.onnx
                             opt-22 -load-pass-plugin={plugin} -passes='default<Oz>' \\
                               -mlbridge-inline-model=my-inliner in.bc
  - answer from Python over a pipe (a policy function, see docs/inliner.md):
                             opt-22 -load-pass-plugin={plugin} -passes='default<Oz>' \\
                               -mlbridge-inline-runner=pipe -mlbridge-inline-channel=/tmp/ch in.bc
  - the corpus:              .venv/bin/mlbridge corpus info   (docs/corpus.md)"""
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
