"""The model registry: named ONNX and TF AOT models with their tensor specs.

A plugin option can name a registered model instead of a path; the registry folder
and its ``model.json`` files are shared with the C++ lookup (``mlbridge::findModel`` in
``include/mlbridge/ModelRegistry.h``). See docs/models.md::

    >>> from mlbridge.models import Registry
    >>> reg = Registry()                               # $MLBRIDGE_MODEL_REGISTRY, ...
    >>> m = reg.register("inliner", "inliner.onnx")    # doctest: +SKIP
    >>> check_compatible(pass_features, m.features)    # doctest: +SKIP
    []
"""

from __future__ import annotations

from mlbridge.models.compat import check_compatible, shapes_compatible
from mlbridge.models.registry import (
    MODEL_JSON,
    REGISTRY_ENV,
    RegisteredModel,
    Registry,
    RegistryError,
    check_model_name,
    default_registry_dir,
)
from mlbridge.models.specs import (
    MODEL_KINDS,
    ModelFileError,
    ModelKind,
    ModelSpecs,
    read_onnx_specs,
    read_specs_file,
    read_tfaot_abi_specs,
    read_tfaot_specs,
)

__all__ = [
    "MODEL_JSON",
    "MODEL_KINDS",
    "REGISTRY_ENV",
    "ModelFileError",
    "ModelKind",
    "ModelSpecs",
    "RegisteredModel",
    "Registry",
    "RegistryError",
    "check_compatible",
    "check_model_name",
    "default_registry_dir",
    "read_onnx_specs",
    "read_specs_file",
    "read_tfaot_abi_specs",
    "read_tfaot_specs",
    "shapes_compatible",
]
