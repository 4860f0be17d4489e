"""Where LLVM 22's tools are, and how big an object file is.

The one place the package looks for LLVM's command-line tools (``opt``, ``llc``,
``llvm-size``, ...): ``$MLBRIDGE_LLVM_TOOLS_DIR`` when set, else ``<name>-22`` on
``PATH`` (Debian's ``llvm-22`` packages), else ``/usr/lib/llvm-22/bin/<name>``.

Code size is measured the way a linker and a loader see it: :func:`object_sizes` reads
the ELF section table and sums the sections that occupy memory (``SHF_ALLOC``:
``.text``, ``.rodata``, ``.data``, ``.bss``, ``.eh_frame``, ...), with ``.text`` beside
it, because ``.text`` alone flatters a transformation that trades instructions for
unwind tables or constants. In a program linked by ``ld.lld``, ``.relro_padding`` is left
out: it is the gap lld fills so that the read-only-after-relocation segment ends on a page
boundary (other linkers leave the same gap without a section), and it would absorb a change
of the code's size up to a page.
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from mlbridge.errors import MLBridgeError

__all__ = [
    "LLVM_TOOLS_DIR_ENV",
    "LLVMToolError",
    "ObjectSizes",
    "find_llvm_tool",
    "llvm_tools_dir",
    "object_sizes",
]

#: The environment variable that names the folder of LLVM 22's tools.
LLVM_TOOLS_DIR_ENV = "MLBRIDGE_LLVM_TOOLS_DIR"
_DEFAULT_TOOLS_DIR = Path("/usr/lib/llvm-22/bin")

_SHF_ALLOC = 0x2
_SHT_NOBITS = 8
#: Allocated sections that are padding, not content (see the module docstring).
_PADDING_SECTIONS = frozenset({".relro_padding"})


class LLVMToolError(MLBridgeError):
    """An LLVM tool is missing, or its output cannot be read."""


def llvm_tools_dir() -> Path:
    """The folder of LLVM 22's tools: ``$MLBRIDGE_LLVM_TOOLS_DIR`` or ``/usr/lib/llvm-22/bin``."""
    env = os.environ.get(LLVM_TOOLS_DIR_ENV)
    return Path(env) if env else _DEFAULT_TOOLS_DIR


def find_llvm_tool(name: str) -> str:
    """The path of LLVM 22's ``name`` (``opt``, ``llc``, ``llvm-size``, ...).

    Looks in ``$MLBRIDGE_LLVM_TOOLS_DIR`` when it is set (and only there), else for
    ``<name>-22`` on ``PATH``, then in ``/usr/lib/llvm-22/bin``.

    Raises:
        LLVMToolError: If the tool is not found; the message says where it looked and how
            to install it.
    """
    env = os.environ.get(LLVM_TOOLS_DIR_ENV)
    if env:
        path = Path(env) / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise LLVMToolError(
            f"LLVM's {name} is not in {env} (${LLVM_TOOLS_DIR_ENV}); point the variable at "
            "LLVM 22's bin folder, or unset it to use /usr/lib/llvm-22/bin"
        )
    found = shutil.which(f"{name}-22")
    if found:
        return found
    path = _DEFAULT_TOOLS_DIR / name
    if path.is_file():
        return str(path)
    raise LLVMToolError(
        f"LLVM 22's {name} is not installed (looked for {name}-22 on PATH and {path}); "
        "run 'make setup' (Debian's llvm-22-tools), or set "
        f"${LLVM_TOOLS_DIR_ENV} to the folder that has it"
    )


@dataclass(frozen=True)
class ObjectSizes:
    """The sizes of an object file's sections, in bytes.

    Attributes:
        text: The ``.text`` sections (``.text`` and ``.text.*``).
        allocated: Every section that occupies memory when loaded (``SHF_ALLOC``),
            ``.text`` included, but lld's page padding ``.relro_padding``: what a program
            pays for the code.
    """

    text: int
    allocated: int

    def __add__(self, other: ObjectSizes) -> ObjectSizes:
        return ObjectSizes(self.text + other.text, self.allocated + other.allocated)


def object_sizes(obj: str | Path) -> ObjectSizes:
    """The ``.text`` and allocated sizes of an ELF object file or program.

    Raises:
        LLVMToolError: If the file cannot be read or is not a well-formed ELF file.
    """
    path = Path(obj)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise LLVMToolError(f"cannot read the object file {path}: {e.strerror}") from None
    try:
        return _elf_sizes(data)
    except (struct.error, IndexError, ValueError) as e:
        raise LLVMToolError(f"{path} is not a well-formed ELF file: {e}") from None


def _elf_sizes(data: bytes) -> ObjectSizes:
    if data[:4] != b"\x7fELF":
        raise ValueError("no ELF magic")
    is64 = {1: False, 2: True}[data[4]]
    order = {1: "<", 2: ">"}[data[5]]
    if is64:
        shoff, shentsize, shnum, shstrndx = (
            struct.unpack_from(order + "Q", data, 0x28)[0],
            *struct.unpack_from(order + "HHH", data, 0x3A),
        )
        section = struct.Struct(order + "IIQQQQIIQQ")
    else:
        shoff, shentsize, shnum, shstrndx = (
            struct.unpack_from(order + "I", data, 0x20)[0],
            *struct.unpack_from(order + "HHH", data, 0x2E),
        )
        section = struct.Struct(order + "IIIIIIIIII")
    if shnum == 0 or shentsize < section.size:
        raise ValueError("no section table")
    headers = [section.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    names_offset = headers[shstrndx][4]
    text = allocated = 0
    for name_index, _type, flags, _addr, _offset, size, *_ in headers:
        if not flags & _SHF_ALLOC:
            continue
        start = names_offset + name_index
        name = data[start : data.index(b"\0", start)].decode("ascii", "replace")
        if name in _PADDING_SECTIONS:
            continue
        allocated += size
        if name == ".text" or name.startswith(".text."):
            text += size
    return ObjectSizes(text=text, allocated=allocated)
