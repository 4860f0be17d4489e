"""mlbridge.export.export_torch: PyTorch modules exported with the pass's input names."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from mlbridge import ElementType, SpecError, TensorSpec
from mlbridge.export import ExportMismatchError, check_export, export_torch, torch_callable
from mlbridge.export._onnx_specs import model_input_specs

SPECS = [
    TensorSpec("loop_depth", ElementType.INT64, (1,)),
    TensorSpec("features", ElementType.FLOAT, (4,)),
    TensorSpec("trip_count", ElementType.DOUBLE, (2,)),
]


class Policy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.hidden = torch.nn.Linear(7, 16)
        self.out = torch.nn.Linear(16, 3)

    def forward(self, depth, features, trips):
        x = torch.cat([depth.float(), features, trips.float()])
        return self.out(torch.relu(self.hidden(x)))


def _samples(n: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    return [
        {
            "loop_depth": rng.integers(0, 5, size=1),
            "features": rng.normal(size=4).astype(np.float32),
            "trip_count": rng.uniform(0, 100, size=2),
        }
        for _ in range(n)
    ]


def test_exported_policy_answers_like_the_module(tmp_path):
    policy = Policy()
    path = export_torch(policy, SPECS, tmp_path / "p.onnx", output_name="logits")
    assert model_input_specs(path) == SPECS
    assert [o.name for o in onnx.load(str(path)).graph.output] == ["logits"]
    worst = check_export(torch_callable(policy, SPECS), path, _samples(50), rtol=1e-5, atol=1e-5)
    assert worst < 1e-4
    assert policy.training, "export_torch restores the module's training mode"


def test_a_module_changed_after_export_is_caught(tmp_path):
    policy = Policy()
    path = export_torch(policy, SPECS, tmp_path / "p.onnx")
    with torch.no_grad():
        policy.out.bias[1] += 0.01
    with pytest.raises(ExportMismatchError, match=r"max difference 0\.0(1|099)"):
        check_export(torch_callable(policy, SPECS), path, _samples(3))


def test_dynamic_dimensions_stay_dynamic(tmp_path):
    class Sum(torch.nn.Module):
        def forward(self, x, scale):
            return (x * scale).sum(dim=0, keepdim=True)

    specs = [
        TensorSpec("x", ElementType.FLOAT, (-1,)),
        TensorSpec("scale", ElementType.FLOAT, (1,)),
    ]
    path = export_torch(Sum(), specs, tmp_path / "s.onnx", output_name="total")
    assert model_input_specs(path) == specs
    rng = np.random.default_rng(1)
    samples = [
        {"x": rng.normal(size=n).astype(np.float32), "scale": np.array([2.0], np.float32)}
        for n in (1, 3, 17)
    ]
    check_export(torch_callable(Sum(), specs), path, samples)


def test_unused_features_are_left_out(tmp_path):
    class First(torch.nn.Module):
        def forward(self, a, unused):
            return a * 2

    specs = [TensorSpec("a", ElementType.INT32, (3,)), TensorSpec("unused", ElementType.BOOL, (1,))]
    path = export_torch(First(), specs, tmp_path / "f.onnx")
    assert model_input_specs(path) == specs[:1]
    sample = {"a": np.array([1, -2, 3], np.int32), "unused": np.array([True])}
    assert check_export(torch_callable(First(), specs), path, sample) == 0.0


def test_types_pytorch_lacks_are_refused(tmp_path):
    specs = [TensorSpec("x", ElementType.UINT32, (1,))]
    with pytest.raises(SpecError, match="'x' is uint32_t, which PyTorch models cannot take"):
        export_torch(torch.nn.Identity(), specs, tmp_path / "x.onnx")
    with pytest.raises(SpecError, match="has the name of a feature"):
        export_torch(torch.nn.Identity(), SPECS, tmp_path / "x.onnx", output_name="features")
