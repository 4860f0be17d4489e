"""The trainer side of GrpcModelRunnerTest.cpp's training-mode tests.

``grpc_trainer.py READY_FILE`` waits for the compiler's ready file, then answers every
observation with ``x * 3 + id`` until the episode ends, and exits 0 (1 on error).
"""

from __future__ import annotations

import sys

from mlbridge.compiler.grpc import GrpcCompilerInterface, wait_for_ready_file


def main() -> int:
    address = wait_for_ready_file(sys.argv[1], timeout=20)
    with GrpcCompilerInterface(address, timeout=20, connect_timeout=20) as ci:
        count = ci.run(lambda obs: int(obs["x"][0]) * 3 + obs.id)
    print(f"answered {count}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
