"""A linear inlining policy over LLVM's inliner features, and its export to ONNX.

The policy is the model the trainer (:mod:`mlbridge.inliner.trainer`) optimises and the
built-in default model ships as: ``logit = w . phi(x) + b``, inline iff ``logit > 0``,
where ``phi`` is the signed logarithm ``sign(x) * log(1 + |x|)`` of each int64 feature
(counts and costs span six orders of magnitude; the logarithm puts them on one scale).

Its JSON form (``LinearPolicy.to_json``) is what the repository keeps; the ONNX model
(and the TensorFlow SavedModel for ahead-of-time compilation) are built from it, so the
three always agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

__all__ = ["ADVICE_NAME", "DEFAULT_FEATURE", "LinearPolicy", "signed_log"]

#: The advice tensor of LLVM's ML inliner: int64 [1], 1 to inline.
ADVICE_NAME = "inlining_decision"
#: The default advisor's decision, sent by ``-inliner-interactive-include-default``
#: and by the mlbridge inline advisor.
DEFAULT_FEATURE = "inlining_default"

_FORMAT = "mlbridge-linear-inline-policy/1"


def signed_log(x: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """``sign(x) * log(1 + |x|)``, elementwise, in float64."""
    v = np.asarray(x, dtype=np.float64)
    return np.sign(v) * np.log1p(np.abs(v))


@dataclass
class LinearPolicy:
    """``inline iff w . signed_log(features) + b > 0``.

    Attributes:
        features: The feature names, in weight order.
        weights: One weight per feature.
        bias: The bias.
        metadata: Free-form provenance (training set, iterations, measured sizes).
    """

    features: list[str]
    weights: np.ndarray[Any, np.dtype[np.float64]]
    bias: float
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.weights = np.asarray(self.weights, dtype=np.float64).reshape(-1)
        if self.weights.shape != (len(self.features),):
            raise ValueError(f"{len(self.features)} features but {self.weights.shape[0]} weights")
        if len(set(self.features)) != len(self.features):
            raise ValueError("feature names must be unique")

    @classmethod
    def imitating_default(cls, features: Sequence[str]) -> LinearPolicy:
        """The policy that answers exactly as LLVM's default advisor (``inlining_default``).

        Raises:
            ValueError: If ``features`` does not include ``inlining_default``.
        """
        names = list(features)
        if DEFAULT_FEATURE not in names:
            raise ValueError(
                f"the features do not include {DEFAULT_FEATURE!r}: run opt with "
                "-inliner-interactive-include-default"
            )
        weights = np.zeros(len(names))
        # signed_log(1) = log 2; logit = +-1 for a default of 1 / 0.
        weights[names.index(DEFAULT_FEATURE)] = 2.0 / math.log(2.0)
        return cls(names, weights, -1.0)

    @property
    def parameters(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The weights followed by the bias, as one vector (a copy)."""
        return np.append(self.weights, self.bias)

    def with_parameters(self, theta: np.ndarray[Any, Any]) -> LinearPolicy:
        """A policy over the same features with parameters ``theta`` (weights, then bias)."""
        theta = np.asarray(theta, dtype=np.float64)
        return LinearPolicy(list(self.features), theta[:-1].copy(), float(theta[-1]))

    def feature_vector(self, observation: Mapping[str, Any]) -> np.ndarray[Any, Any]:
        """``signed_log`` of the policy's features, read by name from ``observation``.

        Raises:
            KeyError: If the observation lacks a feature the policy uses.
        """
        return signed_log([np.asarray(observation[n]).reshape(-1)[0] for n in self.features])

    def logit(self, observation: Mapping[str, Any]) -> float:
        """The policy's logit for one decision."""
        return float(self.feature_vector(observation) @ self.weights + self.bias)

    def __call__(self, observation: Mapping[str, Any]) -> int:
        """1 to inline, 0 not to."""
        return int(self.logit(observation) > 0.0)

    # -- persistence ------------------------------------------------------------------

    def to_json(self) -> bytes:
        """The JSON form (indented, stable key order)."""
        doc = {
            "format": _FORMAT,
            "advice": ADVICE_NAME,
            "transform": "signed_log1p",
            "features": self.features,
            "weights": [float(w) for w in self.weights],
            "bias": float(self.bias),
            "metadata": self.metadata,
        }
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"

    def save(self, path: str | Path) -> None:
        """Writes the JSON form to ``path``."""
        Path(path).write_bytes(self.to_json())

    @classmethod
    def from_json(cls, data: bytes | str) -> LinearPolicy:
        """Reads the JSON form.

        Raises:
            ValueError: If the document is not a linear inlining policy.
        """
        doc = orjson.loads(data)
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
            raise ValueError(f"not a linear inlining policy (expected format {_FORMAT!r})")
        if doc.get("transform") != "signed_log1p":
            raise ValueError(f"unknown feature transform {doc.get('transform')!r}")
        return cls(
            list(doc["features"]),
            np.asarray(doc["weights"], dtype=np.float64),
            float(doc["bias"]),
            dict(doc.get("metadata", {})),
        )

    @classmethod
    def load(cls, path: str | Path) -> LinearPolicy:
        """Reads the JSON form from ``path``."""
        return cls.from_json(Path(path).read_bytes())

    # -- export -----------------------------------------------------------------------

    def active_features(self) -> list[str]:
        """The features with a non-zero weight (the only ones the exported model reads)."""
        return [n for n, w in zip(self.features, self.weights, strict=True) if w != 0.0]

    def to_onnx(self, path: str | Path, *, opset: int = 17) -> None:
        """Writes the policy as an ONNX model answering ``inlining_decision`` int64 [1].

        Each active feature is one int64 [1] input.
        Only features with a non-zero weight become inputs: by MLGO's versioning rule
        the compiler's other features are simply not fed.
        """
        import onnx
        from onnx import TensorProto, helper

        names = self.active_features() or [self.features[0]]
        weights = np.array(
            [self.weights[self.features.index(n)] for n in names], dtype=np.float32
        ).reshape(-1, 1)
        inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [1]) for n in names]
        output = helper.make_tensor_value_info(ADVICE_NAME, TensorProto.INT64, [1])
        inits = [
            helper.make_tensor("W", TensorProto.FLOAT, list(weights.shape), weights.ravel()),
            helper.make_tensor("b", TensorProto.FLOAT, [1], [float(self.bias)]),
            helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
            helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
            helper.make_tensor("row", TensorProto.INT64, [2], [1, -1]),
            helper.make_tensor("flat", TensorProto.INT64, [1], [1]),
        ]
        nodes = [
            helper.make_node("Concat", names, ["x_int"], axis=0),
            helper.make_node("Cast", ["x_int"], ["x"], to=TensorProto.FLOAT),
            helper.make_node("Abs", ["x"], ["x_abs"]),
            helper.make_node("Add", ["x_abs", "one"], ["x_abs1"]),
            helper.make_node("Log", ["x_abs1"], ["x_log"]),
            helper.make_node("Sign", ["x"], ["x_sign"]),
            helper.make_node("Mul", ["x_sign", "x_log"], ["phi"]),
            helper.make_node("Reshape", ["phi", "row"], ["phi_row"]),
            helper.make_node("MatMul", ["phi_row", "W"], ["wx"]),
            helper.make_node("Reshape", ["wx", "flat"], ["wx_flat"]),
            helper.make_node("Add", ["wx_flat", "b"], ["logit"]),
            helper.make_node("Greater", ["logit", "zero"], ["inline"]),
            helper.make_node("Cast", ["inline"], [ADVICE_NAME], to=TensorProto.INT64),
        ]
        graph = helper.make_graph(nodes, "mlbridge_linear_inline_policy", inputs, [output], inits)
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", opset)],
            producer_name="mlbridge",
        )
        model.ir_version = 8
        onnx.checker.check_model(model)
        Path(path).write_bytes(model.SerializeToString())

    def to_tfaot(
        self,
        output_dir: str | Path,
        *,
        name: str,
        tf_python: str | Path | None = None,
        log: bool = False,
    ) -> Path:
        """Compiles the policy ahead of time with TensorFlow (``mlbridge aot``).

        The SavedModel is written in the TensorFlow environment (same inputs, output and
        float32 arithmetic as :meth:`to_onnx`), then compiled into ``output_dir``.

        Args:
            output_dir: Where ``mlbridge aot`` writes its outputs.
            name: The AOT model name (a C identifier).
            tf_python: The TensorFlow environment's interpreter (default: found).
            log: Whether to report progress on stderr.

        Returns:
            The shared object (``<name>.so``; its ``<name>.specs.json`` is beside it).

        Raises:
            mlbridge.aot.compile.AOTError: If compiling fails.
            RuntimeError: If writing the SavedModel fails.
        """
        import tempfile

        from mlbridge.aot.compile import compile_saved_model
        from mlbridge.aot.tfenv import run_tf_script

        script = Path(__file__).resolve().parent / "_tf_linear_policy.py"
        with tempfile.TemporaryDirectory(prefix="mlbridge-policy-") as tmp:
            policy_json = Path(tmp) / "policy.json"
            self.save(policy_json)
            saved = Path(tmp) / "saved_model"
            run_tf_script(
                script,
                str(policy_json),
                str(saved),
                what="writing the policy's SavedModel",
                tf_python=tf_python,
            )
            outputs = compile_saved_model(saved, name, output_dir, tf_python=tf_python, log=log)
        if outputs.shared_object is None:
            raise RuntimeError(f"mlbridge aot wrote no shared object for {name}")
        return outputs.shared_object
