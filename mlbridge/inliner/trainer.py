"""Training an inlining-for-size policy with evolution strategies, against a real ``opt``.

Each evaluation compiles one module with ``opt-22 -passes='default<Oz>'`` while a
:class:`~mlbridge.inliner.policy.LinearPolicy` answers every inlining decision over
the pipe (LLVM's interactive protocol, :func:`mlbridge.compiler.pipe.drive_compiler`),
then ``llc-22`` makes an object file and its ``.text`` size is the measure. The reward
of a module is its relative size saving against stock ``opt-22 -passes='default<Oz>'``
(positive: smaller than stock).

The search is antithetic evolution strategies (Salimans et al., 2017), the method MLGO
used for its inlining-for-size model: perturb the parameters both ways, compare the mean
reward of the two, step along the perturbations that helped. It starts from the policy
that imitates LLVM's default advisor, so the first iterate is as good as stock.

The compiler command is a template: any tool that speaks LLVM's interactive inliner
protocol works (stock ``opt-22`` with ``-enable-ml-inliner=release``, or ``opt-22`` with
the mlbridge plugin on the pipe runner).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlbridge.compiler.pipe import DriveResult, Observation, drive_compiler
from mlbridge.errors import MLBridgeError
from mlbridge.inliner.policy import LinearPolicy
from mlbridge.llvm import LLVMToolError, find_llvm_tool, object_sizes
from mlbridge.progress import track

__all__ = [
    "ESConfig",
    "TrainingError",
    "evaluate_policy",
    "ml_inliner_command",
    "stock_text_size",
    "train_inliner",
]


class TrainingError(MLBridgeError):
    """A compilation during training failed."""


def ml_inliner_command(passes: str = "default<Oz>") -> list[str]:
    """Stock ``opt-22`` with its ML inliner asking over the pipe.

    Returns:
        A command template with ``{base}``, ``{input}`` and ``{output}`` placeholders.
    """
    return [
        find_llvm_tool("opt"),
        f"-passes={passes}",
        "-enable-ml-inliner=release",
        "-inliner-interactive-channel-base={base}",
        "-inliner-interactive-include-default",
        "{input}",
        "-o",
        "{output}",
    ]


def _run(argv: Sequence[str], timeout: float) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TrainingError(f"{argv[0]} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        raise TrainingError(f"{' '.join(argv)} failed: {proc.stderr.strip()[-2000:]}")


def _text_size(bitcode: Path, workdir: Path, timeout: float) -> int:
    obj = workdir / "out.o"
    _run(
        [find_llvm_tool("llc"), "-O2", "-filetype=obj", str(bitcode), "-o", str(obj)],
        timeout,
    )
    try:
        return object_sizes(obj).text
    except LLVMToolError as e:
        raise TrainingError(str(e)) from None


def stock_text_size(module: Path, *, passes: str = "default<Oz>", timeout: float = 300) -> int:
    """The ``.text`` size of ``module`` after stock ``opt-22 -passes=<passes>``, ``llc-22 -O2``."""
    with tempfile.TemporaryDirectory(prefix="mlbridge-train-") as tmp:
        out = Path(tmp) / "out.bc"
        _run([find_llvm_tool("opt"), f"-passes={passes}", str(module), "-o", str(out)], timeout)
        return _text_size(out, Path(tmp), timeout)


def evaluate_policy(
    policy: Callable[[Observation], int],
    module: Path,
    *,
    command: Sequence[str] | None = None,
    timeout: float = 300,
) -> tuple[int, int]:
    """Compiles ``module`` with ``policy`` answering every inlining decision.

    Returns:
        The ``.text`` size in bytes, and the number of decisions the policy made.

    Raises:
        TrainingError: If a tool fails.
    """
    template = list(command) if command is not None else ml_inliner_command()
    with tempfile.TemporaryDirectory(prefix="mlbridge-train-") as tmp:
        out = Path(tmp) / "out.bc"
        argv = [a.replace("{input}", str(module)).replace("{output}", str(out)) for a in template]
        try:
            result: DriveResult = drive_compiler(
                argv, policy, timeout=timeout, exit_timeout=timeout, parent=tmp
            )
        except MLBridgeError as e:
            raise TrainingError(f"compiling {module} with the policy: {e}") from e
        if result.returncode != 0:
            raise TrainingError(f"{argv[0]} exited with code {result.returncode} on {module}")
        return _text_size(out, Path(tmp), timeout), result.answered


@dataclass
class ESConfig:
    """Evolution-strategies settings.

    Attributes:
        iterations: Parameter updates.
        pairs: Antithetic perturbation pairs per update.
        modules_per_iteration: Modules sampled (without replacement) per update.
        sigma: Standard deviation of the perturbations.
        learning_rate: Step size.
        jobs: Compilations in parallel.
        seed: Random seed (the whole run is deterministic given it and the tools).
    """

    iterations: int = 20
    pairs: int = 6
    modules_per_iteration: int = 8
    sigma: float = 0.05
    learning_rate: float = 0.05
    jobs: int = 2
    seed: int = 0


def _relative_saving(size: int, baseline: int) -> float:
    return (baseline - size) / baseline if baseline > 0 else 0.0


def train_inliner(
    modules: Sequence[Path],
    config: ESConfig,
    *,
    initial: LinearPolicy | None = None,
    command: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
    timeout: float = 300,
) -> LinearPolicy:
    """Trains a :class:`LinearPolicy` on ``modules`` and returns the best one seen.

    The features are those the compiler sends (read from the first compilation's header).
    Every iterate is scored on the whole module set at the end of its update; the best
    (largest mean saving against stock ``-Oz``) is returned, with its scores in
    ``metadata``.

    Raises:
        TrainingError: If a compilation fails.
        ValueError: If ``modules`` is empty.
    """
    if not modules:
        raise ValueError("no modules to train on")
    say = progress or (lambda m: print(f"mlbridge train: {m}", file=sys.stderr, flush=True))
    rng = np.random.default_rng(config.seed)
    pool = ThreadPoolExecutor(max_workers=max(1, config.jobs))
    started = time.monotonic()
    try:
        say(f"measuring stock -Oz on {len(modules)} modules")
        baselines = list(
            track(
                pool.map(lambda m: stock_text_size(m, timeout=timeout), modules),
                total=len(modules),
                description="mlbridge train: stock -Oz",
                unit="module",
            )
        )
        policy = initial
        if policy is None:
            names = _feature_names(modules[0], command, timeout)
            policy = LinearPolicy.imitating_default(names)

        def score(p: LinearPolicy, indices: Sequence[int]) -> float:
            sizes = list(
                pool.map(
                    lambda i: evaluate_policy(p, modules[i], command=command, timeout=timeout)[0],
                    indices,
                )
            )
            return float(
                np.mean(
                    [_relative_saving(s, baselines[i]) for s, i in zip(sizes, indices, strict=True)]
                )
            )

        everything = list(range(len(modules)))
        best = policy
        best_score = score(policy, everything)
        say(f"start: mean saving vs stock -Oz {best_score * 100:+.3f}%")
        theta = policy.parameters
        iterations = track(
            range(config.iterations), description="mlbridge train: training", unit="iteration"
        )
        for it in iterations:
            batch = rng.choice(
                len(modules), size=min(config.modules_per_iteration, len(modules)), replace=False
            )
            eps = rng.standard_normal((config.pairs, theta.size))
            diffs = np.empty(config.pairs)
            for k in range(config.pairs):
                plus = score(policy.with_parameters(theta + config.sigma * eps[k]), batch)
                minus = score(policy.with_parameters(theta - config.sigma * eps[k]), batch)
                diffs[k] = plus - minus
            if np.any(diffs != 0.0):
                # Normalise so that the step size does not depend on the reward scale.
                diffs = diffs / (np.std(diffs) + 1e-12)
            theta = theta + config.learning_rate / (2 * config.pairs) * (diffs @ eps)
            candidate = policy.with_parameters(theta)
            cand_score = score(candidate, everything)
            if cand_score > best_score:
                best, best_score = candidate, cand_score
            say(
                f"iteration {it + 1}/{config.iterations}: saving {cand_score * 100:+.3f}% "
                f"(best {best_score * 100:+.3f}%), {time.monotonic() - started:.0f} s"
            )
        best.metadata = {
            "trainer": "mlbridge.inliner.trainer (antithetic evolution strategies)",
            "modules": len(modules),
            "iterations": config.iterations,
            "pairs": config.pairs,
            "sigma": config.sigma,
            "learning_rate": config.learning_rate,
            "seed": config.seed,
            "mean_saving_vs_stock_Oz": best_score,
        }
        return best
    finally:
        pool.shutdown(wait=True)


def _feature_names(module: Path, command: Sequence[str] | None, timeout: float) -> list[str]:
    seen: list[str] = []

    def record(obs: Observation) -> int:
        if not seen:
            seen.extend(s.name for s in obs.header.features)
        return int(np.asarray(obs.get("inlining_default", [0])).reshape(-1)[0])

    evaluate_policy(record, module, command=command, timeout=timeout)
    if not seen:
        raise TrainingError(f"{module} made no inlining decision; cannot read the feature list")
    return seen


def default_jobs() -> int:
    """Parallel compilations: the number of CPUs, at most 2 (the machines here have 2)."""
    return max(1, min(2, os.cpu_count() or 1))


def require_tools() -> None:
    """Raises :class:`TrainingError` naming the missing LLVM 22 tool, if any."""
    for tool in ("opt", "llc"):
        try:
            find_llvm_tool(tool)
        except MLBridgeError as e:
            raise TrainingError(str(e)) from e


def describe(policy: LinearPolicy) -> str:
    """A one-line summary: number of active features and the largest weights."""
    order = np.argsort(-np.abs(policy.weights))[:5]
    top = ", ".join(f"{policy.features[i]}={policy.weights[i]:+.3f}" for i in order)
    return f"{len(policy.active_features())} active features; largest: {top}"
