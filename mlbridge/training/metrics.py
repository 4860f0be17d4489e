"""Training metrics where ML people look: TensorBoard event files and a PNG learning curve.

:class:`TrainingMetrics` takes one dict of scalars per step (an iteration): it writes
them to a TensorBoard event file (through ``tensorboardX``, the ``train`` extra; view
with ``tensorboard --logdir DIR``) and keeps them, so that :func:`plot_learning_curve`
can draw the run (matplotlib) and a checkpoint can carry them across a resume.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["TrainingMetrics", "plot_learning_curve"]


class TrainingMetrics:
    """Scalars per step, to a TensorBoard event file and kept in :attr:`history`.

    Args:
        tensorboard_dir: Where the event file goes (made if missing); ``None``: none.
            A resumed run writes a new event file beside the old ones, continuing the
            step numbers, and TensorBoard shows them as one run.
        history: The steps recorded before (from a checkpoint).
        log: Told once when ``tensorboardX`` is missing (no event file is written then).
    """

    def __init__(
        self,
        tensorboard_dir: str | Path | None,
        *,
        history: Sequence[Mapping[str, float]] = (),
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.history: list[dict[str, float]] = [dict(h) for h in history]
        self._writer: Any = None
        if tensorboard_dir is not None:
            try:
                from tensorboardX import SummaryWriter
            except ImportError:
                if log is not None:
                    log(
                        "tensorboardX is not installed, so no TensorBoard event file is "
                        "written: pip install 'mlbridge[train]'"
                    )
            else:
                Path(tensorboard_dir).mkdir(parents=True, exist_ok=True)
                self._writer = SummaryWriter(logdir=str(tensorboard_dir))

    def record(self, step: int, scalars: Mapping[str, float]) -> None:
        """Records ``scalars`` (tag: value) at ``step`` and flushes them to disk."""
        self.history.append({"step": float(step), **{k: float(v) for k, v in scalars.items()}})
        if self._writer is not None:
            for tag, value in scalars.items():
                self._writer.add_scalar(tag, float(value), step)
            self._writer.flush()

    def close(self) -> None:
        """Closes the event file (idempotent)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def plot_learning_curve(
    history: Sequence[Mapping[str, float]],
    path: str | Path,
    *,
    series: Mapping[str, str],
    ylabel: str,
    title: str,
    wall_time: str | None = None,
) -> None:
    """A PNG of ``series`` against the step (and against wall time, if ``wall_time``).

    Args:
        history: One mapping per step, with ``"step"`` and the series' tags.
        path: The PNG to write.
        series: Line label -> tag in ``history``.
        ylabel: The y axis.
        title: The figure's title.
        wall_time: The tag of the elapsed seconds, for a second panel; ``None``: one panel.

    Raises:
        ImportError: If matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a build machine
    import matplotlib.pyplot as plt

    panels = 2 if wall_time else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.5), sharey=True, squeeze=False)
    xs_by_panel = [("iteration", [h["step"] for h in history])]
    if wall_time:
        xs_by_panel.append(("wall time (s)", [h.get(wall_time, float("nan")) for h in history]))
    from matplotlib.ticker import MaxNLocator

    axes[0][0].xaxis.set_major_locator(MaxNLocator(integer=True))  # whole iterations
    for ax, (xlabel, xs) in zip(axes[0], xs_by_panel, strict=True):
        for label, tag in series.items():
            ys = [h.get(tag, float("nan")) for h in history]
            ax.plot(xs, ys, marker="." if len(xs) < 40 else None, label=label, linewidth=1.4)
        ax.axhline(0.0, color="#888888", linewidth=0.8, linestyle="--")
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel(ylabel)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
