"""mlbridge.export.check_export: catches exports that answer differently from the original."""

from __future__ import annotations

import numpy as np
import pytest

from mlbridge import ElementType, SpecError, TensorSpec
from mlbridge.export import (
    Dense,
    ExportMismatchError,
    check_export,
    export_numpy_dense,
    numpy_dense_forward,
)

SPECS = [TensorSpec("x", ElementType.FLOAT, (4,)), TensorSpec("n", ElementType.INT32, (1,))]


@pytest.fixture
def exported(tmp_path):
    rng = np.random.default_rng(7)
    layers = [Dense(rng.normal(size=(5, 6)), rng.normal(size=6), "sigmoid"), Dense(np.eye(6))]
    path = export_numpy_dense(SPECS, layers, tmp_path / "m.onnx")
    samples = [
        {"x": rng.normal(size=4).astype(np.float32), "n": np.array([i], dtype=np.int32)}
        for i in range(20)
    ]
    return path, layers, samples


def test_a_faithful_export_passes(exported):
    path, layers, samples = exported
    worst = check_export(lambda s: numpy_dense_forward(SPECS, layers, s), path, samples)
    assert 0.0 <= worst < 1e-5


def test_a_wrong_export_is_rejected_with_the_max_difference(exported):
    path, layers, samples = exported
    # The "original" differs from what was exported by a small change of one weight.
    weight = np.array(layers[0].weight, dtype=np.float32).copy()
    weight[4, 2] += 0.05
    changed = [Dense(weight, layers[0].bias, "sigmoid"), layers[1]]
    with pytest.raises(ExportMismatchError, match=r"sample \d+: .* max difference") as info:
        check_export(lambda s: numpy_dense_forward(SPECS, changed, s), path, samples)
    assert info.value.max_difference > 1e-4
    # Within a loose enough tolerance, the same pair agrees.
    check_export(lambda s: numpy_dense_forward(SPECS, changed, s), path, samples, atol=1.0)


def test_a_wrong_shape_is_rejected(exported):
    path, layers, samples = exported

    def original(s):
        return numpy_dense_forward(SPECS, layers, s)[:5]

    with pytest.raises(ExportMismatchError, match="answers 6 elements") as info:
        check_export(original, path, samples[0])
    assert info.value.max_difference == float("inf")
    assert info.value.sample_index == 0


def test_integer_answers_must_be_equal(tmp_path):
    layers = [Dense(np.eye(5))]
    out = TensorSpec("choice", ElementType.INT64, (1,))
    path = export_numpy_dense(SPECS, layers, tmp_path / "a.onnx", output=out, argmax=True)
    sample = {"x": np.array([0, 3, 1, 2], dtype=np.float32), "n": np.array([0], dtype=np.int32)}
    assert check_export(lambda s: np.array([1]), path, sample) == 0.0
    with pytest.raises(ExportMismatchError, match="max difference 1"):
        check_export(lambda s: np.array([2]), path, sample)


def test_samples_must_feed_every_input(exported):
    path, layers, samples = exported
    with pytest.raises(SpecError, match="sample 0 has no value for model input 'n'"):
        check_export(lambda s: 0, path, [{"x": samples[0]["x"]}])
    with pytest.raises(SpecError, match="input 'n' is tensor\\(int32\\) but the value is float"):
        check_export(lambda s: 0, path, {"x": samples[0]["x"], "n": np.array([1.5])})
    with pytest.raises(SpecError, match="no ONNX model"):
        check_export(lambda s: 0, path.with_name("missing.onnx"), samples)
    with pytest.raises(SpecError, match="at least one sample"):
        check_export(lambda s: 0, path, [])
