"""Real programs of the corpus built with a given register allocator, run and compared.

Register allocation must never change what a program does. This module builds a corpus
project's program with every function allocated by the allocator ``llc-22`` is given (LLVM's
greedy, or ``-regalloc=mlbridge`` with any policy or model), runs it on an input that
exercises it, and returns a transcript (its output, or a digest of the files it wrote) that
must be the same as with greedy:

* ``lua``: the Lua 5.4 interpreter running a script of tables, closures, strings,
  coroutines, metatables, errors and sorting;
* ``bzip2``: compressing a generated file and decompressing it byte-identically;
* ``mujs``: the MuJS interpreter running JavaScript with objects, closures, regular
  expressions, JSON and exceptions.

Every module goes through ``opt-22 -O2`` once (shared by every allocator) and ``llc-22 -O2
-relocation-model=pic`` with the allocator's options; ``clang-22`` links the objects.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mlbridge.errors import MLBridgeError
from mlbridge.llvm import find_llvm_tool

__all__ = [
    "PROGRAMS",
    "Program",
    "ProgramError",
    "build_program",
    "mlbridge_allocator",
    "optimize_modules",
    "run_program",
]


class ProgramError(MLBridgeError):
    """A program could not be built, or ran wrongly."""


LUA_SCRIPT = r"""
local t = {}
for i = 1, 200 do t[i] = (i * 7919) % 1009 end
table.sort(t, function(a, b) return a > b end)
print("sorted", t[1], t[100], t[200], #t)
local function counter()
  local n = 0
  return function(k) n = n + (k or 1); return n end
end
local c1, c2 = counter(), counter()
c1(); c1(5); c2(2)
print("closures", c1(), c2())
local words = {}
for w in ("the quick brown fox jumps over the lazy dog"):gmatch("%a+") do
  words[#words + 1] = w:upper():reverse()
end
print("strings", table.concat(words, ","), ("%5.2f|%-6s|%x"):format(math.pi, "ab", 48879))
print("gsub", (("hello world"):gsub("o", "0")), ("a,b,,c"):find(",,", 1, true))
local gen = coroutine.wrap(function()
  local a, b = 0, 1
  for _ = 1, 30 do coroutine.yield(a); a, b = b, a + b end
end)
local fib = {}
for _ = 1, 30 do fib[#fib + 1] = gen() end
print("coroutines", fib[10], fib[30])
local co = coroutine.create(function(x)
  local y = coroutine.yield(x * 2)
  return x + y
end)
print("resume", coroutine.resume(co, 20), coroutine.resume(co, 3), coroutine.status(co))
local V = {}
V.__index = V
V.__add = function(a, b) return setmetatable({x = a.x + b.x}, V) end
V.__tostring = function(v) return "V(" .. v.x .. ")" end
print("metatables", tostring(setmetatable({x = 2}, V) + setmetatable({x = 40}, V)))
print("pcall", pcall(function() error({code = 7}) end), select(2, pcall(error, "boom", 0)))
local acc = 0
for i = 1, 100000 do acc = (acc + i * i) % 1000003 end
print("arith", acc, 7 // 2, 7 % -3, 2^10, math.maxinteger // 3)
local big = {}
for i = 1, 5000 do big["k" .. i] = i end
local sum = 0
for k, v in pairs(big) do sum = sum + v + #k end
print("hash", sum, utf8.char(72, 228, 8364), #utf8.char(8364))
"""

MUJS_SCRIPT = r"""
var a = [];
for (var i = 0; i < 300; i++) a.push((i * 7919) % 1009);
a.sort(function (x, y) { return x - y; });
print("sorted", a[0], a[150], a[299], a.length);
function counter() { var n = 0; return function (k) { n += (k || 1); return n; }; }
var c1 = counter(), c2 = counter();
c1(); c1(5); c2(2);
print("closures", c1(), c2());
var text = "The quick brown fox jumps over the lazy dog 42 times";
print("regexp", text.replace(/o(\w)/g, "[$1]"), /(\d+)\s(\w+)/.exec(text)[2]);
print("split", text.split(" ").map(function (w) { return w.length; }).join(","));
var obj = {name: "mujs", list: [1, 2.5, "three", null, true], nested: {k: [{}, []]}};
var s = JSON.stringify(obj);
print("json", s, JSON.parse(s).list[2], JSON.stringify(JSON.parse(s)) === s);
try { null.x; } catch (e) { print("error", e instanceof TypeError); }
try { throw new RangeError("out"); } catch (e) { print("thrown", e.name, e.message); }
var acc = 0;
for (var j = 1; j <= 100000; j++) acc = (acc + j * j) % 1000003;
print("arith", acc, (0.1 + 0.2).toFixed(10), Math.floor(-7 / 2), (255).toString(16));
function Point(x, y) { this.x = x; this.y = y; }
Point.prototype.norm2 = function () { return this.x * this.x + this.y * this.y; };
var pts = [];
for (var k = 0; k < 1000; k++) pts.push(new Point(k % 17, k % 23));
print("objects", pts.reduce(function (t, p) { return t + p.norm2(); }, 0));
var h = {};
for (var m = 0; m < 3000; m++) h["k" + m] = m;
var keys = Object.keys(h);
print("hash", keys.length, h.k2999, "\u00e4\u20ac".length, encodeURIComponent("a b&\u00e4"));
"""


def _bzip2_input() -> bytes:
    """About 300 KB of text-like bytes, the same every time (bzip2 has work to do)."""
    words = [b"register", b"allocation", b"spill", b"coalesce", b"interval", b"split"]
    out = bytearray()
    state = 12345
    while len(out) < 300_000:
        state = (state * 1103515245 + 12345) % 2**31
        out += words[state % len(words)]
        out += b" " if state % 7 else b"\n"
        if state % 97 == 0:
            out += bytes(range(state % 251, state % 251 + 5))
    return bytes(out)


def _run(argv: Sequence[str], cwd: Path, timeout: float, stdin: bytes = b"") -> bytes:
    proc = subprocess.run(
        list(argv), cwd=cwd, input=stdin, capture_output=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise ProgramError(
            f"`{shlex.join(argv)}` exited with {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace')[-2000:]}"
        )
    return proc.stdout


def _check_lua(binary: Path, work: Path, timeout: float) -> str:
    return _run([str(binary), "-"], work, timeout, LUA_SCRIPT.encode()).decode()


def _check_mujs(binary: Path, work: Path, timeout: float) -> str:
    script = work / "check.js"
    script.write_text(MUJS_SCRIPT)
    return _run([str(binary), str(script)], work, timeout).decode()


def _check_bzip2(binary: Path, work: Path, timeout: float) -> str:
    data = _bzip2_input()
    packed = _run([str(binary), "-9", "-c"], work, timeout, data)
    unpacked = _run([str(binary), "-d", "-c"], work, timeout, packed)
    if unpacked != data:
        raise ProgramError(
            f"{binary}: decompressing gave {len(unpacked)} bytes that differ from the "
            f"{len(data)} compressed"
        )
    digest = hashlib.sha256(packed).hexdigest()
    return f"compressed {len(data)} bytes to {len(packed)} (sha256 {digest}); round trip exact\n"


@dataclass(frozen=True)
class Program:
    """A program of a corpus project and how to check it.

    Attributes:
        project: The corpus project (``corpus/recipe.json``).
        name: The program's file name.
        exclude: Its project's sources that belong to other programs (a second ``main``).
        libraries: What the link needs beyond the C library.
        check: Runs the linked program (binary, a work folder, a time bound) and returns
            its transcript; raises :class:`ProgramError` if it fails or misbehaves.
    """

    project: str
    name: str
    exclude: tuple[str, ...]
    libraries: tuple[str, ...]
    check: Callable[[Path, Path, float], str]


#: The programs, by name.
PROGRAMS: dict[str, Program] = {
    "lua": Program("lua", "lua", ("src/luac.c",), ("-lm",), _check_lua),
    "bzip2": Program(
        "bzip2",
        "bzip2",
        ("bzip2recover.c", "mk251.c", "spewG.c", "unzcrash.c", "dlltest.c"),
        (),
        _check_bzip2,
    ),
    "mujs": Program("mujs", "mujs", ("pp.c",), ("-lm",), _check_mujs),
}


def mlbridge_allocator(plugin: Path, *options: str, verify: bool = True) -> list[str]:
    """``llc-22`` options selecting the ML register allocator of ``plugin``.

    Args:
        plugin: ``MLBridgeLLCPlugin.so``.
        options: More ``-mlbridge-regalloc-*`` options (policy, runner, model).
        verify: Add ``-verify-machineinstrs`` (the machine verifier after every pass).
    """
    argv = [f"-load-pass-plugin={plugin}", "-regalloc=mlbridge", *options]
    return [*argv, "-verify-machineinstrs"] if verify else argv


def _jobs() -> int:
    return os.cpu_count() or 1


def optimize_modules(
    program: Program, corpus: Path, out_dir: Path, timeout: float = 600.0
) -> list[Path]:
    """``opt-22 -O2`` of the program's corpus modules into ``out_dir``; their paths, in order.

    Raises:
        ProgramError: If the corpus has no module of the project, or ``opt-22`` fails.
    """
    from mlbridge.corpus import load_manifest

    modules = [
        m
        for m in load_manifest(corpus).ok_modules(project=program.project)
        if Path(m.source).relative_to(Path("src") / program.project).as_posix()
        not in program.exclude
    ]
    if not modules:
        raise ProgramError(
            f"the corpus in {corpus} has no module of {program.project}: build it with "
            "`mlbridge corpus build`"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    opt = find_llvm_tool("opt")

    def one(index: int) -> Path:
        out = out_dir / f"{index:03d}-{Path(modules[index].source).stem}.bc"
        _run([opt, "-O2", str(modules[index].bitcode_path), "-o", str(out)], out_dir, timeout)
        return out

    with ThreadPoolExecutor(max_workers=_jobs()) as pool:
        return list(pool.map(one, range(len(modules))))


def build_program(
    program: Program,
    modules: Sequence[Path],
    llc_options: Sequence[str],
    out_dir: Path,
    timeout: float = 600.0,
) -> Path:
    """Compiles ``modules`` with ``llc-22 -O2 <llc_options>`` and links the program.

    Returns:
        The linked program, ``out_dir/<name>``.

    Raises:
        ProgramError: If a module does not compile or the link fails (with the words of
            the tool that failed).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    llc = find_llvm_tool("llc")

    def one(module: Path) -> Path:
        obj = out_dir / f"{module.stem}.o"
        argv = [llc, "-O2", "-filetype=obj", "-relocation-model=pic", *llc_options]
        _run([*argv, str(module), "-o", str(obj)], out_dir, timeout)
        return obj

    with ThreadPoolExecutor(max_workers=_jobs()) as pool:
        objects = list(pool.map(one, modules))
    binary = out_dir / program.name
    clang = find_llvm_tool("clang")
    _run([clang, *map(str, objects), "-o", str(binary), *program.libraries], out_dir, timeout)
    return binary


def run_program(program: Program, binary: Path, timeout: float = 120.0) -> str:
    """Runs ``binary`` on ``program``'s check, in a folder of its own; its transcript."""
    work = binary.parent / f"{binary.name}-run"
    work.mkdir(exist_ok=True)
    return program.check(binary, work, timeout)
