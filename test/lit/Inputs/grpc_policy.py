"""Model server for the gRPC lit tests: serves a known policy, runs a compiler against it.

    grpc_policy.py --policy blocks_mod [--log FILE] --tmpdir DIR -- \
        opt ... -mlbridge-address={address}

Starts ``python -m mlbridge serve grpc_policy.py:<policy> --address 127.0.0.1:0
--ready-file DIR/ready`` in the background, waits (bounded by ``--timeout``) for the
ready file, runs the compiler with ``{address}`` replaced by the server's ``host:port``,
then stops the server (SIGTERM, bounded wait, SIGKILL as a last resort) and removes the
files it made in ``--tmpdir``. With ``--no-server`` nothing is started: ``{address}`` is
a loopback port that was free a moment ago (bound, then closed), so no one listens
there. Each decision is written to ``--log`` (``<context> <id> <features> -> <advice>``,
by the server process). A summary goes to stdout; the exit status is the compiler's,
or 1 with a message on stderr if the server could not be started.

The policies (``mlbridge-function-features``: a class index, 0 none, 1 inline, 2 size,
3 speed; ``inline_small`` for the ML inline advisor: 1 inline, 0 not; ``priority_default``
for the llc priority advisor; ``phase_order_table`` for mlbridge-phase-order) are plain functions
of this module, also usable as ``mlbridge serve test/lit/Inputs/grpc_policy.py:blocks_mod``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

LOG_ENV = "MLBRIDGE_LIT_GRPC_LOG"


def _note(obs: Any, what: str, advice: int) -> int:
    log = os.environ.get(LOG_ENV)
    if log:
        with open(log, "a") as f:
            f.write(f"{obs.context} {obs.id} {what} -> {advice}\n")
    return advice


def blocks_mod(obs: Any) -> int:
    """advice = -basic_block_count mod 4: unlike the built-in policy for features.ll."""
    bbs = int(obs["basic_block_count"][0])
    return _note(obs, f"basic_block_count={bbs}", -bbs % 4)


def always_none(obs: Any) -> int:
    """advice = none (0) for every function."""
    return _note(obs, f"instruction_count={int(obs['instruction_count'][0])}", 0)


def inline_small(obs: Any) -> int:
    """The ML inline advisor: inline (1) iff the callee has at most one basic block."""
    bbs = int(obs["callee_basic_block_count"][0])
    return _note(obs, f"callee_basic_block_count={bbs}", int(bbs <= 1))


def priority_default(obs: Any) -> Any:
    """The llc priority advisor: LLVM's default priority (float64), i.e. stock llc-22."""
    import numpy as np

    d = int(obs["default_priority"][0])
    _note(obs, f"li_size={int(obs['li_size'][0])} default_priority={d}", d)
    return np.float64(d)


#: phase_order_table's actions by step: early cleanup, inlining, loop passes with full
#: unrolling (the built-in set, docs/phase-order.md), then stop (N = action_count).
PHASE_ORDER_TABLE = (0, 2, 6)


def phase_order_table(obs: Any) -> int:
    """mlbridge-phase-order: action PHASE_ORDER_TABLE[step], then N (stop)."""
    step = int(obs["step"][0])
    n = int(obs["action_count"][0])
    action = PHASE_ORDER_TABLE[step] if step < len(PHASE_ORDER_TABLE) else n
    history = ",".join(str(int(h)) for h in obs["action_history"].reshape(-1))
    return _note(obs, f"step={step} action_count={n} action_history={history}", action)


def _free_loopback_address() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _wait_ready(ready: Path, server: subprocess.Popen[bytes], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready.exists():
            address = ready.read_text().strip()
            if address:
                return address
        if server.poll() is not None:
            raise RuntimeError(f"mlbridge serve exited with status {server.returncode}")
        time.sleep(0.02)
    raise RuntimeError(f"mlbridge serve wrote no ready file within {timeout:g} s")


def _stop(server: subprocess.Popen[bytes], timeout: float) -> int:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return server.returncode


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("grpc_policy: error: no compiler command after --", file=sys.stderr)
        return 2
    split = argv.index("--")
    argv, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--policy",
        default="blocks_mod",
        choices=[
            "blocks_mod", "always_none", "inline_small", "priority_default", "phase_order_table",
        ],
    )  # fmt: skip
    parser.add_argument("--log", type=Path)
    parser.add_argument("--tmpdir", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--no-server", action="store_true")
    args = parser.parse_args(argv)

    if args.no_server:
        address = _free_loopback_address()
        code = subprocess.run([a.replace("{address}", address) for a in command]).returncode
        print(f"grpc_policy: no server; compiler exit {code}")
        return code

    ready = args.tmpdir / "ready"
    server_log = args.tmpdir / "serve.log"
    ready.unlink(missing_ok=True)
    env = dict(os.environ)
    if args.log:
        args.log.unlink(missing_ok=True)
        env[LOG_ENV] = str(args.log)
    policy = f"{Path(__file__).resolve()}:{args.policy}"
    with server_log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "mlbridge", "serve", policy,
             "--address", "127.0.0.1:0", "--ready-file", str(ready)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    code = None
    try:
        address = _wait_ready(ready, server, args.timeout)
        proc = subprocess.Popen([a.replace("{address}", address) for a in command])
        try:
            code = proc.wait(args.timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"grpc_policy: error: {e}\n{server_log.read_text()}", file=sys.stderr)
    finally:
        server_code = _stop(server, args.timeout)
        ready.unlink(missing_ok=True)
        server_log.unlink(missing_ok=True)
    if code is None:
        return 1
    print(f"grpc_policy: server exit {server_code}; compiler exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
