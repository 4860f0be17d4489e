"""PNG plots of a benchmark report (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_sweep", "plot_totals"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a build machine
    import matplotlib.pyplot as plt

    return plt


def plot_sweep(report: dict[str, Any], path: Path) -> None:
    """Round-trip time of one query against L, one line per host and runner (log scale)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(14, 6), sharey=True)
    for ax, hosts, title in (
        (axes[0], ("C++", "C API", "C++ (in-process)"), "benchmark programs (C++, C API)"),
        (axes[1], ("opt", "mlir-opt"), "compiler passes (opt-22, mlir-opt-22)"),
    ):
        ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)
        for r in report["roundtrip"]:
            if r["host"] not in hosts or not r["per_size_ms"]:
                continue
            xs = sorted(int(k) for k in r["per_size_ms"])
            ys = [max(r["per_size_ms"][str(x)], 1e-4) for x in xs]
            style = "--" if "floor" in r["runner"] or r["runner"] == "callback" else "-"
            ax.plot(
                xs,
                ys,
                style,
                marker="." if len(xs) < 20 else None,
                label=f"{r['host']}: {r['label']}",
                linewidth=1.2,
            )
        ax.set_yscale("log")
        ax.set_xlabel("L (floats per query)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("time per query (ms, log scale)")
    m = report["machine"]
    fig.suptitle(
        f"mlbridge round trip per query ({report['meta']['profile']}; {m['cpu_model']}, "
        f"{m['cores']} cores)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_totals(report: dict[str, Any], path: Path) -> None:
    """Sweep totals of this run beside the paper's published totals (different hardware)."""
    from mlbridge.bench.report import PAPER_TOTALS_MS, measured_totals

    plt = _pyplot()
    names = list(PAPER_TOTALS_MS)
    measured = measured_totals(report)
    fig, ax = plt.subplots(figsize=(9, 5))
    width = 0.38
    xs = range(len(names))
    paper = [PAPER_TOTALS_MS[n] for n in names]
    ours = [measured.get(n, 0.0) for n in names]
    ax.bar(
        [x - width / 2 for x in xs],
        paper,
        width,
        label="paper (published; different hardware)",
        color="#bbbbbb",
    )
    ax.bar(
        [x + width / 2 for x in xs],
        [max(v, 1e-3) for v in ours],
        width,
        label="mlbridge, this machine",
        color="#1f77b4",
    )
    for x, v in zip(xs, ours, strict=True):
        ax.text(
            x + width / 2,
            max(v, 1e-3),
            "n/a" if v == 0 else f"{v:.3g}",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    for x, v in zip(xs, paper, strict=True):
        ax.text(x - width / 2, v, f"{v:.0f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), names)
    ax.set_yscale("log")
    ax.set_ylabel("total of the 100-query sweep (ms, log scale)")
    ax.set_title(
        "Round-trip sweep totals: mlbridge on this machine vs the ML-Compiler-Bridge paper\n"
        "(the paper's figures were measured on different hardware)",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
