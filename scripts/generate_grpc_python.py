#!/usr/bin/env python3
"""Generate the checked-in Python gRPC code of ``proto/mlbridge/v1/model_service.proto``.

Writes ``model_service_pb2.py`` and ``model_service_pb2_grpc.py`` into
``mlbridge/serdes/_proto/mlbridge/v1/`` (or ``--out DIR``) with ``grpc_tools.protoc``
from the pinned ``grpcio-tools``, then makes their imports package-relative: protoc
writes ``from mlbridge.v1 import tensor_pb2``, which would name a module of the
``mlbridge`` package itself; the generated code lives in
``mlbridge.serdes._proto.mlbridge.v1``. That rewrite is the only change.
``test/python/test_grpc.py`` checks the checked-in files are what this writes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = "mlbridge/v1/model_service.proto"
FILES = ("model_service_pb2.py", "model_service_pb2_grpc.py")
DEFAULT_OUT = ROOT / "mlbridge" / "serdes" / "_proto" / "mlbridge" / "v1"
_FROM = "from mlbridge.v1 import "
_TO = "from mlbridge.serdes._proto.mlbridge.v1 import "


def generate(out: Path) -> list[Path]:
    """Generate the files into ``out`` and return their paths."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                "-I",
                str(ROOT / "proto"),
                f"--python_out={tmp}",
                f"--grpc_python_out={tmp}",
                str(ROOT / "proto" / PROTO),
            ],
            check=True,
        )
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name in FILES:
            text = (Path(tmp) / "mlbridge" / "v1" / name).read_text()
            target = out / name
            target.write_text(text.replace(_FROM, _TO))
            written.append(target)
        return written


def main() -> int:
    """Parse the arguments and generate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    args = parser.parse_args()
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
