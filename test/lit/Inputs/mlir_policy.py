"""Model side of the mlbridge-loop-unroll lit tests: runs mlir-opt against a known policy.

    mlir_policy.py pipe [--log FILE] [--answers N] [--serdes S] -- mlir-opt ... channel={base} ...
    mlir_policy.py grpc --tmpdir DIR [--log FILE] -- mlir-opt ... address={address} ...

The policy is ``mlbridge.loop_unroll.policy.unroll_by_trip_count`` (4 if trip_count % 4 == 0,
else 2). ``pipe``: ``{base}`` becomes a private FIFO pair's base; with ``--answers N`` the
model answers N observations, then closes its FIFOs (a model that dies) and waits
(bounded) for mlir-opt to finish. ``grpc``: starts ``mlbridge serve`` on a free loopback
port, waits (bounded) for its ready file, runs mlir-opt with ``{address}`` replaced, then
stops the server. Each decision is logged to ``--log`` as
``<function> <id> <feature>=<value>... -> <advice>``. The exit status is mlir-opt's, or 1
with a message on stderr if the model side fails.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mlbridge import MLBridgeError
from mlbridge.compiler.pipe import FifoChannel, PipeCompilerInterface, drive_compiler
from mlbridge.loop_unroll.features import LOOP_FEATURE_NAMES
from mlbridge.loop_unroll.policy import unroll_by_trip_count

LOG_ENV = "MLBRIDGE_LIT_MLIR_LOG"


def logged(obs: Any) -> int:
    """unroll_by_trip_count, logging the decision to $MLBRIDGE_LIT_MLIR_LOG if set."""
    advice = unroll_by_trip_count(obs)
    log = os.environ.get(LOG_ENV)
    if log:
        feats = " ".join(f"{n}={int(obs[n].reshape(-1)[0])}" for n in LOOP_FEATURE_NAMES)
        with open(log, "a") as f:
            f.write(f"{obs.context} {obs.id} {feats} -> {advice}\n")
    return advice


def run_pipe(command: list[str], args: argparse.Namespace) -> int:
    if args.answers is None:
        result = drive_compiler(
            command, logged, serdes=args.serdes, timeout=args.timeout,
            require_end=True, parent=args.tmpdir,
        )  # fmt: skip
        print(f"mlir_policy: {result.answered} decisions, mlir-opt exit {result.returncode}")
        return result.returncode
    with FifoChannel(parent=args.tmpdir) as channel:
        proc = subprocess.Popen([a.replace("{base}", str(channel.base)) for a in command])
        try:
            with PipeCompilerInterface(channel.base, args.serdes, timeout=args.timeout) as ci:
                ci.connect()
                answered = 0
                while answered < args.answers and (obs := ci.evaluate()) is not None:
                    ci.respond(logged(obs))
                    answered += 1
            code = proc.wait(args.timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    print(f"mlir_policy: answered {answered}, then closed the FIFOs; mlir-opt exit {code}")
    return code


def run_grpc(command: list[str], args: argparse.Namespace) -> int:
    ready = args.tmpdir / "ready"
    ready.unlink(missing_ok=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "mlbridge", "serve", f"{Path(__file__).resolve()}:logged",
         "--address", "127.0.0.1:0", "--ready-file", str(ready)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + args.timeout
        while not (ready.exists() and ready.read_text().strip()):
            if server.poll() is not None or time.monotonic() > deadline:
                print("mlir_policy: error: mlbridge serve did not start", file=sys.stderr)
                return 1
            time.sleep(0.02)
        address = ready.read_text().strip()
        code = subprocess.run(
            [a.replace("{address}", address) for a in command], timeout=args.timeout
        ).returncode
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(args.timeout)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        ready.unlink(missing_ok=True)
    print(f"mlir_policy: grpc server stopped; mlir-opt exit {code}")
    return code


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("mlir_policy: error: no mlir-opt command after --", file=sys.stderr)
        return 2
    split = argv.index("--")
    argv, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport", choices=["pipe", "grpc"])
    parser.add_argument("--log", type=Path)
    parser.add_argument("--serdes", default="bitstream")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--tmpdir", type=Path)
    parser.add_argument("--answers", type=int)
    args = parser.parse_args(argv)
    if args.log:
        args.log.unlink(missing_ok=True)
        os.environ[LOG_ENV] = str(args.log)
    try:
        if args.transport == "pipe":
            return run_pipe(command, args)
        if args.tmpdir is None:
            parser.error("grpc needs --tmpdir")
        return run_grpc(command, args)
    except (MLBridgeError, subprocess.TimeoutExpired) as e:
        print(f"mlir_policy: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
