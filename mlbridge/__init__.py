"""mlbridge: the model side of a bridge between compilers (LLVM, MLIR) and ML models.

The package is pure Python: it needs numpy, orjson and protobuf, never LLVM. Importing it
touches no build folder and loads no native code of its own.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from mlbridge.errors import (
    HeaderMismatchError,
    InvalidTensorError,
    LimitExceededError,
    MalformedInputError,
    MLBridgeError,
    SerDesError,
    SpecError,
    TruncatedInputError,
    UnsupportedValueError,
)
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import DYNAMIC, ElementType, TensorSpec

try:
    __version__ = version("mlbridge")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = [
    "DYNAMIC",
    "ElementType",
    "HeaderMismatchError",
    "InvalidTensorError",
    "LimitExceededError",
    "MLBridgeError",
    "MalformedInputError",
    "SerDesError",
    "SpecError",
    "Tensor",
    "TensorSpec",
    "TruncatedInputError",
    "UnsupportedValueError",
    "__version__",
]
