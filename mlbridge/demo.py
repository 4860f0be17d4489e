"""``make demo``: every shipped model on the corpus's held-out projects, against stock ``-Oz``.

Compiles every held-out module of the corpus with ``opt-22``, then ``llc-22 -O2`` to an
object file, in these configurations, interleaved module by module so that load on the
machine affects them alike:

- stock ``opt-22 -passes='default<Oz>'`` (the baseline);
- ``default<Oz>`` with mlbridge's ML inline advisor asking each built-in model of the
  ``inliner`` task in-process (ONNX Runtime, and compiled ahead of time by TensorFlow);
- mlbridge's phase-ordering pass asking each built-in model of the ``phase-order`` task.

A model that acts in ``llc`` (task ``regalloc``: the ML register allocator) gets a section
of its own after the table, from its problem (:attr:`mlbridge.problems.Problem.demo_report`):
spill and reload cost, allocated bytes and ``.text`` against greedy, on the same modules.

Models are chosen by their registered task, never by position. Before timing, each
configuration's model is checked to be used by its pass: one run with remarks (inliner)
or the step trace (phase ordering) on a module must show the model's decisions.

It prints, per configuration: modules, the allocated size of the objects (every section
that occupies memory: ``.text``, ``.rodata``, ``.data``, ``.eh_frame``, ...) and ``.text``
beside it, each with its change against stock, the total ``opt`` time and its ratio to
stock, and the decisions seen in the check. It writes the table (Markdown and JSON) and a
plot of the per-module change into ``--out`` and says where; with the set-up's step timings
when ``.deps/setup-timings.json`` has them.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from mlbridge.errors import MLBridgeError
from mlbridge.llvm import ObjectSizes, find_llvm_tool, object_sizes

__all__ = [
    "CompileStats",
    "Configuration",
    "DemoError",
    "compile_module",
    "count_decisions",
    "main",
    "run_demo",
]

_KIND_LABEL = {"onnx": "ONNX Runtime", "tfaot": "TF AOT", "native": "native (MLIR)"}
_STOCK = "stock opt-22 -Oz"
# What each pass prints per model decision when asked (-pass-remarks, the step trace).
_DECISION_LINES = {
    "inliner": re.compile(r"remark: .*model advice for "),
    "phase-order": re.compile(r"^mlbridge-phase-order: .* step \d+: (action|stop)", re.M),
}
_DECISION_FLAGS = {
    "inliner": ["-pass-remarks=mlbridge-inline"],
    "phase-order": ["-mlbridge-phase-order-trace"],
}


class DemoError(MLBridgeError):
    """A step of the demo failed."""


@dataclass(frozen=True)
class Configuration:
    """One way of compiling the modules.

    Attributes:
        name: The row's label.
        opt_args: The ``opt-22`` arguments before the input module.
        task: The task of the model the configuration asks (``None``: stock).
        model: The registered model's name (``None``: stock).
    """

    name: str
    opt_args: tuple[str, ...]
    task: str | None = None
    model: str | None = None


@dataclass
class CompileStats:
    """Totals of one configuration over the modules, and each module's sizes."""

    name: str
    modules: int = 0
    text_bytes: int = 0
    allocated_bytes: int = 0
    opt_seconds: float = 0.0
    decisions: int | None = None
    per_module: dict[str, ObjectSizes] = field(default_factory=dict)


def compile_module(
    module: Path, opt_args: Sequence[str], workdir: Path, *, timeout: float = 600
) -> tuple[ObjectSizes, float]:
    """``opt-22 <opt_args> module``, then ``llc-22 -O2`` to an object file.

    Returns:
        The object's sizes and the wall time of ``opt`` in seconds.

    Raises:
        DemoError: If a tool fails or times out.
    """
    out = workdir / "out.bc"
    obj = workdir / "out.o"
    _, seconds = _run([find_llvm_tool("opt"), *opt_args, str(module), "-o", str(out)], timeout)
    _run([find_llvm_tool("llc"), "-O2", "-filetype=obj", str(out), "-o", str(obj)], timeout)
    return object_sizes(obj), seconds


def _run(argv: Sequence[str], timeout: float) -> tuple[str, float]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DemoError(
            f"{argv[0]} did not finish within {timeout:g} s: {' '.join(argv)}"
        ) from None
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise DemoError(f"{' '.join(argv)} failed:\n{proc.stderr.strip()[-3000:]}")
    return proc.stderr, seconds


def count_decisions(
    config: Configuration, modules: Sequence[Path], workdir: Path, *, attempts: int = 3
) -> int:
    """The model decisions the configuration's pass reports on the first module that has any.

    Runs ``opt`` with the pass's remarks (inliner) or step trace (phase ordering) on up to
    ``attempts`` modules and counts the lines that name a decision of the model.

    Raises:
        DemoError: If ``opt`` fails, or the configuration has no task with a decision log.
    """
    if config.task not in _DECISION_LINES:
        raise DemoError(f"no way to see the decisions of a {config.task} model")
    pattern = _DECISION_LINES[config.task]
    found = 0
    for module in modules[:attempts]:
        argv = [
            find_llvm_tool("opt"),
            *config.opt_args,
            *_DECISION_FLAGS[config.task],
            str(module),
            "-o",
            str(workdir / "check.bc"),
        ]
        stderr, _ = _run(argv, 600)
        found = len(pattern.findall(stderr))
        if found:
            break
    return found


def run_demo(
    modules: Sequence[Path],
    configurations: Sequence[Configuration],
    *,
    progress: bool = True,
    check_use: bool = True,
) -> list[CompileStats]:
    """Compiles every module in every configuration and returns the totals per configuration.

    The configurations are interleaved module by module, so that load on the machine
    affects all of them alike. With ``check_use``, each configuration with a model first
    shows that its pass used the model (:func:`count_decisions`).

    Raises:
        DemoError: If a compilation fails, or a model's pass reports no decision.
    """
    from mlbridge.progress import track

    stats = [CompileStats(c.name) for c in configurations]
    with tempfile.TemporaryDirectory(prefix="mlbridge-demo-") as tmp:
        work = Path(tmp)
        if check_use:
            for s, config in zip(stats, configurations, strict=True):
                if config.model is None:
                    continue
                s.decisions = count_decisions(config, modules, work)
                if s.decisions == 0:
                    raise DemoError(
                        f"{config.name}: the pass reported no decision of model "
                        f"{config.model!r} on the first modules; is it the right option?"
                    )
        iterator = (
            track(modules, total=len(modules), description="mlbridge demo", unit="module")
            if progress
            else iter(modules)
        )
        for module in iterator:
            for s, config in zip(stats, configurations, strict=True):
                sizes, seconds = compile_module(module, config.opt_args, work)
                s.modules += 1
                s.text_bytes += sizes.text
                s.allocated_bytes += sizes.allocated
                s.opt_seconds += seconds
                s.per_module[_module_key(module)] = sizes
    return stats


def _module_key(module: Path) -> str:
    return f"{module.parent.name}/{module.name}"


def _change(value: float, base: float) -> str:
    return f"{(value / base - 1) * 100:+.2f}%" if base else "n/a"


def table(rows: Sequence[CompileStats]) -> str:
    """The Markdown table of the totals; the first row is the baseline."""
    base = rows[0]
    lines = [
        "| configuration | modules | allocated bytes | vs stock | .text bytes | vs stock "
        "| opt time (s) | vs stock | model decisions checked |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ratio = r.opt_seconds / base.opt_seconds if base.opt_seconds else math.nan
        decisions = "-" if r.decisions is None else str(r.decisions)
        lines.append(
            f"| {r.name} | {r.modules} | {r.allocated_bytes} | "
            f"{_change(r.allocated_bytes, base.allocated_bytes)} | {r.text_bytes} | "
            f"{_change(r.text_bytes, base.text_bytes)} | {r.opt_seconds:.2f} | {ratio:.2f}x | "
            f"{decisions} |"
        )
    return "\n".join(lines)


def plot(rows: Sequence[CompileStats], path: Path) -> None:
    """A PNG of each configuration's per-module size change against the first row.

    Two panels, allocated size and ``.text``; one box per configuration, modules as
    points, so that a total's change can be seen to come from many modules or a few.

    Raises:
        DemoError: If matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DemoError(
            "the demo's plot needs matplotlib: pip install matplotlib (make setup installs it)"
        ) from None
    base, others = rows[0], rows[1:]
    fig, axes = plt.subplots(1, 2, figsize=(12, 1.2 + 0.9 * max(1, len(others))), sharey=True)
    for ax, measure, title in (
        (axes[0], "allocated", "allocated sections"),
        (axes[1], "text", ".text"),
    ):
        data = []
        for r in others:
            changes = []
            for key, sizes in r.per_module.items():
                before = getattr(base.per_module[key], measure)
                if before:
                    changes.append((getattr(sizes, measure) / before - 1) * 100)
            data.append(changes)
        positions = list(range(len(others)))
        ax.boxplot(
            data, positions=positions, orientation="horizontal", widths=0.6, showfliers=False
        )
        for i, changes in enumerate(data):
            ax.scatter(changes, [i] * len(changes), s=8, alpha=0.5)
        ax.axvline(0, color="grey", linewidth=0.8)
        ax.set_title(title)
        ax.set_xlabel("change per module, % (negative: smaller)")
    axes[0].set_yticks(range(len(others)), [r.name for r in others])
    axes[0].invert_yaxis()  # the table's order, top to bottom
    fig.suptitle(f"Code size per module against {base.name}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _setup_timings(source: Path | None) -> str | None:
    # Written by scripts/setup.sh when one of its steps had work to do.
    if source is None:
        return None
    path = source / ".deps" / "setup-timings.json"
    try:
        obj = orjson.loads(path.read_bytes())
        steps = [(str(s["name"]), float(s["seconds"])) for s in obj["steps"]]
        finished = str(obj.get("finished", "?"))
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    total = sum(seconds for _, seconds in steps)
    parts = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in steps)
    return f"set-up (last run with work to do, {finished}): {parts}; {total:.0f} s in all"


def configurations(plugin: Path, models: Sequence[Any]) -> list[Configuration]:
    """The demo's configurations: stock, then each built-in model with its own pass.

    ``models`` are :class:`~mlbridge.models.registry.RegisteredModel` objects; each is put
    with the pass of its task, and a model of a task the demo has no pass for is an error.

    Raises:
        DemoError: If a model has no task, or one the demo cannot run.
    """
    configs = [Configuration(_STOCK, ("-passes=default<Oz>",))]
    for model in models:
        kind = _KIND_LABEL.get(model.kind, model.kind)
        if model.task == "inliner":
            args = ("-passes=default<Oz>", f"-mlbridge-inline-model={model.name}")
            name = f"ML inliner, {kind} '{model.name}'"
        elif model.task == "phase-order":
            args = ("-passes=mlbridge-phase-order", f"-mlbridge-phase-order-model={model.name}")
            name = f"phase ordering, {kind} '{model.name}'"
        else:
            raise DemoError(
                f"the built-in model {model.name!r} has task {model.task!r}, which the demo "
                "does not run; register it again with 'mlbridge models install-builtin'"
            )
        configs.append(
            Configuration(name, (f"-load-pass-plugin={plugin}", *args), model.task, model.name)
        )
    return configs


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the demo; see the module docstring."""
    from mlbridge.corpus import default_corpus_dir, load_manifest
    from mlbridge.models.builtin import ensure_builtin_models
    from mlbridge.paths import default_build_dir, find_source_dir, plugin_path
    from mlbridge.problems import PROBLEMS, builtin_models

    p = argparse.ArgumentParser(
        prog="mlbridge-demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--build-dir",
        type=Path,
        default=default_build_dir(),
        help="the C++ build folder with the plugins (default: $MLBRIDGE_BUILD_DIR, else build/)",
    )
    p.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="the corpus folder (default: .deps/corpus, built by the set-up)",
    )
    p.add_argument(
        "--split",
        default="heldout",
        choices=["train", "heldout"],
        help="which projects of the corpus (default: the held-out ones)",
    )
    p.add_argument(
        "--modules",
        type=int,
        default=0,
        metavar="N",
        help="only the first N modules, one per project in turn (default: all)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where the table (demo.md, demo.json) and the plot (demo.png) go "
        "(default: <build-dir>/demo)",
    )
    args = p.parse_args(argv)
    if args.build_dir is None:
        p.error("no build folder: pass --build-dir")
    if args.modules < 0:
        p.error("--modules must be 0 (all) or more")
    started = time.perf_counter()
    try:
        corpus = args.corpus or default_corpus_dir()
        manifest = load_manifest(corpus)
        entries = list(manifest.ok_modules(split=args.split))
        if not entries:
            raise DemoError(f"the corpus {corpus} has no {args.split} modules; run 'make setup'")
        projects = sorted({m.project for m in entries})
        modules = _pick(
            [(m.project, m.bitcode_path) for m in entries], args.modules or len(entries)
        )
        plugin = plugin_path("llvm", args.build_dir)
        if not plugin.is_file():
            raise DemoError(f"the opt plugin is not built: {plugin} (run 'make build')")
        models = ensure_builtin_models(builtin_models(), log=False)
        reports = {p.task: p.demo_report for p in PROBLEMS if p.demo_report is not None}
        configs = configurations(plugin, [m for m in models if m.task not in reports])
        print(
            f"mlbridge demo: {len(modules)} {args.split} modules of {', '.join(projects)}, "
            f"{len(configs)} configurations",
            file=sys.stderr,
        )
        stats = run_demo(modules, configs)
        picked = {str(m) for m in modules}
        sections = []
        for task, report in reports.items():
            of_task = [m for m in models if m.task == task]
            if of_task:
                print(f"mlbridge demo: {task} models in llc-22", file=sys.stderr)
                sections.append(
                    report([e for e in entries if str(e.bitcode_path) in picked], of_task)
                )
        out = args.out or args.build_dir / "demo"
        out.mkdir(parents=True, exist_ok=True)
        text = "\n\n".join([table(stats), *filter(None, sections)])
        (out / "demo.md").write_text(text + "\n")
        (out / "demo.json").write_bytes(
            orjson.dumps(
                {
                    "split": args.split,
                    "projects": projects,
                    "configurations": [asdict(c) for c in configs],
                    "results": [
                        {
                            **{k: v for k, v in asdict(s).items() if k != "per_module"},
                            "per_module": {k: asdict(v) for k, v in sorted(s.per_module.items())},
                        }
                        for s in stats
                    ],
                },
                option=orjson.OPT_INDENT_2,
            )
        )
        plot(stats, out / "demo.png")
    except MLBridgeError as e:
        print(f"mlbridge demo: error: {e}", file=sys.stderr)
        return 1
    print()
    print(text)
    print()
    print(
        "Allocated bytes: every section of the objects that occupies memory (.text, .rodata,\n"
        ".data, .bss, .eh_frame, ...) after llc-22 -O2; .text beside it. Opt time: wall time\n"
        f"of opt-22 alone, summed. Demo: {time.perf_counter() - started:.0f} s."
    )
    timings = _setup_timings(find_source_dir())
    if timings:
        print(timings)
    print(f"Table and per-module data: {out / 'demo.md'}, {out / 'demo.json'}")
    print(f"Plot (size change per module): {out / 'demo.png'}")
    print(
        f"""
Where to go next:
  - see what is installed and what is missing:   .venv/bin/mlbridge doctor
  - the models and the passes they answer:       .venv/bin/mlbridge models list
  - train your own inliner (docs/inliner.md):
      .venv/bin/mlbridge train inliner -o my-policy.json --onnx my.onnx
      .venv/bin/mlbridge models register my-inliner my.onnx
      opt-22 -load-pass-plugin={plugin} -passes='default<Oz>' \\
        -mlbridge-inline-model=my-inliner in.bc -o out.bc
  - train a phase-ordering agent:                .venv/bin/mlbridge train phase-order -o out/
                                                 (docs/phase-order-training.md)
  - answer from a Python process over a pipe:    docs/inliner.md, docs/pipe-protocol.md"""
    )
    return 0


def _pick(modules: Sequence[tuple[str, Path]], count: int) -> list[Path]:
    """``count`` modules, taking one of each project in turn (all projects are seen early)."""
    by_project: dict[str, list[Path]] = {}
    for project, path in modules:
        by_project.setdefault(project, []).append(path)
    queues = [list(reversed(paths)) for _, paths in sorted(by_project.items())]
    picked: list[Path] = []
    while len(picked) < count and any(queues):
        for queue in queues:
            if queue and len(picked) < count:
                picked.append(queue.pop())
    return picked


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
