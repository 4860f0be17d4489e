"""Model side for PipeModelRunnerTest: answers a PipeModelRunner through mlbridge.

    pipe_model.py BASE SERDES POLICY

POLICY ``sum``: advice = the sum of every numeric feature element, cast to the advice
type. ``context``: advice = the length of the current context name. Exits 0 at the end
of the session; prints nothing on stdout.
"""

from __future__ import annotations

import sys

import numpy as np

from mlbridge.compiler.pipe import Observation, PipeCompilerInterface


def main() -> int:
    base, serdes, policy = sys.argv[1:4]

    def answer(obs: Observation) -> object:
        assert obs.header.advice is not None
        dtype = obs.header.advice.type.numpy_dtype
        if policy == "context":
            value = len(obs.context or "")
        else:
            value = sum(float(np.sum(a)) for a in obs.values() if a.dtype.kind in "iuf")
        return np.array(value).astype(dtype)

    with PipeCompilerInterface(base, serdes, timeout=60, connect_timeout=60) as ci:
        ci.run(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
