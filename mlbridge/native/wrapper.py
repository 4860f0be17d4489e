"""The C source that gives a natively compiled model mlbridge's AOT C ABI.

The ABI is the one ``mlbridge aot`` models export (:mod:`mlbridge.aot.abi`, version
:data:`mlbridge.aot.abi.ABI_VERSION`), so ``TFAOTModelRunner`` loads either kind of
shared object. The MLIR function (``llvm.emit_c_interface``) takes one memref descriptor
per input and per output; ``run`` fills the descriptors from the instance's buffers and
calls it. Every instance owns its buffers; the only global data are read-only tables and
the model's constants, so instances may run on different threads at once.

A model with a dynamic batch (:attr:`TensorInfo.batch`) has ``-1`` as the leading
dimension of those tensors in its shape tables and also exports ``set_batch``
(:data:`mlbridge.aot.abi.BATCH_FUNCTIONS`); its MLIR function computes one row, and
``run`` calls it once per row with the descriptors moved along the batched buffers
(the importer proved that rows are independent).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mlbridge.aot.abi import ABI_VERSION, DYNAMIC_BATCH
from mlbridge.native.importer import TensorInfo
from mlbridge.tensor_spec import ElementType

__all__ = ["ELEMENT_TYPES", "render_c_wrapper"]

#: MLIR element type -> mlbridge element type (bool is one byte, 0 or 1).
ELEMENT_TYPES: dict[str, ElementType] = {
    "f32": ElementType.FLOAT,
    "f64": ElementType.DOUBLE,
    "i64": ElementType.INT64,
    "i32": ElementType.INT32,
    "i8": ElementType.INT8,
    "i1": ElementType.BOOL,
}
_C_SIZES = {"f32": 4, "f64": 8, "i64": 8, "i32": 4, "i8": 1, "i1": 1}


def _c_string(text: str) -> str:
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch.isalnum() or ch in " _-.:/+=,;()[]<>!#$%&*@^`|~{}'":
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _tables(kind: str, tensors: Sequence[TensorInfo]) -> str:
    lines = []
    for i, t in enumerate(tensors):
        shape = [DYNAMIC_BATCH if t.batch and k == 0 else d for k, d in enumerate(t.shape)]
        dims = ", ".join(str(d) for d in shape) or "0"
        lines.append(f"static const int64_t k{kind}Shape{i}[] = {{{dims}}};")
    lines.append(f"static const struct tensor_info k{kind}s[{len(tensors)}] = {{")
    for i, t in enumerate(tensors):
        size = math.prod(t.shape) * _C_SIZES[t.dtype]  # one row's, with a batch
        number = ELEMENT_TYPES[t.dtype].value - 1
        lines.append(
            f"    {{{_c_string(t.name)}, {number}, {len(t.shape)}, k{kind}Shape{i}, {size}, "
            f"{_C_SIZES[t.dtype]}, {int(t.batch)}}},"
        )
    lines.append("};")
    return "\n".join(lines)


def _descriptor(rank: int) -> str:
    if rank == 0:
        return "struct memref0 { void *allocated; void *aligned; int64_t offset; };"
    return (
        f"struct memref{rank} {{ void *allocated; void *aligned; int64_t offset; "
        f"int64_t sizes[{rank}]; int64_t strides[{rank}]; }};"
    )


def _fill(var: str, rank: int, ptr: str, shape: Sequence[int], indent: str = "  ") -> list[str]:
    lines = [
        f"{indent}{var}.allocated = {var}.aligned = (void *)({ptr});",
        f"{indent}{var}.offset = 0;",
    ]
    stride = 1
    strides = []
    for d in reversed(shape):
        strides.append(stride)
        stride *= d
    strides.reverse()
    for k in range(rank):
        lines.append(f"{indent}{var}.sizes[{k}] = {shape[k]}; {var}.strides[{k}] = {strides[k]};")
    return lines


def _set_batch() -> str:
    return """\
/* Sets the rows of every batched input and output (the leading dimension the tables
 * give as -1) for the following runs; a new instance has 1. The instance's own buffers
 * are made anew for that many rows (zero-filled); an input read from the caller's
 * buffer (set_arg_data) keeps it, which must then hold that many rows. 0 on success;
 * 1 if batch < 0 or memory runs out, and the instance is unchanged. */
MLBRIDGE_AOT_API int32_t MLBRIDGE_AOT_FN(set_batch)(struct mlbridge_aot_instance *P,
                                                   int64_t batch) {
  if (!P || batch < 0)
    return 1;
  if (batch == P->batch)
    return 0;
  void *args[NUM_ARGS] = {0};
  void *results[NUM_RESULTS] = {0};
  int failed = 0;
  for (int32_t i = 0; i < NUM_ARGS && !failed; ++i)
    if (kArgs[i].batched)
      failed = !(args[i] = alloc_rows(kArgs[i].bytes, batch));
  for (int32_t i = 0; i < NUM_RESULTS && !failed; ++i)
    if (kResults[i].batched)
      failed = !(results[i] = alloc_rows(kResults[i].bytes, batch));
  if (failed) {
    for (int32_t i = 0; i < NUM_ARGS; ++i)
      free(args[i]);
    for (int32_t i = 0; i < NUM_RESULTS; ++i)
      free(results[i]);
    return 1;
  }
  for (int32_t i = 0; i < NUM_ARGS; ++i)
    if (kArgs[i].batched) {
      if (P->args[i] == P->own_args[i])
        P->args[i] = args[i];
      free(P->own_args[i]);
      P->own_args[i] = args[i];
    }
  for (int32_t i = 0; i < NUM_RESULTS; ++i)
    if (kResults[i].batched) {
      free(P->results[i]);
      P->results[i] = results[i];
    }
  P->batch = batch;
  return 0;
}
"""


def render_c_wrapper(
    name: str, function: str, inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo]
) -> str:
    """Return the C source implementing the AOT C ABI over the MLIR function.

    Args:
        name: The model name (a C identifier), returned by ``model_name``.
        function: The MLIR function symbol (its C entry is ``_mlir_ciface_<function>``).
        inputs: The model inputs, in the function's order.
        outputs: The model outputs, in the function's order.

    Compile with ``-DMLBRIDGE_AOT_PREFIX=mlbridge_aot`` for a shared object (with
    ``-DMLBRIDGE_AOT_EXPORT``), or ``mlbridge_aot_<name>`` to link it into a tool.
    """
    tensors = list(inputs) + list(outputs)
    ranks = sorted({len(t.shape) for t in tensors})
    params = ", ".join(f"struct memref{len(t.shape)} *" for t in tensors)
    batched = any(t.batch for t in tensors)
    run = [
        "MLBRIDGE_AOT_API int32_t MLBRIDGE_AOT_FN(run)(struct mlbridge_aot_instance *P) {",
        "  if (!P)",
        "    return 1;",
    ]
    # With a batch, one call per row, each batched buffer moved on by one row's bytes.
    indent = "    " if batched else "  "
    if batched:
        run.append("  for (int64_t row = 0; row < P->batch; ++row) {")

    def at(buffer: str, table: str, i: int, t: TensorInfo) -> str:
        if not t.batch:
            return buffer
        return f"(char *){buffer} + row * (int64_t){table}[{i}].bytes"

    for i, t in enumerate(inputs):
        run.append(f"{indent}struct memref{len(t.shape)} a{i};")
        run += _fill(f"a{i}", len(t.shape), at(f"P->args[{i}]", "kArgs", i, t), t.shape, indent)
    for j, t in enumerate(outputs):
        run.append(f"{indent}struct memref{len(t.shape)} r{j};")
        ptr = at(f"P->results[{j}]", "kResults", j, t)
        run += _fill(f"r{j}", len(t.shape), ptr, t.shape, indent)
    call_args = [f"&a{i}" for i in range(len(inputs))] + [f"&r{j}" for j in range(len(outputs))]
    run.append(f"{indent}_mlir_ciface_{function}({', '.join(call_args)});")
    if batched:
        run.append("  }")
    run += ["  return 0;", "}"]
    n_args, n_results = len(inputs), len(outputs)
    return f"""\
/* Generated by `mlbridge compile` for the model '{name}': mlbridge's AOT C ABI
 * (docs/tfaot.md, docs/native.md) over the MLIR function {function}. DO NOT EDIT.
 *
 * Compile with -DMLBRIDGE_AOT_PREFIX=mlbridge_aot -DMLBRIDGE_AOT_EXPORT for the
 * shared object, or -DMLBRIDGE_AOT_PREFIX=mlbridge_aot_{name} to link it in. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef MLBRIDGE_AOT_PREFIX
#error "define MLBRIDGE_AOT_PREFIX"
#endif
#ifdef MLBRIDGE_AOT_EXPORT
#define MLBRIDGE_AOT_API __attribute__((visibility("default")))
#else
#define MLBRIDGE_AOT_API
#endif
#define MLBRIDGE_AOT_CAT2(P, N) P##_##N
#define MLBRIDGE_AOT_CAT(P, N) MLBRIDGE_AOT_CAT2(P, N)
#define MLBRIDGE_AOT_FN(N) MLBRIDGE_AOT_CAT(MLBRIDGE_AOT_PREFIX, N)

{chr(10).join(_descriptor(r) for r in ranks)}

void _mlir_ciface_{function}({params});

struct tensor_info {{
  const char *name;
  int32_t type; /* mlbridge::ElementType */
  int32_t rank;
  const int64_t *shape;
  size_t bytes; /* with a batch: one row's */
  size_t align; /* the element size: what set_arg_data needs */
  int32_t batched; /* the leading dimension is the dynamic batch */
}};

{_tables("Arg", inputs)}

{_tables("Result", outputs)}

#define NUM_ARGS {n_args}
#define NUM_RESULTS {n_results}

struct mlbridge_aot_instance {{
  void *args[NUM_ARGS];     /* what run() reads: own_args[i] or the caller's */
  void *own_args[NUM_ARGS];
  void *results[NUM_RESULTS];
  int64_t batch; /* the rows of the batched tensors (set_batch) */
}};

static void *alloc_buffer(size_t bytes) {{
  size_t rounded = (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, rounded ? rounded : 64);
  if (p)
    memset(p, 0, rounded ? rounded : 64);
  return p;
}}

/* Null if rows * bytes does not fit, or memory runs out. */
static __attribute__((unused)) void *alloc_rows(size_t bytes, int64_t rows) {{
  if (bytes && (uint64_t)rows > (SIZE_MAX - 64) / bytes)
    return 0;
  return alloc_buffer(bytes * (size_t)rows);
}}

static const struct tensor_info *info(const struct tensor_info *table, int32_t n, int32_t i) {{
  return i >= 0 && i < n ? &table[i] : 0;
}}

MLBRIDGE_AOT_API uint32_t MLBRIDGE_AOT_FN(abi_version)(void) {{ return {ABI_VERSION}; }}
MLBRIDGE_AOT_API const char *MLBRIDGE_AOT_FN(model_name)(void) {{ return "{name}"; }}

MLBRIDGE_AOT_API int32_t MLBRIDGE_AOT_FN(num_args)(void) {{ return NUM_ARGS; }}
MLBRIDGE_AOT_API const char *MLBRIDGE_AOT_FN(arg_name)(int32_t i) {{
  const struct tensor_info *t = info(kArgs, NUM_ARGS, i);
  return t ? t->name : 0;
}}
MLBRIDGE_AOT_API int32_t MLBRIDGE_AOT_FN(arg_type)(int32_t i) {{
  const struct tensor_info *t = info(kArgs, NUM_ARGS, i);
  return t ? t->type : -1;
}}
MLBRIDGE_AOT_API int32_t MLBRIDGE_AOT_FN(arg_rank)(int32_t i) {{
  const struct tensor_info *t = info(kArgs, NUM_ARGS, i);
  return t ? t->rank : -1;
}}
MLBRIDGE_AOT_API const int64_t *MLBRIDGE_AOT_FN(arg_shape)(int32_t i) {{
  const struct tensor_info *t = info(kArgs, NUM_ARGS, i);
  return t ? t->shape : 0;
}}

MLBRIDGE_AOT_API int32_t MLBRIDGE_AOT_FN(num_results)(void) {{ return NUM_RESULTS; }}
MLBRIDGE_AOT_API const char *MLBRIDGE_AOT_FN(result_name)(int32_t i) {{
  const struct tensor_info *t = info(kResults, NUM_RESULTS, i);
  return t ? t->name : 0;
}}
MLBRIDGE_AOT_API int32_t MLBRIDGE_AOT_FN(result_type)(int32_t i) {{
  const struct tensor_info *t = info(kResults, NUM_RESULTS, i);
  return t ? t->type : -1;
}}
MLBRIDGE_AOT_API int32_t MLBRIDGE_AOT_FN(result_rank)(int32_t i) {{
  const struct tensor_info *t = info(kResults, NUM_RESULTS, i);
  return t ? t->rank : -1;
}}
MLBRIDGE_AOT_API const int64_t *MLBRIDGE_AOT_FN(result_shape)(int32_t i) {{
  const struct tensor_info *t = info(kResults, NUM_RESULTS, i);
  return t ? t->shape : 0;
}}

MLBRIDGE_AOT_API void MLBRIDGE_AOT_FN(destroy)(struct mlbridge_aot_instance *P) {{
  if (!P)
    return;
  for (int32_t i = 0; i < NUM_ARGS; ++i)
    free(P->own_args[i]);
  for (int32_t i = 0; i < NUM_RESULTS; ++i)
    free(P->results[i]);
  free(P);
}}
/* Returns null if memory runs out. */
MLBRIDGE_AOT_API struct mlbridge_aot_instance *MLBRIDGE_AOT_FN(create)(void) {{
  struct mlbridge_aot_instance *P = calloc(1, sizeof(struct mlbridge_aot_instance));
  if (!P)
    return 0;
  P->batch = 1;
  for (int32_t i = 0; i < NUM_ARGS; ++i) {{
    if (!(P->own_args[i] = alloc_buffer(kArgs[i].bytes))) {{
      MLBRIDGE_AOT_FN(destroy)(P);
      return 0;
    }}
    P->args[i] = P->own_args[i];
  }}
  for (int32_t i = 0; i < NUM_RESULTS; ++i)
    if (!(P->results[i] = alloc_buffer(kResults[i].bytes))) {{
      MLBRIDGE_AOT_FN(destroy)(P);
      return 0;
    }}
  return P;
}}
MLBRIDGE_AOT_API void *MLBRIDGE_AOT_FN(arg_data)(struct mlbridge_aot_instance *P, int32_t i) {{
  if (!P || !info(kArgs, NUM_ARGS, i))
    return 0;
  return P->args[i];
}}
MLBRIDGE_AOT_API const void *MLBRIDGE_AOT_FN(result_data)(struct mlbridge_aot_instance *P,
                                                          int32_t i) {{
  if (!P || !info(kResults, NUM_RESULTS, i))
    return 0;
  return P->results[i];
}}
/* Makes input i read from the caller's buffer, which must stay valid while the
 * instance runs and be aligned to its element size; null goes back to the
 * instance's own buffer. 0 on success. */
MLBRIDGE_AOT_API int32_t MLBRIDGE_AOT_FN(set_arg_data)(struct mlbridge_aot_instance *P, int32_t i,
                                                      const void *data) {{
  const struct tensor_info *t = info(kArgs, NUM_ARGS, i);
  if (!P || !t)
    return 1;
  if (!data) {{
    P->args[i] = P->own_args[i];
    return 0;
  }}
  if ((uintptr_t)data % t->align != 0)
    return 1;
  P->args[i] = (void *)data;
  return 0;
}}

{_set_batch() if batched else ""}
/* 0 on success. */
{chr(10).join(run)}
"""
