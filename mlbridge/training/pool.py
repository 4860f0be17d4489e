"""Rollout pools: run one function over many items on a set of workers, results in order.

A trainer's rollouts (compile a module with a policy, measure the result) are independent
of each other, so a trainer hands them to a :class:`RolloutPool` as ``fn(context, item)``
and gets the results back in the order of the items, each with the node it ran on
(:class:`Rollout`). The files a rollout reads (the corpus modules) are shared first
(:meth:`RolloutPool.share`) and opened on the worker through its context
(:meth:`WorkerContext.local_path`): the local pool hands back the file itself, the Ray pool
(:mod:`mlbridge.training.ray_pool`) ships the bytes through Ray's object store, so that
its workers need no shared file system.

:class:`LocalRolloutPool` is threads in this process: each rollout starts its own
compiler processes, so threads are enough to keep the cores busy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from mlbridge._closing import Closing
from mlbridge.errors import MLBridgeError
from mlbridge.progress import track

__all__ = [
    "LocalRolloutPool",
    "NodeInfo",
    "Rollout",
    "RolloutPool",
    "RolloutPoolError",
    "SharedFile",
    "WorkerContext",
    "file_digest",
]

T = TypeVar("T")
R = TypeVar("R")


class RolloutPoolError(MLBridgeError):
    """A pool cannot run its rollouts: a worker cannot start, or none is left."""


def file_digest(path: Path) -> str:
    """The SHA-256 of the file at ``path``, as hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class SharedFile:
    """A file the workers of a pool can open, named by its content.

    Attributes:
        name: The file's name (its last path component).
        digest: The SHA-256 of its bytes (hex): workers cache it under this.
        size: Its size in bytes.
        path: Where it is on the machine that shared it.
        ref: Where its bytes are for the pool's workers (a Ray ``ObjectRef`` for the Ray
            pool, ``None`` for the local pool, whose workers read :attr:`path`).
    """

    name: str
    digest: str
    size: int
    path: Path
    ref: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class NodeInfo:
    """A machine of the pool.

    Attributes:
        node_id: Its id (Ray's node id in hex; ``"local"`` for the local pool).
        ip: Its IP address.
        labels: Its custom resources on Ray (``ray start --resources``), else empty.
    """

    node_id: str
    ip: str
    labels: tuple[str, ...] = ()

    def describe(self) -> str:
        """``node <id> (<ip>, <labels>)``, as log lines name it."""
        extra = "".join(f", {label}" for label in self.labels)
        return f"node {self.node_id} ({self.ip}{extra})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: ``{"node_id", "ip", "labels"}``."""
        return {"node_id": self.node_id, "ip": self.ip, "labels": list(self.labels)}


@dataclass(frozen=True)
class Rollout(Generic[R]):
    """The result of one item, and the node whose worker computed it."""

    value: R
    node: NodeInfo


class WorkerContext(ABC):
    """What a rollout function gets besides its item: its node and the shared files."""

    @property
    @abstractmethod
    def node(self) -> NodeInfo:
        """The node this worker runs on."""

    @abstractmethod
    def local_path(self, file: SharedFile) -> Path:
        """A path on this worker's machine holding the bytes of ``file``.

        Raises:
            RolloutPoolError: If the bytes cannot be had (or do not match the digest).
        """

    @property
    @abstractmethod
    def scratch_dir(self) -> Path:
        """A folder of the pool on this worker's machine, removed when the pool closes.

        For what a rollout keeps between rollouts (e.g. an environment's private folder),
        so that nothing is left behind when the workers end.
        """


class RolloutPool(Closing, ABC):
    """Runs ``fn(context, item)`` for many items on its workers.

    Use it as a context manager (or call :meth:`close`): the Ray pool owns actors.
    """

    #: ``"local"`` or ``"ray"``.
    backend: str = ""

    def __init__(self) -> None:
        self._by_node: Counter[NodeInfo] = Counter()
        self._retried = 0
        self._requeued = 0
        self._lost: list[NodeInfo] = []

    @property
    @abstractmethod
    def workers(self) -> int:
        """How many rollouts run at once."""

    @abstractmethod
    def share(self, path: str | os.PathLike[str]) -> SharedFile:
        """Makes the file at ``path`` readable by every worker (once; later maps reuse it).

        Raises:
            OSError: If the file cannot be read.
        """

    @abstractmethod
    def _run(
        self, fn: Callable[[WorkerContext, T], R], items: Sequence[T]
    ) -> Iterator[tuple[int, Rollout[R]]]:
        """Yields ``(index, rollout)`` as items finish, in any order."""

    def map(
        self,
        fn: Callable[[WorkerContext, T], R],
        items: Sequence[T],
        *,
        description: str | None = None,
        unit: str = "rollout",
    ) -> list[Rollout[R]]:
        """``fn(context, item)`` for every item, on the pool's workers.

        Args:
            fn: The rollout. On the Ray pool it is pickled (cloudpickle) to the workers,
                so it must not hold locks, open files or the pool itself.
            items: Its inputs (pickled too on Ray).
            description: Progress on stderr under this name (:func:`mlbridge.progress.track`);
                ``None``: none.
            unit: What one item is, for the progress display.

        Returns:
            One :class:`Rollout` per item, in the order of ``items``.

        Raises:
            RolloutPoolError: If no worker is left, or an item's worker was lost more often
                than the pool retries.
            Exception: What ``fn`` raised, for the first item whose ``fn`` failed.
        """
        results: list[Rollout[R] | None] = [None] * len(items)
        done = self._run(fn, items)
        if description is not None:
            done = track(done, total=len(items), description=description, unit=unit)
        for index, rollout in done:
            results[index] = rollout
            self._by_node[rollout.node] += 1
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:
            raise AssertionError(f"the pool finished without results for items {missing}")
        return [r for r in results if r is not None]

    def summary(self) -> dict[str, Any]:
        """What ran where: backend, workers, rollouts per node, retries, lost nodes (JSON).

        ``retried_rollouts`` counts the rollouts a lost worker was running (run again on
        another), ``requeued_rollouts`` those it held queued, not started (sent to another).
        """
        return {
            "backend": self.backend,
            "workers": self.workers,
            "rollouts_by_node": [
                {**node.to_dict(), "rollouts": n}
                for node, n in sorted(
                    self._by_node.items(), key=lambda kv: (kv[0].labels, kv[0].node_id)
                )
            ],
            "retried_rollouts": self._retried,
            "requeued_rollouts": self._requeued,
            "lost_nodes": [node.to_dict() for node in self._lost],
        }

    @abstractmethod
    def close(self) -> None:
        """Stops the workers (idempotent)."""


def _share_local(path: str | os.PathLike[str], ref: Any = None) -> SharedFile:  # noqa: ANN401
    p = Path(path).resolve()
    return SharedFile(p.name, file_digest(p), p.stat().st_size, p, ref)


def _host_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class _LocalContext(WorkerContext):
    def __init__(self, node: NodeInfo, scratch: Path) -> None:
        self._node = node
        self._scratch = scratch

    @property
    def node(self) -> NodeInfo:
        return self._node

    def local_path(self, file: SharedFile) -> Path:
        return file.path

    @property
    def scratch_dir(self) -> Path:
        return self._scratch


class LocalRolloutPool(RolloutPool):
    """``workers`` threads of this process (what ``mlbridge train --no-ray`` uses).

    A rollout that raises stops the map: the items not yet started are cancelled and the
    exception goes to the caller.
    """

    backend = "local"

    def __init__(self, workers: int) -> None:
        super().__init__()
        if workers < 1:
            raise ValueError(f"a pool needs at least one worker, got {workers}")
        self._workers = workers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout")
        self._scratch = Path(tempfile.mkdtemp(prefix="mlbridge-rollouts-"))
        self._context = _LocalContext(NodeInfo("local", _host_ip(), ("local",)), self._scratch)

    @property
    def workers(self) -> int:
        """How many rollouts run at once (threads)."""
        return self._workers

    def share(self, path: str | os.PathLike[str]) -> SharedFile:
        """The file itself: the threads read it where it is."""
        return _share_local(path)

    def _run(
        self, fn: Callable[[WorkerContext, T], R], items: Sequence[T]
    ) -> Iterator[tuple[int, Rollout[R]]]:
        index_of: dict[Future[R], int] = {
            self._executor.submit(fn, self._context, item): i for i, item in enumerate(items)
        }
        pending = set(index_of)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield index_of[future], Rollout(future.result(), self._context.node)
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        """Waits for running rollouts, stops the threads and removes the scratch folder."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self._scratch, ignore_errors=True)
