"""Model side for PipeModelRunnerTest: answers a PipeModelRunner through mlbridge.

    pipe_model.py BASE SERDES POLICY [REPORT]

POLICY ``sum``: advice = the sum of every numeric feature element, cast to the advice
type. ``context``: advice = the length of the current context name. Exits 0 at the end
of the session; prints nothing on stdout. With REPORT, the session must end with an end
record, and the file gets one line per observation, ``<context> <id> <feature names,
comma-separated> <outcome or none>``, then ``ended``.
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

    report = sys.argv[4] if len(sys.argv) > 4 else None
    seen: list[Observation] = []
    with PipeCompilerInterface(
        base, serdes, timeout=60, connect_timeout=60, require_end=report is not None
    ) as ci:
        while (obs := ci.evaluate()) is not None:
            ci.respond(answer(obs))
            seen.append(obs)
        ended = ci.ended
    if report is not None:
        with open(report, "w") as f:
            for obs in seen:
                outcome = "none" if obs.outcome is None else f"{float(obs.outcome.flat[0]):g}"
                f.write(f"{obs.context} {obs.id} {','.join(obs)} {outcome}\n")
            if ended:
                f.write("ended\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
