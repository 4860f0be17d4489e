"""RayRolloutPool on a local Ray instance: the next rollout waits in the actor's queue.

An actor holds two rollouts at once (``queue_depth=2``): the one it runs and the next,
sent while the first runs, so that the actor starts it without waiting for the driver to
hear that the first ended. The tests see when the driver sends a rollout through its item,
which leaves a file behind when it is pickled (Ray pickles an actor call's arguments in
the driver, when the call is made): a rollout can wait for the file of another item. They
show that the next rollout is sent while the first runs (and not with ``queue_depth=1``),
that the last rollouts, fewer than the workers, are sent only to a free worker, and that
when a worker dies, the rollouts queued behind its running one are run again on the other
workers, every result still in the order of the items.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mlbridge.training.pool import WorkerContext
from mlbridge.training.ray_pool import RayRolloutPool, ray_session

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    """A local Ray instance of two CPUs for the module; the environment is restored after."""
    saved = dict(os.environ)
    # The rollouts and items below are this module's: the actors get them by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with ray_session(num_cpus=2):
            yield
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        os.environ.clear()
        os.environ.update(saved)


class Item:
    """Item ``index`` of a map; pickling it (the driver sending it) writes ``sent-<index>``.

    ``wait``: how long a rollout that awaits another item's sending waits for it (s).
    """

    def __init__(self, index: int, folder: Path, wait: float = 20) -> None:
        self.index = index
        self.folder = folder
        self.wait = wait

    def __reduce__(self) -> tuple[Any, ...]:
        (self.folder / f"sent-{self.index}").touch()
        return (Item, (self.index, self.folder, self.wait))


@dataclass(frozen=True)
class Seen:
    """What a rollout saw: its item, its worker process, and whether the awaited item
    was sent while it ran."""

    index: int
    pid: int
    saw: bool


def wait_for(path: Path, seconds: float) -> bool:
    """Whether ``path`` exists within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def items(count: int, folder: Path, wait: float = 20) -> list[Item]:
    return [Item(i, folder, wait) for i in range(count)]


def awaits_next(context: WorkerContext, item: Item) -> Seen:
    """Item 0 waits (up to ``item.wait`` s) for item 1 to be sent; the others return at once."""
    saw = item.index == 0 and wait_for(item.folder / "sent-1", item.wait)
    return Seen(item.index, os.getpid(), saw)


def awaits_last(context: WorkerContext, item: Item) -> Seen:
    """Item 0 waits ``item.wait`` s for item 2 to be sent, item 1 up to 20 s (it ends only
    once item 2 is sent); item 2 returns at once."""
    wait = item.wait if item.index == 0 else 20
    saw = item.index < 2 and wait_for(item.folder / "sent-2", wait)
    return Seen(item.index, os.getpid(), saw)


def dies_once(context: WorkerContext, item: Item) -> Seen:
    """Item 0, the first time, waits until item 2 is sent (queued behind it on its worker),
    then kills its worker process; every other rollout returns at once."""
    first = item.folder / "died"
    if item.index == 0 and not first.exists():
        assert wait_for(item.folder / "sent-2", 20)
        first.write_text(str(os.getpid()))
        os._exit(3)  # the worker process dies mid-rollout, as in a segfault or an OOM kill
    return Seen(item.index, os.getpid(), False)


def items_0_and_1_die_once(context: WorkerContext, item: Item) -> Seen:
    """Items 0 and 1 kill their worker process the first time they run: item 0 once item 1
    is sent (queued behind it), item 1 once item 2 is (the driver has item 0's result then,
    which a process that died at once could have taken with it); the others return at once.
    """
    first = item.folder / f"died-{item.index}"
    if item.index < 2 and not first.exists():
        assert wait_for(item.folder / f"sent-{item.index + 1}", 20)
        first.write_text(str(os.getpid()))
        os._exit(3)
    return Seen(item.index, os.getpid(), False)


def test_an_actor_gets_its_next_rollout_while_it_runs_one(tmp_path: Path) -> None:
    with RayRolloutPool(1) as pool:
        results = pool.map(awaits_next, items(3, tmp_path))
    assert [r.value.index for r in results] == [0, 1, 2]
    assert results[0].value.saw  # item 1 was sent while item 0 ran
    assert len({r.value.pid for r in results}) == 1


def test_with_a_queue_depth_of_one_the_next_rollout_waits_for_the_last(
    tmp_path: Path,
) -> None:
    with RayRolloutPool(1, queue_depth=1) as pool:
        results = pool.map(awaits_next, items(2, tmp_path, wait=3))
    assert [r.value.index for r in results] == [0, 1]
    assert not results[0].value.saw


def test_the_last_rollouts_go_only_to_a_free_worker(tmp_path: Path) -> None:
    # Two workers, three items: items 0 and 1 run at once; item 2, the last, is not queued
    # behind either in advance, but sent once item 0 has ended, to its worker, while
    # item 1 still runs.
    with RayRolloutPool(2) as pool:
        results = pool.map(awaits_last, items(3, tmp_path, wait=3))
    assert [r.value.index for r in results] == [0, 1, 2]
    assert not results[0].value.saw and results[1].value.saw
    assert results[2].value.pid == results[0].value.pid != results[1].value.pid


def test_a_dead_workers_queued_rollouts_run_again_on_the_others_in_order(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    with RayRolloutPool(2, log=lines.append) as pool:
        results = pool.map(dies_once, items(8, tmp_path))
        summary = pool.summary()
    dead = int((tmp_path / "died").read_text())
    assert [r.value.index for r in results] == list(range(8))
    # Item 0 (running) and item 2 (queued behind it) ran again on another worker.
    assert results[0].value.pid != dead and results[2].value.pid != dead
    # Item 0 counts as retried; item 2, which never started there, as requeued.
    assert (summary["retried_rollouts"], summary["requeued_rollouts"]) == (1, 1)
    assert sum(n["rollouts"] for n in summary["rollouts_by_node"]) == 8
    (lost,) = [line for line in lines if "lost the Ray worker" in line]
    assert "retried 1 rollout on the other workers (and 1 queued behind it)" in lost, lines
    assert summary["lost_nodes"] and summary["lost_nodes"][0]["node_id"] in lost


def test_a_queue_depth_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one rollout"):
        RayRolloutPool(1, queue_depth=0)


def test_a_rollout_that_fails_raises_its_own_exception(tmp_path: Path) -> None:
    def fails(context: WorkerContext, item: Item) -> None:
        if item.index == 1:
            raise KeyError("item 1")

    with RayRolloutPool(1) as pool, pytest.raises(KeyError, match="item 1"):
        pool.map(fails, items(4, tmp_path))


def test_a_rollout_queued_on_a_dead_worker_is_not_charged_an_attempt(tmp_path: Path) -> None:
    # One worker, one retry per rollout. Item 0 dies with item 1 queued behind it; then
    # item 1 dies the first time it runs. Had item 1 been charged for the first loss too,
    # its second would have been one too many.
    lines: list[str] = []
    with RayRolloutPool(1, max_retries=1, log=lines.append) as pool:
        results = pool.map(items_0_and_1_die_once, items(3, tmp_path))
        summary = pool.summary()
    assert [r.value.index for r in results] == [0, 1, 2]
    assert summary["retried_rollouts"] == 2  # items 0 and 1, once each
    assert summary["requeued_rollouts"] == 2  # item 1, then item 2 (queued behind item 1)
