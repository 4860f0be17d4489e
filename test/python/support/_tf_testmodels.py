"""Runs inside the TensorFlow environment: write the SavedModels mlbridge tests AOT with.

``TF_PYTHON _tf_testmodels.py OUT_DIR`` writes, for each model, ``OUT_DIR/<name>/`` (the
SavedModel) and ``OUT_DIR/<name>.answers.json``: inputs and TensorFlow's own outputs for
them, so that tests compare a compiled model with the model itself. Imports nothing
from mlbridge (see ``aot_testmodels.py`` beside it).

Models:

* ``mixed``: three inputs of different types, ``x`` (float32 [1,4]), ``count`` (int64
  [1]) and ``flags`` (int32 [2]); outputs ``score`` (float32 [1], a dense layer with
  known weights over all three) and ``doubled`` (int64 [1], ``2*count+sum(flags)``).
* ``dense50k``: ``x`` (float32 [50000]) to ``y`` (float32 [1]), one dense layer.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

DENSE_SIZE = 50_000


class Mixed(tf.Module):
    """A dense layer over a float vector, an int64 count and int32 flags."""

    def __init__(self) -> None:
        super().__init__()
        self.w = tf.constant([[0.5], [-1.25], [2.0], [0.75]], dtype=tf.float32)
        self.w_count = tf.constant(0.125, dtype=tf.float32)
        self.w_flags = tf.constant(-0.5, dtype=tf.float32)
        self.bias = tf.constant(3.0, dtype=tf.float32)

    @tf.function(
        input_signature=[
            tf.TensorSpec([1, 4], tf.float32, name="x"),
            tf.TensorSpec([1], tf.int64, name="count"),
            tf.TensorSpec([2], tf.int32, name="flags"),
        ]
    )
    def serve(self, x: tf.Tensor, count: tf.Tensor, flags: tf.Tensor) -> dict[str, tf.Tensor]:
        flag_sum = tf.reduce_sum(flags)
        score = (
            tf.matmul(x, self.w)[0]
            + self.w_count * tf.cast(count, tf.float32)
            + self.w_flags * tf.cast(flag_sum, tf.float32)
            + self.bias
        )
        return {"score": score, "doubled": 2 * count + tf.cast(flag_sum, tf.int64)}


class Dense(tf.Module):
    """y = x . w + b over DENSE_SIZE floats."""

    def __init__(self) -> None:
        super().__init__()
        w = np.sin(np.arange(DENSE_SIZE, dtype=np.float64) * 0.001) / 100.0
        self.w = tf.constant(w.astype(np.float32).reshape(DENSE_SIZE, 1))
        self.b = tf.constant([0.25], dtype=tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([DENSE_SIZE], tf.float32, name="x")])
    def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"y": tf.matmul(tf.reshape(x, [1, DENSE_SIZE]), self.w)[0] + self.b}


def _answers(module: tf.Module, cases: list[dict[str, np.ndarray]]) -> list[dict[str, object]]:
    result = []
    for case in cases:
        outputs = module.serve(**{k: tf.constant(v) for k, v in case.items()})
        result.append(
            {
                "inputs": {k: v.reshape(-1).tolist() for k, v in case.items()},
                "outputs": {k: v.numpy().reshape(-1).tolist() for k, v in outputs.items()},
            }
        )
    return result


def main(out_dir: str) -> None:
    """Write both models and their answers into ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(7)
    mixed_cases = [
        {
            "x": np.array([[1.0, 2.0, 3.0, 4.0]], np.float32),
            "count": np.array([5], np.int64),
            "flags": np.array([1, 0], np.int32),
        },
        {
            "x": rng.standard_normal((1, 4)).astype(np.float32),
            "count": np.array([-3], np.int64),
            "flags": np.array([7, -2], np.int32),
        },
    ]
    dense_cases = [
        {"x": np.linspace(-1.0, 1.0, DENSE_SIZE, dtype=np.float32)},
        {"x": rng.standard_normal(DENSE_SIZE).astype(np.float32)},
    ]
    for name, module, cases in (
        ("mixed", Mixed(), mixed_cases),
        ("dense50k", Dense(), dense_cases),
    ):
        tf.saved_model.save(
            module, os.path.join(out_dir, name), signatures={"serving_default": module.serve}
        )
        with open(os.path.join(out_dir, f"{name}.answers.json"), "w", encoding="utf-8") as f:
            json.dump({"model": name, "cases": _answers(module, cases)}, f)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: _tf_testmodels.py OUT_DIR", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
