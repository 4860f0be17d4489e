"""A Python server of a user's own service (test/unit/user_service.proto), for GrpcModelRunnerTest.

Usage: ``python grpc_user_service.py PROTO OUT_DIR READY_FILE``. The messages are generated at
run time with ``grpc_tools.protoc`` into ``OUT_DIR``; the service is registered with
``grpc.method_handlers_generic_handler``, so no generated gRPC stub is needed. The request is
decoded by the reflection SerDes (``ProtoMessageSerDes``), like the compiler encoded it.
Once listening, ``HOST:PORT`` and a newline are written to ``READY_FILE`` (atomically).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from grpc_tools import protoc

from mlbridge.serdes.user_message import ProtoMessageSerDes


def generate(proto: Path, out_dir: Path) -> Any:
    """Run protoc on ``proto`` into ``out_dir`` and import the generated ``*_pb2`` module."""
    include = str(Path(protoc.__file__).parent / "_proto")
    args = ["protoc", f"-I{proto.parent}", f"-I{include}", f"--python_out={out_dir}", str(proto)]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {proto}")
    sys.path.insert(0, str(out_dir))
    return importlib.import_module(proto.stem + "_pb2")


def main() -> int:
    proto, out_dir, ready = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    pb2 = generate(proto, out_dir)
    serdes = ProtoMessageSerDes(pb2.InlinerRequest)

    def advise(request: Any, context: grpc.ServicerContext) -> Any:
        t = {tensor.name: tensor for tensor in serdes.from_message(request)}
        y = 10 * int(t["x"].array[0]) + t["v"].size + len(t["name"].strings()[0])
        return pb2.InlinerReply(y=y, note="ok")

    def forget(request: Any, context: grpc.ServicerContext) -> Any:
        return pb2.InlinerReply(note="no advice today")

    def handler(fn: Any, reply: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            fn,
            request_deserializer=pb2.InlinerRequest.FromString,
            response_serializer=reply.SerializeToString,
        )

    service = grpc.method_handlers_generic_handler(
        "mlbridge.unittest.InlinerService",
        {
            "Advise": handler(advise, pb2.InlinerReply),
            "Forget": handler(forget, pb2.InlinerReply),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((service,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    tmp = ready.with_name(ready.name + ".tmp")
    tmp.write_text(f"127.0.0.1:{port}\n")
    os.replace(tmp, ready)
    stop.wait()
    server.stop(1).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
