"""Checkpoints of a training run: numbered JSON files in one folder, written atomically.

A checkpoint is ``<folder>/iteration-NNNNNN.json``: a JSON object with the ``format``
the trainer names, the ``iteration`` it was taken after, and the trainer's ``state``.
Each is written to a temporary file and renamed into place, so a job killed while writing
leaves the previous checkpoints whole, and :func:`latest_checkpoint` never sees half a
file. JSON keeps what a trainer needs exactly: floats are written with enough digits to
read back the same double, and integers of any size (a numpy generator's state) stay
integers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlbridge._files import write_atomically
from mlbridge.errors import MLBridgeError

__all__ = [
    "CheckpointError",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "prepare_checkpoint_folder",
    "save_checkpoint",
    "tensors_from_json",
    "tensors_to_json",
]

_NAME = re.compile(r"^iteration-([0-9]{6,})\.json$")


class CheckpointError(MLBridgeError):
    """A checkpoint cannot be written, found or read, or is not the kind expected."""


def list_checkpoints(folder: str | Path) -> list[tuple[int, Path]]:
    """The checkpoints in ``folder`` as ``(iteration, path)``, oldest first (none: empty)."""
    root = Path(folder)
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = _NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The checkpoint of the highest iteration in ``folder``, or ``None``."""
    found = list_checkpoints(folder)
    return found[-1][1] if found else None


def save_checkpoint(folder: str | Path, fmt: str, iteration: int, state: dict[str, Any]) -> Path:
    """Writes the checkpoint of ``iteration`` into ``folder`` (made if missing).

    Args:
        folder: The run's checkpoint folder.
        fmt: The trainer's checkpoint format name (checked by :func:`load_checkpoint`).
        iteration: Iterations done when it was taken.
        state: The trainer's state: JSON types only (dicts, lists, str, int, float, bool).

    Returns:
        The checkpoint's path.

    Raises:
        CheckpointError: If the folder cannot be written or ``state`` is not JSON.
    """
    root = Path(folder)
    path = root / f"iteration-{iteration:06d}.json"
    try:
        data = json.dumps(
            {"format": fmt, "iteration": iteration, "state": state},
            indent=1,
            sort_keys=True,
            allow_nan=False,
        )
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"the state of iteration {iteration} is not JSON: {e}") from None
    try:
        root.mkdir(parents=True, exist_ok=True)
        write_atomically(path, data.encode() + b"\n")
    except OSError as e:
        raise CheckpointError(f"cannot write the checkpoint {path}: {e}") from None
    return path


def load_checkpoint(path: str | Path, fmt: str) -> tuple[int, dict[str, Any]]:
    """Reads a checkpoint written by :func:`save_checkpoint`.

    Returns:
        The iteration it was taken after, and the trainer's state.

    Raises:
        CheckpointError: If it cannot be read or is not of format ``fmt``.
    """
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"cannot read the checkpoint {path}: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise CheckpointError(f"{path} is not a {fmt} checkpoint (its format: {found!r})")
    iteration, state = doc.get("iteration"), doc.get("state")
    if not isinstance(iteration, int) or not isinstance(state, dict):
        raise CheckpointError(f"{path} lacks its iteration or state; it is damaged")
    return iteration, state


def tensors_to_json(value: Any) -> Any:  # noqa: ANN401 - a tensor, or what holds tensors
    """PyTorch tensors in ``value`` (nested dicts) as ``{"tensor": lists, "dtype", "shape"}``.

    For an optimizer's ``state_dict()["state"]``: the values read back exactly
    (:func:`tensors_from_json`), since float32 -> float64 is exact and JSON keeps every
    float64. Dict keys become strings. Needs PyTorch only when ``value`` holds tensors.
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        array = value.detach().cpu().numpy()
        return {"dtype": str(array.dtype), "shape": list(array.shape), "tensor": array.tolist()}
    if isinstance(value, dict):
        return {str(k): tensors_to_json(v) for k, v in value.items()}
    return value


def tensors_from_json(value: Any) -> Any:  # noqa: ANN401
    """The tensors of :func:`tensors_to_json`'s form back, exactly (dict keys stay strings)."""
    if isinstance(value, dict) and "tensor" in value and "dtype" in value:
        import numpy as np
        import torch

        array = np.asarray(value["tensor"], dtype=np.dtype(value["dtype"]))
        return torch.from_numpy(array.reshape(value["shape"]).copy())
    if isinstance(value, dict):
        return {k: tensors_from_json(v) for k, v in value.items()}
    return value


def prepare_checkpoint_folder(
    folder: str | Path,
    fmt: str,
    *,
    resume: bool,
    say: Callable[[str], None],
    what_resumes: str = "--resume",
) -> None:
    """Checks a run's checkpoint folder before the run (cheap: call it before starting Ray).

    To resume, the folder must hold a checkpoint. A new run removes the checkpoints of a
    run that finished there (its latest checkpoint's iteration reached its state's
    ``config["iterations"]``), and refuses those of an unfinished run, whose iterations a
    new run would mix with its own.

    Args:
        folder: The run's checkpoint folder.
        fmt: The trainer's checkpoint format.
        resume: Whether the run continues from the folder's latest checkpoint.
        say: Told when a finished run's checkpoints are removed.
        what_resumes: How the user asks to resume, for the messages.

    Raises:
        CheckpointError: Saying what to do (resume, or remove the folder).
    """
    root = Path(folder)
    if resume:
        if latest_checkpoint(root) is None:
            raise CheckpointError(
                f"no checkpoint to resume from in {root}: run without {what_resumes} to start "
                "a new run (or point --checkpoint-dir at the run's folder)"
            )
        return
    found = list_checkpoints(root)
    if not found:
        return
    latest = found[-1][1]
    try:
        iteration, state = load_checkpoint(latest, fmt)
        finished = iteration >= int(state["config"]["iterations"])
    except (CheckpointError, KeyError, TypeError, ValueError):
        finished = False
    if not finished:
        raise CheckpointError(
            f"{root} holds the checkpoints of an unfinished run (latest: {latest.name}): "
            f"pass {what_resumes} to continue it, or remove the folder (or choose another "
            "--checkpoint-dir) to start anew"
        )
    for _, path in found:
        path.unlink()
    say(f"removed the {len(found)} checkpoints of the finished run in {root}")
