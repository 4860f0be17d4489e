"""The one observation type and policy protocol of every compiler interface.

A policy is any callable taking an :class:`Observation` and returning the advice; the
same function answers the pipe interface (:mod:`mlbridge.compiler.pipe`), the gRPC
server and the gRPC trainer (:mod:`mlbridge.compiler.grpc`)::

    def policy(obs: Observation) -> int:
        return int(obs["callee_users"][0] < 3)

An observation is a mapping of feature name to numpy array, in the compiler's order,
with what every channel knows about the decision beside it. A channel may add what only
it has: the pipe's observations (:class:`mlbridge.compiler.pipe.Observation`, a
subclass) also carry the stream header, the decoded message and the outcome the
compiler reports later.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mlbridge.errors import UnknownFeatureError
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import TensorSpec

__all__ = ["Observation", "Policy"]


class Observation(dict[str, np.ndarray[Any, np.dtype[Any]]]):
    """One decision's features: feature name to numpy array, in the compiler's order.

    Attributes:
        id: The decision's index (per context on a pipe, per session over gRPC).
        context: What the decision is about (LLVM sends the function or module name);
            ``None`` (pipe) or ``""`` (gRPC) when the compiler sent none.
        advice: The spec of the advice the compiler expects back, or ``None`` when the
            compiler did not say (stock LLVM's pipe header has no advice spec).
        tensors: The features as :class:`~mlbridge.Tensor` objects, in order.
    """

    def __init__(
        self,
        id: int,
        context: str | None,
        advice: TensorSpec | None,
        tensors: Sequence[Tensor],
    ) -> None:
        super().__init__((t.name, t.array) for t in tensors)
        self.id = id
        self.context = context
        self.advice = advice
        self.tensors = tuple(tensors)

    def __missing__(self, name: str) -> np.ndarray[Any, np.dtype[Any]]:
        """``obs[name]`` for a name the compiler did not send: an error listing the names."""
        raise UnknownFeatureError(name, self)

    def __repr__(self) -> str:
        advice = "" if self.advice is None else f", advice={self.advice.name!r}"
        return (
            f"{type(self).__name__}(id={self.id}, context={self.context!r}, "
            f"features={len(self)}{advice})"
        )


#: A policy: called with each :class:`Observation`, returns the advice (a number, a
#: numpy array or scalar, or anything the advice spec accepts).
Policy = Callable[[Observation], Any]
