#!/usr/bin/env python3
"""A ThinLTO link with the ML inliner in-process in lld's backends (a measurement, not a test).

What the ML-Compiler-Bridge paper's Table 3 measures (issue 16): a held-out project of the
corpus (Lua's ``lua`` interpreter, cmark-gfm's ``cmark-gfm``; docs/corpus.md) is compiled
once with stock ``clang-22 -Oz -flto=thin`` to ThinLTO bitcode, then linked by ``ld.lld-22``
in four configurations, interleaved round by round so that load on the machine hits all of
them alike:

- stock ``ld.lld-22 --thinlto-jobs=1`` and ``--thinlto-jobs=2`` (LLVM's inline advisor);
- the same two links with mlbridge's opt plugin loaded into the link
  (``--load-pass-plugin``) and its ML inline advisor answering every inlining decision of
  the ThinLTO backends in-process, on the built-in policy ``inliner-oz`` compiled to native
  code (``mlbridge compile``, docs/native.md; ``--model`` names another).

lld parses ``-mllvm`` options before it loads pass plugins (llvm/llvm-project#90956), so the
plugin's ``-mlbridge-inline-*`` options would be unknown: the plugin is also preloaded into
``ld.lld-22`` (``LD_PRELOAD``), which registers its options before lld parses them; lld's
``--load-pass-plugin`` then finds the library loaded and registers its passes in every
backend's pass builder. The link command is clang-22's own (``clang-22 -### -flto=thin
-fuse-ld=lld``: crt files, libraries), run as ``ld.lld-22`` directly so that the time is
the linker's alone. lld's ThinLTO backends run LLVM's ``O2`` LTO pipeline (lld has no
``Oz``; the functions keep the ``minsize``/``optsize`` attributes ``-Oz`` gave them).

Every plugin configuration is first linked once untimed with lld's optimization remarks
(``--opt-remarks-filename``, pass ``mlbridge-inline``): the decisions the model made in the
link, those that differ from LLVM's default heuristic, and no fallback warning (the script
fails otherwise). Every linked program is run on a small input (a Lua script; a Markdown text
with GitHub extensions) and must print exactly what the stock link prints. Reported: wall
time (median, min, max, spread of the repetitions) and CPU time of the link, the speed-up
from 1 to 2 backend threads (target: at least 1.8x), the plugin's cost over the stock link
at each thread count, and the program's allocated size (every ``SHF_ALLOC`` section) with
``.text`` beside it.

    .venv/bin/python bench/thinlto_link.py            # lua and cmark-gfm, 5 rounds
    .venv/bin/python bench/thinlto_link.py --quick    # the same, 2 rounds
    .venv/bin/python bench/thinlto_link.py --smoke    # cmark-gfm once: correctness only

Results: ``bench/results/thinlto-link-<time>.json`` and ``.md``; the Markdown of a full or
``--quick`` run also goes to ``bench/results/thinlto-link-latest.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlbridge.bench.stats import WIDE_SPREAD, spread_stats
from mlbridge.llvm import find_llvm_tool, object_sizes
from mlbridge.paths import plugin_path

ROOT = Path(__file__).resolve().parents[1]
#: The issue's target for 1 -> 2 ThinLTO backend threads (reported, never asserted).
TARGET_SPEEDUP = 1.8
#: Compile flags of the ThinLTO bitcode (the demo's size setting, -Oz).
COMPILE_FLAGS = ("-Oz", "-flto=thin", "-c", "-g0", "-w")
#: The pass name of the ML inline advisor's remarks (docs/inliner.md, "Remarks").
REMARK_PASS = "mlbridge-inline"
THREAD_COUNTS = (1, 2)

LUA_SCRIPT = r"""
local t = {}
for i = 1, 500 do t[i] = (i * 7919) % 1009 end
table.sort(t)
local s = 0
for i, v in ipairs(t) do s = s + v * i end
print("sum", s, #t)
print(string.format("%5.2f %x %q %g", math.pi, 48879, "a\nb", 1e300 * 10))
print(("hello world from lua"):gsub("o", "0"))
print(("key=value; other=thing"):match("(%w+)=(%w+)"))
local co = coroutine.wrap(function(a)
  for _ = 1, 3 do a = coroutine.yield(a * 2) end
  return "done"
end)
print(co(1), co(2), co(3), co(4))
local ok, err = pcall(function() error("boom") end)
print(ok, err)
print(utf8.char(72, 228, 8364), #utf8.char(8364), utf8.len("h\u{e4}\u{20ac}"))
print(string.pack(">i4", 1000):byte(1, -1))
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
print(fib(22))
print(select("#", 1, nil, 3), tostring(nil), 10 // 3, 7.5 % 2, 2 ^ 10, math.maxinteger)
print(string.rep("ab", 3, ","), table.concat({1, 2, 3}, "-"), load("return 1 + 2")())
local mt = setmetatable({}, {__index = function(_, k) return k * k end})
print(mt[12], rawget(mt, 12), next({}))
local words = {}
for w in ("the quick brown fox jumps over the lazy dog"):gmatch("%a+") do
  words[#words + 1] = w:upper()
end
table.sort(words)
print(table.concat(words, " "))
collectgarbage()
print(math.floor(3.7), math.ceil(3.2), math.tointeger(8.0), 0x7fffffffffffffff + 1)
"""

MARKDOWN_TEXT = """# A title with *emphasis*

Some **strong** text, `code`, ~~struck~~ words and a link <https://example.org/a?b=c>.

| name | value | note |
|------|:-----:|-----:|
| one  | 1     | first |
| two  | 2     | *second* |

- [x] done
- [ ] to do
  - nested item

1. first
2. second

> a quote with a [reference link][ref]

```c
int main(void) { return 0; }
```

[ref]: https://example.com "Title"

Line with a footnote-like &amp; entity &copy; and <b>inline HTML</b>.
"""


@dataclass(frozen=True)
class Program:
    """A program of a held-out corpus project, linked and then run on a small input.

    Attributes:
        project: The corpus project (``corpus/recipe.json``).
        name: The program's file name.
        exclude: Its project's sources that belong to other programs (a second ``main``).
        libraries: What the link needs beyond the C library.
        args: The program's arguments for the behaviour check.
        stdin: Its standard input for the behaviour check.
    """

    project: str
    name: str
    exclude: tuple[str, ...]
    libraries: tuple[str, ...]
    args: tuple[str, ...]
    stdin: str


PROGRAMS = {
    "lua": Program("lua", "lua", ("src/luac.c",), ("-lm",), ("-",), LUA_SCRIPT),
    "cmark-gfm": Program(
        "cmark-gfm",
        "cmark-gfm",
        (),
        (),
        ("--to", "html", "-e", "table", "-e", "strikethrough", "-e", "autolink", "-e", "tasklist"),
        MARKDOWN_TEXT,
    ),
}


@dataclass
class LinkConfig:
    """One way of linking: with or without the plugin, on how many backend threads."""

    ml: bool
    jobs: int
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The row label."""
        how = "ML inliner (plugin in lld)" if self.ml else "stock ld.lld-22"
        return f"{how}, --thinlto-jobs={self.jobs}"


@dataclass
class LinkedProgram:
    """What one configuration produced: the program, its size, its output, the decisions."""

    allocated_bytes: int
    text_bytes: int
    sha256: str
    output_sha256: str
    decisions: int = 0
    inlined: int = 0
    differ_from_default: int = 0


def _log(message: str) -> None:
    print(f"thinlto-link: {message}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()
    return {
        "node": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": list(load),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "summary": f"{platform.machine()}, {os.cpu_count()} CPUs, load {load[0]:.2f}",
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compile_thinlto(program: Program, corpus: Path, out_dir: Path, timeout: float) -> list[Path]:
    """Compiles ``program``'s sources to ThinLTO bitcode objects; returns them in order.

    The sources, their folder and the flags are the corpus's (the held-out modules of the
    manifest, the project's defines, include folders and flags in the recipe); only the
    optimization flags differ (:data:`COMPILE_FLAGS`).
    """
    from mlbridge.corpus import load_manifest, load_recipe

    manifest = load_manifest(corpus)
    project = load_recipe().project(program.project)
    modules = [
        m
        for m in manifest.ok_modules(project=program.project)
        if Path(m.source).relative_to(Path("src") / program.project).as_posix()
        not in program.exclude
    ]
    if not modules:
        raise RuntimeError(
            f"the corpus in {corpus} has no module of {program.project}: build it with "
            "`mlbridge corpus build`"
        )
    clang = find_llvm_tool("clang")
    out_dir.mkdir(parents=True, exist_ok=True)

    def one(index_module: tuple[int, Any]) -> Path:
        index, module = index_module
        rel = Path(module.source).relative_to(Path("src") / program.project).as_posix()
        root = Path(module.cwd)
        obj = out_dir / f"{index:03d}-{Path(rel).stem}.o"
        argv = [clang, *COMPILE_FLAGS, *project.flags, *project.file_flags.get(rel, ())]
        argv += [f"-D{d}" for d in project.defines]
        argv += [f"-I{root / d}" for d in project.include_dirs]
        argv += [rel, "-o", str(obj)]
        proc = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{shlex.join(argv)} failed:\n{proc.stderr[-2000:]}")
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(one, enumerate(modules)))


def link_command(objects: Sequence[Path], program: Program, timeout: float) -> list[str]:
    """The ``ld.lld-22`` command line clang-22's driver runs for a ThinLTO link.

    Taken from ``clang-22 -### -flto=thin -fuse-ld=lld --ld-path=<ld.lld-22>`` (the C
    runtime's start files, library folders, the C library); ``-o`` is the placeholder
    ``{out}``.
    """
    lld = find_llvm_tool("ld.lld")
    argv = [find_llvm_tool("clang"), "-###", "-flto=thin", "-fuse-ld=lld", f"--ld-path={lld}"]
    argv += [*map(str, objects), "-o", "{out}", *program.libraries]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} failed:\n{proc.stderr[-2000:]}")
    for line in reversed(proc.stderr.splitlines()):
        words = shlex.split(line)
        if words and words[0] == lld:
            return words
    raise RuntimeError(f"clang-22 -### printed no {lld} command:\n{proc.stderr[-2000:]}")


def _with_output(base: Sequence[str], out: Path) -> list[str]:
    return [str(out) if a == "{out}" else a for a in base]


@dataclass(frozen=True)
class PluginLoad:
    """How the plugin and its ML inline advisor go into ``ld.lld-22``."""

    plugin: Path
    model: str

    def args(self) -> list[str]:
        """lld arguments: load the plugin into the LTO backends, select the model."""
        return [
            f"--load-pass-plugin={self.plugin}",
            "-mllvm",
            f"-mlbridge-inline-model={self.model}",
        ]

    def environment(self) -> dict[str, str]:
        """The environment: the plugin preloaded, so lld knows its options when it parses them."""
        env = dict(os.environ)
        preload = env.get("LD_PRELOAD", "")
        env["LD_PRELOAD"] = f"{self.plugin} {preload}".strip()
        return env


def run_link(
    base: Sequence[str],
    config: LinkConfig,
    plugin: PluginLoad,
    out: Path,
    timeout: float,
    extra: Sequence[str] = (),
) -> tuple[float, float]:
    """Links once; returns the wall and CPU seconds of ``ld.lld-22``.

    Raises:
        RuntimeError: If the link fails, or the ML inline advisor warns (it fell back to
            LLVM's advisor, e.g. for a backend it was not registered with).
    """
    argv = [*_with_output(base, out), f"--thinlto-jobs={config.jobs}", *extra]
    env = None
    if config.ml:
        argv += plugin.args()
        env = plugin.environment()
    cpu_start = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    wall = time.perf_counter() - start
    cpu = _children_cpu() - cpu_start
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} failed:\n{proc.stderr[-3000:]}")
    if REMARK_PASS in proc.stderr:
        raise RuntimeError(
            f"the ML inline advisor warned in {config.label}:\n{proc.stderr[-3000:]}"
        )
    return wall, cpu


_REMARK_FIELD = re.compile(r"^(?:  - )?(Pass|Advice|Default):\s+'?([\w-]+)'?\s*$")


def count_decisions(remark_files: Sequence[Path]) -> tuple[int, int, int]:
    """Counts the ML inline advisor's remarks in lld's YAML remark files.

    Returns:
        The decisions, those that said inline, those that differ from LLVM's default.
    """
    decisions = inlined = differ = 0
    for path in remark_files:
        remark: dict[str, str] = {}
        for line in [*path.read_text().splitlines(), "--- !End"]:
            if line.startswith("--- !"):
                if remark.get("Pass") == REMARK_PASS and "Advice" in remark:
                    decisions += 1
                    inlined += remark["Advice"] == "inline"
                    differ += remark["Advice"] != remark.get("Default")
                remark = {}
                continue
            match = _REMARK_FIELD.match(line)
            if match:
                remark.setdefault(match.group(1), match.group(2))
    return decisions, inlined, differ


def run_program(binary: Path, program: Program, timeout: float) -> str:
    """Runs a linked program on its check input; returns its standard output."""
    proc = subprocess.run(
        [str(binary), *program.args],
        input=program.stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{binary} exited with {proc.returncode}:\n{proc.stderr[-2000:]}")
    return proc.stdout


def measure_program(
    program: Program,
    corpus: Path,
    plugin: PluginLoad,
    rounds: int,
    work: Path,
    timeout: float,
) -> dict[str, Any]:
    """Compiles, proves and times the links of one program; returns its result record."""
    start = time.perf_counter()
    objects = compile_thinlto(program, corpus, work / "obj", timeout)
    compile_seconds = time.perf_counter() - start
    _log(f"{program.name}: {len(objects)} modules compiled in {compile_seconds:.1f} s")
    base = link_command(objects, program, timeout)
    configs = [LinkConfig(ml, jobs) for ml in (False, True) for jobs in THREAD_COUNTS]
    linked: dict[str, LinkedProgram] = {}
    outputs: dict[str, str] = {}
    for c in configs:
        out = work / f"{program.name}-{'ml' if c.ml else 'stock'}-j{c.jobs}"
        extra: list[str] = []
        remarks = work / f"remarks-{out.name}" / "remarks.yaml"
        if c.ml:
            remarks.parent.mkdir(parents=True, exist_ok=True)
            extra = ["--opt-remarks-filename", str(remarks), "--opt-remarks-passes", REMARK_PASS]
        run_link(base, c, plugin, out, timeout, extra)
        sizes = object_sizes(out)
        outputs[c.label] = run_program(out, program, timeout)
        record = LinkedProgram(
            allocated_bytes=sizes.allocated,
            text_bytes=sizes.text,
            sha256=_sha256(out),
            output_sha256=hashlib.sha256(outputs[c.label].encode()).hexdigest(),
        )
        if c.ml:
            files = sorted(remarks.parent.glob("remarks.yaml*"))
            record.decisions, record.inlined, record.differ_from_default = count_decisions(files)
            if record.decisions == 0:
                raise RuntimeError(f"{c.label}: the ML inline advisor made no decision")
        linked[c.label] = record
    reference = outputs[configs[0].label]
    for label, text in outputs.items():
        if text != reference:
            raise RuntimeError(
                f"{program.name} linked by {label} prints something else than by "
                f"{configs[0].label}:\n--- {configs[0].label}\n{reference}\n--- {label}\n{text}"
            )
    _log(f"{program.name}: every link runs and prints the same; timing {rounds} rounds")
    out = work / f"{program.name}-timed"
    for r in range(rounds):
        # Rotate the order each round so that no configuration always runs first.
        for c in configs[r % len(configs) :] + configs[: r % len(configs)]:
            wall, cpu = run_link(base, c, plugin, out, timeout)
            c.seconds.append(wall)
            c.cpu_seconds.append(cpu)
        _log(f"{program.name}: round {r + 1}/{rounds}")
    return {
        "program": program.name,
        "project": program.project,
        "modules": len(objects),
        "compile_seconds": compile_seconds,
        "link_command": shlex.join(base),
        "check_output": reference,
        "configurations": [
            {
                "label": c.label,
                "ml": c.ml,
                "jobs": c.jobs,
                "seconds": c.seconds,
                "cpu_seconds": c.cpu_seconds,
                "wall": spread_stats(c.seconds),
                "cpu": spread_stats(c.cpu_seconds),
                "program": vars(linked[c.label]),
            }
            for c in configs
        ],
    }


def _config(result: dict[str, Any], ml: bool, jobs: int) -> dict[str, Any]:
    return next(c for c in result["configurations"] if c["ml"] == ml and c["jobs"] == jobs)


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Speed-ups (1 -> 2 threads), plugin-over-stock ratios and determinism of one program."""
    summary: dict[str, Any] = {"speedup": {}, "ml_over_stock": {}, "deterministic": {}}
    for ml in (False, True):
        one, two = (_config(result, ml, j)["wall"]["median"] for j in THREAD_COUNTS)
        key = "ml" if ml else "stock"
        summary["speedup"][key] = one / two if two > 0 else 0.0
        hashes = {_config(result, ml, j)["program"]["sha256"] for j in THREAD_COUNTS}
        summary["deterministic"][key] = len(hashes) == 1
    for jobs in THREAD_COUNTS:
        stock = _config(result, False, jobs)["wall"]["median"]
        ml_time = _config(result, True, jobs)["wall"]["median"]
        summary["ml_over_stock"][str(jobs)] = ml_time / stock if stock > 0 else 0.0
    return summary


def _pct(value: int, base: int) -> str:
    return f"{(value / base - 1) * 100:+.2f}%" if base else ""


def markdown(report: dict[str, Any]) -> str:
    """The results as Markdown."""
    meta, mach = report["meta"], report["machine"]
    lines = [
        f"ThinLTO link of held-out corpus programs with `ld.lld-22`, stock and with mlbridge's "
        f"ML inliner in-process in the backends (model `{meta['model']}`), "
        f"{meta['rounds']} interleaved round(s){' (--quick)' if meta['quick'] else ''}"
        f"{' (--smoke)' if meta['smoke'] else ''}; {mach['cpu']}, {mach['summary']}, "
        f"{meta['date']}. Bitcode: `clang-22 {' '.join(COMPILE_FLAGS)}`.",
        "",
        "Wall time of the link: median (min - max, spread = (max - min) / median); speed-up = "
        "median with 1 backend thread / median with 2 (target >= "
        f"{TARGET_SPEEDUP:.1f}x); CPU = user + system time of `ld.lld-22`.",
        "",
        "| program | link | 1 thread (s) | 2 threads (s) | speed-up | CPU 1 / 2 (s) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    wide: list[str] = []
    for result in report["programs"]:
        summary = result["summary"]
        for ml in (False, True):
            cells = []
            cpu = []
            for jobs in THREAD_COUNTS:
                c = _config(result, ml, jobs)
                w = c["wall"]
                cells.append(
                    f"{w['median']:.2f} ({w['min']:.2f} - {w['max']:.2f}, {w['spread']:.0%})"
                )
                cpu.append(f"{c['cpu']['median']:.2f}")
                if w["spread"] > WIDE_SPREAD:
                    wide.append(f"{result['program']}, {c['label']}")
            how = "ML inliner (plugin)" if ml else "stock"
            speedup = summary["speedup"]["ml" if ml else "stock"]
            lines.append(
                f"| {result['program']} | {how} | {cells[0]} | {cells[1]} | {speedup:.2f}x "
                f"| {' / '.join(cpu)} |"
            )
    lines += [
        "",
        "The plugin's cost: median link time with the ML inliner over the stock link.",
        "",
        "| program | 1 thread | 2 threads |",
        "| --- | ---: | ---: |",
    ]
    for result in report["programs"]:
        ratio = result["summary"]["ml_over_stock"]
        lines.append(f"| {result['program']} | {ratio['1']:.2f}x | {ratio['2']:.2f}x |")
    lines += [
        "",
        "The linked programs (2 backend threads; 1 thread links the same bytes where "
        "'same program' says yes): allocated size (every section that occupies memory) and "
        "`.text`, against the stock link; the ML inline advisor's decisions in the link (its "
        "`mlbridge-inline` remarks), how many said inline and how many differ from LLVM's "
        "default heuristic; every program printed the same output on the check input.",
        "",
        "| program | link | allocated bytes | vs stock | .text bytes | vs stock | decisions "
        "| inline | differ from default | same program, 1 and 2 threads |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for result in report["programs"]:
        stock = _config(result, False, 2)["program"]
        for ml in (False, True):
            p = _config(result, ml, 2)["program"]
            same = "yes" if result["summary"]["deterministic"]["ml" if ml else "stock"] else "no"
            decisions = (
                (str(p["decisions"]), str(p["inlined"]), str(p["differ_from_default"]))
                if ml
                else ("", "", "")
            )
            allocated, text = p["allocated_bytes"], p["text_bytes"]
            lines.append(
                f"| {result['program']} | {'ML inliner (plugin)' if ml else 'stock'} "
                f"| {allocated} | {_pct(allocated, stock['allocated_bytes'])} "
                f"| {text} | {_pct(text, stock['text_bytes'])} "
                f"| {' | '.join(decisions)} | {same} |"
            )
    if wide:
        lines += ["", "**Warnings**", ""]
        lines += [
            f"- {w}: spread above {WIDE_SPREAD:.0%}: the machine was busy; compare medians "
            "with care."
            for w in wide
        ]
    return "\n".join(lines) + "\n"


def _native_builtin_model(folder: Path) -> Path:
    """The built-in inlining policy compiled to native code (as bench/inliner_compile.py)."""
    from mlbridge.inliner.policy import LinearPolicy
    from mlbridge.native import compile_onnx
    from mlbridge.problems import builtin_model

    builtin = builtin_model("inliner")
    onnx_model = folder / f"{builtin.name}.onnx"
    LinearPolicy.load(builtin.policy_path).to_onnx(onnx_model)
    return compile_onnx(onnx_model, folder / "inliner.so", name=builtin.name.replace("-", "_"))


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the benchmark; see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--build-dir", type=Path, default=None, help="default: $MLBRIDGE_BUILD_DIR or build/"
    )
    p.add_argument("--corpus", type=Path, default=None, help="default: the corpus's default folder")
    p.add_argument(
        "--programs", default=",".join(PROGRAMS), help=f"comma-separated, of {', '.join(PROGRAMS)}"
    )
    p.add_argument(
        "--model",
        default=None,
        help="a registered inliner model or a .so/.onnx path (default: the built-in policy "
        "inliner-oz compiled to native code)",
    )
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--quick", action="store_true", help="2 rounds")
    p.add_argument("--smoke", action="store_true", help="cmark-gfm, 1 round: correctness only")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--timeout", type=float, default=600.0, help="bound of every command, s")
    args = p.parse_args(argv)

    from mlbridge.corpus import default_corpus_dir

    build = args.build_dir or Path(os.environ.get("MLBRIDGE_BUILD_DIR") or ROOT / "build")
    plugin = plugin_path("llvm", build)
    if not plugin.is_file():
        p.error(f"{plugin} is not built: run `make build` (or pass --build-dir)")
    names = ["cmark-gfm"] if args.smoke else [n for n in args.programs.split(",") if n]
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        p.error(f"unknown program(s) {unknown}; known: {', '.join(PROGRAMS)}")
    rounds = 1 if args.smoke else 2 if args.quick else args.rounds
    corpus = args.corpus or default_corpus_dir()
    with tempfile.TemporaryDirectory(prefix="mlbridge-thinlto-") as tmp:
        work = Path(tmp)
        model = args.model or str(_native_builtin_model(work))
        load = PluginLoad(plugin, model)
        results = []
        for name in names:
            try:
                result = measure_program(
                    PROGRAMS[name], corpus, load, rounds, work / name, args.timeout
                )
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                _log(f"{name}: {e}")
                return 1
            result["summary"] = summarize(result)
            results.append(result)
    report: dict[str, Any] = {
        "meta": {
            "command": "bench/thinlto_link.py "
            + " ".join(argv if argv is not None else sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "plugin": str(plugin),
            "model": args.model or "inliner-oz (native, mlbridge compile)",
            "linker": find_llvm_tool("ld.lld"),
            "rounds": rounds,
            "quick": args.quick,
            "smoke": args.smoke,
            "target_speedup": TARGET_SPEEDUP,
            "statistic": statistics.median.__name__,
        },
        "machine": machine(),
        "programs": results,
    }
    text = markdown(report)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = ("smoke-" if args.smoke else "") + time.strftime("%Y%m%d-%H%M%S")
    (args.out / f"thinlto-link-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / f"thinlto-link-{stamp}.md").write_text(text)
    if not args.smoke:
        (args.out / "thinlto-link-latest.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
