"""Runs inside the TensorFlow environment: describe one signature of a SavedModel.

Invoked by :mod:`mlbridge.aot.compile` as ``TF_PYTHON _tf_inspect.py DIR TAG SIGNATURE``
with the TensorFlow environment's interpreter (the main environment cannot import
TensorFlow: their protobuf versions conflict). Imports nothing from mlbridge.

Prints one JSON object on stdout::

    {"tf_version": "2.19.1", "tf_dir": ".../site-packages/tensorflow",
     "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 4]}, ...],
     "outputs": [...]}

in the signature's own order (sorted by name, as the SignatureDef map is). On a bad
SavedModel, tag or signature it prints one line to stderr and exits with status 2.
"""

from __future__ import annotations

import json
import os
import sys

# TensorFlow's C++ start-up logging is noise for a compiler front end.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _fail(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(2)


def _describe(tensors: object) -> list[dict[str, object]]:
    from tensorflow.python.framework import dtypes

    result = []
    for key in sorted(tensors):  # type: ignore[call-overload]
        info = tensors[key]  # type: ignore[index]
        if info.tensor_shape.unknown_rank:
            shape = None
        else:
            shape = [int(d.size) for d in info.tensor_shape.dim]
        result.append({"name": key, "dtype": dtypes.as_dtype(info.dtype).name, "shape": shape})
    return result


def main(argv: list[str]) -> None:
    """Describe signature ``argv[3]`` of the meta graph tagged ``argv[2]`` in ``argv[1]``."""
    if len(argv) != 4:
        _fail("usage: _tf_inspect.py SAVED_MODEL_DIR TAG_SET SIGNATURE")
    directory, tag_set, signature = argv[1], argv[2], argv[3]
    import tensorflow as tf
    from tensorflow.python.tools import saved_model_utils

    try:
        tag_sets = saved_model_utils.get_saved_model_tag_sets(directory)
    except (OSError, RuntimeError, ValueError) as e:
        _fail(f"cannot read the SavedModel in {directory}: {e}")
    wanted = set(tag_set.split(","))
    if not any(set(t) == wanted for t in tag_sets):
        known = "; ".join(",".join(t) for t in tag_sets) or "none"
        _fail(
            f"the SavedModel {directory} has no meta graph tagged '{tag_set}' "
            f"(it has: {known}); pass --tag"
        )
    meta_graph = saved_model_utils.get_meta_graph_def(directory, tag_set)
    signatures = meta_graph.signature_def
    if signature not in signatures:
        known = ", ".join(sorted(signatures)) or "none"
        _fail(
            f"the SavedModel {directory} has no signature '{signature}' "
            f"(it has: {known}); pass --signature"
        )
    sig = signatures[signature]
    print(
        json.dumps(
            {
                "tf_version": tf.__version__,
                "tf_dir": os.path.dirname(tf.__file__),
                "inputs": _describe(sig.inputs),
                "outputs": _describe(sig.outputs),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv)
