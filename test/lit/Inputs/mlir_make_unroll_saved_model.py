"""Writes the TensorFlow unroll model of the lit tests as a SavedModel.

    mlir_make_unroll_saved_model.py OUT_DIR

factor = 4 if trip_count % 4 == 0 else 2: the model mlir_make_unroll_model.py writes as
ONNX. Input ``trip_count`` int64 [1] (one of the pass's features: a model may read a
subset), output ``unroll_factor`` int64 [1]. ``floormod`` takes the divisor's sign, like
Python, so an unknown trip count (-1) gets 2, as ``mlbridge.loop_unroll.policy`` does.

Run with mlbridge's interpreter, it runs itself again in the TensorFlow environment
(``mlbridge.aot.tfenv``), since TensorFlow lives in a virtual environment of its own.
Compile the result with ``mlbridge aot OUT_DIR --name NAME``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Set by the outer run: this process is the TensorFlow environment's.
IN_TF_ENV = "--in-tf-env"


def write_saved_model(out_dir: str) -> None:
    """Writes the SavedModel (TensorFlow environment only)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    class Unroll(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1], tf.int64, name="trip_count")])
        def serve(self, trip_count: tf.Tensor) -> dict[str, tf.Tensor]:
            four = tf.constant([4], tf.int64)
            divides = tf.equal(tf.math.floormod(trip_count, four), 0)
            factor = tf.where(divides, four, tf.constant([2], tf.int64))
            return {"unroll_factor": factor}

    module = Unroll()
    tf.saved_model.save(module, out_dir, signatures={"serving_default": module.serve})


def main(argv: list[str]) -> int:
    """Writes the SavedModel, in the TensorFlow environment."""
    if len(argv) == 2 and argv[0] == IN_TF_ENV:
        write_saved_model(argv[1])
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    from mlbridge.aot.tfenv import run_tf_script

    run_tf_script(
        Path(__file__).resolve(), IN_TF_ENV, argv[0], what="writing the unroll SavedModel"
    )
    print(f"wrote {argv[0]}: unroll_factor = 4 if trip_count % 4 == 0 else 2")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
