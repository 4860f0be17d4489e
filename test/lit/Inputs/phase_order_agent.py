"""Agent side of the phase-order lit tests: runs opt and answers a fixed action list.

    phase_order_agent.py --actions 0,3,8 --log FILE [--answers K] -- opt ... {base} ...

``{base}`` in the compiler command is replaced by the base of a private FIFO pair. The
agent answers the listed actions in order, then ``action_count`` (stop) for every later
observation. Each observation is logged as one line (``obs <context> step=.. code_size=..
action_count=.. dim=.. nonzero=.. history=<action_history> -> <action>``), each outcome
(reward channel) as ``outcome <context> <id> code_size=..``, and the session's end as
``end ended=<bool>``.
``--dump-observations FILE`` writes every observation vector as one JSON list per line.
With ``--answers K`` the agent answers K observations, then closes its ends of the FIFOs
as an agent that dies would, and waits (bounded) for the compiler to finish. A summary
goes to stdout; the exit status is the compiler's, or 1 if the agent side fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import TextIO

import numpy as np

from mlbridge import MLBridgeError
from mlbridge.compiler.pipe import FifoChannel, Observation, PipeCompilerInterface


def decide(obs: Observation, actions: list[int], log: TextIO, dump: TextIO | None) -> int:
    """The action for ``obs``: the listed one for its step, else stop."""
    step = int(obs["step"][0])
    count = int(obs["action_count"][0])
    action = actions[step] if step < len(actions) else count
    vec = np.asarray(obs["observation"], dtype=np.float32).reshape(-1)
    history = ",".join(str(int(h)) for h in np.asarray(obs["action_history"]).reshape(-1))
    log.write(
        f"obs {obs.context} step={step} code_size={int(obs['code_size'][0])} "
        f"action_count={count} dim={vec.size} nonzero={int(np.count_nonzero(vec))} "
        f"history={history} -> {action}\n"
    )
    if dump is not None:
        dump.write(json.dumps(vec.tolist()) + "\n")
    return action


def run(command: list[str], args: argparse.Namespace, log: TextIO, dump: TextIO | None) -> int:
    actions = [int(a) for a in args.actions.split(",") if a]
    with FifoChannel(parent=args.tmpdir) as channel:
        argv = [a.replace("{base}", str(channel.base)) for a in command]
        proc = subprocess.Popen(argv)
        decisions = outcomes = 0
        try:
            with PipeCompilerInterface(
                channel.base, args.serdes, timeout=args.timeout, require_end=True
            ) as ci:
                ci.connect()
                while args.answers is None or decisions < args.answers:
                    obs = ci.evaluate()
                    for o in ci.outcomes():
                        log.write(f"outcome {o.context} {o.id} code_size={int(o.score[0])}\n")
                        outcomes += 1
                    if obs is None:
                        log.write(f"end ended={ci.ended}\n")
                        break
                    ci.respond(decide(obs, actions, log, dump))
                    decisions += 1
            # With --answers the agent is gone now: the compiler must cope on its own.
            code = proc.wait(args.timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    print(
        f"phase_order_agent: {decisions} decisions, {outcomes} outcomes"
        + (", then closed the FIFOs" if args.answers is not None else "")
        + f"; compiler exit {code}"
    )
    return code


def main(argv: list[str]) -> int:
    split = argv.index("--")
    argv, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", required=True, help="comma-separated action indices")
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--dump-observations", type=Path)
    parser.add_argument("--serdes", default="bitstream")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--tmpdir", type=Path, help="parent of the private FIFO folder")
    parser.add_argument("--answers", type=int, help="answer this many, then close the FIFOs")
    args = parser.parse_args(argv)
    dump = args.dump_observations.open("w") if args.dump_observations else None
    try:
        with args.log.open("w") as log:
            return run(command, args, log, dump)
    except MLBridgeError as e:
        print(f"phase_order_agent: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        if dump is not None:
            dump.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
