#!/usr/bin/env python3
"""Compile time of the ML inline advisor against stock ``-Oz`` (a measurement, not a test).

Every held-out module of the corpus is compiled with ``opt-22 -passes='default<Oz>'`` in
each configuration, interleaved module by module so that load on the machine hits all of
them alike, ``--reps`` times; a module's time is the median of its repetitions and a
configuration's total is the sum over modules:

- stock ``opt-22`` (LLVM's default inline advisor);
- the mlbridge plugin's ML inline advisor on the built-in model in-process, through
  ONNX Runtime (``-mlbridge-inline-model=<model>.onnx``);
- the same policy as a Python process answering over the pipe runner
  (``-mlbridge-inline-runner=pipe``; the time includes the Python side's work), which
  also counts how often the policy agrees with LLVM's own decision (``inlining_default``);
- a model that never inlines (ONNX), the lower bar for size;
- the same policy compiled ahead of time by TensorFlow (``mlbridge aot``, loaded by the
  TF AOT runner from its shared object); ``--no-tfaot`` leaves it out;
- the same ONNX model compiled to native code through MLIR (``mlbridge compile``,
  docs/native.md), loaded by the TF AOT runner.

Besides wall time, the ``opt`` process's CPU time (user + system, from ``getrusage`` of
the children) is recorded: on a shared machine it is the steadier measure of the compiler's
own work (for the pipe runner it leaves out the Python side, which runs in this process).

Each configuration's ``.text`` size after ``llc-22 -O2`` is recorded too: the ONNX, TF AOT
and pipe runners answer with the same policy, so their sizes must agree (checked).

    .venv/bin/python bench/inliner_compile.py            # held-out corpus, 3 repetitions
    .venv/bin/python bench/inliner_compile.py --smoke    # 2 modules once: correctness only
    # a change's plugin against the one before it, interleaved, on the first 12 modules:
    .venv/bin/python bench/inliner_compile.py --build-dir build-new --baseline-build-dir build \
        --modules 12

Results: ``bench/results/inliner-compile-<time>.json`` and ``.md``; the Markdown also goes
to ``bench/results/inliner-compile-latest.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlbridge.compiler.pipe import drive_compiler
from mlbridge.inliner.policy import LinearPolicy
from mlbridge.llvm import find_llvm_tool, object_sizes
from mlbridge.paths import plugin_path
from mlbridge.problems import builtin_model

ROOT = Path(__file__).resolve().parents[1]
#: The issue's targets (reported, never asserted).
TARGET_IN_PROCESS = 1.10
TARGET_PIPE = 3.0


@dataclass
class AgreementCounter:
    """Wraps a policy; counts its decisions and those equal to LLVM's default."""

    policy: Callable[[Any], int]
    decisions: int = 0
    agreements: int = 0

    def __call__(self, obs: Any) -> int:
        advice = self.policy(obs)
        self.decisions += 1
        self.agreements += int(advice == int(obs["inlining_default"][0]))
        return advice


@dataclass
class Config:
    """One configuration: how ``opt`` is run.

    Attributes:
        name: The row label.
        args: ``opt`` arguments before the input (``{base}`` is the pipe channel).
        policy: For the pipe runner, the Python policy that answers.
        target: The target ratio to stock, if any.
    """

    name: str
    args: list[str]
    policy: Callable[[Any], int] | None = None
    target: float | None = None
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    text_bytes: int = 0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _compile(config: Config, module: Path, out: Path, timeout: float) -> tuple[float, float]:
    """Runs ``opt`` once; returns its wall and CPU seconds."""
    argv = [find_llvm_tool("opt"), *config.args, str(module), "-o", str(out)]
    cpu_start = _children_cpu()
    start = time.perf_counter()
    if config.policy is None:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    else:
        result = drive_compiler(argv, config.policy, timeout=timeout, exit_timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited with {result.returncode}")
    return time.perf_counter() - start, _children_cpu() - cpu_start


def _text_size(bitcode: Path, timeout: float) -> int:
    obj = bitcode.with_suffix(".o")
    llc = [find_llvm_tool("llc"), "-O2", "-filetype=obj", str(bitcode), "-o", str(obj)]
    subprocess.run(llc, check=True, capture_output=True, timeout=timeout)
    return object_sizes(obj).text


def measure(modules: Sequence[Path], configs: Sequence[Config], reps: int, timeout: float) -> None:
    """Fills each config's per-module median wall and CPU seconds and total ``.text`` size."""
    with tempfile.TemporaryDirectory(prefix="mlbridge-bench-") as tmp:
        out = Path(tmp) / "out.bc"
        for i, module in enumerate(modules):
            times: list[list[tuple[float, float]]] = [[] for _ in configs]
            for _ in range(reps):
                for c, t in zip(configs, times, strict=True):
                    t.append(_compile(c, module, out, timeout))
            for c, t in zip(configs, times, strict=True):
                c.seconds.append(statistics.median(wall for wall, _ in t))
                c.cpu_seconds.append(statistics.median(cpu for _, cpu in t))
                _compile(c, module, out, timeout)
                c.text_bytes += _text_size(out, timeout)
            print(f"inliner_compile: {i + 1}/{len(modules)} {module.name}", file=sys.stderr)


def markdown(configs: Sequence[Config], modules: int, reps: int) -> str:
    """The results table."""
    base = sum(configs[0].seconds)
    base_cpu = sum(configs[0].cpu_seconds)
    lines = [
        f"Compile time of {modules} held-out modules with `opt-22 -passes='default<Oz>'`, "
        f"median of {reps} runs per module, summed ({platform.node()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}).",
        "",
        "| configuration | opt time (s) | vs stock | opt CPU (s) | vs stock | target "
        "| .text bytes | vs stock |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in configs:
        total = sum(c.seconds)
        ratio = total / base if base else 0.0
        cpu = sum(c.cpu_seconds)
        cpu_ratio = cpu / base_cpu if base_cpu else 0.0
        target = f"<= {c.target:.2f}x" if c.target else ""
        size = (c.text_bytes / configs[0].text_bytes - 1) * 100 if configs[0].text_bytes else 0
        lines.append(
            f"| {c.name} | {total:.2f} | {ratio:.2f}x | {cpu:.2f} | {cpu_ratio:.2f}x | {target} "
            f"| {c.text_bytes} | {size:+.2f}% |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the benchmark; see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build-dir", type=Path, default=ROOT / "build")
    p.add_argument("--corpus", type=Path, default=None)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="2 modules once: correctness only")
    p.add_argument("--no-tfaot", action="store_true", help="leave the TF AOT runner out")
    p.add_argument("--modules", type=int, default=None, help="only the first N held-out modules")
    p.add_argument(
        "--baseline-build-dir",
        type=Path,
        default=None,
        help="also run the in-process runners with this build's plugin (e.g. one from before "
        "a change), interleaved with the others so that both see the same machine load",
    )
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args(argv)

    from mlbridge.corpus import default_corpus_dir, load_manifest

    manifest = load_manifest(args.corpus or default_corpus_dir())
    modules = [m.bitcode_path for m in manifest.ok_modules(split="heldout")]
    reps = args.reps
    if args.modules is not None:
        modules = modules[: args.modules]
    if args.smoke:
        modules, reps = modules[:2], 1
    plugin = plugin_path("llvm", args.build_dir)
    plugins = [plugin]
    if args.baseline_build_dir is not None:
        plugins.append(plugin_path("llvm", args.baseline_build_dir))
    for path in plugins:
        if not path.is_file():
            p.error(f"{path} is not built: run `make build`")
    builtin = builtin_model("inliner")
    policy = LinearPolicy.load(builtin.policy_path)
    with tempfile.TemporaryDirectory(prefix="mlbridge-bench-model-") as tmp:
        onnx_model = Path(tmp) / f"{builtin.name}.onnx"
        policy.to_onnx(onnx_model)
        ml = [f"-load-pass-plugin={plugin}", "-passes=default<Oz>"]
        configs = [
            Config("stock opt-22", ["-passes=default<Oz>"]),
            Config(
                f"ML advisor, ONNX Runtime ({builtin.name})",
                [*ml, f"-mlbridge-inline-model={onnx_model}"],
                target=TARGET_IN_PROCESS,
            ),
        ]
        from mlbridge.native import compile_onnx

        native = compile_onnx(
            onnx_model, Path(tmp) / "native" / "inliner.so", name=builtin.name.replace("-", "_")
        )
        configs.append(
            Config(
                f"ML advisor, native MLIR ({builtin.name})",
                [*ml, f"-mlbridge-inline-model={native}"],
                target=TARGET_IN_PROCESS,
            )
        )
        if not args.no_tfaot:
            aot = policy.to_tfaot(Path(tmp) / "aot", name=builtin.name.replace("-", "_"))
            configs.append(
                Config(
                    f"ML advisor, TF AOT ({builtin.name})",
                    [*ml, f"-mlbridge-inline-model={aot}"],
                    target=TARGET_IN_PROCESS,
                )
            )
        if args.baseline_build_dir is not None:
            base_ml = [f"-load-pass-plugin={plugins[1]}", "-passes=default<Oz>"]
            label = f"[baseline {args.baseline_build_dir.name}]"
            configs.append(
                Config(
                    f"ML advisor, ONNX Runtime ({builtin.name}) {label}",
                    [*base_ml, f"-mlbridge-inline-model={onnx_model}"],
                    target=TARGET_IN_PROCESS,
                )
            )
            if not args.no_tfaot:
                configs.append(
                    Config(
                        f"ML advisor, TF AOT ({builtin.name}) {label}",
                        [*base_ml, f"-mlbridge-inline-model={aot}"],
                        target=TARGET_IN_PROCESS,
                    )
                )
        counter = AgreementCounter(policy)
        configs.append(
            Config(
                f"ML advisor, Python over a pipe ({builtin.name})",
                [*ml, "-mlbridge-inline-runner=pipe", "-mlbridge-inline-channel={base}"],
                policy=counter,
                target=TARGET_PIPE,
            )
        )
        never = Path(tmp) / "never.onnx"
        LinearPolicy(["inlining_default"], [0.0], -1.0).to_onnx(never)
        configs.append(
            Config(
                "ML advisor, a model that never inlines", [*ml, f"-mlbridge-inline-model={never}"]
            )
        )
        measure(modules, configs, reps, args.timeout)
    # The pipe configuration ran reps + 1 times per module (timed runs, then the size).
    runs = reps + 1
    agreement = counter.agreements / counter.decisions if counter.decisions else 0.0
    sizes = {c.name: c.text_bytes for c in configs[1:-1]}
    if len(set(sizes.values())) != 1:
        print(f"inliner_compile: runners of one policy disagree: {sizes}", file=sys.stderr)
        return 1
    table = markdown(configs, len(modules), reps)
    table += (
        f"\n{builtin.name} agrees with LLVM's default decision on {agreement * 100:.1f}% of "
        f"{counter.decisions // runs} inlining decisions.\n"
    )
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    # Runs on part of the corpus are kept under their own name, never as "latest".
    partial = args.smoke or args.modules is not None
    stamp = "smoke-" if args.smoke else "partial-" if args.modules is not None else ""
    stamp += time.strftime("%Y%m%d-%H%M%S")
    result: dict[str, Any] = {
        "machine": {"node": platform.node(), "python": platform.python_version()},
        "modules": [str(m) for m in modules],
        "reps": reps,
        "agreement_with_default": agreement,
        "decisions": counter.decisions // runs,
        "configurations": [
            {
                "name": c.name,
                "seconds": c.seconds,
                "cpu_seconds": c.cpu_seconds,
                "text_bytes": c.text_bytes,
                "target": c.target,
            }
            for c in configs
        ],
    }
    (args.out / f"inliner-compile-{stamp}.json").write_text(json.dumps(result, indent=2))
    (args.out / f"inliner-compile-{stamp}.md").write_text(table)
    if not partial:
        (args.out / "inliner-compile-latest.md").write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
