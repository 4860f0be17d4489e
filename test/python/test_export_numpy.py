"""mlbridge.export.export_numpy_dense: a dense model from numpy weights, run by ONNX Runtime."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest

from mlbridge import ElementType, SpecError, TensorSpec
from mlbridge.export import Dense, check_export, export_numpy_dense, numpy_dense_forward

SPECS = [
    TensorSpec("callee_size", ElementType.INT64, (1,)),
    TensorSpec("weights", ElementType.FLOAT, (2, 2)),
    TensorSpec("is_hot", ElementType.BOOL, (1,)),
]


def _layers(rng: np.random.Generator) -> list[Dense]:
    return [
        Dense(rng.normal(size=(6, 8)), rng.normal(size=8), "relu"),
        Dense(rng.normal(size=(8, 8)), rng.normal(size=8), "tanh"),
        Dense(rng.normal(size=(8, 3)), None, None),
    ]


def _samples(rng: np.random.Generator, n: int) -> list[dict[str, np.ndarray]]:
    return [
        {
            "callee_size": rng.integers(0, 3, size=1, dtype=np.int64),
            "weights": rng.normal(size=(2, 2)).astype(np.float32),
            "is_hot": rng.integers(0, 2, size=1).astype(np.bool_),
            # A feature the model does not read: ignored, as by the C++ runner.
            "extra": np.zeros(3, dtype=np.int32),
        }
        for _ in range(n)
    ]


def test_inputs_carry_the_feature_names_types_and_shapes(tmp_path):
    rng = np.random.default_rng(0)
    path = export_numpy_dense(SPECS, _layers(rng), tmp_path / "m.onnx")
    model = onnx.load(str(path))
    inputs = [
        (i.name, i.type.tensor_type.elem_type, [d.dim_value for d in i.type.tensor_type.shape.dim])
        for i in model.graph.input
    ]
    assert inputs == [
        ("callee_size", onnx.TensorProto.INT64, [1]),
        ("weights", onnx.TensorProto.FLOAT, [2, 2]),
        ("is_hot", onnx.TensorProto.BOOL, [1]),
    ]
    assert [o.name for o in model.graph.output] == ["advice"]


def test_answers_like_numpy(tmp_path):
    rng = np.random.default_rng(1)
    layers = _layers(rng)
    path = export_numpy_dense(SPECS, layers, tmp_path / "m.onnx")
    worst = check_export(
        lambda s: numpy_dense_forward(SPECS, layers, s), path, _samples(rng, 50), rtol=1e-5
    )
    assert worst < 1e-3


def test_argmax_decision_with_a_named_int_output(tmp_path):
    rng = np.random.default_rng(2)
    layers = _layers(rng)
    out = TensorSpec("inlining_decision", ElementType.INT32, ())
    path = export_numpy_dense(SPECS, layers, tmp_path / "m.onnx", output=out, argmax=True)
    samples = _samples(rng, 40)
    assert check_export(
        lambda s: numpy_dense_forward(SPECS, layers, s, argmax=True), path, samples
    ) == pytest.approx(0.0)
    decisions = {int(numpy_dense_forward(SPECS, layers, s, argmax=True)[0]) for s in samples}
    assert len(decisions) > 1, "the samples should exercise more than one decision"


def test_double_output_with_its_own_shape(tmp_path):
    rng = np.random.default_rng(3)
    layers = _layers(rng)
    out = TensorSpec("scores", ElementType.DOUBLE, (1, 3))
    path = export_numpy_dense(SPECS, layers, tmp_path / "m.onnx", output=out)
    check_export(lambda s: numpy_dense_forward(SPECS, layers, s), path, _samples(rng, 5))


@pytest.mark.parametrize(
    ("specs", "layers", "kwargs", "message"),
    [
        ([TensorSpec("x", ElementType.FLOAT, (-1,))], [Dense(np.ones((1, 1)))], {}, "dynamic"),
        ([TensorSpec("x", ElementType.STRING, (1,))], [Dense(np.ones((1, 1)))], {}, "string"),
        (SPECS, [Dense(np.ones((5, 2)))], {}, "layer 0 takes 5 inputs but receives 6"),
        (SPECS, [Dense(np.ones((6, 2))), Dense(np.ones((3, 1)))], {}, "layer 1 takes 3"),
        (SPECS, [Dense(np.ones((6, 2)), np.ones(3))], {}, "bias has shape (3,)"),
        (SPECS, [Dense(np.ones((6, 2)), None, "gelu")], {}, "unknown activation 'gelu'"),
        (
            SPECS,
            [Dense(np.ones((6, 2)))],
            {"output": TensorSpec("a", ElementType.FLOAT, (3,))},
            "with 2 elements",
        ),
        (
            SPECS,
            [Dense(np.ones((6, 2)))],
            {"output": TensorSpec("a", ElementType.FLOAT, (1,)), "argmax": True},
            "must be one integer",
        ),
        (
            SPECS,
            [Dense(np.ones((6, 2)))],
            {"output": TensorSpec("is_hot", ElementType.FLOAT, (2,))},
            "has the name of a feature",
        ),
        ([SPECS[0], SPECS[0]], [Dense(np.ones((2, 1)))], {}, "listed twice"),
    ],
)
def test_bad_specs_and_layers_are_refused(tmp_path, specs, layers, kwargs, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        export_numpy_dense(specs, layers, tmp_path / "m.onnx", **kwargs)
    assert not (tmp_path / "m.onnx").exists()


EXPORT_WITHOUT_TORCH = r"""
import sys

sys.modules["torch"] = None  # any `import torch` now raises ImportError

import numpy as np

import mlbridge.export
from mlbridge import ElementType, TensorSpec
from mlbridge.export import Dense, check_export, export_numpy_dense, numpy_dense_forward

specs = [TensorSpec("x", ElementType.FLOAT, (3,)), TensorSpec("n", ElementType.INT64, (1,))]
layers = [Dense(np.arange(8, dtype=np.float32).reshape(4, 2) / 8, np.ones(2), "tanh")]
path = export_numpy_dense(specs, layers, sys.argv[1])
samples = [{"x": np.array([1.0, -2.0, 0.5], np.float32), "n": np.array([3], np.int64)}]
check_export(lambda s: numpy_dense_forward(specs, layers, s), path, samples)
assert sys.modules["torch"] is None
print("exported", path)
"""


def test_numpy_export_and_check_never_import_torch(tmp_path):
    out = tmp_path / "m.onnx"
    result = subprocess.run(
        [sys.executable, "-c", EXPORT_WITHOUT_TORCH, str(out)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert f"exported {out}" in result.stdout
    assert onnx.load(str(out)).graph.input[0].name == "x"
