"""The C ABI of an mlbridge AOT model, and the C++ sources that implement it.

``mlbridge aot`` wraps the class XLA generates in a few C functions (docs/tfaot.md):
the same source is compiled twice, once with the prefix ``mlbridge_aot`` and default
visibility into the shared object that :cpp:func:`TFAOTModelRunner::load` opens, once
with the prefix ``mlbridge_aot_<name>`` and hidden visibility into the static library
that is linked into a plugin. The C++ side (include/mlbridge/TFAOTModelRunner.h) holds
the same list of functions in ``TFAOTFunctions``; ``ABI_VERSION`` must match its
``TFAOTAbiVersion``.

A model with a dynamic batch (``mlbridge compile`` of an ONNX model with a symbolic
leading dimension) gives that dimension as :data:`DYNAMIC_BATCH` in its shape tables
and also exports the :data:`BATCH_FUNCTIONS`: an addition to version 1 that models
without a batch (every ``mlbridge aot`` model) do not export. A model whose inputs each
take their own rows (the register allocator's agents, :mod:`mlbridge.regalloc.native`)
exports ``set_arg_rows`` instead, and may export ``error_message`` (docs/tfaot.md); its
own compiler writes its wrapper, not this module.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from functools import cache
from importlib import resources

from mlbridge.tensor_spec import TensorSpec

__all__ = [
    "ABI_FUNCTIONS",
    "ABI_VERSION",
    "BATCH_FUNCTIONS",
    "DYNAMIC_BATCH",
    "render_linked_header",
    "render_wrapper",
]

#: The version of the C ABI below; bumped whenever a function changes.
ABI_VERSION = 1

#: (suffix, C return type, C parameters) of each function, in TFAOTFunctions order.
ABI_FUNCTIONS: tuple[tuple[str, str, str], ...] = (
    ("abi_version", "uint32_t", "void"),
    ("model_name", "const char *", "void"),
    ("num_args", "int32_t", "void"),
    ("arg_name", "const char *", "int32_t index"),
    ("arg_type", "int32_t", "int32_t index"),
    ("arg_rank", "int32_t", "int32_t index"),
    ("arg_shape", "const int64_t *", "int32_t index"),
    ("num_results", "int32_t", "void"),
    ("result_name", "const char *", "int32_t index"),
    ("result_type", "int32_t", "int32_t index"),
    ("result_rank", "int32_t", "int32_t index"),
    ("result_shape", "const int64_t *", "int32_t index"),
    ("create", "struct mlbridge_aot_instance *", "void"),
    ("destroy", "void", "struct mlbridge_aot_instance *instance"),
    ("arg_data", "void *", "struct mlbridge_aot_instance *instance, int32_t index"),
    ("result_data", "const void *", "struct mlbridge_aot_instance *instance, int32_t index"),
    ("run", "int32_t", "struct mlbridge_aot_instance *instance"),
    (
        "set_arg_data",
        "int32_t",
        "struct mlbridge_aot_instance *instance, int32_t index, const void *data",
    ),
)

#: The functions only a model with a dynamic batch exports (TFAOTFunctions order).
BATCH_FUNCTIONS: tuple[tuple[str, str, str], ...] = (
    ("set_batch", "int32_t", "struct mlbridge_aot_instance *instance, int64_t batch"),
)

#: The dimension a shape table gives for the dynamic batch (the leading dimension).
DYNAMIC_BATCH = -1

# The TFAOTFunctions member of each suffix.
_MEMBERS = {
    "abi_version": "AbiVersion", "model_name": "ModelName", "num_args": "NumArgs",
    "arg_name": "ArgName", "arg_type": "ArgType", "arg_rank": "ArgRank",
    "arg_shape": "ArgShape", "num_results": "NumResults", "result_name": "ResultName",
    "result_type": "ResultType", "result_rank": "ResultRank",
    "result_shape": "ResultShape", "create": "Create", "destroy": "Destroy",
    "arg_data": "ArgData", "result_data": "ResultData", "run": "Run",
    "set_arg_data": "SetArgData", "set_batch": "SetBatch",
}  # fmt: skip


# mlbridge's element type numbers (ElementType in TensorSpec.h): protobuf's minus one.
def _type_number(spec: TensorSpec) -> int:
    return spec.type.value - 1


def _tables(kind: str, prefix: str, specs: Sequence[TensorSpec]) -> str:
    lines = []
    for i, spec in enumerate(specs):
        dims = ", ".join(str(d) for d in spec.shape) or "0"
        lines.append(f"constexpr int64_t k{kind}Shape{i}[] = {{{dims}}};")
    lines.append(f"constexpr std::array<TensorInfo, {len(specs)}> k{kind}s = {{{{")
    for i, spec in enumerate(specs):
        lines.append(
            f'    {{"{spec.name}", "{prefix}{spec.name}", {_type_number(spec)}, '
            f"{spec.rank}, k{kind}Shape{i}}},"
        )
    lines.append("}};")
    return "\n".join(lines)


@cache
def _wrapper_template() -> string.Template:
    """The wrapper's source (``wrapper.cpp.in``, package data) with ``${...}`` fields."""
    text = resources.files("mlbridge.aot").joinpath("wrapper.cpp.in").read_text(encoding="utf-8")
    return string.Template(text)


def render_wrapper(
    name: str, xla_header: str, xla_class: str, args: Sequence[TensorSpec],
    results: Sequence[TensorSpec],
) -> str:  # fmt: skip
    """Return the C++ source that implements the C ABI over the XLA class.

    The source is ``wrapper.cpp.in`` beside this module, its fields filled in.

    Args:
        name: The model name (a C identifier).
        xla_header: The header ``saved_model_cli`` wrote, as included.
        xla_class: The fully qualified XLA class.
        args: The model inputs, by signature name (fed as ``feed_<name>``).
        results: The model outputs (fetched as ``fetch_<name>``).
    """
    return _wrapper_template().substitute(
        name=name,
        xla_header=xla_header,
        xla_class=xla_class,
        arg_tables=_tables("Arg", "feed_", args),
        result_tables=_tables("Result", "fetch_", results),
        abi_version=ABI_VERSION,
    )


def render_linked_header(name: str, *, dynamic_batch: bool = False) -> str:
    """Return ``<name>_mlbridge.h``: the linked-in model's functions for the runner.

    Args:
        name: The model name.
        dynamic_batch: The model has a dynamic batch (it defines ``set_batch`` too).
    """
    prefix = f"mlbridge_aot_{name}"
    functions = ABI_FUNCTIONS + (BATCH_FUNCTIONS if dynamic_batch else ())
    decls = "\n".join(f"{ret} {prefix}_{suffix}({params});" for suffix, ret, params in functions)
    fills = "\n".join(f"  F.{_MEMBERS[s]} = &{prefix}_{s};" for s, _, _ in functions)
    guard = f"MLBRIDGE_AOT_{name.upper()}_MLBRIDGE_H"
    return f"""\
// Generated by `mlbridge aot` for the model '{name}'. DO NOT EDIT.
//
// The model linked into this binary (target mlbridge_aot_{name}):
//   auto Runner = mlbridge::TFAOTModelRunner::create(
//       mlbridge_aot::{name}_functions(), Features, Advice);
#ifndef {guard}
#define {guard}

#include "mlbridge/TFAOTModelRunner.h"

#include <cstdint>

extern "C" {{
{decls}
}}

namespace mlbridge_aot {{
/// The C ABI of the linked-in model '{name}'.
inline mlbridge::TFAOTFunctions {name}_functions() {{
  mlbridge::TFAOTFunctions F;
{fills}
  return F;
}}
}} // namespace mlbridge_aot

#endif // {guard}
"""
