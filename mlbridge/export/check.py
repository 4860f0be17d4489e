"""Checks that an exported ONNX model answers like the model it was exported from."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mlbridge._onnxruntime import import_onnxruntime
from mlbridge.errors import MLBridgeError, SpecError

__all__ = ["ExportMismatchError", "check_export"]

#: One sample: a value for each feature, by name.
Sample = Mapping[str, npt.ArrayLike]


class ExportMismatchError(MLBridgeError):
    """The exported model answers differently from the original.

    Attributes:
        max_difference: The largest absolute difference seen (``inf`` for a shape or
            element-count mismatch).
        sample_index: The index of the first sample that disagreed.
    """

    def __init__(self, message: str, max_difference: float, sample_index: int) -> None:
        super().__init__(message)
        self.max_difference = max_difference
        self.sample_index = sample_index


def _session(path: Path) -> Any:
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


_ORT_DTYPES = {
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(int16)": np.int16,
    "tensor(uint16)": np.uint16,
    "tensor(int32)": np.int32,
    "tensor(uint32)": np.uint32,
    "tensor(int64)": np.int64,
    "tensor(uint64)": np.uint64,
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(bool)": np.bool_,
    "tensor(string)": np.object_,
}


def _feeds(session: Any, sample: Sample, index: int) -> dict[str, np.ndarray]:
    feeds = {}
    for inp in session.get_inputs():
        if inp.name not in sample:
            raise SpecError(f"sample {index} has no value for model input {inp.name!r}")
        dtype = np.dtype(_ORT_DTYPES.get(inp.type, np.float32))
        value = np.asarray(sample[inp.name])
        if value.dtype != dtype and not np.can_cast(value.dtype, dtype, "same_kind"):
            raise SpecError(
                f"sample {index}: input {inp.name!r} is {inp.type} but the value is {value.dtype}"
            )
        feeds[inp.name] = value.astype(dtype, copy=False)
    return feeds


def check_export(
    original: Callable[[Sample], npt.ArrayLike],
    onnx_path: str | Path,
    sample_inputs: Sample | Sequence[Sample],
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    output_name: str | None = None,
) -> float:
    """Runs the exported model with ONNX Runtime and compares it with the original.

    Args:
        original: The model it was exported from, as a function from a sample (feature
            name to value) to its answer (see :func:`mlbridge.export.torch_callable` for a
            PyTorch module).
        onnx_path: The exported ``.onnx`` file.
        sample_inputs: One sample or several. Features the model does not read are
            ignored, as the C++ runner does.
        rtol: Relative tolerance for float answers.
        atol: Absolute tolerance for float answers. Integer and bool answers must be equal.
        output_name: The model output to compare; by default the first.

    Returns:
        The largest absolute difference over all samples.

    Raises:
        ExportMismatchError: An answer differs beyond the tolerance, or in shape; the
            message gives the sample, the largest difference and both answers.
        SpecError: A sample lacks a model input or has a value of another kind.
    """
    path = Path(onnx_path)
    if not path.is_file():
        raise SpecError(f"no ONNX model at {str(path)!r}")
    samples: Sequence[Sample] = (
        [sample_inputs] if isinstance(sample_inputs, Mapping) else list(sample_inputs)
    )
    if not samples:
        raise SpecError("check_export needs at least one sample")
    session = _session(path)
    outputs = [o.name for o in session.get_outputs()]
    name = output_name or outputs[0]
    if name not in outputs:
        raise SpecError(f"model {str(path)!r} has no output {name!r} (its outputs: {outputs})")

    worst = 0.0
    for i, sample in enumerate(samples):
        (got,) = session.run([name], _feeds(session, sample, i))
        got = np.asarray(got)
        want = np.asarray(original(sample))
        if got.size != want.size:
            raise ExportMismatchError(
                f"sample {i}: the exported model answers {got.size} elements "
                f"(shape {list(got.shape)}), the original {want.size} (shape {list(want.shape)})",
                float("inf"),
                i,
            )
        got, want = got.reshape(-1), want.reshape(-1)
        if got.dtype.kind in "fc" or want.dtype.kind in "fc":
            g, w = got.astype(np.float64), want.astype(np.float64)
            diff = float(np.max(np.abs(g - w), initial=0.0))
            if np.isnan(g).any() != np.isnan(w).any():
                diff = float("inf")
            ok = bool(np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True))
        else:
            ok = bool(np.array_equal(got, want))
            diff = 0.0 if ok else float(np.max(np.abs(got.astype(np.float64) - want)))
        worst = max(worst, diff)
        if not ok:
            raise ExportMismatchError(
                f"sample {i}: the exported model {str(path)!r} disagrees with the original: "
                f"max difference {diff:.6g} (rtol={rtol}, atol={atol}); exported "
                f"{np.array2string(got, threshold=8)}, "
                f"original {np.array2string(want, threshold=8)}",
                diff,
                i,
            )
    return worst
