"""A small phase-ordering policy in PyTorch, its JSON form and its ONNX export.

The policy sees the pass's features (``observation`` float32 [D], ``step`` and
``code_size`` int64 [1], ``action_history`` float32 [N]) and scores the N + 1 actions
(N sub-sequences, then stop) with a one-hidden-layer perceptron. The input scaling is
part of the network, so the exported ONNX graph takes the raw features the pass sends
and answers the int64 ``action`` (the
argmax, computed in the graph), as ``mlbridge-phase-order`` expects of an in-process agent
(``ActionSelection::Raw``). ``action_count`` is not an input: a model may know fewer
features than the pass sends.

Needs PyTorch (the ``dev`` extra); ``mlbridge.phase_order`` imports this module lazily.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from mlbridge.errors import MLBridgeError
from mlbridge.export.weights import shortest_decimals
from mlbridge.phase_order.command import ACTION_HISTORY, ADVICE, CODE_SIZE, OBSERVATION, STEP
from mlbridge.tensor_spec import ElementType, TensorSpec

__all__ = ["POLICY_FORMAT", "PhasePolicy", "policy_specs"]

#: The ``format`` of the JSON a policy is saved as.
POLICY_FORMAT = "mlbridge-phase-order-policy-2"
# Scales that bring the step and the log code size near [0, 1] for the usual modules.
_STEP_SCALE = 16.0
_SIZE_SCALE = 12.0
_HISTORY_SCALE = 4.0


def policy_specs(dim: int, n_actions: int) -> list[TensorSpec]:
    """The specs of the policy's inputs (the pass's features but ``action_count``)."""
    return [
        TensorSpec(OBSERVATION, ElementType.FLOAT, (dim,)),
        TensorSpec(STEP, ElementType.INT64, (1,)),
        TensorSpec(CODE_SIZE, ElementType.INT64, (1,)),
        TensorSpec(ACTION_HISTORY, ElementType.FLOAT, (n_actions,)),
    ]


class PhasePolicy(torch.nn.Module):
    """Scores the N + 1 actions of a phase-ordering step; ``forward`` answers the best.

    Args:
        dim: D, the observation's length.
        n_actions: N, the number of sub-sequences (the stop action is N).
        hidden: The hidden layer's width.
        metadata: Free-form facts kept with the policy (training settings, results).
    """

    def __init__(
        self, dim: int, n_actions: int, hidden: int = 64, metadata: dict[str, Any] | None = None
    ) -> None:
        super().__init__()
        if dim < 1 or n_actions < 1 or hidden < 1:
            raise ValueError(
                f"dim, n_actions and hidden must be positive, got {dim}, {n_actions}, {hidden}"
            )
        self.dim = dim
        self.n_actions = n_actions
        self.hidden = hidden
        self.metadata: dict[str, Any] = dict(metadata or {})
        # The history enters twice: whether each sequence ran, and how often.
        self.layer1 = torch.nn.Linear(self.feature_width, hidden)
        self.layer2 = torch.nn.Linear(hidden, n_actions + 1)

    @property
    def feature_width(self) -> int:
        """The width of :meth:`features`' output (``layer1``'s input): D + 2 + 2N."""
        return self.dim + 2 + 2 * self.n_actions

    @staticmethod
    def features(
        observation: torch.Tensor,
        step: torch.Tensor,
        code_size: torch.Tensor,
        history: torch.Tensor,
    ) -> torch.Tensor:
        """The scaled inputs of ``layer1``, ``[..., D + 2 + 2N]``, from the raw features."""
        # Counts span orders of magnitude: a signed log keeps them comparable.
        obs = torch.sign(observation) * torch.log1p(torch.abs(observation))
        s = step.to(torch.float32) / _STEP_SCALE
        c = torch.log1p(code_size.to(torch.float32).clamp(min=0)) / _SIZE_SCALE
        ran = history.clamp(min=0.0, max=1.0)
        return torch.cat([obs, s, c, ran, history / _HISTORY_SCALE], dim=-1)

    def logits(
        self,
        observation: torch.Tensor,
        step: torch.Tensor,
        code_size: torch.Tensor,
        history: torch.Tensor,
    ) -> Any:
        """Action scores ``[..., N + 1]`` for inputs ``[..., D]``, ``[..., 1]``, ``[..., 1]``, ``[..., N]``."""  # noqa: E501
        x = self.features(observation, step, code_size, history)
        return self.layer2(torch.tanh(self.layer1(x)))

    def forward(
        self,
        observation: torch.Tensor,
        step: torch.Tensor,
        code_size: torch.Tensor,
        history: torch.Tensor,
    ) -> Any:
        """The greedy action, int64 ``[..., 1]``."""
        return torch.argmax(
            self.logits(observation, step, code_size, history), dim=-1, keepdim=True
        )

    # -- numpy in, numpy out ----------------------------------------------------------

    @staticmethod
    def tensors(obs: Mapping[str, npt.ArrayLike]) -> tuple[torch.Tensor, ...]:
        """The policy's four inputs of one observation (feature name to value)."""
        # Copies: observations read from the pipe may be read-only views.
        return (
            torch.tensor(np.array(obs[OBSERVATION], dtype=np.float32)),
            torch.tensor(np.array(obs[STEP], dtype=np.int64).reshape(1)),
            torch.tensor(np.array(obs[CODE_SIZE], dtype=np.int64).reshape(1)),
            torch.tensor(np.array(obs[ACTION_HISTORY], dtype=np.float32).reshape(-1)),
        )

    def probabilities(
        self, obs: Mapping[str, npt.ArrayLike], temperature: float = 1.0
    ) -> np.ndarray:
        """The softmax of the action scores (divided by ``temperature``) for one observation."""
        with torch.no_grad():
            p = torch.softmax(self.logits(*self.tensors(obs)) / temperature, dim=-1)
        return p.numpy().astype(np.float64)

    def act(self, obs: Mapping[str, npt.ArrayLike]) -> int:
        """The greedy action for one observation (what the ONNX export answers)."""
        with torch.no_grad():
            return int(self(*self.tensors(obs)).reshape(-1)[0])

    # -- files ------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The policy as JSON-ready data (architecture, weights, metadata)."""
        return {
            "format": POLICY_FORMAT,
            "dim": self.dim,
            "n_actions": self.n_actions,
            "hidden": self.hidden,
            "metadata": self.metadata,
            "weights": {k: shortest_decimals(v) for k, v in self.state_dict().items()},
        }

    def save(self, path: str | Path) -> Path:
        """Writes :meth:`to_json` to ``path``."""
        path = Path(path)
        path.write_text(json.dumps(self.to_json()) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> PhasePolicy:
        """Reads a policy written by :meth:`save`.

        Raises:
            MLBridgeError: If the file is not such a policy.
        """
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise MLBridgeError(f"cannot read the phase-ordering policy {path}: {e}") from None
        return cls.from_json(data, where=str(path))

    @classmethod
    def from_json(cls, data: Any, *, where: str = "the data") -> PhasePolicy:  # noqa: ANN401
        """The policy of :meth:`to_json`'s data, in eval mode.

        Raises:
            MLBridgeError: If ``data`` is not such a policy.
        """
        if not isinstance(data, dict) or data.get("format") != POLICY_FORMAT:
            raise MLBridgeError(
                f"{where} is not a phase-ordering policy (expected format {POLICY_FORMAT!r}; "
                "write one with 'mlbridge train phase-order')"
            )
        policy = cls(data["dim"], data["n_actions"], data["hidden"], data.get("metadata"))
        state = {k: torch.tensor(v, dtype=torch.float32) for k, v in data["weights"].items()}
        policy.load_state_dict(state)
        policy.eval()
        return policy

    def to_onnx(self, path: str | Path) -> Path:
        """Exports the greedy policy to ONNX.

        The inputs are those of :func:`policy_specs`, the output is int64 ``action`` [1].
        """
        from mlbridge.export import export_torch

        return export_torch(self, policy_specs(self.dim, self.n_actions), path, output_name=ADVICE)
