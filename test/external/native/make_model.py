"""Writes the native external project's ONNX model and what the program checks it with.

    make_model.py OUT_DIR

``OUT_DIR/dense.onnx``: a two-layer perceptron made by :mod:`mlbridge.export.numpy_dense`
over the features ``x`` (float [4]) and ``count`` (int64 [1]), answering ``score`` (float
[1]). ``OUT_DIR/dense.json``: its layers (weights, biases, activations) and a few inputs,
so that the program computes the answers itself rather than trusting a reference.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import orjson

from mlbridge.export.numpy_dense import Dense, export_numpy_dense
from mlbridge.tensor_spec import ElementType, TensorSpec


def main(out_dir: Path) -> None:
    """Write ``dense.onnx`` and ``dense.json`` into ``out_dir``."""
    rng = np.random.default_rng(16)
    specs = [
        TensorSpec("x", ElementType.FLOAT, (4,)),
        TensorSpec("count", ElementType.INT64, (1,)),
    ]
    layers = [
        Dense(rng.normal(size=(5, 6)).astype(np.float32), rng.normal(size=6), "tanh"),
        Dense(rng.normal(size=(6, 1)).astype(np.float32), rng.normal(size=1)),
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    export_numpy_dense(
        specs, layers, out_dir / "dense.onnx", output=TensorSpec("score", ElementType.FLOAT, (1,))
    )
    cases = [
        {"x": rng.normal(size=4).round(3).tolist(), "count": [int(rng.integers(-5, 50))]}
        for _ in range(8)
    ]
    doc = {
        "layers": [
            {
                "weight": np.asarray(layer.weight, np.float32).tolist(),
                "bias": np.asarray(layer.bias, np.float32).tolist(),
                "activation": layer.activation or "",
            }
            for layer in layers
        ],
        "cases": cases,
    }
    (out_dir / "dense.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    print(f"wrote {out_dir / 'dense.onnx'} and {out_dir / 'dense.json'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
