"""Running a compiled model from Python (ctypes over mlbridge's AOT C ABI).

:class:`NativeModel` loads a shared object that exports the ``mlbridge_aot_*`` functions
(``mlbridge compile`` or ``mlbridge aot`` wrote it), creates one instance and runs it on
numpy arrays. It is how the tests compare a native model with ONNX Runtime; compilers
load the same object through the C++ ``TFAOTModelRunner``. A model with a dynamic batch
(``-1`` leading its shapes, ``set_batch`` exported) runs on as many rows as the inputs
have; a model that exports ``set_arg_rows`` instead (:mod:`mlbridge.regalloc.native`)
takes each such input's own rows and reads it in place, as the C++ runner hands it the
features.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mlbridge.aot.abi import ABI_VERSION, DYNAMIC_BATCH
from mlbridge.native.importer import NativeCompileError
from mlbridge.tensor_spec import ElementType, TensorSpec

__all__ = ["NativeModel"]

_PREFIX = "mlbridge_aot_"


class NativeModel:
    """One instance of a compiled model in this process.

    Args:
        path: The shared object.

    Raises:
        NativeCompileError: If it cannot be loaded, is not an mlbridge AOT model, or
            has another ABI version.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._lib = ctypes.CDLL(str(self.path.absolute()), mode=os.RTLD_LOCAL)
        except OSError as exc:
            raise NativeCompileError(f"cannot load {self.path}: {exc}") from None
        version = self._fn("abi_version", ctypes.c_uint32)()
        if version != ABI_VERSION:
            raise NativeCompileError(
                f"{self.path} has ABI version {version}, this mlbridge reads {ABI_VERSION}"
            )
        self.inputs = self._specs("arg")
        self.outputs = self._specs("result")
        vp = ctypes.c_void_p
        self._create = self._fn("create", vp)
        self._destroy = self._fn("destroy", None, vp)
        self._arg_data = self._fn("arg_data", vp, vp, ctypes.c_int32)
        self._result_data = self._fn("result_data", vp, vp, ctypes.c_int32)
        self._run = self._fn("run", ctypes.c_int32, vp)
        self._set_batch: Any = None
        i32, i64 = ctypes.c_int32, ctypes.c_int64
        self._set_arg_rows = self._optional("set_arg_rows", i32, vp, i32, i64)
        self._set_arg_data = self._optional("set_arg_data", i32, vp, i32, vp)
        self._error_message = self._optional("error_message", ctypes.c_char_p, vp)
        if self._set_arg_rows is not None:
            if self._set_arg_data is None or any(DYNAMIC_BATCH in s.shape for s in self.outputs):
                raise NativeCompileError(
                    f"{self.path} has set_arg_rows but no set_arg_data, or an output with "
                    "rows; rebuild it"
                )
        elif any(DYNAMIC_BATCH in s.shape for s in self.inputs + self.outputs):
            self._set_batch = self._fn("set_batch", ctypes.c_int32, vp, ctypes.c_int64)
        self._batch = 1  # a new instance's
        self._instance = self._create()
        if not self._instance:
            raise NativeCompileError(f"{self.path}: creating an instance failed (out of memory)")

    def _fn(self, suffix: str, restype: Any, *argtypes: Any) -> Any:  # noqa: ANN401
        try:
            f = getattr(self._lib, _PREFIX + suffix)
        except AttributeError:
            raise NativeCompileError(
                f"{self.path} is not an mlbridge compiled model: no {_PREFIX}{suffix}"
            ) from None
        f.restype, f.argtypes = restype, list(argtypes)
        return f

    def _optional(self, suffix: str, restype: Any, *argtypes: Any) -> Any:  # noqa: ANN401
        if not hasattr(self._lib, _PREFIX + suffix):
            return None
        return self._fn(suffix, restype, *argtypes)

    def _specs(self, kind: str) -> tuple[TensorSpec, ...]:
        i32 = ctypes.c_int32
        count = self._fn(f"num_{kind}s", i32)()
        name = self._fn(f"{kind}_name", ctypes.c_char_p, i32)
        typ = self._fn(f"{kind}_type", i32, i32)
        rank = self._fn(f"{kind}_rank", i32, i32)
        shape = self._fn(f"{kind}_shape", ctypes.POINTER(ctypes.c_int64), i32)
        types = list(ElementType)
        out = []
        for i in range(count):
            dims = shape(i)
            out.append(
                TensorSpec(
                    name(i).decode("utf-8"), types[typ(i)], tuple(dims[d] for d in range(rank(i)))
                )
            )
        return tuple(out)

    @property
    def dynamic_batch(self) -> bool:
        """Whether the leading dimension of some inputs and outputs is a dynamic batch."""
        return self._set_batch is not None

    def _batch_of(self, values: dict[str, np.ndarray[Any, Any]]) -> int:
        """The rows the batched inputs have (they must agree), after checking shapes."""
        batch: tuple[str, int] | None = None
        for spec in self.inputs:
            value = values[spec.name]
            if spec.shape[:1] != (DYNAMIC_BATCH,):
                if value.size != int(np.prod(spec.shape)):
                    raise NativeCompileError(
                        f"input '{spec.name}' has {value.size} elements, expected shape "
                        f"{spec.shape}"
                    )
                continue
            if value.ndim != len(spec.shape) or value.shape[1:] != spec.shape[1:]:
                raise NativeCompileError(
                    f"input '{spec.name}' has shape {value.shape}, expected {spec.shape} "
                    "(-1: any number of rows)"
                )
            if self._set_arg_rows is not None:
                continue  # each input has its own rows
            if batch is not None and batch[1] != value.shape[0]:
                raise NativeCompileError(
                    f"inputs '{batch[0]}' and '{spec.name}' have different batches "
                    f"({batch[1]} and {value.shape[0]} rows)"
                )
            batch = (spec.name, int(value.shape[0]))
        return 1 if batch is None else batch[1]

    def run(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
        """Run the instance on ``feeds`` (by input name); copies of the outputs by name.

        With a dynamic batch, the batched inputs give the rows (their leading dimension,
        the same for all) and the outputs have as many.

        Raises:
            NativeCompileError: If an input is missing or has the wrong shape, batched
                inputs disagree on the rows, or the run fails.
        """
        values = {}
        for spec in self.inputs:
            if spec.name not in feeds:
                raise NativeCompileError(f"no value for input '{spec.name}'")
            values[spec.name] = np.ascontiguousarray(feeds[spec.name], dtype=spec.type.numpy_dtype)
        batch = self._batch_of(values)
        if self._set_batch is not None and batch != self._batch:
            if self._set_batch(self._instance, batch) != 0:
                raise NativeCompileError(f"{self.path}: set_batch({batch}) failed")
            self._batch = batch
        for i, spec in enumerate(self.inputs):
            value = values[spec.name]
            if self._set_arg_rows is not None and spec.shape[:1] == (DYNAMIC_BATCH,):
                # Read in place (``values`` keeps the array alive through the run).
                rows, data = value.shape[0], value.ctypes.data if value.size else None
                if self._set_arg_rows(self._instance, i, rows) or self._set_arg_data(
                    self._instance, i, data
                ):
                    raise NativeCompileError(f"{self.path}: input '{spec.name}' refused")
                continue
            if value.nbytes:
                ctypes.memmove(self._arg_data(self._instance, i), value.ctypes.data, value.nbytes)
        if self._run(self._instance) != 0:
            why = self._error_message(self._instance) if self._error_message else None
            raise NativeCompileError(
                f"{self.path}: run failed" + (f": {why.decode('utf-8')}" if why else "")
            )
        results = {}
        for j, spec in enumerate(self.outputs):
            dtype = spec.type.numpy_dtype
            shape = tuple(batch if d == DYNAMIC_BATCH else d for d in spec.shape)
            count = int(np.prod(shape))
            buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(
                self._result_data(self._instance, j)
            )
            results[spec.name] = np.frombuffer(bytes(buf), dtype=dtype).reshape(shape)
        return results

    def close(self) -> None:
        """Destroy the instance (the library stays loaded until the process ends)."""
        if self._instance:
            self._destroy(self._instance)
            self._instance = None

    def __enter__(self) -> NativeModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass
