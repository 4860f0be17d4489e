"""mlbridge.export.export_keras: Keras MLPs (torch backend here) exported through their weights."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mlbridge import ElementType, SpecError, TensorSpec  # noqa: E402
from mlbridge.export import ExportMismatchError, check_export, export_keras  # noqa: E402
from mlbridge.export._onnx_specs import model_input_specs  # noqa: E402

SPECS = [
    TensorSpec("loop_depth", ElementType.INT64, (1,)),
    TensorSpec("features", ElementType.FLOAT, (4,)),
]


def _model(activation: str = "tanh") -> keras.Model:
    keras.utils.set_random_seed(3)
    return keras.Sequential(
        [
            keras.Input(shape=(5,)),
            keras.layers.Dense(16, activation=activation),
            keras.layers.Dense(3),
        ]
    )


def _samples(n: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    return [
        {
            "loop_depth": rng.integers(0, 5, size=1),
            "features": rng.normal(size=4).astype(np.float32),
        }
        for _ in range(n)
    ]


def _keras_callable(model: keras.Model):
    def run(sample: dict[str, np.ndarray]) -> np.ndarray:
        row = np.concatenate([sample["loop_depth"].astype(np.float32), sample["features"]])
        return np.asarray(model.predict(row[None, :], verbose=0))[0]

    return run


def test_exported_keras_model_answers_like_keras(tmp_path):
    model = _model()
    path = export_keras(model, SPECS, tmp_path / "policy.onnx")
    assert [s.name for s in model_input_specs(path)] == ["loop_depth", "features"]
    check_export(_keras_callable(model), path, _samples(20), rtol=1e-4, atol=1e-5)


def test_argmax_export_answers_the_largest_output(tmp_path):
    model = _model("relu")
    advice = TensorSpec("choice", ElementType.INT64, (1,))
    path = export_keras(model, SPECS, tmp_path / "choice.onnx", output=advice, argmax=True)
    keras_run = _keras_callable(model)
    check_export(lambda s: np.array([np.argmax(keras_run(s))]), path, _samples(20))


def test_a_wrong_export_is_caught_by_check_export(tmp_path):
    model = _model()
    path = export_keras(model, SPECS, tmp_path / "policy.onnx")
    other = _model("sigmoid")
    with pytest.raises(ExportMismatchError):
        check_export(_keras_callable(other), path, _samples(5))


def test_non_dense_layers_are_refused_by_name(tmp_path):
    model = keras.Sequential(
        [keras.Input(shape=(5,)), keras.layers.Dense(4), keras.layers.Dropout(0.5, name="drop")]
    )
    with pytest.raises(SpecError, match="'drop' is a Dropout"):
        export_keras(model, SPECS, tmp_path / "x.onnx")


def test_unsupported_activations_are_refused(tmp_path):
    model = keras.Sequential([keras.Input(shape=(5,)), keras.layers.Dense(4, activation="elu")])
    with pytest.raises(SpecError, match="activation 'elu'"):
        export_keras(model, SPECS, tmp_path / "x.onnx")
