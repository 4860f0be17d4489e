"""mlbridge.llvm.object_sizes on a program linked by ld.lld-22: lld's page padding is not size.

lld gives the gap that ends the read-only-after-relocation segment on a page boundary a
section, ``.relro_padding`` (SHF_ALLOC, NOBITS); counting it would absorb any change of the
code's size up to a page. Every other allocated section counts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from mlbridge.llvm import find_llvm_tool, object_sizes


def _allocated_sections(binary: Path) -> dict[str, int]:
    """Name -> size of the SHF_ALLOC sections, as llvm-readelf lists them."""
    out = subprocess.run(
        [find_llvm_tool("llvm-readelf"), "-SW", str(binary)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    sizes: dict[str, int] = {}
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) >= 8 and fields[0].startswith("[") and fields[1].startswith("."):
            name, size, flags = fields[1], int(fields[5], 16), fields[7]
            if "A" in flags:
                sizes[name] = size
    return sizes


def test_lld_relro_padding_is_left_out_of_the_allocated_size(tmp_path: Path) -> None:
    source = tmp_path / "hello.c"
    source.write_text('#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n')
    binary = tmp_path / "hello"
    subprocess.run(
        [find_llvm_tool("clang"), "-O2", "-fuse-ld=lld", f"--ld-path={find_llvm_tool('ld.lld')}",
         str(source), "-o", str(binary)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    sections = _allocated_sections(binary)
    assert ".relro_padding" in sections and ".text" in sections
    sizes = object_sizes(binary)
    assert sizes.text == sections[".text"]
    assert sizes.allocated == sum(sections.values()) - sections[".relro_padding"]
