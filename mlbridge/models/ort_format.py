"""ORT-format copies of ONNX models: what the in-process ONNX runner loads fastest.

Every compiler process that runs an ONNX model in-process creates an ONNX Runtime
session, and most of that time goes to checking and optimizing the graph. ONNX
Runtime's own ORT format holds the graph after both, so a session loads in about 60% of
the time (9 ms instead of 16 for ``regalloc-split``; docs/models.md). The registry writes
one beside every ONNX model it registers; the C++ runner (``OnnxModel::load``) reads it
instead of the ``.onnx`` when its name carries the runner's own ONNX Runtime version and
it is not older than the model. The ``.onnx`` stays the model of record.
"""

from __future__ import annotations

from pathlib import Path

from mlbridge._onnxruntime import import_onnxruntime

__all__ = ["lacks_ort_format_copy", "ort_format_copy_path", "write_ort_format_copy"]


def ort_format_copy_path(onnx_path: str | Path, version: str) -> Path:
    """Where the ORT-format copy of ``onnx_path`` for ONNX Runtime ``version`` goes.

    ``<stem>.onnxruntime-<version>.ort`` beside it, as ``mlbridge::ortFormatCopyPath``
    names it in C++.
    """
    path = Path(onnx_path)
    stem = path.name[: -len(".onnx")] if path.suffix == ".onnx" else path.name
    return path.with_name(f"{stem}.onnxruntime-{version}.ort")


def write_ort_format_copy(onnx_path: str | Path) -> Path | None:
    """Write the ORT-format copy of ``onnx_path`` for the installed ONNX Runtime.

    The graph is optimized at ONNX Runtime's extended level: the basic and extended
    rewrites, none that depends on this machine's CPU (the layout ones of the highest
    level do), so the copy runs wherever its ONNX Runtime version does.

    Returns:
        The copy, or ``None`` when there is none to make: ONNX Runtime is not installed
        (the ``onnx`` extra), or it cannot load the model (the runner then reports why,
        from the ``.onnx``).
    """
    try:
        ort = import_onnxruntime()
    except ImportError:
        return None
    source = Path(onnx_path)
    target = ort_format_copy_path(source, ort.__version__)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(target)
    options.add_session_config_entry("session.save_model_format", "ORT")
    options.log_severity_level = 3  # errors only: library code stays quiet
    try:
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any failure to load means no copy
        target.unlink(missing_ok=True)
        return None
    return target


def lacks_ort_format_copy(onnx_path: str | Path) -> bool:
    """Whether ``onnx_path`` has no ORT-format copy for the installed ONNX Runtime.

    ``False`` without ONNX Runtime: there is then no copy to make.
    """
    try:
        ort = import_onnxruntime()
    except ImportError:
        return False
    return not ort_format_copy_path(onnx_path, ort.__version__).is_file()
