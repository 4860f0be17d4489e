"""Runs inside the TensorFlow environment: a linear inlining policy as a SavedModel.

``TF_PYTHON _tf_linear_policy.py POLICY.json OUT_DIR`` writes the SavedModel of
:class:`mlbridge.inliner.policy.LinearPolicy` (whose JSON form it reads): one int64
[1] input per active feature, output ``inlining_decision`` int64 [1], computed exactly as
the ONNX export does (float32). Imports nothing from mlbridge: the TensorFlow environment
does not have it.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402


def main() -> int:
    policy_file, out_dir = sys.argv[1], sys.argv[2]
    with open(policy_file, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("transform") != "signed_log1p":
        print(f"unknown transform {doc.get('transform')!r}", file=sys.stderr)
        return 1
    pairs = [(n, w) for n, w in zip(doc["features"], doc["weights"], strict=True) if w != 0.0]
    if not pairs:
        pairs = [(doc["features"][0], 0.0)]
    names = [n for n, _ in pairs]
    weights = tf.constant([[w] for _, w in pairs], dtype=tf.float32)
    bias = tf.constant(doc["bias"], dtype=tf.float32)
    signature = [tf.TensorSpec([1], tf.int64, name=n) for n in names]

    class Policy(tf.Module):
        @tf.function(input_signature=signature)
        def serve(self, *features: tf.Tensor) -> dict[str, tf.Tensor]:
            x = tf.cast(tf.concat(features, axis=0), tf.float32)
            phi = tf.sign(x) * tf.math.log(tf.abs(x) + 1.0)
            logit = tf.reshape(tf.matmul(tf.reshape(phi, [1, -1]), weights), [1]) + bias
            return {"inlining_decision": tf.cast(logit > 0.0, tf.int64)}

    module = Policy()
    tf.saved_model.save(module, out_dir, signatures={"serving_default": module.serve})
    print(f"wrote {out_dir}: inputs {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
