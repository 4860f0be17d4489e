"""What every ``mlbridge train`` command says about where its rollouts run and what it keeps.

A trainer's command adds two groups of options with :func:`add_pool_arguments` (the
local Ray instance by default, ``--ray-address``, ``--workers``/``--jobs``, ``--no-ray``)
and :func:`add_run_arguments` (checkpoints, ``--resume``, TensorBoard event files, the
PNG learning curve), checks them with :func:`check_pool_arguments`, and gets its pool from
:func:`open_rollout_pool` inside a :class:`contextlib.ExitStack` that ends the pool (and a
Ray instance it started) with the job. Only the words differ between trainers (what a
rollout is, where the files go by default), so they are arguments here.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

from mlbridge.errors import CLIError
from mlbridge.training.pool import LocalRolloutPool, RolloutPool

__all__ = [
    "OpenedPool",
    "add_pool_arguments",
    "add_run_arguments",
    "check_pool_arguments",
    "default_workers",
    "open_rollout_pool",
]


def default_workers() -> int:
    """Rollouts at once without ``--workers`` on one machine: its CPUs, at most 2.

    Each rollout runs compilers of its own, and the machines this runs on have 2 CPUs.
    """
    return max(1, min(2, os.cpu_count() or 1))


def add_pool_arguments(
    parser: argparse.ArgumentParser, *, rollout: str = "compilation", rollouts: str = "compilations"
) -> None:
    """Adds ``--ray-address``, ``--workers`` (alias ``--jobs``) and ``--no-ray``.

    Args:
        parser: The command's parser.
        rollout: What one rollout is (``"compilation"``, ``"episode"``), for the help texts.
        rollouts: The same, plural.
    """
    where = parser.add_argument_group(
        f"where the {rollouts} run",
        "By default on Ray: a local Ray instance started for the job (no dashboard, no "
        "usage statistics) and stopped at its end, or the cluster of --ray-address. Each "
        f"worker is a Ray actor running one {rollout} at a time; the modules reach "
        "it through Ray's object store, so worker nodes need the same mlbridge install and "
        f"LLVM 22, no shared files. A worker lost mid-job has its {rollouts} retried on "
        "the others (docs/distributed-training.md).",
    )
    where.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="join this Ray cluster: HOST:PORT of its head (`ray start --head` prints it), "
        "'auto' for the cluster this machine belongs to, or ray://HOST:PORT (Ray Client); "
        "default: start a local Ray instance",
    )
    where.add_argument(
        "--workers",
        "--jobs",
        dest="workers",
        type=int,
        metavar="N",
        help=f"{rollouts} at once: Ray actors of 1 CPU each (default: every CPU of the "
        "cluster; on a local instance this machine's CPUs, at most 2), or threads with "
        "--no-ray (default: CPUs, at most 2)",
    )
    where.add_argument(
        "--no-ray",
        action="store_true",
        help=f"run the {rollouts} in threads of this process, without Ray",
    )


def add_run_arguments(
    parser: argparse.ArgumentParser,
    *,
    checkpoint_default: str,
    checkpoint_contents: str,
    tensorboard_default: str,
    curve_default: str,
    tensorboard_contents: str = "the per-iteration reward and wall time",
) -> None:
    """Adds the checkpoint and metrics options.

    ``--checkpoint-dir``, ``--checkpoint-every`` (default 1), ``--resume``,
    ``--tensorboard-dir`` and ``--curve``; the ``*_default`` texts say where each goes
    without the option, ``checkpoint_contents`` what a checkpoint holds.
    """
    runs = parser.add_argument_group("checkpoints and metrics")
    runs.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help=f"where checkpoints go (default: {checkpoint_default}); a new run replaces a "
        "finished run's checkpoints there and refuses an unfinished run's (continue it "
        "with --resume)",
    )
    runs.add_argument(
        "--checkpoint-every",
        type=int,
        default=1,
        metavar="N",
        help=f"write a checkpoint ({checkpoint_contents}) every N iterations, and after the "
        "last (default 1)",
    )
    runs.add_argument(
        "--resume",
        action="store_true",
        help="continue the run from the latest checkpoint in --checkpoint-dir; give the "
        "run's settings again (only --iterations and --workers may change)",
    )
    runs.add_argument(
        "--tensorboard-dir",
        metavar="DIR",
        help=f"TensorBoard event files of {tensorboard_contents} (default: "
        f"{tensorboard_default}; view with `tensorboard --logdir DIR`)",
    )
    runs.add_argument(
        "--curve",
        metavar="FILE",
        help=f"the PNG learning curve (default: {curve_default})",
    )


def check_pool_arguments(args: argparse.Namespace) -> None:
    """Refuses ``--ray-address`` with ``--no-ray``, and ``--workers``/``--checkpoint-every`` < 1.

    Raises:
        CLIError: Saying which option is wrong.
    """
    if args.no_ray and args.ray_address:
        raise CLIError("--ray-address joins a Ray cluster and --no-ray runs without Ray: pick one")
    for name in ("workers", "checkpoint_every"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise CLIError(f"--{name.replace('_', '-')} must be at least 1, got {value}")


@dataclass(frozen=True)
class OpenedPool:
    """The pool of a job, and how many rollouts it runs at once."""

    pool: RolloutPool
    workers: int


def open_rollout_pool(
    stack: contextlib.ExitStack,
    args: argparse.Namespace,
    *,
    setup: Callable[[], None] | None,
    say: Callable[[str], None],
    rollouts: str = "compilations",
) -> OpenedPool:
    """The job's pool, as ``args`` (:func:`add_pool_arguments`) ask; ``stack`` ends it.

    Without ``--no-ray``, starts a local Ray instance (or joins ``--ray-address``) for the
    duration of ``stack`` and starts the workers, each running ``setup`` first (the
    trainer's check of its node); ``say`` gets where they run.

    Raises:
        mlbridge.training.pool.RolloutPoolError: If Ray cannot start or a worker's check
            fails (:class:`~mlbridge.training.ray_pool.RayUnavailableError` when Ray is
            missing or the cluster cannot be joined).
    """
    if args.no_ray:
        workers = args.workers or default_workers()
        pool: RolloutPool = stack.enter_context(LocalRolloutPool(workers))
        say(f"{workers} {rollouts} at once in this process (no Ray)")
        return OpenedPool(pool, workers)
    from mlbridge.training.ray_pool import RayRolloutPool, cluster_cpus, ray_session

    local_cpus = max(os.cpu_count() or 1, args.workers or 1)
    where = stack.enter_context(
        ray_session(args.ray_address, num_cpus=None if args.ray_address else local_cpus)
    )
    workers = args.workers or (cluster_cpus() if args.ray_address else default_workers())
    say(f"on the {where}: starting {workers} workers")
    pool = stack.enter_context(RayRolloutPool(workers, setup=setup, log=say))
    nodes = sorted({n.describe() for n in pool.live_nodes()})
    say(f"{workers} workers on {len(nodes)} node(s): {'; '.join(nodes)}")
    return OpenedPool(pool, workers)
