"""The model side of mlbridge's gRPC services (``docs/grpc.md``).

Two roles, over the generic services of ``proto/mlbridge/v1/model_service.proto``:

- **Inference**: the model is the server. :func:`serve` answers the compiler's
  ``ModelService.Evaluate`` calls (from the C++ ``GrpcModelRunner``) with a policy::

      def policy(obs: Observation) -> int:
          return int(obs["callee_users"][0] < 3)

      with serve(policy, "127.0.0.1:0") as server:
          ...  # start the compiler with server.address
  ``mlbridge serve module:policy`` does the same from the command line.

- **Training**: the compiler is the server (``GrpcCompilerServer``, one compile is one
  episode) and the trainer drives it with :class:`GrpcCompilerInterface`, the same loop
  as the pipe interface::

      with GrpcCompilerInterface(address) as ci:
          while (obs := ci.evaluate()) is not None:
              ci.respond(agent(obs))

Observations arrive as numpy arrays (views of the received bytes, no per-element
loops): :class:`Observation` is the one observation type of every compiler interface
(:mod:`mlbridge.compiler.observation`), and a policy is the same function over pipes and
gRPC. Every call has a deadline; messages are bounded in size both ways.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any, NoReturn

import grpc

from mlbridge._closing import Closing
from mlbridge._files import write_atomically
from mlbridge._process import killed_by_signal
from mlbridge.compiler.advice_constraints import with_stock_constraints
from mlbridge.compiler.observation import Observation, Policy
from mlbridge.errors import GrpcError, GrpcTimeoutError, MLBridgeError
from mlbridge.serdes._proto.mlbridge.v1 import model_service_pb2 as pb
from mlbridge.serdes._proto.mlbridge.v1 import model_service_pb2_grpc as pb_grpc
from mlbridge.serdes._proto.mlbridge.v1 import tensor_pb2
from mlbridge.serdes.base import DecodeLimits
from mlbridge.serdes.protobuf import spec_from_proto, tensor_from_proto, tensor_to_proto
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import TensorSpec

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_TIMEOUT",
    "GrpcCompilerInterface",
    "ModelServer",
    "Observation",
    "Policy",
    "PolicyImportError",
    "load_policy",
    "serve",
    "wait_for_ready_file",
    "write_ready_file",
]

#: Where a policy's exception is logged (with its traceback) while serving.
logger = logging.getLogger("mlbridge.serve")

#: Largest gRPC message, both ways (the C++ runners' default too).
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Seconds to wait for the compiler's server to accept a connection.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Seconds each trainer call may take (Observe waits for the compiler's next decision).
DEFAULT_TIMEOUT = 300.0

# Reconnection back-off of the trainer's channel, in milliseconds.
_INITIAL_BACKOFF_MS = 50
_MAX_BACKOFF_MS = 1000


def _check_seconds(value: float, what: str) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, got {value!r}")
    return value


def _check_bytes(value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 2**31 - 1:
        raise ValueError(f"max_message_bytes must be in [1, 2**31 - 1], got {value!r}")
    return value


def _limits(max_message_bytes: int) -> DecodeLimits:
    return DecodeLimits(max_message_bytes=max_message_bytes)


def _message_options(max_message_bytes: int) -> list[tuple[str, Any]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


#: Advice specs remembered per cache (the compiler sends the same one with every call).
_MAX_CACHED_SPECS = 64

#: An advice spec and, if its reply may be given as a bare numpy scalar (one numeric
#: element), that scalar's type; the spec's element type number.
_AdviceEntry = tuple[TensorSpec, type | None, int]


def _advice_entry(a: Any) -> _AdviceEntry:
    try:
        advice = spec_from_proto(a, "the observation's advice spec")
    except MLBridgeError as e:
        raise MLBridgeError(f"the observation's advice spec is invalid: {e}") from None
    scalar = None
    # A constrained advice is always checked (no shortcut in _reply_for).
    if (
        advice.type.itemsize
        and not advice.is_dynamic
        and advice.element_count == 1
        and not advice.has_constraints
    ):
        scalar = advice.type.numpy_dtype.type
    return advice, scalar, advice.type.value


class _ReceivedObservation(Observation):
    """An :class:`Observation` that came over gRPC.

    Its advice spec is always given, and its checked form is kept for the reply's
    shortcut (:func:`_reply_for`).
    """

    advice: TensorSpec

    def __init__(
        self, id: int, context: str, entry: _AdviceEntry, tensors: tuple[Tensor, ...]
    ) -> None:
        super().__init__(id, context, entry[0], tensors)
        self._advice_entry = entry


def _observation_from_proto(
    msg: Any, limits: DecodeLimits, specs: dict[tuple[Any, ...], _AdviceEntry] | None = None
) -> _ReceivedObservation:
    """Build an :class:`Observation` from a ``mlbridge.v1.Observation``, checking it.

    ``specs`` caches the advice specs already checked, by their fields.
    """
    if not msg.HasField("advice"):
        raise MLBridgeError("the observation has no advice spec")
    a = msg.advice
    key = (
        a.name,
        a.type,
        tuple(a.shape),
        a.port,
        (a.range.low, a.range.high) if a.HasField("range") else None,
        a.mask if a.HasField("mask") else None,
    )
    entry = None if specs is None else specs.get(key)
    if entry is None:
        entry = _advice_entry(a)
        if specs is not None and len(specs) < _MAX_CACHED_SPECS:
            specs[key] = entry
    features = msg.features
    if features.kind != tensor_pb2.MESSAGE_KIND_OBSERVATION:
        raise MLBridgeError(f"the features message has kind {features.kind}, not observation")
    limits.check_tensor_count(len(features.tensors), 0)
    where = f"observation {features.id}"
    tensors = tuple(tensor_from_proto(t, where, limits, 0) for t in features.tensors)
    # Stock LLVM's specs carry no constraints: a stock advisor's are known here.
    constrained = with_stock_constraints(entry[0], (t.name for t in tensors))
    if constrained is not entry[0]:
        entry = (constrained, None, entry[2])  # no unchecked shortcut
    return _ReceivedObservation(features.id, msg.context, entry, tensors)


def _advice_tensor(advice: object, spec: TensorSpec) -> Tensor:
    """Convert a policy's answer exactly to the advice spec (a scalar fits a 1-element spec)."""
    if isinstance(advice, Tensor):
        if advice.name != spec.name or advice.type is not spec.type:
            raise MLBridgeError(
                f"advice tensor {advice.name!r} ({advice.type.llvm_name}) does not match the "
                f"advice spec {spec.name!r} ({spec.type.llvm_name})"
            )
        tensor = advice
    else:
        tensor = Tensor(spec.name, spec.type, advice)
    if not spec.matches(tensor.shape):
        if spec.is_dynamic or tensor.size != spec.element_count:
            raise MLBridgeError(
                f"advice {spec.name!r} has shape {list(tensor.shape)}, the compiler expects "
                f"{list(spec.shape)}"
            )
        tensor = Tensor._trusted(spec.name, spec.type, tensor.array.reshape(spec.shape))
    return tensor


def _advice_message(tensor: Tensor, id: int) -> Any:
    msg = tensor_pb2.TensorMessage(kind=tensor_pb2.MESSAGE_KIND_ADVICE, id=id)
    tensor_to_proto(tensor, msg.tensors.add())
    return msg


def _reply_for(obs: _ReceivedObservation, advice: object) -> Any:
    """The advice message answering ``obs``.

    Raises as :func:`_advice_tensor`, and :class:`~mlbridge.errors.AdviceConstraintError`
    if the advice violates its spec's constraints.
    """
    entry = obs._advice_entry
    if type(advice) is entry[1]:
        # Exactly the advice's one-element type (np.float32(y)): nothing to convert or
        # check, its bytes are the data (what tensor_to_proto would write).
        spec = entry[0]
        msg = tensor_pb2.TensorMessage(kind=tensor_pb2.MESSAGE_KIND_ADVICE, id=obs.id)
        t = msg.tensors.add()
        t.name = spec.name
        t.type = entry[2]
        t.shape.extend(spec.shape)
        t.data = advice.tobytes()  # type: ignore[attr-defined]
        return msg
    tensor = _advice_tensor(advice, obs.advice)
    obs.advice.check_value(tensor.array, obs)
    return _advice_message(tensor, obs.id)


# -- inference: the model server ------------------------------------------------------


class _ModelServicer(pb_grpc.ModelServiceServicer):
    def __init__(self, policy: Policy, limits: DecodeLimits, serialize: bool) -> None:
        self._policy = policy
        self._name = _policy_name(policy)
        self._limits = limits
        self._lock = threading.Lock() if serialize else None
        self._specs: dict[tuple[Any, ...], _AdviceEntry] = {}
        self.evaluated = 0
        self._count_lock = threading.Lock()
        #: Policy calls running now.
        self.in_flight = 0

    @staticmethod
    def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
        context.abort(code, message)
        raise AssertionError("unreachable: abort raises")  # pragma: no cover

    def Evaluate(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        """Answer one decision with the policy."""
        if request.done:
            self._abort(context, grpc.StatusCode.INVALID_ARGUMENT, "Evaluate with done = true")
        try:
            obs = _observation_from_proto(request, self._limits, self._specs)
        except MLBridgeError as e:
            self._abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))
        with self._count_lock:
            self.in_flight += 1
        try:
            if self._lock is not None:
                with self._lock:
                    answer = self._policy(obs)
            else:
                answer = self._policy(obs)
        except Exception as e:
            about = f", context {obs.context!r}" if obs.context else ""
            logger.exception(
                "the policy %s raised %s on observation %d%s",
                self._name, type(e).__name__, obs.id, about,
            )  # fmt: skip
            self._abort(
                context,
                grpc.StatusCode.INTERNAL,
                f"the policy raised {type(e).__name__} on observation {obs.id}: {e} (policy "
                f"{self._name}{about}; the traceback is in the model server's log)",
            )
        finally:
            with self._count_lock:
                self.in_flight -= 1
        try:
            reply = _reply_for(obs, answer)
        except (MLBridgeError, ValueError) as e:
            self._abort(
                context,
                grpc.StatusCode.INTERNAL,
                f"the policy's answer to observation {obs.id} does not fit the advice: {e}",
            )
        self.evaluated += 1
        return reply


class ModelServer(Closing):
    """A running ``ModelService`` server (see :func:`serve`).

    Attributes:
        address: The bound ``host:port`` (with the actual port when 0 was asked for).
        port: The bound port.
    """

    def __init__(self, server: grpc.Server, host: str, port: int, servicer: _ModelServicer) -> None:
        self._server = server
        self._servicer = servicer
        self.port = port
        self.address = f"{host}:{port}"

    @property
    def evaluated(self) -> int:
        """The number of decisions answered so far."""
        return self._servicer.evaluated

    @property
    def in_flight(self) -> int:
        """The number of policy calls running now (after :meth:`stop`: still running)."""
        return self._servicer.in_flight

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving; calls in flight get ``grace`` seconds to finish. Waits until done."""
        self._server.stop(grace).wait(grace + 5.0)

    def close(self) -> None:
        """Stop serving (see :meth:`stop`)."""
        self.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops or ``timeout`` seconds pass; True if it stopped."""
        return bool(self._server.wait_for_termination(timeout))

    def __repr__(self) -> str:
        return f"ModelServer(address={self.address!r})"


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"address must be host:port (port 0 picks one), got {address!r}")
    return host, int(port)


def serve(
    policy: Policy,
    address: str = "127.0.0.1:0",
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_workers: int = 4,
    serialize: bool = True,
) -> ModelServer:
    """Serve ``ModelService`` with ``policy`` and return the running server.

    Args:
        policy: Called with each :class:`Observation`; returns the advice: a
            :class:`~mlbridge.Tensor` named and typed as ``obs.advice``, or values
            convertible exactly to its type (a scalar for a one-element advice).
        address: ``host:port`` to listen on; port 0 picks a free port (see
            :attr:`ModelServer.address`). Loopback by default.
        max_message_bytes: Largest message received or sent; a larger one fails the call
            with ``RESOURCE_EXHAUSTED``.
        max_workers: Threads answering calls (several compilers may share a server).
        serialize: Call the policy from one thread at a time (for policies that are not
            thread-safe).

    Raises:
        GrpcError: If the address cannot be bound.
    """
    host, _ = _split_address(address)
    max_message_bytes = _check_bytes(max_message_bytes)
    servicer = _ModelServicer(policy, _limits(max_message_bytes), serialize)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="mlbridge-serve"),
        options=[*_message_options(max_message_bytes), ("grpc.so_reuseport", 0)],
    )
    pb_grpc.add_ModelServiceServicer_to_server(servicer, server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as e:
        raise GrpcError(f"cannot listen on {address}: {e}") from None
    if port == 0:
        raise GrpcError(f"cannot listen on {address}")
    server.start()
    return ModelServer(server, host, port, servicer)


def write_ready_file(path: str | os.PathLike[str], address: str) -> None:
    """Write ``address`` and a newline to ``path`` atomically (for scripts to wait on).

    Through a fresh temporary file beside ``path`` (created exclusively, never through a
    link someone planted), renamed over it.
    """
    write_atomically(path, f"{address}\n".encode())


def wait_for_ready_file(
    path: str | os.PathLike[str],
    timeout: float,
    alive: Callable[[], bool] | None = None,
) -> str:
    """Wait until a ready file (``host:port`` and a newline) exists; return the address.

    Args:
        path: The file a server writes once it listens (``mlbridge serve --ready-file``
            or ``GrpcCompilerServerOptions::ReadyFile``).
        timeout: Seconds to wait at most.
        alive: Called while waiting; when it returns False (the server process died),
            waiting stops with an error.

    Raises:
        GrpcTimeoutError: If the file does not appear within ``timeout``.
        GrpcError: If ``alive`` reports the server gone.
    """
    timeout = _check_seconds(timeout, "timeout")
    deadline = time.monotonic() + timeout
    p = Path(path)
    delay = 0.005
    while True:
        try:
            text = p.read_text()
        except FileNotFoundError:
            text = ""
        if text.endswith("\n"):
            return text.strip()
        if alive is not None and not alive():
            raise GrpcError(f"the server exited before writing {p}")
        if time.monotonic() >= deadline:
            raise GrpcTimeoutError(f"{p} did not appear within {timeout:g} s")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


# -- training: the trainer drives the compiler's server -------------------------------


class GrpcCompilerInterface(Closing):
    """The trainer's side of ``CompilerService``: one instance per episode (compile).

    The compiler (``GrpcCompilerServer``) listens at ``address``; :meth:`evaluate` returns
    its next observation (``None`` once the compile is over) and :meth:`respond` answers
    it. The first call connects, waiting at most ``connect_timeout`` seconds.

    Given the compiler's ``process`` (when the caller started it), a call that fails
    because the compiler died says how it died: the signal that killed it (with the end
    of its stderr, if that is a pipe) or its exit code, never a bare ``UNAVAILABLE``.

    Attributes:
        address: The compiler's ``host:port``.
        timeout: Deadline of each call, in seconds.
        answered: Observations answered so far.
    """

    def __init__(
        self,
        address: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        process: subprocess.Popen[Any] | None = None,
    ) -> None:
        _split_address(address)
        self.address = address
        self._process = process
        self.timeout = _check_seconds(timeout, "timeout")
        self.connect_timeout = _check_seconds(connect_timeout, "connect_timeout")
        self._max = _check_bytes(max_message_bytes)
        self._limits = _limits(self._max)
        self._specs: dict[tuple[Any, ...], _AdviceEntry] = {}
        self._channel = grpc.insecure_channel(
            address,
            options=[
                *_message_options(self._max),
                ("grpc.initial_reconnect_backoff_ms", _INITIAL_BACKOFF_MS),
                ("grpc.min_reconnect_backoff_ms", _INITIAL_BACKOFF_MS),
                ("grpc.max_reconnect_backoff_ms", _MAX_BACKOFF_MS),
                ("grpc.use_local_subchannel_pool", 1),
            ],
        )
        self._stub = pb_grpc.CompilerServiceStub(self._channel)
        self._connected = False
        self._pending: _ReceivedObservation | None = None
        self._done = False
        self.answered = 0

    def _error(self, rpc: str, e: grpc.RpcError) -> GrpcError:
        code = e.code()  # type: ignore[attr-defined]
        name = code.name if code is not None else "UNKNOWN"
        message = (
            f"gRPC CompilerService/{rpc} to {self.address} failed: {name}: "
            f"{e.details()} (deadline {self.timeout:g} s)"  # type: ignore[attr-defined]
        )
        # A dead compiler makes calls fail as UNAVAILABLE (wait for it to finish dying);
        # a call that ran out of time only asks whether it is gone already.
        died = self._how_the_compiler_died(
            wait=1.0 if code is not grpc.StatusCode.DEADLINE_EXCEEDED else 0.0
        )
        if died is not None:
            return GrpcError(f"{died} ({message})", name)
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            return GrpcTimeoutError(message, name)
        return GrpcError(message, name)

    def _how_the_compiler_died(self, wait: float) -> str | None:
        """Why a call failed, if the compiler's process ended: its signal or exit code."""
        proc = self._process
        if proc is None:
            return None
        try:
            code = proc.wait(wait) if wait > 0 else proc.poll()
        except subprocess.TimeoutExpired:
            return None
        if code is None:
            return None
        argv0 = str(proc.args[0] if isinstance(proc.args, list | tuple) else proc.args)
        tail = ""
        if proc.stderr is not None:
            try:
                _, err = proc.communicate(timeout=1.0)
            except (subprocess.TimeoutExpired, ValueError, OSError):
                err = None
            if err:
                text = err.decode(errors="replace") if isinstance(err, bytes) else err
                tail = "\n".join(text.rstrip("\n").splitlines()[-20:])
        if code < 0:
            return killed_by_signal(argv0, code, self.answered, tail)
        said = f"; its stderr ends with:\n{tail}" if tail else ""
        return (
            f"the compiler ({argv0}) exited with code {code} after {self.answered} answered "
            f"queries{said}"
        )

    def connect(self) -> None:
        """Wait (at most ``connect_timeout``) until the compiler's server accepts us."""
        if self._connected:
            return
        try:
            grpc.channel_ready_future(self._channel).result(timeout=self.connect_timeout)
        except grpc.FutureTimeoutError:
            raise GrpcTimeoutError(
                f"cannot connect to the compiler at {self.address} within "
                f"{self.connect_timeout:g} s",
                "UNAVAILABLE",
            ) from None
        self._connected = True

    def evaluate(self) -> Observation | None:
        """Return the compiler's next observation, or ``None`` when the episode is over.

        Raises:
            GrpcTimeoutError: If nothing comes within ``timeout`` (or no connection within
                ``connect_timeout``).
            GrpcError: If the call fails (the compiler died: ``UNAVAILABLE``, or with
                ``process`` given, how it died).
        """
        if self._done:
            return None
        self.connect()
        try:
            reply = self._stub.Observe(pb.ObserveRequest(), timeout=self.timeout)
        except grpc.RpcError as e:
            raise self._error("Observe", e) from None
        if reply.done:
            self._done = True
            self._pending = None
            return None
        try:
            obs = _observation_from_proto(reply, self._limits, self._specs)
        except MLBridgeError as e:
            raise GrpcError(f"the compiler at {self.address} sent a bad observation: {e}") from None
        self._pending = obs
        return obs

    def respond(self, advice: object) -> None:
        """Answer the last observation (see :func:`serve` for what ``advice`` may be).

        Raises:
            GrpcError: If there is no observation to answer, the advice does not fit (the
                compiler says ``INVALID_ARGUMENT``), or the call fails.
            AdviceConstraintError: If the advice violates its spec's constraints (a stock
                advisor's: :mod:`mlbridge.compiler.advice_constraints`); nothing is sent.
        """
        obs = self._pending
        if obs is None:
            raise GrpcError("respond() without an observation: call evaluate() first")
        reply = _reply_for(obs, advice)
        try:
            self._stub.Act(reply, timeout=self.timeout)
        except grpc.RpcError as e:
            raise self._error("Act", e) from None
        self._pending = None
        self.answered += 1

    def run(
        self, policy: Policy, *, deadline: float | None = None, max_queries: int | None = None
    ) -> int:
        """Answer every observation with ``policy`` until the episode ends; return the count.

        Args:
            policy: Called with each :class:`Observation`; returns the advice.
            deadline: Bound, in seconds, of the whole episode from this call (``None``: no
                bound beyond each call's ``timeout``). Each call's deadline is cut to what
                is left, so a compiler that keeps asking ends the episode however quick
                each call is.
            max_queries: The most observations to answer (``None``: no limit); one more
                ends the episode unanswered.

        Raises:
            GrpcTimeoutError: If the episode outlasts ``deadline`` (or a call its timeout).
            GrpcError: If the compiler asks more than ``max_queries`` queries, or a call
                fails.
        """
        if deadline is not None:
            deadline = _check_seconds(deadline, "deadline")
        if max_queries is not None and max_queries < 0:
            raise ValueError(f"max_queries must be >= 0, got {max_queries}")
        end = None if deadline is None else time.monotonic() + deadline
        saved = self.timeout
        count = 0
        try:
            while True:
                self.timeout = self._left(saved, end, deadline)
                obs = self.evaluate()
                if obs is None:
                    return count
                if max_queries is not None and count >= max_queries:
                    raise GrpcError(
                        f"the compiler at {self.address} asked more than max_queries="
                        f"{max_queries} queries; the episode was ended unanswered"
                    )
                advice = policy(obs)
                self.timeout = self._left(saved, end, deadline)
                self.respond(advice)
                count += 1
        finally:
            self.timeout = saved

    def _left(self, timeout: float, end: float | None, deadline: float | None) -> float:
        """The deadline of the next call: ``timeout``, cut to what is left of ``deadline``."""
        if end is None:
            return timeout
        left = end - time.monotonic()
        if left <= 0:
            raise GrpcTimeoutError(
                f"the episode with the compiler at {self.address} outlasted its deadline of "
                f"{deadline:g} s ({self.answered} queries answered)",
                "DEADLINE_EXCEEDED",
            )
        return min(timeout, left)

    def close(self) -> None:
        """Close the channel (idempotent)."""
        self._channel.close()


# -- policies named on the command line -----------------------------------------------


class PolicyImportError(MLBridgeError, ImportError):
    """The module or file of a policy named as ``MODULE:NAME`` cannot be loaded."""


def _policy_name(policy: object) -> str:
    """How messages name a policy: ``module.qualname`` of its function or class."""
    target = policy if inspect.isfunction(policy) or inspect.ismethod(policy) else type(policy)
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None) or repr(policy)
    if module and module != "__main__" and not module.startswith("_mlbridge_policy_"):
        return f"{module}.{qualname}"
    return qualname


def _same_folder(entry: str, folder: str) -> bool:
    try:
        return os.path.realpath(entry or os.curdir) == os.path.realpath(folder)
    except (OSError, ValueError):
        return False


def _searched(cwd: str, limit: int = 6) -> str:
    others = [e for e in sys.path if e and not _same_folder(e, cwd)]
    shown = ", ".join(others[:limit])
    if len(others) > limit:
        shown += f" and {len(others) - limit} more"
    return shown


def _import_policy_module(source: str, name: str) -> Any:
    """Import ``source`` as ``python -m`` would: the current folder first on ``sys.path``."""
    cwd = os.getcwd()
    if not any(_same_folder(entry, cwd) for entry in sys.path):
        sys.path.insert(0, cwd)  # and it stays: the policy may import its neighbours later
    try:
        return importlib.import_module(source)
    except ModuleNotFoundError as e:
        missing = e.name or source
        if missing != source and not source.startswith(f"{missing}."):
            raise PolicyImportError(
                f"importing {source} failed: {e}; {source} imports it and it is not installed "
                f"in this Python environment ({sys.executable})"
            ) from e
        top = source.partition(".")[0]
        raise PolicyImportError(
            f"no module named {missing!r}: looked in the current folder {cwd} and on "
            f"sys.path ({_searched(cwd)}). Run the command from the folder that holds "
            f"{top}.py (or the package folder {top}/), add that folder to PYTHONPATH, or "
            f"name the file instead: path/to/{source.replace('.', '/')}.py:{name}"
        ) from None


def load_policy(spec: str) -> Policy:
    """Load ``module:name`` or ``path/to/file.py:name``: a function, or a class to instantiate.

    A class is instantiated with no arguments; its instances must be callable. ``module``
    is imported the way ``python -m`` does: the current folder comes first on
    ``sys.path`` (it is added if missing, and stays, for the policy's own imports).

    Raises:
        ValueError: If ``spec`` is malformed, or names something that is not callable.
        PolicyImportError: If the module or file cannot be found (an ``ImportError``); the
            message names where it was looked for and how to fix it.
    """
    source, sep, name = spec.rpartition(":")
    if not sep or not source or not name.isidentifier():
        raise ValueError(f"policy must be MODULE:NAME or FILE.py:NAME, got {spec!r}")
    if source.endswith(".py") or os.sep in source:
        path = Path(source).resolve()
        if not path.is_file():
            raise PolicyImportError(
                f"policy file {path} does not exist (relative paths are from the current "
                f"folder, {os.getcwd()})"
            )
        module_name = f"_mlbridge_policy_{abs(hash(str(path)))}"
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise PolicyImportError(f"cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        loader_spec.loader.exec_module(module)
    else:
        module = _import_policy_module(source, name)
    try:
        obj = getattr(module, name)
    except AttributeError:
        raise ValueError(f"{source} has no attribute {name!r}") from None
    if inspect.isclass(obj):
        obj = obj()
    if not callable(obj):
        raise ValueError(f"{spec} is not a function or a class with __call__")
    return obj  # type: ignore[no-any-return]
