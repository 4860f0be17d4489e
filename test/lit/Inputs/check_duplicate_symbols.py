"""Fails when one mlbridge symbol is defined in two shipped libraries.

    check_duplicate_symbols.py NM LIBRARY...

Runs ``NM -D --defined-only`` on each shared library or plugin and collects the strong
definitions (nm types T, D, B, R, G, S: functions and data with one definition rule
linkage) of mlbridge's symbols: those whose demangled name mentions ``mlbridge`` (its
namespaces, the generated ``mlbridge.v1`` protobuf code, the C API's ``mlbridge_``
functions). Weak and unique definitions (W, V, u, i: inline functions, template
instantiations, vtables and type information emitted in every user) are not counted: the
dynamic linker unifies those. The entry point every runner module exports
(``mlbridge_runner_module_v2``) is the module protocol and is allowed in each module.
Prints one line per symbol defined twice (with the libraries) and exits 1, or prints a
summary and exits 0.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

STRONG_TYPES = frozenset("TDBRGS")
ALLOWED_EVERYWHERE = frozenset({"mlbridge_runner_module_v2"})
POSIX_LINE = re.compile(r"^(.*) ([A-Za-z]) ([0-9a-f]+)( [0-9a-f]+)?$")


def nm_lines(nm: str, library: Path, demangle: bool) -> list[str]:
    """The lines of ``nm -D --defined-only`` on ``library``, demangled or not."""
    proc = subprocess.run(
        [nm, "-D", "--defined-only", "--format=posix", *(["-C"] if demangle else []), str(library)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"check_duplicate_symbols: {nm} failed on {library}: {proc.stderr}")
    return proc.stdout.splitlines()


def defined_symbols(nm: str, library: Path) -> dict[str, str]:
    """The strong mlbridge symbols ``library`` defines, mangled name to demangled name.

    Constructors and destructors have several mangled names (complete, base, deleting)
    that demangle alike: symbols are told apart by their mangled names.
    """
    mangled, demangled = nm_lines(nm, library, False), nm_lines(nm, library, True)
    symbols = {}
    for line, shown in zip(mangled, demangled, strict=True):
        # posix format: "<name> <type> <value> [<size>]".
        match = POSIX_LINE.match(line)
        if match is None:
            continue
        name, kind = match.group(1), match.group(2)
        if kind not in STRONG_TYPES or "mlbridge" not in name or name in ALLOWED_EVERYWHERE:
            continue
        shown_match = POSIX_LINE.match(shown)
        symbols[name] = shown_match.group(1) if shown_match else name
    return symbols


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    nm, libraries = argv[1], [Path(a) for a in argv[2:]]
    seen: set[Path] = set()
    where: dict[str, list[str]] = defaultdict(list)
    shown: dict[str, str] = {}
    checked = 0
    for library in libraries:
        real = library.resolve()
        if real in seen:
            continue
        seen.add(real)
        checked += 1
        for symbol, readable in defined_symbols(nm, library).items():
            where[symbol].append(library.name)
            shown[symbol] = readable
    twice = {s: libs for s, libs in where.items() if len(libs) > 1}
    for symbol, libs in sorted(twice.items()):
        print(f"defined twice: {shown[symbol]} in {', '.join(sorted(libs))}")
    if twice:
        print(f"check_duplicate_symbols: {len(twice)} symbols defined in more than one library")
        return 1
    print(
        f"check_duplicate_symbols: {checked} libraries, {len(where)} mlbridge symbols, "
        "none defined twice"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
