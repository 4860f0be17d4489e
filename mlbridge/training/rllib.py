"""What a trainer needs to run RLlib's algorithms on mlbridge's environments.

RLlib (``ray.rllib``, the ``rllib`` extra) runs PPO on its new API stack: an
:class:`~ray.rllib.algorithms.algorithm.Algorithm` in this process (its learner updates
the RLModule here) and *env runners*, Ray actors that each own an environment and play its
episodes with the latest weights. This module knows no problem; a trainer gives it its
environment and its RLModule. It provides:

* :func:`import_rllib`: RLlib, or an error saying how to install it;
* :func:`ship_files` and :func:`local_copies`: the files an environment reads (e.g. a
  corpus's modules) put once into Ray's object store, and written by each env runner into
  its own folder, named by their SHA-256, so that worker nodes need no shared file system;
* :func:`iteration_scalars`: the numbers of one ``Algorithm.train()`` result that a
  trainer records (episode return, length, entropy, losses, sampled steps);
* :func:`env_runner_nodes`: where the env runners run;
* :class:`RLlibCheckpoints`: ``Algorithm.save_to_path`` once per checkpoint, in numbered
  folders with the trainer's own state beside them, and the latest one to resume from.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mlbridge.errors import MLBridgeError
from mlbridge.training.pool import NodeInfo, RolloutPoolError, SharedFile, _share_local

__all__ = [
    "RLLIB_STATE_FILE",
    "RLlibCheckpoints",
    "RLlibUnavailableError",
    "env_runner_nodes",
    "import_rllib",
    "iteration_scalars",
    "local_copies",
    "ship_files",
]

#: The trainer's own state in each checkpoint folder (beside RLlib's files).
RLLIB_STATE_FILE = "mlbridge-state.json"


class RLlibUnavailableError(RolloutPoolError):
    """RLlib (or one of its dependencies) is not installed."""


def import_rllib() -> Any:  # noqa: ANN401 - the ray.rllib module
    """``ray.rllib``, imported.

    Raises:
        RLlibUnavailableError: If Ray or RLlib's dependencies are missing, with the
            command that installs them.
    """
    try:
        import ray.rllib
    except ImportError as e:
        raise RLlibUnavailableError(
            f"RLlib is not installed ({e}): pip install 'mlbridge[rllib]' (or run `make "
            "setup` in a checkout)"
        ) from None
    return ray.rllib


def ship_files(paths: Sequence[str | os.PathLike[str]]) -> list[SharedFile]:
    """Puts each file's bytes into the object store of the Ray session of this process.

    Raises:
        OSError: If a file cannot be read.
    """
    import ray

    shared = []
    for path in paths:
        local = _share_local(path)
        shared.append(
            SharedFile(
                local.name, local.digest, local.size, local.path, ray.put(local.path.read_bytes())
            )
        )
    return shared


def local_copies(files: Sequence[SharedFile], folder: str | os.PathLike[str]) -> list[Path]:
    """The files of :func:`ship_files`, written into ``folder`` (inside a Ray worker).

    Each file goes to ``folder/<digest>/<name>`` (its name kept: tools name their inputs in
    messages), once; a file without an object reference (shared without Ray) is its path.
    """
    import ray

    out = []
    for f in files:
        if f.ref is None:
            out.append(f.path)
            continue
        path = Path(folder) / f.digest / f.name
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".partial")
            partial.write_bytes(ray.get(f.ref))
            partial.replace(path)
        out.append(path)
    return out


def _get(result: Mapping[str, Any], *keys: str) -> float | None:
    value: Any = result
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def iteration_scalars(result: Mapping[str, Any], module_id: str) -> dict[str, float]:
    """The numbers of one ``Algorithm.train()`` result (new API stack), by short name.

    ``return_mean``, ``return_max``, ``return_min`` and ``length_mean`` (over the episodes
    in the reporting window), ``episodes`` (finished in the iteration),
    ``episodes_lifetime``, ``env_steps_lifetime``, and the learner's ``entropy``,
    ``policy_loss``, ``vf_loss`` and ``mean_kl`` of ``module_id``; a number the result
    lacks (e.g. no episode finished yet) is left out.
    """
    runners, learner = "env_runners", ("learners", module_id)
    wanted = {
        "return_mean": (runners, "episode_return_mean"),
        "return_max": (runners, "episode_return_max"),
        "return_min": (runners, "episode_return_min"),
        "length_mean": (runners, "episode_len_mean"),
        "episodes": (runners, "num_episodes"),
        "episodes_lifetime": (runners, "num_episodes_lifetime"),
        "env_steps_lifetime": (runners, "num_env_steps_sampled_lifetime"),
        "entropy": (*learner, "entropy"),
        "policy_loss": (*learner, "policy_loss"),
        "vf_loss": (*learner, "vf_loss"),
        "mean_kl": (*learner, "mean_kl_loss"),
    }
    out = {}
    for name, keys in wanted.items():
        value = _get(result, *keys)
        if value is not None:
            out[name] = value
    return out


def env_runner_nodes(algo: Any) -> list[NodeInfo]:  # noqa: ANN401 - an RLlib Algorithm
    """The node of each remote env runner of ``algo``, in the order of their ids."""
    import ray

    def where(_runner: Any) -> tuple[str, str]:  # noqa: ANN401
        import ray

        context = ray.get_runtime_context()
        return context.get_node_id(), ray.util.get_node_ip_address()

    found = algo.env_runner_group.foreach_env_runner(where, local_env_runner=False)
    labels: dict[str, tuple[str, ...]] = {}
    for node in ray.nodes():
        custom = sorted(
            r
            for r in node.get("Resources", {})
            if r not in ("CPU", "GPU", "TPU", "memory", "object_store_memory")
            and not r.startswith(("node:", "accelerator_type"))
        )
        labels[node["NodeID"]] = tuple(custom)
    return [NodeInfo(node_id, ip, labels.get(node_id, ())) for node_id, ip in found]


class RLlibCheckpoints:
    """Numbered checkpoints of an RLlib algorithm: ``DIR/iteration-NNNNNN/``.

    Each holds ``Algorithm.save_to_path``'s files (the RLModule's weights, the optimizer's
    state, the env runners' connector states, the iteration counter) and
    :data:`RLLIB_STATE_FILE`, the trainer's own state (its settings, metric history).
    The folder may hold nothing else.

    Args:
        folder: Where the checkpoints go.
        kind: What trains and the checkpoints' format, ``TRAINER-N``
            (``"mlbridge-phase-order-rllib-ppo-1"``), kept in the state file: another
            kind's checkpoints are refused, and the same trainer's of another format N
            with a message saying so (N changes when the RLModules do).
    """

    def __init__(self, folder: str | os.PathLike[str], kind: str) -> None:
        self.folder = Path(folder)
        self.kind = kind

    def _numbered(self) -> list[tuple[int, Path]]:
        if not self.folder.is_dir():
            return []
        out = []
        for p in self.folder.iterdir():
            stem, _, number = p.name.partition("-")
            if stem == "iteration" and number.isdigit() and (p / RLLIB_STATE_FILE).is_file():
                out.append((int(number), p))
        return sorted(out)

    def prepare(self, *, resume: bool, say: Callable[[str], None]) -> None:
        """Checks the folder before a run.

        To resume, it must hold a checkpoint of this kind; a new run removes a finished
        run's checkpoints and refuses an unfinished run's.

        Raises:
            MLBridgeError: Saying what to do.
        """
        found = self._numbered()
        if resume:
            if not found:
                raise MLBridgeError(f"no checkpoint to resume from in {self.folder}")
            self.state(found[-1][1])  # of this kind
            return
        if not self.folder.exists() or not any(self.folder.iterdir()):
            return
        if not found:
            raise MLBridgeError(
                f"{self.folder} holds files that are not checkpoints of this trainer: give "
                "another --checkpoint-dir or remove it"
            )
        state = self.state(found[-1][1])
        if not state.get("finished"):
            raise MLBridgeError(
                f"{self.folder} holds the checkpoints of an unfinished run (up to iteration "
                f"{found[-1][0]}): continue it with --resume, or remove the folder"
            )
        say(f"replacing the finished run's checkpoints in {self.folder}")
        shutil.rmtree(self.folder)

    def state(self, path: Path) -> dict[str, Any]:
        """The trainer's state of the checkpoint at ``path``.

        Raises:
            MLBridgeError: If it is damaged or of another kind.
        """
        try:
            state = json.loads((path / RLLIB_STATE_FILE).read_text())
        except (OSError, ValueError) as e:
            raise MLBridgeError(f"cannot read the checkpoint {path}: {e}") from None
        kind = state.get("kind") if isinstance(state, dict) else None
        if kind == self.kind:
            return state
        trainer, _, version = self.kind.rpartition("-")
        theirs, _, their_version = str(kind).rpartition("-")
        if theirs == trainer and version.isdigit() and their_version.isdigit():
            # Same trainer, another checkpoint format (its RLModules changed).
            raise MLBridgeError(
                f"{path} was written by another version of this trainer (checkpoint format "
                f"{their_version}; this one reads format {version}, whose networks differ): "
                "that run cannot be continued; start a new run with another --checkpoint-dir, "
                f"or remove {self.folder}"
            )
        raise MLBridgeError(f"{path} is not a checkpoint of {self.kind} (it says {kind!r})")

    def latest(self) -> Path | None:
        """The folder of the highest iteration, or ``None``."""
        found = self._numbered()
        return found[-1][1] if found else None

    def save(self, algo: Any, iteration: int, state: Mapping[str, Any]) -> Path:  # noqa: ANN401
        """Writes ``algo``'s checkpoint of ``iteration`` with the trainer's ``state``.

        The state file is written last, so a folder without it (an interrupted save) is
        not a checkpoint.
        """
        path = self.folder / f"iteration-{iteration:06d}"
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        algo.save_to_path(str(path.resolve()))
        doc = {"kind": self.kind, "iteration": iteration, **state}
        partial = path / (RLLIB_STATE_FILE + ".partial")
        partial.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        partial.replace(path / RLLIB_STATE_FILE)
        return path
