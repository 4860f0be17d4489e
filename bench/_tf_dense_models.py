"""Writes the round-trip layer as TensorFlow SavedModels (runs in the TensorFlow environment).

    _tf_dense_models.py OUT_DIR WEIGHTS.npy L1,L2,...

For each L, ``OUT_DIR/saved<L>`` computes ``y = x . w[:L] + 0.25`` with ``x`` float [1, L]
and ``y`` float [1, 1], the layer of ``bench/RoundTripCommon.h``; ``WEIGHTS.npy`` holds
the weights (made by ``bench/inprocess_roundtrip.py``, so that this file imports nothing
but TensorFlow and numpy).
"""

from __future__ import annotations

import os
import sys

import numpy as np


def main(argv: list[str]) -> int:
    """Writes one SavedModel per size."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    out_dir, weights_file, sizes = argv
    w_all = np.load(weights_file).astype(np.float32)

    class Dense(tf.Module):
        def __init__(self, w: np.ndarray) -> None:
            super().__init__()
            self.w = tf.constant(w.reshape(-1, 1))

    for length in (int(s) for s in sizes.split(",")):
        module = Dense(w_all[:length])

        @tf.function(input_signature=[tf.TensorSpec([1, length], tf.float32, name="x")])
        def serve(x: tf.Tensor, module: Dense = module) -> dict[str, tf.Tensor]:
            return {"y": tf.matmul(x, module.w) + tf.constant(0.25, tf.float32)}

        tf.saved_model.save(
            module, os.path.join(out_dir, f"saved{length}"), signatures={"serving_default": serve}
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
