"""A rollout pool on Ray: one actor per worker, on this machine or across a cluster.

Each worker is a Ray actor (:class:`RolloutWorker`) that runs one rollout at a time and
owns the compilations it starts. An actor holds its next rollout queued behind the one it
runs (``queue_depth``, default 2), so that it starts it as soon as the first ends instead of
idling for a round trip to the driver; the last rollouts of a map (fewer than the workers)
go only to a free worker, so that none waits behind another's.

The files a rollout reads are put once into Ray's object store
(:meth:`RayRolloutPool.share`); an actor fetches a file's bytes the first time one of its
rollouts asks for it and keeps them in its own private temporary folder, named by their
SHA-256, so worker nodes need no shared file system, only the same mlbridge install.

At start every actor runs the trainer's check (``setup``, e.g. that LLVM 22's tools are
there); an actor whose check fails stops the pool with a message naming its node (id and
IP) and the fix. When an actor or its node dies mid-rollout (``RayActorError``,
``NodeDiedError``, ``ObjectLostError``/``OwnerDiedError``, ``WorkerCrashedError``), the
rollout and the one queued behind it go to other live workers, a replacement actor is asked
for (it joins when the cluster has room for it), and one line per lost node says which node
it was and how many rollouts were retried. A rollout is retried at most ``max_retries``
times (a queued one that never started is not counted); with no worker left the map fails
with :class:`~mlbridge.training.pool.RolloutPoolError`. The results come back in the order
of the items whatever ran where.

:func:`ray_session` starts a local Ray instance (no dashboard, no usage statistics, Ray's
own logging at warnings) or joins a cluster by address, and ends it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mlbridge.training.pool import (
    NodeInfo,
    Rollout,
    RolloutPool,
    RolloutPoolError,
    SharedFile,
    WorkerContext,
    _share_local,
)

__all__ = ["RayRolloutPool", "RayUnavailableError", "RolloutWorker", "ray_session"]

T = TypeVar("T")
R = TypeVar("R")

#: Resources Ray gives every node itself; the others are labels a user gave
#: (``ray start --resources='{"gpu_box": 1}'``).
_BUILTIN_RESOURCES = frozenset(
    {"CPU", "GPU", "TPU", "memory", "object_store_memory", "accelerator_type"}
)

#: How long to wait for the actors to start (placement, worker processes, the check).
DEFAULT_START_TIMEOUT_S = 300.0


class RayUnavailableError(RolloutPoolError):
    """Ray is not installed, or the cluster cannot be reached."""


def _ray() -> Any:  # noqa: ANN401 - the ray module
    try:
        import ray
    except ImportError as e:
        raise RayUnavailableError(
            f"Ray is not installed ({e}): pip install 'mlbridge[ray]' (or run `make setup` "
            "in a checkout), or train without Ray (--no-ray)"
        ) from None
    return ray


def _lost_worker_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that say a worker (its actor, process or node) is gone."""
    exc = _ray().exceptions
    return (
        exc.RayActorError,  # ActorDiedError, ActorUnavailableError
        exc.NodeDiedError,
        exc.ObjectLostError,  # OwnerDiedError, ObjectFetchTimedOutError, ...
        exc.WorkerCrashedError,
    )


@contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None) -> Iterator[str]:
    """Ray for the duration of the ``with`` block.

    Args:
        address: A cluster to join (``HOST:PORT`` of its head, ``auto`` for the one this
            machine belongs to, ``ray://...`` for Ray Client). ``None``: start a local
            Ray instance, without dashboard or usage statistics, and stop it at the end.
        num_cpus: CPUs of the local instance (default: this machine's); ignored when
            joining a cluster.

    Yields:
        A description of where the job runs: ``"local Ray instance (N CPUs)"`` or
        ``"Ray cluster at ADDR (N nodes, M CPUs)"``.

    Raises:
        RayUnavailableError: If Ray is not installed or the cluster cannot be joined.
    """
    ray = _ray()
    if ray.is_initialized():  # the caller's session: use it, leave it running
        yield _describe_cluster(ray, "Ray session of this process")
        return
    # Before Ray starts any process: they read it from the environment.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address is None:
        # Ray starts its workers at niceness 15, below everything else on the machine, and
        # the compilers they run inherit it. A local instance's workers are this job's
        # compute, as the threads of --no-ray would be: they run at the job's own priority.
        os.environ.setdefault("RAY_worker_niceness", "0")
    # Ray 2.60 says on every new local instance that it turned token authentication on
    # (its default, kept; docs/distributed-training.md says so once).
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
        logging.ERROR
    )
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    try:
        if address is None:
            _start_local(ray, num_cpus, quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        fix = (
            "start one with `ray start --head` on the head node and `ray start --address "
            "HEAD:PORT` on the others, or check the address (docs/distributed-training.md)"
            if address
            else "check `ray start --head` works on this machine, or train without Ray (--no-ray)"
        )
        raise RayUnavailableError(f"cannot start {where}: {e}; {fix}") from None
    try:
        yield _describe_cluster(
            ray, "local Ray instance" if address is None else f"Ray cluster at {address}"
        )
    finally:
        ray.shutdown()


#: What Ray 2.60 raises (a bare ``Exception``) when a new local node's raylet has not
#: registered within its 30 s: seen once on a loaded 2-core machine, fine when started again.
_NODE_STARTUP_TIMEOUT = "timed out during startup"


def _start_local(ray: Any, num_cpus: int | None, quiet: dict[str, Any]) -> None:  # noqa: ANN401
    """``ray.init`` of a new local instance, started once more if its node timed out.

    A start that fails is shut down before anything else (its head's processes would
    otherwise stay behind).

    Raises:
        RuntimeError: If the node timed out twice (Ray's message).
    """
    for attempt in (1, 2):
        try:
            # "local": a new instance even when $RAY_ADDRESS names a cluster.
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, **quiet)
            return
        except Exception as e:  # Ray raises a bare Exception for the start-up timeout
            ray.shutdown()
            if _NODE_STARTUP_TIMEOUT not in str(e):
                raise
            if attempt == 2:
                raise RuntimeError(str(e)) from None


def _describe_cluster(ray: Any, what: str) -> str:  # noqa: ANN401
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = ray.cluster_resources().get("CPU", 0)
    return f"{what} ({len(nodes)} node{'s' if len(nodes) != 1 else ''}, {cpus:g} CPUs)"


def cluster_cpus() -> int:
    """The CPUs of the Ray cluster this process is connected to (at least 1)."""
    return max(1, int(_ray().cluster_resources().get("CPU", 1)))


def _node_table(ray: Any) -> dict[str, tuple[str, tuple[str, ...]]]:  # noqa: ANN401
    """Node id -> its address as the cluster knows it, and its labels, for every node.

    The labels are the node's custom resources (``ray start --resources``).
    """
    table = {}
    for node in ray.nodes():
        custom = sorted(
            r
            for r in node.get("Resources", {})
            if r not in _BUILTIN_RESOURCES and not r.startswith("node:")
        )
        table[node["NodeID"]] = (str(node.get("NodeManagerAddress", "")), tuple(custom))
    return table


@dataclass(frozen=True)
class _WorkerReport:
    node_id: str
    ip: str
    pid: int
    error: str | None


class _ActorContext(WorkerContext):
    """A rollout's view from inside an actor: its node and the files, cached by digest."""

    def __init__(self, node: NodeInfo, folder: Path) -> None:
        self._node = node
        self._folder = folder
        self._paths: dict[str, Path] = {}

    @property
    def node(self) -> NodeInfo:
        return self._node

    def local_path(self, file: SharedFile) -> Path:
        cached = self._paths.get(file.digest)
        if cached is not None:
            return cached
        if file.ref is None:
            raise RolloutPoolError(
                f"{file.path} was not shared through this Ray pool (RayRolloutPool.share)"
            )
        data = _ray().get(file.ref)
        if hashlib.sha256(data).hexdigest() != file.digest:
            raise RolloutPoolError(
                f"the bytes of {file.name} from the object store do not match its SHA-256 "
                f"{file.digest}"
            )
        path = self._folder / f"{file.digest[:16]}-{file.name}"
        partial = path.with_name(path.name + ".part")
        partial.write_bytes(data)
        partial.replace(path)
        self._paths[file.digest] = path
        return path

    @property
    def scratch_dir(self) -> Path:
        """The actor's private folder (beside its cached files), removed by its close()."""
        return self._folder


class RolloutWorker:
    """The Ray actor behind one worker of :class:`RayRolloutPool` (one rollout at a time).

    Its files live in a private temporary folder of its own, removed by :meth:`close`
    (an actor that dies leaves it to the node's temporary-file cleaning).
    """

    def __init__(self) -> None:
        ray = _ray()
        self._folder = Path(tempfile.mkdtemp(prefix="mlbridge-ray-worker-"))
        node_id = ray.get_runtime_context().get_node_id()
        self._context = _ActorContext(
            NodeInfo(node_id, ray.util.get_node_ip_address()), self._folder
        )
        self._fn: Callable[[WorkerContext, Any], Any] | None = None
        self._fn_ref: Any = None  # the reference self._fn came from

    def ready(self, setup: Callable[[], None] | None) -> _WorkerReport:
        """Runs the trainer's check on this node; reports the node and any failure."""
        error = None
        if setup is not None:
            try:
                setup()
            except Exception as e:  # noqa: BLE001 - reported to the driver, which stops
                error = f"{type(e).__name__}: {e}"
        node = self._context.node
        return _WorkerReport(node.node_id, node.ip, os.getpid(), error)

    def run(self, fn_box: list[Any], item: Any) -> Any:  # noqa: ANN401
        """One rollout: ``fn(context, item)``, ``fn`` being in the object store at ``fn_box[0]``.

        The rollout function comes as a reference inside a list, which Ray hands over as
        it is, and is fetched once per map (a pool's map puts its function once), not once
        per rollout.
        """
        ref = fn_box[0]
        if self._fn is None or self._fn_ref != ref:
            self._fn = _ray().get(ref)
            self._fn_ref = ref
        return self._fn(self._context, item)

    def close(self) -> None:
        """Removes the worker's folder."""
        shutil.rmtree(self._folder, ignore_errors=True)


@dataclass(eq=False)  # one per actor, compared (and hashed) by identity
class _Worker:
    handle: Any
    node: NodeInfo


class RayRolloutPool(RolloutPool):
    """``workers`` Ray actors on the cluster this process is connected to.

    Call it inside :func:`ray_session` (or after ``ray.init``).

    Args:
        workers: Actors to start (rollouts at once).
        setup: Run by every actor at start (and by every replacement); an exception fails
            the pool with the actor's node named. It is pickled to the actors.
        cpus_per_worker: CPUs Ray reserves for each actor (a rollout runs compilers).
        max_retries: How often one rollout may be moved off a lost worker (counted for
            the rollout the worker was running, not for those queued behind it).
        queue_depth: Rollouts an actor holds at once: the one it runs and the ones queued
            behind it, which it starts as soon as the one before ends (1: the next is sent
            when this process hears that the last one ended).
        max_replacements: Replacement actors asked for, once the pool has started, for
            workers lost (default: ``2 * workers``), so that a crash loop ends. Before that,
            up to ``2 * workers`` actors that die while starting are started again.
        start_timeout: Seconds to wait for the first actors to start.
        runtime_env: Ray's runtime environment for the actors (e.g. ``{"env_vars":
            {...}}``), ``None`` for the cluster's.
        log: Where the pool's lines go (a lost node, a replacement); default stderr.

    Raises:
        RayUnavailableError: If Ray is not installed or not started.
        RolloutPoolError: If the cluster cannot hold the workers, an actor does not start
            within ``start_timeout``, or its check fails (the message names its node).
    """

    backend = "ray"

    def __init__(
        self,
        workers: int,
        *,
        setup: Callable[[], None] | None = None,
        cpus_per_worker: float = 1.0,
        max_retries: int = 3,
        queue_depth: int = 2,
        max_replacements: int | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        runtime_env: dict[str, Any] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        ray = _ray()
        if not ray.is_initialized():
            raise RayUnavailableError(
                "Ray is not started in this process: use mlbridge.training.ray_pool."
                "ray_session() (or ray.init()) before making a RayRolloutPool"
            )
        if workers < 1:
            raise ValueError(f"a pool needs at least one worker, got {workers}")
        if queue_depth < 1:
            raise ValueError(f"an actor holds at least one rollout, got {queue_depth}")
        cpus = ray.cluster_resources().get("CPU", 0)
        if workers * cpus_per_worker > cpus:
            raise RolloutPoolError(
                f"{workers} workers of {cpus_per_worker:g} CPU need {workers * cpus_per_worker:g} "
                f"CPUs, the Ray cluster has {cpus:g}: ask for at most "
                f"{int(cpus // cpus_per_worker)} workers (--workers), or add nodes "
                "(`ray start --address HEAD:PORT` on another machine)"
            )
        self._ray = ray
        self._max_retries = max_retries
        self._queue_depth = queue_depth
        self._replacements_left = 2 * workers if max_replacements is None else max_replacements
        self._start_timeout = start_timeout
        self._log = log or (lambda m: print(f"mlbridge: {m}", file=sys.stderr, flush=True))
        self._actor_class = ray.remote(RolloutWorker).options(
            num_cpus=cpus_per_worker,
            max_restarts=0,  # a lost actor is replaced by the pool, which knows its rollouts
            max_task_retries=0,
            runtime_env=runtime_env,
        )
        self._setup_ref = ray.put(setup)
        self._live: list[_Worker] = []
        self._starting: dict[Any, Any] = {}  # ready() ref -> actor handle
        self._closed = False
        self._started = False  # until the first `workers` actors are up
        self._start_retries_left = 2 * workers  # for actors that die while starting
        for _ in range(workers):
            self._start_actor()
        self._workers = workers
        try:
            self._await_start(workers)
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        """The actors asked for (rollouts at once while none is lost)."""
        return self._workers

    def live_nodes(self) -> list[NodeInfo]:
        """The node of every live actor (one entry per actor)."""
        return [w.node for w in self._live]

    def share(self, path: str | os.PathLike[str]) -> SharedFile:
        """Puts the file's bytes into Ray's object store, once."""
        local = _share_local(path)
        return SharedFile(
            local.name, local.digest, local.size, local.path, self._ray.put(local.path.read_bytes())
        )

    # -- actors -----------------------------------------------------------------------

    def _start_actor(self) -> None:
        handle = self._actor_class.remote()
        self._starting[handle.ready.remote(self._setup_ref)] = handle

    def _admit(self, ref: Any) -> _Worker | None:  # noqa: ANN401
        """Turns a finished ``ready()`` into a live worker.

        Returns ``None`` for an actor that died while starting: another is started while
        the pool's start retries (or, once started, its replacements) last; after that the
        pool fails. It fails too for any actor whose check failed.
        """
        handle = self._starting.pop(ref)
        try:
            report: _WorkerReport = self._ray.get(ref)
        except _lost_worker_errors() as e:
            # E.g. placed on a node that died a moment ago and that the cluster has not
            # marked dead yet, or a worker process that crashed.
            self._kill(handle)
            if not self._started and self._start_retries_left > 0:
                self._start_retries_left -= 1
                self._log(f"a Ray worker died while starting ({_first_line(e)}); starting another")
                self._start_actor()
                return None
            if self._started and self._replacements_left > 0:
                self._log(f"a Ray worker died while starting ({_first_line(e)}); starting another")
                self._replace()
                return None
            raise RolloutPoolError(
                f"Ray workers keep dying while starting (last: {_first_line(e)}). Every node "
                "needs the same mlbridge install as this machine (and its Python packages): "
                "run `mlbridge doctor` on each node"
            ) from None
        # The address the node registered with (`ray start --node-ip-address`), which the
        # worker's own guess (its default route) need not be.
        ip, labels = _node_table(self._ray).get(report.node_id, (report.ip, ()))
        node = NodeInfo(report.node_id, ip or report.ip, labels)
        if report.error is not None:
            self._kill(handle)
            raise RolloutPoolError(
                f"the Ray worker on {node.describe()} cannot run rollouts: {report.error}. "
                "Fix that node (run `mlbridge doctor` there and install what it names, "
                "e.g. LLVM 22), or leave it out of the cluster, then start the job again"
            )
        worker = _Worker(handle, node)
        self._live.append(worker)
        return worker

    def _await_start(self, count: int) -> None:
        deadline = time.monotonic() + self._start_timeout
        while len(self._live) < count:
            if not self._starting:
                raise RolloutPoolError(
                    f"only {len(self._live)} of {count} Ray workers started; the others died "
                    "while starting"
                )
            left = deadline - time.monotonic()
            ready, _ = self._ray.wait(list(self._starting), num_returns=1, timeout=max(0, left))
            if not ready:
                raise RolloutPoolError(
                    f"only {len(self._live)} of {count} Ray workers started within "
                    f"{self._start_timeout:g} s: the cluster may lack free CPUs (`ray status`), "
                    "or its nodes cannot start Python workers; ask for fewer workers "
                    "(--workers)"
                )
            self._admit(ready[0])
        self._started = True

    def _adopt_replacements(self, timeout: float) -> list[_Worker]:
        """Replacement actors that have started, waiting up to ``timeout`` s for the first."""
        adopted: list[_Worker] = []
        while self._starting:
            ready, _ = self._ray.wait(list(self._starting), num_returns=1, timeout=timeout)
            if not ready:
                break
            worker = self._admit(ready[0])
            if worker is not None:
                self._log(f"a replacement Ray worker joined on {worker.node.describe()}")
                adopted.append(worker)
                timeout = 0
        return adopted

    def _kill(self, handle: Any) -> None:  # noqa: ANN401
        try:
            self._ray.kill(handle, no_restart=True)
        except Exception:  # noqa: BLE001, S110 - it is gone already
            pass

    def _replace(self) -> None:
        """Asks for a replacement actor while any are left; it joins once placed."""
        if self._replacements_left > 0:
            self._replacements_left -= 1
            self._start_actor()

    def _lose(self, worker: _Worker) -> None:
        if worker in self._live:
            self._live.remove(worker)
        self._kill(worker.handle)
        if worker.node not in self._lost:
            self._lost.append(worker.node)
        self._replace()

    # -- rollouts ---------------------------------------------------------------------

    def _run(
        self, fn: Callable[[WorkerContext, T], R], items: Sequence[T]
    ) -> Iterator[tuple[int, Rollout[R]]]:
        ray = self._ray
        lost_errors = _lost_worker_errors()
        fn_box = [ray.put(fn)]  # a reference in a list: the actor fetches it once (run())
        queue = deque(range(len(items)))
        # Per live worker, its rollouts in the order they were sent: the first runs (or is
        # about to), the others wait in the actor's queue (an actor runs its calls in order).
        sent: dict[_Worker, deque[Any]] = {}
        in_flight: dict[Any, tuple[int, _Worker]] = {}
        attempts = [0] * len(items)
        # Per lost node in this map: why, and how many rollouts it was running (retried) and
        # held queued (sent to the other workers) when it was lost.
        lost_here: dict[NodeInfo, list[Any]] = {}

        def send() -> None:
            # Every worker without a rollout gets one; then, while more are left than there
            # are workers, each gets its next one queued behind the one it runs, so that it
            # starts it without waiting for this process to hear of the first. The last
            # rollouts (fewer than the workers) go only to a worker that is free, so that
            # none waits behind another's while a worker has nothing to do.
            for depth in range(self._queue_depth):
                for worker in self._live:
                    if not queue or (depth > 0 and len(queue) < len(self._live)):
                        return
                    refs = sent.setdefault(worker, deque())
                    if len(refs) == depth:
                        index = queue.popleft()
                        ref = worker.handle.run.remote(fn_box, items[index])
                        refs.append(ref)
                        in_flight[ref] = (index, worker)

        def lose(worker: _Worker, error: BaseException) -> None:
            # Every rollout sent to the worker goes back to the queue, in item order, ahead
            # of the others. The one it was running counts an attempt of its item; the ones
            # waiting behind it never started.
            self._lose(worker)
            indices = [in_flight.pop(ref)[0] for ref in sent.pop(worker, deque())]
            entry = lost_here.setdefault(worker.node, [_first_line(error), 0, 0])
            if not indices:
                return
            running = indices[0]
            attempts[running] += 1
            if attempts[running] > self._max_retries:
                raise RolloutPoolError(
                    f"item {running} lost its worker {attempts[running]} times "
                    f"(last on {worker.node.describe()}: {_first_line(error)}); giving up"
                ) from None
            entry[1] += 1
            entry[2] += len(indices) - 1
            self._retried += 1
            self._requeued += len(indices) - 1
            queue.extendleft(sorted(indices, reverse=True))

        try:
            while queue or in_flight:
                self._adopt_replacements(timeout=0)
                send()
                if not in_flight:  # work is left and every worker is gone
                    if not self._starting:
                        raise RolloutPoolError(
                            f"every Ray worker was lost ({self._lost_text()}) and no "
                            "replacement can be started (the pool's replacements are used up): "
                            "check the nodes' logs, add nodes to the cluster"
                        )
                    adopted = self._adopt_replacements(timeout=self._start_timeout)
                    if not adopted and not self._starting:
                        continue  # the replacement died starting; the check above decides
                    if not adopted:
                        raise RolloutPoolError(
                            f"every Ray worker was lost ({self._lost_text()}) and no "
                            f"replacement started within {self._start_timeout:g} s: add "
                            "nodes to the cluster"
                        )
                    continue
                (ref,), _ = ray.wait(list(in_flight), num_returns=1)
                index, worker = in_flight[ref]
                try:
                    value = ray.get(ref)
                except lost_errors as e:
                    lose(worker, e)
                    continue
                except ray.exceptions.RayTaskError as e:
                    cause = getattr(e, "cause", None)
                    if isinstance(cause, Exception):
                        raise cause from None
                    raise
                del in_flight[ref]
                sent[worker].remove(ref)
                send()  # the worker's next rollout is queued before this one is handed on
                yield index, Rollout(value, worker.node)
        finally:
            for node, (reason, count, queued) in lost_here.items():
                retried = (
                    f"; retried {count} rollout{'s' if count != 1 else ''} on the other workers"
                    if count
                    else ""
                )
                if queued:
                    retried += f" (and {queued} queued behind {'it' if count == 1 else 'them'})"
                self._log(
                    f"lost the Ray worker on {node.describe()} ({reason}){retried}, "
                    f"{len(self._live)} left"
                )

    def _lost_text(self) -> str:
        return ", ".join(n.describe() for n in self._lost) or "none recorded"

    def close(self) -> None:
        """Removes the actors' folders and ends the actors (idempotent)."""
        if self._closed:
            return
        self._closed = True
        closing = [w.handle.close.remote() for w in self._live]
        if closing:
            self._ray.wait(closing, num_returns=len(closing), timeout=30)
        for handle in [w.handle for w in self._live] + list(self._starting.values()):
            self._kill(handle)
        self._live.clear()
        self._starting.clear()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(e).__name__}: {first[:300]}"
