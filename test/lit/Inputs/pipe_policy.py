"""Model side for the pipe lit tests: runs a compiler and answers it with a known policy.

    pipe_policy.py --policy inline-small [--log FILE] -- opt ... -...-channel-base={base} ...

``{base}`` in the compiler command is replaced by the base of a private FIFO pair
(``mlbridge.compiler.pipe.FifoChannel``). Each decision is written to ``--log`` as one line
(``<context> <id> <features...> -> <advice>``); a summary goes to stdout. With no
compiler command, the script only waits for a compiler to connect (to test the bound).
With ``--answers N`` the model answers N observations, then closes its ends of the FIFOs
(as a model that exits would) and waits (bounded) for the compiler to finish without it.
``--require-end`` makes the end of input without an end record an error (mlbridge's
``PipeModelRunner`` sends one). The exit status is the compiler's, or 1 with a message
on stderr if the model side fails.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from mlbridge import MLBridgeError
from mlbridge.compiler.pipe import FifoChannel, Observation, PipeCompilerInterface, drive_compiler


def make_policy(name: str, log: TextIO | None) -> Any:
    def note(obs: Observation, what: str, advice: object) -> None:
        if log is not None:
            log.write(f"{obs.context} {obs.id} {what} -> {advice}\n")

    def inline_small(obs: Observation) -> int:
        # Inline iff the callee has at most one basic block.
        bbs = int(obs["callee_basic_block_count"][0])
        advice = int(bbs <= 1)
        note(obs, f"callee_basic_block_count={bbs}", advice)
        return advice

    def blocks_mod(obs: Observation) -> int:
        # For mlbridge-function-features: advice = -basic_block_count mod 4 (a class index
        # of none/inline/size/speed), unlike the built-in policy for every sample function.
        bbs = int(obs["basic_block_count"][0])
        advice = -bbs % 4
        note(obs, f"basic_block_count={bbs}", advice)
        return advice

    def inline_all(obs: Observation) -> int:
        # Inline everything the compiler asks about (for the legality tests).
        note(obs, f"callee_basic_block_count={int(obs['callee_basic_block_count'][0])}", 1)
        return 1

    def inline_default(obs: Observation) -> int:
        # LLVM's default heuristic's decision, which the compiler sends as inlining_default.
        advice = int(obs["inlining_default"][0])
        note(obs, f"inlining_default={advice}", advice)
        return advice

    def inline_small_all_features(obs: Observation) -> int:
        # inline-small, logging every feature in header order: the same log from stock opt
        # and from the plugin proves that both send the same features.
        advice = int(int(obs["callee_basic_block_count"][0]) <= 1)
        note(obs, " ".join(f"{k}={v.reshape(-1).tolist()}" for k, v in obs.items()), advice)
        return advice

    def inline_none(obs: Observation) -> int:
        note(obs, f"inlining_default={int(obs['inlining_default'][0])}", 0)
        return 0

    def priority_weight(obs: Observation) -> np.ndarray:
        # The live range's spill weight, as the priority. An unspillable range weighs
        # inf, which stock llc would cast to unsigned (undefined): the priority's valid
        # range is [0, 2^32) (mlbridge/compiler/advice_constraints.py), so clamp to it.
        w = np.asarray(obs["weight"], dtype=np.float32).reshape(-1)[0]
        p = np.float32(min(max(float(w), 0.0), 4294967040.0))  # the largest float < 2^32
        note(obs, f"li_size={int(obs['li_size'][0])} weight={w:g}", f"{p:g}")
        return p

    def priority_constant(obs: Observation) -> np.ndarray:
        note(obs, f"li_size={int(obs['li_size'][0])}", "1")
        return np.float32(1.0)

    # mlbridge's priority advisor (docs/regalloc.md): float64 advice, default_priority sent.
    def priority_default(obs: Observation) -> np.ndarray:
        # LLVM's default priority: the allocation must be stock llc's.
        d = int(obs["default_priority"][0])
        note(obs, f"li_size={int(obs['li_size'][0])} default_priority={d}", d)
        return np.float64(d)

    def priority_reverse(obs: Observation) -> np.ndarray:
        # The default order reversed: what greedy would take last comes first.
        d = int(obs["default_priority"][0])
        advice = 0xFFFFFFFF - d
        note(obs, f"li_size={int(obs['li_size'][0])} default_priority={d}", advice)
        return np.float64(advice)

    def evict_first(obs: Observation) -> int:
        # Evict the first candidate the mask allows; 32 (the candidate itself) if none.
        mask = obs["mask"].reshape(-1)
        allowed = [i for i in range(mask.size - 1) if mask[i]]
        advice = allowed[0] if allowed else mask.size - 1
        note(obs, f"candidates={len(allowed)}", advice)
        return advice

    def regalloc_spill_first(obs: Observation) -> np.ndarray:
        # The ML register allocator: the first queued live range; spill it when it can
        # be spilled (the last action), else the first legal register.
        mask = obs["action_mask"].reshape(-1)
        agent = int(obs["agent"][0])
        legal = [i for i in range(mask.size) if mask[i]]
        advice = legal[-1] if agent == 1 else legal[0]
        note(obs, f"agent={agent} actions={mask.size}", advice)
        return np.array([advice], np.int64)

    def regalloc_basic(obs: Observation) -> np.ndarray:
        from mlbridge.regalloc import basic_policy

        advice = basic_policy(obs)
        note(obs, f"agent={int(obs['agent'][0])} actions={obs['action_mask'].size}", advice[0])
        return advice

    return {
        "blocks-mod": blocks_mod,
        "regalloc-basic": regalloc_basic,
        "regalloc-spill-first": regalloc_spill_first,
        "evict-first": evict_first,
        "inline-small": inline_small,
        "inline-all": inline_all,
        "inline-default": inline_default,
        "inline-small-all-features": inline_small_all_features,
        "inline-none": inline_none,
        "priority-weight": priority_weight,
        "priority-constant": priority_constant,
        "priority-default": priority_default,
        "priority-reverse": priority_reverse,
    }[name]


def answer_then_leave(command: list[str], policy: Any, args: argparse.Namespace) -> int:
    """Start the compiler, answer ``args.answers`` observations, close the FIFOs, and wait
    (bounded by ``args.timeout``) for the compiler to finish; its exit status."""
    with FifoChannel(parent=args.tmpdir) as channel:
        argv = [a.replace("{base}", str(channel.base)) for a in command]
        proc = subprocess.Popen(argv)
        try:
            with PipeCompilerInterface(
                channel.base,
                args.serdes,
                timeout=args.timeout,
                connect_timeout=args.connect_timeout,
            ) as ci:
                ci.connect()
                answered = 0
                while answered < args.answers and (obs := ci.evaluate()) is not None:
                    ci.respond(policy(obs))
                    answered += 1
            # The model side is gone: the compiler must cope on its own.
            code = proc.wait(args.timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    print(f"pipe_policy: answered {answered}, then closed the FIFOs; compiler exit {code}")
    return code


def main(argv: list[str]) -> int:
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    else:
        command = []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--policy", default="inline-small",
        choices=[
            "inline-small", "inline-all", "inline-default", "inline-small-all-features",
            "inline-none",
            "priority-weight", "priority-constant", "evict-first", "blocks-mod",
            "priority-default", "priority-reverse", "regalloc-basic", "regalloc-spill-first",
        ],
    )  # fmt: skip
    parser.add_argument("--log", type=Path)
    parser.add_argument("--serdes", default="bitstream")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--connect-timeout", type=float, default=60.0)
    parser.add_argument("--tmpdir", type=Path, help="parent of the private FIFO folder")
    parser.add_argument("--answers", type=int, help="answer this many, then close the FIFOs")
    parser.add_argument("--require-end", action="store_true", help="require an end record")
    args = parser.parse_args(argv)

    log = args.log.open("w") if args.log else None
    try:
        if args.answers is not None:
            return answer_then_leave(command, make_policy(args.policy, log), args)
        if not command:
            with FifoChannel(parent=args.tmpdir) as channel:
                print(f"waiting on {channel.base}", file=sys.stderr)
                with PipeCompilerInterface(
                    channel.base, args.serdes, connect_timeout=args.connect_timeout
                ) as ci:
                    ci.run(make_policy(args.policy, log))
            return 0
        result = drive_compiler(
            command,
            make_policy(args.policy, log),
            require_end=args.require_end or None,
            serdes=args.serdes,
            timeout=args.timeout,
            connect_timeout=args.connect_timeout,
            parent=args.tmpdir,
        )
    except MLBridgeError as e:
        print(f"pipe_policy: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        if log is not None:
            log.close()
    assert result.header is not None
    print(
        f"pipe_policy: {result.answered} decisions, {len(result.header.features)} features, "
        f"advice {result.header.advice.to_json().decode() if result.header.advice else None}, "
        f"compiler exit {result.returncode}"
    )
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
