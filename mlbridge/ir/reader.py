"""Read LLVM IR with llvmlite and count what the inliner cares about.

A *call site* is a ``call``, ``invoke`` or ``callbr`` instruction. Each is classified by
its callee (:class:`CallKind`): a function defined in the module (an inlining candidate),
a declared external function, an LLVM intrinsic (``llvm.*``), an indirect call through a
pointer, or inline assembly.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mlbridge.errors import MLBridgeError

try:
    import llvmlite.binding as _llvm
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "mlbridge.ir needs llvmlite 0.50 (it embeds LLVM 22): pip install 'mlbridge[corpus]'"
    ) from e

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

_CALL_OPCODES = frozenset({"call", "invoke", "callbr"})
# A raw bitcode file and the wrapper some toolchains (Darwin) put around it.
_BITCODE_MAGICS = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")

#: The llvmlite module type returned by :func:`parse_module`.
Module = Any


class IRError(MLBridgeError, ValueError):
    """An IR file cannot be read or is not valid LLVM IR."""


class CallKind(str, enum.Enum):
    """What a call site calls."""

    DEFINED = "defined"
    EXTERNAL = "external"
    INTRINSIC = "intrinsic"
    INDIRECT = "indirect"
    INLINE_ASM = "inline_asm"


@dataclass(frozen=True)
class CallSite:
    """One call site: the calling function, the callee's name (if direct) and its kind."""

    caller: str
    callee: str | None
    kind: CallKind
    opcode: str


@dataclass(frozen=True)
class FunctionStats:
    """Counts for one function (all zero for a declaration)."""

    name: str
    linkage: str
    is_declaration: bool
    basic_blocks: int
    instructions: int
    call_sites: int
    calls_to_defined: int


@dataclass(frozen=True)
class ModuleStats:
    """Counts for one module.

    Attributes:
        defined_functions: Functions with a body.
        declared_functions: Declarations that are not LLVM intrinsics.
        intrinsic_declarations: Declarations of ``llvm.*`` intrinsics.
        basic_blocks: Basic blocks over all defined functions.
        instructions: Instructions over all defined functions.
        call_sites: All ``call``/``invoke``/``callbr`` instructions.
        calls_to_defined: Direct calls to a function defined in this module.
        calls_to_external: Direct calls to a declared, non-intrinsic function.
        calls_to_intrinsics: Calls to ``llvm.*`` intrinsics.
        indirect_calls: Calls through a function pointer.
        inline_asm_calls: Calls of inline assembly.
    """

    defined_functions: int
    declared_functions: int
    intrinsic_declarations: int
    basic_blocks: int
    instructions: int
    call_sites: int
    calls_to_defined: int
    calls_to_external: int
    calls_to_intrinsics: int
    indirect_calls: int
    inline_asm_calls: int

    def to_dict(self) -> dict[str, int]:
        """Return the counts as a JSON-ready dict (field name → count)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModuleStats:
        """Build from :meth:`to_dict` output.

        Raises:
            IRError: If a field is missing or not an integer.
        """
        values: dict[str, int] = {}
        for name in cls.__dataclass_fields__:
            value = data.get(name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise IRError(f"module statistics: field {name!r} is {value!r}, not an integer")
            values[name] = value
        return cls(**values)


def parse_module(path: str | Path) -> Module:
    """Parse a bitcode (``.bc``) or textual IR (``.ll``) file and verify it.

    The kind is read from the file's first bytes, not its name.

    Raises:
        IRError: If the file cannot be read, does not parse, or fails the verifier.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise IRError(f"cannot read the IR file {path}: {e.strerror}") from None
    try:
        if data[:4] in _BITCODE_MAGICS:
            module = _llvm.parse_bitcode(data)
        else:
            module = _llvm.parse_assembly(data.decode("utf-8", errors="replace"))
        module.verify()
    except RuntimeError as e:
        message = str(e).strip() or "unknown error"
        raise IRError(
            f"{path} is not valid LLVM 22 IR: {message} "
            "(llvmlite reads the output of LLVM 22 tools such as clang-22 and opt-22)"
        ) from None
    return module


def _call_site(caller: str, instruction: Any, defined: frozenset[str]) -> CallSite:
    # The callee is the last operand of every call-like instruction.
    callee = None
    for operand in instruction.operands:
        callee = operand
    kind_name = "" if callee is None else callee.value_kind.name
    if kind_name == "function":
        name = callee.name
        if name in defined:
            kind = CallKind.DEFINED
        elif name.startswith("llvm."):
            kind = CallKind.INTRINSIC
        else:
            kind = CallKind.EXTERNAL
        return CallSite(caller, name, kind, instruction.opcode)
    if kind_name == "inline_asm":
        return CallSite(caller, None, CallKind.INLINE_ASM, instruction.opcode)
    return CallSite(caller, None, CallKind.INDIRECT, instruction.opcode)


def _defined_names(module: Module) -> frozenset[str]:
    return frozenset(f.name for f in module.functions if not f.is_declaration)


def iter_call_sites(module: Module) -> Iterator[CallSite]:
    """Yield every call site of every defined function, in module order."""
    defined = _defined_names(module)
    for function in module.functions:
        if function.is_declaration:
            continue
        for block in function.blocks:
            for instruction in block.instructions:
                if instruction.opcode in _CALL_OPCODES:
                    yield _call_site(function.name, instruction, defined)


def iter_functions(module: Module) -> Iterator[FunctionStats]:
    """Yield the counts of every function (definitions and declarations), in module order."""
    defined = _defined_names(module)
    for function in module.functions:
        blocks = instructions = calls = to_defined = 0
        if not function.is_declaration:
            for block in function.blocks:
                blocks += 1
                for instruction in block.instructions:
                    instructions += 1
                    if instruction.opcode in _CALL_OPCODES:
                        calls += 1
                        site = _call_site(function.name, instruction, defined)
                        to_defined += site.kind is CallKind.DEFINED
        yield FunctionStats(
            name=function.name,
            linkage=function.linkage.name,
            is_declaration=bool(function.is_declaration),
            basic_blocks=blocks,
            instructions=instructions,
            call_sites=calls,
            calls_to_defined=to_defined,
        )


def stats_of(module: Module) -> ModuleStats:
    """Count functions, blocks, instructions and call sites of a parsed module."""
    defined_names = _defined_names(module)
    declared = intrinsics = blocks = instructions = 0
    kinds = dict.fromkeys(CallKind, 0)
    for function in module.functions:
        if function.is_declaration:
            if function.name.startswith("llvm."):
                intrinsics += 1
            else:
                declared += 1
            continue
        for block in function.blocks:
            blocks += 1
            for instruction in block.instructions:
                instructions += 1
                if instruction.opcode in _CALL_OPCODES:
                    kinds[_call_site(function.name, instruction, defined_names).kind] += 1
    return ModuleStats(
        defined_functions=len(defined_names),
        declared_functions=declared,
        intrinsic_declarations=intrinsics,
        basic_blocks=blocks,
        instructions=instructions,
        call_sites=sum(kinds.values()),
        calls_to_defined=kinds[CallKind.DEFINED],
        calls_to_external=kinds[CallKind.EXTERNAL],
        calls_to_intrinsics=kinds[CallKind.INTRINSIC],
        indirect_calls=kinds[CallKind.INDIRECT],
        inline_asm_calls=kinds[CallKind.INLINE_ASM],
    )


def read_module(path: str | Path) -> ModuleStats:
    """Parse an IR file (bitcode or text), verify it and return its counts.

    Raises:
        IRError: If the file cannot be read or is not valid LLVM IR.
    """
    module = parse_module(path)
    try:
        return stats_of(module)
    finally:
        module.close()
