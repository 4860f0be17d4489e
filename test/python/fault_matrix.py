"""The fault matrix: opt's ML inliner against a model side that fails one way at a time.

    PYTHONPATH=$PWD .venv/bin/python test/python/fault_matrix.py [--quick]
        [--transports pipe-bitstream,pipe-json,pipe-protobuf,grpc] [--faults NAME,...]
        [--policies fail,fallback] [--timeout-ms 2000] [--margin 10] [--out build/fault-matrix]

Each cell runs the real ``opt-22`` with mlbridge's plugin and its ML inliner
(``-passes='default<O2>'`` over ``test/lit/Inputs/inline.ll``, three decisions) against a
model side in its own process, which this script also is (``--model-side``): over the
pipe it is :class:`mlbridge.compiler.pipe.PipeCompilerInterface` in a
:class:`~mlbridge.compiler.pipe.FifoChannel` of its own; over gRPC the project's
``ModelService`` servicer in a ``grpc.server``. Its policy answers LLVM's own decision
(the ``inlining_default`` feature), so whatever the model had answered before the fault,
the output the model asked for is stock ``opt-22``'s: with ``fallback`` (or any exit 0)
the output must be byte-identical to it. The fault (a row) happens at a fixed decision;
malformed replies are written as bytes on the FIFO beside the interface's own
descriptor, or as a mangled gRPC reply message.

Per cell: opt's exit status, wall time against the bound (``--timeout-ms`` plus
``--margin``), the first diagnostic line of its stderr, whether the output equals stock
opt's, files left in the cell's private temporary folder (the children's ``TMPDIR``, the
pipe channel's parent) or as ``/tmp/mlbridge-*`` of the cell's processes, processes of
the cell still alive or unreaped, and opt's CPU time over its wall time. A cell breaks the
rules with a crash (opt killed by a signal), a wait past the bound, a silent wrong result
(exit 0, output unlike the model's, no diagnostic), leftovers (after SIGKILL only the
model's channel folder is allowed, if ``mlbridge pipe clean``'s sweep removes it),
leftover processes, or a busy wait (CPU over 50% of a wall time over 1.5 s). The table
goes to stdout and, with the cells as JSON, to ``--out``; the exit status is 1 if any
cell breaks a rule, 2 if the harness itself could not run a cell.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the checkout's package
    sys.path.insert(0, str(REPO))

INPUT = REPO / "test" / "lit" / "Inputs" / "inline.ll"
PASSES = "default<O2>"
TRANSPORTS = ("pipe-bitstream", "pipe-json", "pipe-protobuf", "grpc")
POLICIES = ("fail", "fallback")
#: The quick subset (--quick, and the pytest): transports, faults.
QUICK = (("pipe-bitstream",), ("stall", "exit-after-1", "extra-bytes"))
#: Wall time over which opt's CPU share is judged, and the share that is a busy wait.
BUSY_MIN_WALL = 1.5
BUSY_SHARE = 0.5
#: Bound of the harness's own waits (the model side's start, its end after opt's).
HARNESS_WAIT = 60.0
#: The 13 "random" bytes of the random-bytes fault (fixed: the run is deterministic).
RANDOM_REPLY = bytes(random.Random(19).randrange(256) for _ in range(13))


@dataclass(frozen=True)
class Fault:
    """One row: what the model side does, and at which decision (0-based).

    Attributes:
        name: The row's name on the command line.
        title: The row's label in the table.
        at: The decision at which the fault happens (decisions before it are answered).
        not_on: Transports where it cannot be injected, with the reason.
    """

    name: str
    title: str
    at: int = 0
    not_on: tuple[tuple[str, str], ...] = ()


_RAW_ONLY = "no raw reply in this format: its replies are records (the row above)"
FAULTS: tuple[Fault, ...] = (
    Fault("no-model", "never connects / no server"),
    Fault("exit-before-first", "exits before the first answer"),
    Fault("sigkill-before-first", "SIGKILL before the first answer"),
    Fault("exit-after-1", "exits after 1 answer", at=1),
    Fault("sigkill-after-1", "SIGKILL after 1 answer", at=1),
    Fault("stall", "stalls (never answers)"),
    Fault("truncated", "truncated reply, then waits"),
    Fault("extra-bytes", "reply + 8 extra bytes"),
    Fault("wrong-type", "float64 for int64"),
    Fault(
        "wrong-type-raw",
        "float64 for int64, raw reply (no typed-reply)",
        not_on=(("pipe-json", _RAW_ONLY), ("pipe-protobuf", _RAW_ONLY), ("grpc", _RAW_ONLY)),
    ),
    Fault("random-bytes", "13 random bytes as the reply"),
    Fault("out-of-range", "advice 2 (range [0,2)): Python refuses"),
    Fault("sigterm-after-1", "SIGTERM after 1 answer", at=1),
)
FAULTS_BY_NAME = {f.name: f for f in FAULTS}


# -- the model side (run as `fault_matrix.py --model-side ...`) ---------------------------


def default_decision(obs: Any) -> int:
    """The policy: LLVM's own decision, which the compiler sends as ``inlining_default``."""
    return int(obs["inlining_default"][0])


def _mark(path: Path) -> None:
    from mlbridge._files import write_atomically

    write_atomically(path, b"reached\n", 0o600)


def _reply_bytes(ci: Any, obs_id: int, tensor: Any) -> bytes:
    """``tensor`` as ``ci`` would send it as the reply to ``obs_id`` (no checks made)."""
    from mlbridge.serdes import Message, MessageKind, get_serdes
    from mlbridge.serdes.bitstream import encode_values
    from mlbridge.tensor_spec import TensorSpec

    if ci.serdes != "bitstream":
        return bytes(get_serdes(ci.serdes).encode(Message(MessageKind.ADVICE, obs_id, (tensor,))))
    raw = encode_values(tensor)
    if not ci.typed_replies:
        return bytes(raw)
    spec = TensorSpec(tensor.name, tensor.type, tuple(tensor.shape)).to_json()
    return b'{"advice":%d,"spec":%s}\n%s\n' % (obs_id, spec, raw)


def _write_beside(ci: Any, data: bytes) -> None:
    """Write ``data`` to the compiler through a second descriptor of ``<base>.in``."""
    from mlbridge.compiler.fifo import write_all

    fd = os.open(ci.in_path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        write_all(fd, data, ci.in_path, ci.timeout, "the injected reply")
    finally:
        os.close(fd)


def _forget_pending(ci: Any) -> None:
    # PipeCompilerInterface has no hook for a reply written by hand: mark the
    # observation answered, so that evaluate() waits for the next one as a model would.
    ci._pending = None  # noqa: SLF001


def run_pipe_model(fault: Fault, serdes: str, ready: Path, marker: Path, bound: float) -> int:
    """The pipe model side: answer with :func:`default_decision`, inject ``fault``."""
    import numpy as np

    from mlbridge.compiler.pipe import FifoChannel, PipeCompilerInterface
    from mlbridge.errors import MLBridgeError
    from mlbridge.tensor import Tensor

    with FifoChannel(parent=os.environ.get("TMPDIR")) as channel:
        from mlbridge._files import write_atomically

        write_atomically(ready, f"{channel.base}\n".encode(), 0o600)
        typed = fault.name != "wrong-type-raw"
        try:
            with PipeCompilerInterface(
                channel.base, serdes, timeout=bound, connect_timeout=bound, typed_replies=typed
            ) as ci:
                decision = 0
                while (obs := ci.evaluate()) is not None:
                    value = default_decision(obs)
                    if decision != fault.at:
                        ci.respond(value)
                        decision += 1
                        continue
                    _mark(marker)  # the fault is injected now (sigterm-*: send it now)
                    if fault.name.startswith("exit-"):
                        sys.exit(3)
                    elif fault.name.startswith("sigkill-"):
                        os.kill(os.getpid(), signal.SIGKILL)
                    elif fault.name in ("stall", "sigterm-after-1"):
                        _forget_pending(ci)
                    elif fault.name == "truncated":
                        data = _reply_bytes(
                            ci, obs.id, Tensor("inlining_decision", "int64_t", [value])
                        )
                        _write_beside(ci, data[: len(data) // 2])
                        _forget_pending(ci)
                    elif fault.name == "extra-bytes":
                        ci.respond(value)
                        _write_beside(ci, struct.pack("<q", value))
                    elif fault.name.startswith("wrong-type"):
                        wrong = Tensor("inlining_decision", "double", np.array([float(value)]))
                        _write_beside(ci, _reply_bytes(ci, obs.id, wrong))
                        _forget_pending(ci)
                    elif fault.name == "random-bytes":
                        _write_beside(ci, RANDOM_REPLY)
                        _forget_pending(ci)
                    elif fault.name == "out-of-range":
                        ci.respond(2)  # refused (AdviceConstraintError): nothing is sent
                    decision += 1
        except MLBridgeError as e:
            print(f"model side: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
    return 0


def run_grpc_model(fault: Fault, ready: Path, marker: Path, bound: float) -> int:
    """The gRPC model side: mlbridge's ModelService servicer, its reply mangled per ``fault``."""
    from concurrent import futures

    import grpc

    from mlbridge.compiler import grpc as mlgrpc
    from mlbridge.serdes._proto.mlbridge.v1 import model_service_pb2 as pb
    from mlbridge.serdes.base import DecodeLimits
    from mlbridge.tensor_spec import ElementType

    calls = 0
    lock = threading.Lock()
    exit_now = threading.Event()

    def policy(obs: Any) -> int:
        value = default_decision(obs)
        return 2 if fault.name == "out-of-range" and obs.id == fault.at else value

    # The project's servicer (observation checks, the policy, the reply and its checks).
    servicer = mlgrpc._ModelServicer(policy, DecodeLimits(), True)  # noqa: SLF001

    def wait_while_active(context: grpc.ServicerContext) -> None:
        deadline = time.monotonic() + bound
        while context.is_active() and time.monotonic() < deadline:
            time.sleep(0.05)

    def evaluate(request: Any, context: grpc.ServicerContext) -> bytes:
        nonlocal calls
        with lock:
            decision = calls
            calls += 1
        if decision == fault.at:
            _mark(marker)  # the fault is injected now (sigterm-*: send it now)
            if fault.name.startswith("exit-"):
                exit_now.set()  # the main thread stops the server and exits
                wait_while_active(context)
                return b""
            if fault.name.startswith("sigkill-"):
                os.kill(os.getpid(), signal.SIGKILL)
            if fault.name in ("stall", "sigterm-after-1"):
                wait_while_active(context)
                return b""
        reply = servicer.Evaluate(request, context)
        data: bytes = reply.SerializeToString()
        if decision != fault.at:
            return data
        if fault.name == "truncated":
            return data[: len(data) // 2]
        if fault.name == "extra-bytes":
            return data + struct.pack("<q", 0)
        if fault.name == "random-bytes":
            return RANDOM_REPLY
        if fault.name == "wrong-type":
            t = reply.tensors[0]
            value = struct.unpack("<q", t.data)[0]
            t.type = ElementType.DOUBLE.value
            t.data = struct.pack("<d", float(value))
            return bytes(reply.SerializeToString())
        return data

    handler = grpc.method_handlers_generic_handler(
        "mlbridge.v1.ModelService",
        {
            "Evaluate": grpc.unary_unary_rpc_method_handler(
                evaluate,
                request_deserializer=pb.Observation.FromString,
                response_serializer=lambda b: b,
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        mlgrpc.write_ready_file(ready, f"127.0.0.1:{port}")
        while not exit_now.wait(0.1):
            pass
        return 3
    finally:
        server.stop(0.5).wait(5.0)


def model_side_main(args: argparse.Namespace) -> int:
    """Entry of ``--model-side``: SIGTERM ends it as an exception would (as mlbridge's CLI)."""
    from mlbridge.cli import _exit_on_sigterm

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    fault = FAULTS_BY_NAME[args.fault]
    if args.transport == "grpc":
        return run_grpc_model(fault, args.ready, args.marker, args.bound)
    serdes = args.transport.removeprefix("pipe-")
    return run_pipe_model(fault, serdes, args.ready, args.marker, args.bound)


# -- the orchestrator ----------------------------------------------------------------------


@dataclass
class Cell:
    """One cell's record (see the module's docstring for the rules)."""

    fault: str
    transport: str
    policy: str
    applicable: bool = True
    reason: str = ""
    exit: int | None = None
    wall: float = 0.0
    bound: float = 0.0
    cpu: float = 0.0
    diagnostic: str = ""
    same_as_stock: bool | None = None
    leftovers: list[str] = field(default_factory=list)
    swept: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    model_exit: int | None = None
    notes: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    harness_error: str = ""


def _opt() -> str:
    return shutil.which("opt-22") or "opt-22"


def _plugin(build_dir: Path) -> Path:
    from mlbridge.paths import plugin_path

    return Path(plugin_path("llvm", build_dir))


def stock_output(out: Path) -> bytes:
    """Stock ``opt-22``'s output for the input (no plugin)."""
    path = out / "stock.ll"
    subprocess.run(
        [_opt(), f"-passes={PASSES}", "-S", str(INPUT), "-o", str(path)], check=True, timeout=120
    )
    return path.read_bytes()


def _wait_with_rusage(proc: subprocess.Popen[bytes], limit: float) -> tuple[bool, float]:
    """Reap ``proc`` (within ``limit`` s, else kill it); whether it ended in time, CPU s."""
    deadline = time.monotonic() + limit
    in_time = True
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return in_time, usage.ru_utime + usage.ru_stime
        if in_time and time.monotonic() >= deadline:
            in_time = False
            proc.kill()
        time.sleep(0.01)


def _session_processes(sids: Sequence[int]) -> list[str]:
    """Processes (any state, zombies too) still in the sessions of the cell's children."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name_end = stat.rindex(")")
        fields = stat[name_end + 2 :].split()
        state, sid = fields[0], int(fields[3])
        if sid in sids:
            found.append(f"{entry.name} {stat[stat.index('(') + 1 : name_end]} state {state}")
    return found


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _first_diagnostic(stderr: str) -> str:
    for line in stderr.splitlines():
        if "error:" in line or "warning:" in line:
            kind = "error" if "error:" in line else "warning"
            # The cause, after "no advice for the call to 'f' in 'g': " or "... for the
            # rest of the compilation: "; folders left out of paths.
            cause = line
            for before in (r"rest of the compilation: ", r" in '[^']*': ", r"mlbridge-inline: "):
                if len(parts := re.split(before, line, maxsplit=1)) == 2:
                    cause = parts[1]
                    break
            cause = re.sub(r"'?/\S*/(channel(\.\w+)?)'?", r"\1", cause.strip())
            return f"{kind}: {cause}"[:120]
    return stderr.strip().splitlines()[0][:150] if stderr.strip() else ""


def _wait_for_file(path: Path, proc: subprocess.Popen[bytes] | None, limit: float) -> str:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()).endswith("\n"):
            return text.strip()
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the model side exited ({proc.returncode}) before {path.name}")
        time.sleep(0.02)
    raise RuntimeError(f"{path.name} did not appear within {limit:g} s")


def _free_loopback_address() -> str:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _tmp_mlbridge_entries(pids: Sequence[int]) -> list[str]:
    names = []
    for p in Path(tempfile.gettempdir()).glob("mlbridge-*"):
        if any(re.match(rf"mlbridge-\w+-{pid}-", p.name) for pid in pids):
            names.append(str(p))
    return names


def run_cell(
    fault: Fault,
    transport: str,
    policy: str,
    *,
    build_dir: Path,
    stock: bytes,
    out: Path,
    timeout_ms: int,
    margin: float,
) -> Cell:
    """Run one cell and judge it."""
    from mlbridge.compiler.fifo import FifoChannel, remove_stale_channels

    cell = Cell(fault.name, transport, policy)
    reasons = dict(fault.not_on)
    if transport in reasons:
        cell.applicable, cell.reason = False, reasons[transport]
        return cell
    cell.bound = timeout_ms / 1000 + margin
    work = out / "cells" / f"{fault.name}.{transport}.{policy}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cell_tmp = Path(tempfile.mkdtemp(prefix="fault-matrix-"))
    env = dict(os.environ, TMPDIR=str(cell_tmp), PYTHONPATH=str(REPO))
    ready, marker = work / "ready", work / "fault-reached"
    model: subprocess.Popen[bytes] | None = None
    opt: subprocess.Popen[bytes] | None = None
    own_channel = None
    pids: list[int] = []
    try:
        if fault.name == "no-model":
            if transport == "grpc":
                endpoint = _free_loopback_address()
            else:
                own_channel = FifoChannel(parent=cell_tmp)  # FIFOs nobody opens
                endpoint = str(own_channel.base)
        else:
            with (work / "model.log").open("wb") as log:
                model = subprocess.Popen(
                    [sys.executable, str(Path(__file__).resolve()), "--model-side",
                     "--transport", transport, "--fault", fault.name, "--ready", str(ready),
                     "--marker", str(marker), "--bound", str(cell.bound + 30)],
                    stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                )  # fmt: skip
            pids.append(model.pid)
            endpoint = _wait_for_file(ready, model, HARNESS_WAIT)
        runner = "grpc" if transport == "grpc" else "pipe"
        where = (
            [f"-mlbridge-inline-address={endpoint}"]
            if runner == "grpc"
            else [f"-mlbridge-inline-channel={endpoint}",
                  f"-mlbridge-inline-serdes={transport.removeprefix('pipe-')}"]
        )  # fmt: skip
        argv = [
            _opt(), f"-load-pass-plugin={_plugin(build_dir)}", f"-passes={PASSES}",
            f"-mlbridge-inline-runner={runner}", *where,
            f"-mlbridge-inline-timeout-ms={timeout_ms}",
            f"-mlbridge-inline-on-model-failure={policy}",
            "-S", str(INPUT), "-o", str(work / "out.ll"),
        ]  # fmt: skip
        (work / "command").write_text(" ".join(argv) + "\n")
        terminator = None
        if fault.name.startswith("sigterm-") and model is not None:
            proc_to_stop = model

            def send_sigterm() -> None:
                try:
                    _wait_for_file(marker, proc_to_stop, HARNESS_WAIT)
                except RuntimeError:
                    return
                if proc_to_stop.poll() is None:
                    proc_to_stop.send_signal(signal.SIGTERM)

            terminator = threading.Thread(target=send_sigterm, daemon=True)
            terminator.start()
        start = time.monotonic()
        with (work / "stderr").open("wb") as err:
            opt = subprocess.Popen(argv, stderr=err, env=env, start_new_session=True)
        pids.append(opt.pid)
        in_time, cell.cpu = _wait_with_rusage(opt, cell.bound + 60)
        cell.wall = time.monotonic() - start
        cell.exit = opt.returncode
        if not in_time:
            cell.violations.append(f"opt still running after {cell.bound + 60:g} s: killed")
        if terminator is not None:
            terminator.join(HARNESS_WAIT)
        if model is not None:
            ends_itself = fault.name.split("-")[0] in ("exit", "sigkill", "sigterm")
            if transport == "grpc" and not ends_itself and model.poll() is None:
                model.send_signal(signal.SIGTERM)  # the usual end of a model server
            try:
                cell.model_exit = model.wait(HARNESS_WAIT)
            except subprocess.TimeoutExpired:
                model.kill()
                cell.model_exit = model.wait()
                cell.violations.append("the model side did not end after opt: killed")
    except (RuntimeError, OSError) as e:
        cell.harness_error = str(e)
    finally:
        for proc in (opt, model):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        if own_channel is not None:
            own_channel.close()
    if model is not None and not marker.exists():
        log = (work / "model.log").read_text(errors="replace").strip().splitlines()
        cell.harness_error = "the model side did not reach the fault: " + " ".join(log[-2:])
    if cell.harness_error:
        shutil.rmtree(cell_tmp, ignore_errors=True)
        return cell

    stderr = (work / "stderr").read_text(errors="replace")
    cell.diagnostic = _first_diagnostic(stderr)
    out_ll = work / "out.ll"
    if cell.exit == 0:
        cell.same_as_stock = out_ll.is_file() and out_ll.read_bytes() == stock
    cell.leftovers = _files_under(cell_tmp)
    if cell.leftovers and fault.name.startswith("sigkill-"):
        cell.swept = [Path(p).name for p in remove_stale_channels(cell_tmp)]
        cell.leftovers = _files_under(cell_tmp)
    cell.leftovers += _tmp_mlbridge_entries(pids)
    cell.processes = _session_processes(pids)
    shutil.rmtree(cell_tmp, ignore_errors=True)
    judge(cell, stderr)
    return cell


def judge(cell: Cell, stderr: str) -> None:
    """Add the rules ``cell`` breaks to ``cell.violations`` (and notes)."""
    if cell.exit is not None and cell.exit < 0:
        cell.violations.append(f"opt killed by signal {-cell.exit}")
    if cell.wall > cell.bound:
        cell.violations.append(f"wall {cell.wall:.1f} s past the bound {cell.bound:g} s")
    diagnosed = "error:" in stderr or "warning:" in stderr
    if cell.exit == 0 and cell.same_as_stock is False and not diagnosed:
        cell.violations.append("silent wrong result: exit 0, output unlike stock, no diagnostic")
    if cell.policy == "fallback" and cell.exit == 0 and cell.same_as_stock is False:
        cell.violations.append("fallback output differs from stock opt's")
    if cell.policy == "fallback" and cell.exit != 0:
        cell.notes.append("fallback did not complete the compilation")
    if cell.exit == 0 and not diagnosed and cell.fault != "no-model":
        cell.notes.append("fault not reported")
    if cell.leftovers:
        cell.violations.append("leftover files: " + ", ".join(cell.leftovers))
    if cell.processes:
        cell.violations.append("processes left: " + "; ".join(cell.processes))
    if cell.wall >= BUSY_MIN_WALL and cell.cpu > BUSY_SHARE * cell.wall:
        cell.violations.append(f"busy wait: CPU {cell.cpu:.1f} s of {cell.wall:.1f} s")


def cell_text(cell: Cell) -> str:
    """The cell's Markdown table entry."""
    if not cell.applicable:
        return f"n/a: {cell.reason}"
    if cell.harness_error:
        return f"harness error: {cell.harness_error}"
    head = "ok 0" if cell.exit == 0 else f"exit {cell.exit}"
    parts = [head, f"{cell.wall:.1f} s", f"cpu {cell.cpu:.2f} s"]
    if cell.same_as_stock is not None:
        parts.append("= stock" if cell.same_as_stock else "≠ stock")
    if cell.diagnostic:
        parts.append('"' + cell.diagnostic.replace("|", "\\|") + '"')
    if cell.swept:
        parts.append("swept " + ", ".join(cell.swept))
    if cell.fault.startswith("sigterm-"):
        parts.append(f"model exit {cell.model_exit}")
    parts += cell.notes
    if cell.violations:
        parts.append("**BREAKS: " + "; ".join(cell.violations).replace("|", "\\|") + "**")
    return ", ".join(parts)


def markdown(cells: list[Cell], transports: Sequence[str], policies: Sequence[str]) -> str:
    """The matrix as a Markdown table: rows are faults, columns transport × policy."""
    columns = [(t, p) for t in transports for p in policies]
    lines = [
        "| fault | " + " | ".join(f"{t} {p}" for t, p in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    by_key = {(c.fault, c.transport, c.policy): c for c in cells}
    for fault in dict.fromkeys(c.fault for c in cells):
        title = FAULTS_BY_NAME[fault].title
        row = [cell_text(by_key[(fault, t, p)]) for t, p in columns]
        lines.append(f"| {title} (`{fault}`) | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def run_matrix(
    faults: Sequence[Fault],
    transports: Sequence[str],
    policies: Sequence[str],
    *,
    build_dir: Path,
    out: Path,
    timeout_ms: int = 2000,
    margin: float = 10.0,
    progress: bool = True,
) -> list[Cell]:
    """Run every cell (faults × transports × policies) in turn; the cells."""
    out.mkdir(parents=True, exist_ok=True)
    stock = stock_output(out)
    cells = []
    for fault in faults:
        for transport in transports:
            for policy in policies:
                cell = run_cell(
                    fault, transport, policy, build_dir=build_dir, stock=stock, out=out,
                    timeout_ms=timeout_ms, margin=margin,
                )  # fmt: skip
                if progress:
                    print(f"{fault.name} {transport} {policy}: {cell_text(cell)}", file=sys.stderr)
                cells.append(cell)
    return cells


def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    """Run the matrix (or, with ``--model-side``, one cell's model side)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transports", default=",".join(TRANSPORTS))
    parser.add_argument("--faults", default=",".join(f.name for f in FAULTS))
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--quick", action="store_true", help="pipe-bitstream × 3 faults")
    parser.add_argument("--timeout-ms", type=int, default=2000)
    parser.add_argument("--margin", type=float, default=10.0, help="seconds over the timeout")
    parser.add_argument("--out", type=Path, default=Path("build") / "fault-matrix")
    parser.add_argument(
        "--build-dir", type=Path, default=Path(os.environ.get("MLBRIDGE_BUILD_DIR", REPO / "build"))
    )
    parser.add_argument("--model-side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--transport", help=argparse.SUPPRESS)
    parser.add_argument("--fault", help=argparse.SUPPRESS)
    parser.add_argument("--ready", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--marker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--bound", type=float, default=60.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.model_side:
        return model_side_main(args)

    transports = _names(args.transports, TRANSPORTS, "transports")
    fault_names = _names(args.faults, list(FAULTS_BY_NAME), "faults")
    if args.quick:
        transports, fault_names = list(QUICK[0]), list(QUICK[1])
    policies = _names(args.policies, POLICIES, "policies")
    faults = [FAULTS_BY_NAME[n] for n in fault_names]
    start = time.monotonic()
    cells = run_matrix(
        faults, transports, policies, build_dir=args.build_dir, out=args.out,
        timeout_ms=args.timeout_ms, margin=args.margin,
    )  # fmt: skip
    elapsed = time.monotonic() - start
    table = markdown(cells, transports, policies)
    broken = [c for c in cells if c.violations]
    harness = [c for c in cells if c.harness_error]
    summary = (
        f"{len(cells)} cells ({sum(not c.applicable for c in cells)} n/a) in {elapsed:.0f} s, "
        f"timeout {args.timeout_ms} ms, bound {args.timeout_ms / 1000 + args.margin:g} s; "
        f"{len(broken)} break a rule, {len(harness)} harness errors\n"
    )
    print(table + "\n" + summary, end="")
    (args.out / "matrix.md").write_text(f"# The fault matrix\n\n{table}\n{summary}")
    (args.out / "matrix.json").write_text(
        json.dumps(
            {"timeout_ms": args.timeout_ms, "margin": args.margin, "seconds": elapsed,
             "cells": [asdict(c) for c in cells]},
            indent=1,
        ) + "\n"
    )  # fmt: skip
    if harness:
        return 2
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
