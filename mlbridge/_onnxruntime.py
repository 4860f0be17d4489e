"""ONNX Runtime, imported with its telemetry off unless the user chose otherwise.

The PyPI builds of ONNX Runtime (1.29 and later) collect telemetry by default outside
CI: at their first session they write a device id and an event store under
``~/.cache/Microsoft`` and a session file into ``$TMPDIR``, and report the model's file
name and hashes. A compiler tool must not do that on every run. ONNX Runtime reads
``ORT_DISABLE_TELEMETRY`` once, before its first session, so every import of it in
mlbridge goes through :func:`import_onnxruntime`, as the C++ runner sets the variable
before it creates its environment (docs/onnx.md).
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["import_onnxruntime"]


def import_onnxruntime() -> ModuleType:
    """``onnxruntime``, with ``ORT_DISABLE_TELEMETRY=1`` unless the variable is set.

    A user who sets the variable (to anything) keeps their choice.

    Raises:
        ImportError: If ONNX Runtime is not installed (the ``onnx`` extra).
    """
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime

    return onnxruntime
