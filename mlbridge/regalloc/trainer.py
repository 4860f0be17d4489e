"""Training the ML register allocator's agents, and their held-out evaluation.

The agents are one :class:`mlbridge.regalloc.gnn.RegallocGNN` (a graph policy over the
interference graph with a priority and a coloring head). Every rollout is one ``llc-22 -O2
-regalloc=mlbridge`` run of a training module over the pipe (the policy answers every
decision of every function) that writes the MIR after the rewriter, then one run of
``mlbridge-regalloc-cost`` over that MIR, which gives each function's spill and reload
instructions weighted by block frequency (``SpillReloadCost``, docs/ml-regalloc.md).

1. **Preparation.** The training modules go through ``opt-22 -O2`` once; each one's
   functions are allocated by the built-in basic policy (in-process) and costed: the
   baseline.
2. **Collection and behaviour cloning.** On ``bc_modules`` modules the Python
   :func:`~mlbridge.regalloc.policy.basic_policy` answers over the pipe and its decisions
   are recorded (at most ``samples_per_function`` per function, drawn uniformly); the
   policy is trained by cross-entropy over the legal actions to make the same decisions.
   With ``dagger_rounds`` (DAgger, Ross et al. 2011), each round lets the cloned policy
   allocate ``bc_modules`` modules itself while the teacher labels the decisions it is
   asked there, and trains ``dagger_epochs`` more epochs on every decision so far: the
   clone learns the teacher's answer in the states its own mistakes lead to, where errors
   would otherwise compound.
3. **REINFORCE.** Each iteration draws ``modules_per_iteration`` modules among those where
   the basic policy spills (elsewhere no policy can do better) and samples
   actions from the masked softmax (divided by ``temperature``). A function's return is
   ``-SpillReloadCost``; its advantage is the improvement over the basic policy's cost on
   the same function, relative to the larger of the two (in [-1, 1]), divided by the
   iteration's root mean square advantage. The loss is minus the advantage times the sum of
   the function's log-probabilities (estimated from at most ``samples_per_function``
   uniformly drawn decisions, scaled up), minus an entropy bonus.
Large modules are sampled, not left out: in a module with more than ``sample_functions``
functions, a rollout lets the policy allocate that many, drawn from the rollout's seed;
llc's built-in basic policy allocates the others in-process
(``-mlbridge-regalloc-model-functions``), so that they cost neither pipe traffic nor
Python time, and only the sampled functions are recorded and rewarded. The policy makes
at most ``max_decisions`` decisions per rollout: the later ones get the basic policy over
the pipe, the session ends normally, and the function where it ran out is left out of
the record (its cost mixes two policies).

4. **Validation.** The deterministic policies after cloning and after fine-tuning, exported
   to ONNX and run in-process, are compared on ``validation_modules`` training modules; the
   lower total ``SpillReloadCost`` is kept.

Every compilation of stages 1 to 4 is a rollout on a
:class:`~mlbridge.training.pool.RolloutPool` (Ray actors or threads, :mod:`mlbridge.training`):
a worker gets the module (through the pool), the policy's weights as numpy arrays and the
rollout's seeds, answers the pipe in Python and returns the costs and the recorded
observations and actions; the gradient steps run in the driver, which draws every seed
in the order of the rollouts, so the result does not depend on the pool. Checkpoints
(:mod:`mlbridge.training.checkpoints`) let a run resume with the result of an
uninterrupted one.

:func:`evaluate_heldout` then compares, per held-out project, LLVM's greedy allocator
(stock llc), LLVM's basic allocator, ``-regalloc=mlbridge`` with the built-in basic policy
and with the trained ONNX model in-process: sums of ``SpillReloadCost`` and ``.text`` bytes.
"""

from __future__ import annotations

import base64
import copy
import functools
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlbridge.compiler.pipe import drive_compiler
from mlbridge.errors import MLBridgeError
from mlbridge.llvm import ObjectSizes, find_llvm_tool, object_sizes
from mlbridge.paths import default_build_dir, plugin_path
from mlbridge.progress import track
from mlbridge.regalloc.interface import BLOCK_FEATURES, MASK
from mlbridge.regalloc.policy import basic_policy, split_policy
from mlbridge.training.checkpoints import (
    CheckpointError,
    latest_checkpoint,
    load_checkpoint,
    prepare_checkpoint_folder,
    save_checkpoint,
    tensors_from_json,
    tensors_to_json,
)
from mlbridge.training.metrics import TrainingMetrics
from mlbridge.training.pool import (
    LocalRolloutPool,
    RolloutPool,
    RolloutPoolError,
    SharedFile,
    WorkerContext,
    file_digest,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "COST_FIELDS",
    "METRIC_AGREEMENT",
    "METRIC_ENTROPY",
    "METRIC_LOSS",
    "METRIC_RELATIVE",
    "METRIC_ROLLOUTS",
    "METRIC_SAMPLED_VS_BASIC",
    "METRIC_WALL",
    "FunctionCost",
    "HeldoutRow",
    "PolicyWeights",
    "RegallocTrainConfig",
    "RegallocTrainError",
    "Rollout",
    "RolloutAgent",
    "RolloutSettings",
    "RolloutTask",
    "TrainingModule",
    "allocate",
    "check_worker",
    "evaluate_heldout",
    "find_llc_plugin",
    "function_costs",
    "heldout_allocators",
    "heldout_table",
    "optimize_module",
    "parse_cost_remarks",
    "prepare_checkpoints",
    "rollout",
    "sample_functions",
    "select_modules",
    "stderr_log",
    "summarize_heldout",
    "train_regalloc",
    "write_metrics",
]

Obs = Mapping[str, Any]
Log = Callable[[str], None]


class RegallocTrainError(MLBridgeError):
    """A tool failed while training or evaluating the register allocator's agents."""


@dataclass
class RegallocTrainConfig:
    """Settings of :func:`train_regalloc`.

    The defaults are a modest run: about 15 to 20 minutes on a 2-core machine, held-out
    evaluation included (docs/ml-regalloc.md, "Training", has a measured run).

    Attributes:
        max_decisions: The most decisions the policy makes per rollout (in Python they cost
            about a millisecond each); the later ones get the basic policy, and the function
            where the policy ran out is left out of the rollout's record.
        sample_functions: In a module with more functions than this, a rollout lets the
            policy allocate this many, drawn from its seed, and llc's built-in basic policy
            the others (``None``: the policy allocates every function).
        bc_modules: Training modules on which the basic policy's decisions are recorded.
        bc_epochs: Epochs of behaviour cloning.
        dagger_rounds: Rounds of DAgger after the cloning (0: none): the cloned policy's
            own deterministic decisions allocate ``bc_modules`` modules, the teacher labels
            the recorded ones, and the policy trains ``dagger_epochs`` epochs on all
            decisions recorded so far.
        dagger_epochs: Epochs of training after each DAgger round.
        bc_learning_rate: Adam's step size while cloning.
        batch_size: Samples per gradient step of cloning and REINFORCE.
        samples_per_function: Decisions kept per function and rollout (drawn uniformly).
        iterations: REINFORCE updates (0: cloning only).
        modules_per_iteration: Modules drawn per update, among those where the basic policy
            spills.
        episodes_per_module: Sampled rollouts per drawn module.
        temperature: Divides the scores before the softmax actions are sampled from.
        learning_rate: Adam's step size in REINFORCE.
        entropy: Weight of the entropy bonus in REINFORCE.
        validation_modules: Training modules on which the cloned and the fine-tuned
            policies are compared (0: keep the fine-tuned one).
        hidden: The policy's embedding width.
        rounds: The policy's rounds of message passing.
        split: Train the split agent too: llc runs with ``-mlbridge-regalloc-split``, the
            teacher of the cloning and the baseline of REINFORCE are the split policy
            (:func:`~mlbridge.regalloc.policy.split_policy`, llc's
            ``-mlbridge-regalloc-policy=split``) instead of the basic policy, and the
            policy has a split agent.
        jobs: Compilations at once (the threads of the pool :func:`train_regalloc` makes
            when it is given none; the command line sets its pool's workers).
        seed: Seeds the policy's initialisation, the draws and the action samples.
        timeout: Bound of every wait, seconds.
    """

    max_decisions: int = 3000
    sample_functions: int | None = 16
    bc_modules: int = 96
    bc_epochs: int = 8
    dagger_rounds: int = 0
    dagger_epochs: int = 4
    bc_learning_rate: float = 0.003
    batch_size: int = 64
    samples_per_function: int = 64
    iterations: int = 40
    modules_per_iteration: int = 16
    episodes_per_module: int = 2
    temperature: float = 1.0
    learning_rate: float = 0.0005
    entropy: float = 0.0
    validation_modules: int = 48
    hidden: int = 32
    rounds: int = 2
    split: bool = False
    jobs: int = 2
    seed: int = 0
    timeout: float = 300.0


#: The numbers ``mlbridge-regalloc-cost`` reports per function, as remark arguments.
COST_FIELDS: dict[str, str] = {
    "Spills": "spills",
    "Reloads": "reloads",
    "FoldedSpills": "folded_spills",
    "FoldedReloads": "folded_reloads",
    "Copies": "copies",
    "SpillReloadCost": "spill_reload_cost",
    "CopyCost": "copy_cost",
}


@dataclass
class FunctionCost:
    """One function's allocation cost (``mlbridge-regalloc-cost``).

    Attributes:
        spills: Spill stores.
        reloads: Reloads.
        folded_spills: Spills folded into another instruction.
        folded_reloads: Reloads folded into another instruction.
        copies: Register copies.
        spill_reload_cost: Spills and reloads (folded too) weighted by block frequency.
        copy_cost: Copies weighted by block frequency.
    """

    spills: float = 0.0
    reloads: float = 0.0
    folded_spills: float = 0.0
    folded_reloads: float = 0.0
    copies: float = 0.0
    spill_reload_cost: float = 0.0
    copy_cost: float = 0.0


def _yaml_scalar(text: str) -> str:
    """A YAML flow scalar as LLVM's remark writer quotes it (plain, '...' or "...")."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return json.loads(text)
    return text


_ARG = re.compile(r"^\s*-\s+(\w+):\s*(.*)$")


def parse_cost_remarks(text: str) -> dict[str, FunctionCost]:
    """Each function's cost from the YAML of ``-pass-remarks-output`` of the cost pass.

    Other passes' remarks in the file are left out.
    """
    costs: dict[str, FunctionCost] = {}
    doc: dict[str, str] = {}
    args: dict[str, str] = {}

    def finish() -> None:
        if doc.get("Pass") == "mlbridge-regalloc-cost" and "Function" in doc:
            values = {COST_FIELDS[k]: float(_yaml_scalar(v)) for k, v in args.items()}
            costs[doc["Function"]] = FunctionCost(**values)

    for line in text.splitlines():
        if line.startswith("---"):
            finish()
            doc, args = {}, {}
        elif m := _ARG.match(line):
            if m.group(1) in COST_FIELDS:
                args[m.group(1)] = m.group(2)
        elif ":" in line and not line.startswith(" "):
            key, _, value = line.partition(":")
            doc[key.strip()] = _yaml_scalar(value)
    finish()
    return costs


# -- tools --------------------------------------------------------------------------------


def find_llc_plugin(build_dir: str | Path | None = None) -> Path:
    """The llc plugin (``MLBridgeLLCPlugin.so``) of ``build_dir``.

    Args:
        build_dir: The build folder; default ``$MLBRIDGE_BUILD_DIR``, else ``<checkout>/build``.

    Raises:
        RegallocTrainError: If it is not built.
    """
    folder = Path(build_dir) if build_dir is not None else default_build_dir()
    if folder is None:
        raise RegallocTrainError("no build folder: set MLBRIDGE_BUILD_DIR or pass --build-dir")
    path = plugin_path("llc", folder)
    if not path.is_file():
        raise RegallocTrainError(
            f"{path} is not built: run `mlbridge build` (or point MLBRIDGE_BUILD_DIR at a "
            "build folder that has it)"
        )
    return path


def _run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RegallocTrainError(
            f"{argv[0]} took more than {timeout:.0f} s: {' '.join(argv)}"
        ) from None
    except OSError as e:
        raise RegallocTrainError(f"cannot run {argv[0]}: {e}") from None
    if proc.returncode != 0:
        raise RegallocTrainError(
            f"{' '.join(argv)} failed (exit status {proc.returncode}): {proc.stderr[-2000:]}"
        )
    return proc


def optimize_module(module: Path, out: Path, timeout: float = 300.0) -> Path:
    """``opt-22 -O2 module -o out``."""
    _run([find_llvm_tool("opt"), "-O2", str(module), "-o", str(out)], timeout)
    return out


def function_costs(mir: Path, plugin: Path, timeout: float = 300.0) -> dict[str, FunctionCost]:
    """Each function's cost in ``mir`` (MIR after the rewriter), by ``mlbridge-regalloc-cost``."""
    remarks = mir.with_suffix(".costs.yaml")
    _run(
        [find_llvm_tool("llc"), f"-load-pass-plugin={plugin}",
         "-run-pass=mlbridge-regalloc-cost", f"-pass-remarks-output={remarks}", str(mir),
         "-o", os.devnull],
        timeout,
    )  # fmt: skip
    try:
        return parse_cost_remarks(remarks.read_text())
    finally:
        remarks.unlink(missing_ok=True)


def _llc_base(plugin: Path) -> list[str]:
    # The plugin is loaded for every allocator, so that MIR of each parses the same way.
    return [find_llvm_tool("llc"), "-O2", f"-load-pass-plugin={plugin}"]


def allocate(
    module: Path,
    plugin: Path,
    options: Sequence[str],
    work: Path,
    *,
    text_bytes: bool = False,
    timeout: float = 300.0,
) -> tuple[dict[str, FunctionCost], ObjectSizes | None]:
    """Allocates ``module`` in-process with llc ``options``; each function's cost.

    Args:
        module: Optimised bitcode.
        plugin: The llc plugin.
        options: The allocator's options (``[]``: greedy; ``["-regalloc=basic"]``; ...).
        work: A folder for the MIR and the object.
        text_bytes: Also compile to an object and measure its sizes.
        timeout: Bound of each llc run.

    Returns:
        The costs, and the object's sizes (``.text`` and every allocated section; ``None``
        unless ``text_bytes``).
    """
    mir = work / f"{module.stem}.mir"
    _run([*_llc_base(plugin), *options, "-stop-after=virtregrewriter", str(module),
          "-o", str(mir)], timeout)  # fmt: skip
    try:
        costs = function_costs(mir, plugin, timeout)
    finally:
        mir.unlink(missing_ok=True)
    sizes = None
    if text_bytes:
        obj = work / f"{module.stem}.o"
        _run([*_llc_base(plugin), "-filetype=obj", *options, str(module), "-o", str(obj)], timeout)
        sizes = object_sizes(obj)
        obj.unlink(missing_ok=True)
    return costs, sizes


def _mlbridge(*options: str) -> list[str]:
    return ["-regalloc=mlbridge", *options]


def _split_options(split: bool) -> list[str]:
    """The options that let the split agent act (``split``), or none."""
    return ["-mlbridge-regalloc-split"] if split else []


def baseline_options(split: bool) -> list[str]:
    """The built-in policy a run is measured against, in-process: basic, or split."""
    return _mlbridge(
        *(["-mlbridge-regalloc-policy=split", "-mlbridge-regalloc-split"] if split else [])
    )


def teacher_policy(split: bool) -> Callable[[Obs], np.ndarray]:
    """The Python twin of :func:`baseline_options`' policy: basic, or split."""
    return split_policy if split else basic_policy


# -- rollouts -----------------------------------------------------------------------------


@dataclass
class _Reservoir:
    """A uniform sample of at most ``capacity`` of a function's decisions (Vitter's R)."""

    capacity: int
    seen: int = 0
    observations: list[dict[str, Any]] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)


@dataclass
class Rollout:
    """One allocation of a module over the pipe.

    Attributes:
        module: The optimised module.
        costs: Each function's cost.
        decisions: Each function's number of decisions.
        observations: Each function's recorded decisions (a uniform sample).
        actions: The actions of ``observations``.
        seconds: Wall time of the llc run and the cost run.
        capped: The function where the policy ran out of decisions (``max_decisions``;
            the basic policy finished it and every later one), left out of ``decisions``,
            ``observations`` and ``actions``; ``None`` if it did not run out.
    """

    module: Path
    costs: dict[str, FunctionCost]
    decisions: dict[str, int]
    observations: dict[str, list[dict[str, Any]]]
    actions: dict[str, list[int]]
    seconds: float
    capped: str | None = None

    @property
    def total_decisions(self) -> int:
        """Decisions over every function."""
        return sum(self.decisions.values())


def rollout(
    module: Path,
    choose: Callable[[Obs], int],
    plugin: Path,
    work: Path,
    *,
    keep_per_function: int,
    rng: np.random.Generator,
    max_decisions: int | None = None,
    model_functions: Collection[str] | None = None,
    split: bool = False,
    timeout: float = 300.0,
    label: Callable[[Obs], int] | None = None,
) -> Rollout:
    """Allocates ``module`` with ``choose`` answering the decisions over the pipe.

    Args:
        module: Optimised bitcode.
        choose: The policy: observation to action index.
        plugin: The llc plugin.
        work: A folder for the MIR.
        keep_per_function: Decisions recorded per function (uniformly drawn).
        rng: Draws the recorded decisions.
        max_decisions: The most decisions ``choose`` makes; the later ones get the basic
            policy (the session ends normally) and the function where it ran out is left
            out of the record (:attr:`Rollout.capped`). ``None``: no bound.
        model_functions: The functions asked over the pipe (at least one); llc's built-in
            basic policy allocates the others in-process. ``None``: every function.
        split: llc with ``-mlbridge-regalloc-split`` (the split agent acts); past
            ``max_decisions`` the split policy answers instead of the basic one.
        timeout: Bound of every wait.
        label: Records, for each recorded decision, this policy's action in the same
            state instead of ``choose``'s (DAgger: the teacher labels the learner's
            states); ``None``: ``choose``'s actions.

    Raises:
        MLBridgeError: If the session fails.
        RegallocTrainError: If the cost run fails.
    """
    from mlbridge.regalloc.gnn import compact_observation

    start = time.perf_counter()
    kept: dict[str, _Reservoir] = {}
    last_edges: dict[str, Any] = {}
    capped: list[str] = []
    made = 0

    def policy(obs: Any) -> np.ndarray:
        nonlocal made
        name = str(obs.context)
        if capped or (max_decisions is not None and made >= max_decisions):
            # Out of decisions: the basic policy (llc's built-in one, in Python) ends the
            # session normally instead of an ended session's error in llc.
            if not capped:
                capped.append(name)
            return np.asarray(teacher_policy(split)(obs), dtype=np.int64).reshape(1)
        made += 1
        action = int(choose(obs))
        if np.asarray(obs[MASK]).reshape(-1)[action] == 0:
            raise RegallocTrainError(f"the policy chose the illegal action {action}")
        r = kept.setdefault(name, _Reservoir(keep_per_function))
        r.seen += 1
        slot = len(r.actions) if len(r.actions) < r.capacity else int(rng.integers(r.seen))
        if slot < r.capacity:
            sample = compact_observation(obs, last_edges.get(name))
            last_edges[name] = sample
            recorded = action if label is None else int(label(obs))
            if slot == len(r.actions):
                r.observations.append(sample)
                r.actions.append(recorded)
            else:
                r.observations[slot] = sample
                r.actions[slot] = recorded
        return np.array([action], dtype=np.int64)

    if model_functions is not None and not model_functions:
        raise ValueError("model_functions names no function (None: every function)")
    only = (
        [f"-mlbridge-regalloc-model-functions={','.join(sorted(model_functions))}"]
        if model_functions is not None
        else []
    )
    mir = work / f"{module.stem}.rollout.mir"
    command = [*_llc_base(plugin), *_mlbridge("-mlbridge-regalloc-runner=pipe",
               "-mlbridge-regalloc-channel={base}", *only, *_split_options(split)),
               "-stop-after=virtregrewriter",
               str(module), "-o", str(mir)]  # fmt: skip
    try:
        drive_compiler(
            command,
            policy,
            serdes="bitstream",
            timeout=timeout,
            require_end=True,
            parent=work,
            # The sampled functions may have nothing to allocate: then llc never asks.
            require_session=model_functions is None,
        )
        costs = function_costs(mir, plugin, timeout)
    finally:
        mir.unlink(missing_ok=True)
    recorded = {k: r for k, r in kept.items() if k not in capped}
    return Rollout(
        module,
        costs,
        {k: r.seen for k, r in recorded.items()},
        {k: r.observations for k, r in recorded.items()},
        {k: r.actions for k, r in recorded.items()},
        time.perf_counter() - start,
        capped[0] if capped else None,
    )


def sample_functions(functions: Collection[str], size: int | None, seed: int) -> list[str] | None:
    """The functions the policy allocates in one rollout of a module.

    Args:
        functions: The module's functions.
        size: The sample size; a module with no more functions is not sampled (``None``:
            never sampled).
        seed: Draws the sample; the same seed gives the same sample.

    Returns:
        ``size`` of ``functions``, sorted, or ``None`` if the policy allocates every one.
    """
    if size is None or len(functions) <= size:
        return None
    names = sorted(functions)
    rng = np.random.default_rng(seed)
    return sorted(names[int(i)] for i in rng.choice(len(names), size=size, replace=False))


# -- modules ------------------------------------------------------------------------------


@dataclass
class TrainingModule:
    """A training module, optimised, with the basic policy's cost per function.

    Attributes:
        source: The corpus bitcode.
        optimized: After ``opt-22 -O2``.
        basic: Each function's cost with the built-in basic policy.
    """

    source: Path
    optimized: Path
    basic: dict[str, FunctionCost]

    @property
    def basic_cost(self) -> float:
        """The basic policy's ``SpillReloadCost`` over every function."""
        return sum(c.spill_reload_cost for c in self.basic.values())


def select_modules(
    manifest: Any,
    split: str,
    *,
    max_instructions: int | None = None,
    min_instructions: int = 50,
    max_modules: int | None = None,
) -> list[Any]:
    """The ``split`` modules of a corpus manifest within an IR-instruction range.

    Args:
        manifest: A :class:`mlbridge.corpus.Manifest`.
        split: ``train`` or ``heldout``.
        max_instructions: Leave out larger modules (before ``-O2``; ``None``: no bound,
            large modules are sampled by the rollouts).
        min_instructions: Leave out modules with almost no code.
        max_modules: Keep at most this many, spread evenly over the corpus order (projects
            stay mixed).

    Returns:
        The :class:`mlbridge.corpus.ModuleEntry` objects.
    """
    return list(
        manifest.select(
            split,
            min_instructions=min_instructions,
            max_instructions=max_instructions,
            max_modules=max_modules,
        )
    )


def _log(message: str, log: Log | None) -> None:
    if log is not None:
        log(message)


# -- the rollouts: what a pool's worker runs (module-level, so that Ray can pickle them) --


@dataclass(frozen=True)
class RolloutSettings:
    """What every rollout of a run needs besides its task (the same on every worker).

    Attributes:
        plugin: The llc plugin, at this path on every node (the same install everywhere).
        samples_per_function: Decisions recorded per function and rollout.
        max_decisions: The most decisions the policy makes per rollout.
        temperature: Divides the scores before the sampled actions are drawn.
        timeout: Bound of every wait, seconds.
        split: Whether the split agent acts (:attr:`RegallocTrainConfig.split`).
    """

    plugin: str
    samples_per_function: int
    max_decisions: int
    temperature: float
    timeout: float
    split: bool = False


@dataclass(frozen=True)
class PolicyWeights:
    """A :class:`~mlbridge.regalloc.gnn.RegallocGNN` as plain data, for the workers.

    Attributes:
        hidden: The embedding width.
        rounds: The rounds of message passing.
        arrays: The state dict as ``(name, float32 array)`` pairs.
    """

    hidden: int
    rounds: int
    arrays: tuple[tuple[str, np.ndarray], ...]
    split: bool = False

    @classmethod
    def of(cls, policy: Any) -> PolicyWeights:  # noqa: ANN401 - a RegallocGNN
        """A copy of ``policy``'s architecture and weights."""
        return cls(
            policy.hidden,
            policy.rounds,
            tuple((k, v.detach().cpu().numpy().copy()) for k, v in policy.state_dict().items()),
            policy.split,
        )

    def build(self) -> Any:  # noqa: ANN401 - a RegallocGNN
        """The policy, in eval mode, with exactly these weights."""
        import torch

        from mlbridge.regalloc.gnn import RegallocGNN

        # Built on the meta device, then given the weights: a random initialisation would
        # draw from torch's global generator, which the driver's threads share (--no-ray).
        with torch.device("meta"):
            policy = RegallocGNN(self.hidden, self.rounds, split=self.split)
        policy.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in self.arrays}, assign=True)
        policy.eval()
        return policy


@dataclass(frozen=True)
class RolloutAgent:
    """Who answers the decisions of one map's rollouts.

    Attributes:
        kind: ``"basic"`` (the teacher, for cloning: :func:`teacher_policy`),
            ``"sample"`` (actions drawn from the policy's masked softmax, divided by the
            temperature, with the rollout's own sampling seed) or ``"learner"`` (the
            policy's deterministic actions, the recorded decisions labelled with the
            teacher's: DAgger).
        weights: The policy of ``sample`` and ``learner``.
    """

    kind: str
    weights: PolicyWeights | None = None


@dataclass(frozen=True)
class RolloutTask:
    """One allocation rollout of a map, as the driver drew it.

    Attributes:
        module: The optimised module.
        seed: Draws the recorded decisions.
        model_functions: The functions the policy allocates (drawn by the driver from
            the rollout's seed); ``None``: every function.
        sampling_seed: Draws the sampled actions (``None`` for the basic policy).
    """

    module: SharedFile
    seed: int
    model_functions: tuple[str, ...] | None
    sampling_seed: int | None = None


def _sampler(policy: Any, seed: int, temperature: float) -> Callable[[Obs], int]:
    sampler = np.random.default_rng(seed)

    def choose(obs: Obs) -> int:
        p = policy.probabilities(obs, temperature)
        return int(sampler.choice(len(p), p=p / p.sum()))

    return choose


def _teacher(split: bool) -> Callable[[Obs], int]:
    policy = teacher_policy(split)

    def choose(obs: Obs) -> int:
        return int(policy(obs)[0])

    return choose


def _allocation_rollout(
    context: WorkerContext, task: RolloutTask, *, agent: RolloutAgent, settings: RolloutSettings
) -> Rollout:
    """One :func:`rollout` of ``task`` with ``agent`` answering, in the worker."""
    import torch

    # Compilations run in other processes; more torch threads would only compete with them.
    torch.set_num_threads(1)
    choose: Callable[[Obs], int]
    label: Callable[[Obs], int] | None = None
    if agent.kind == "basic":
        choose = _teacher(settings.split)
    elif agent.kind == "learner":
        assert agent.weights is not None
        choose = agent.weights.build().act
        label = _teacher(settings.split)
    else:
        assert agent.weights is not None and task.sampling_seed is not None
        choose = _sampler(agent.weights.build(), task.sampling_seed, settings.temperature)
    folder = Path(tempfile.mkdtemp(prefix="rollout-", dir=context.scratch_dir))
    try:
        result = rollout(
            context.local_path(task.module),
            choose,
            Path(settings.plugin),
            folder,
            keep_per_function=settings.samples_per_function,
            rng=np.random.default_rng(task.seed),
            max_decisions=settings.max_decisions,
            model_functions=task.model_functions,
            split=settings.split,
            timeout=settings.timeout,
            label=label,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result.module = task.module.path  # the driver's name of it
    return result


def _prepare_rollout(
    context: WorkerContext, source: SharedFile, *, settings: RolloutSettings
) -> tuple[bytes, dict[str, FunctionCost]]:
    """``opt-22 -O2`` of ``source`` and the baseline's cost per function, in the worker.

    The baseline is :func:`baseline_options`' built-in policy (basic, or split).

    Returns the optimised module's bytes (the driver shares them for the later rollouts).
    """
    folder = Path(tempfile.mkdtemp(prefix="prepare-", dir=context.scratch_dir))
    try:
        out = optimize_module(context.local_path(source), folder / "optimized.bc", settings.timeout)
        costs, _ = allocate(
            out,
            Path(settings.plugin),
            baseline_options(settings.split),
            folder,
            timeout=settings.timeout,
        )
        return out.read_bytes(), costs
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _model_cost_rollout(
    context: WorkerContext, task: tuple[SharedFile, SharedFile], *, settings: RolloutSettings
) -> float:
    """Total ``SpillReloadCost`` of module ``task[0]`` with the ONNX model ``task[1]`` in llc."""
    module, model = task
    folder = Path(tempfile.mkdtemp(prefix="validate-", dir=context.scratch_dir))
    try:
        costs, _ = allocate(
            context.local_path(module),
            Path(settings.plugin),
            _mlbridge(
                f"-mlbridge-regalloc-model={context.local_path(model)}",
                *_split_options(settings.split),
            ),
            folder,
            timeout=settings.timeout,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return sum(c.spill_reload_cost for c in costs.values())


def check_worker(plugin: str | Path) -> None:
    """What a training worker checks at start (a Ray actor, on its node).

    LLVM 22's ``opt`` and ``llc``, the plugin at ``plugin`` and PyTorch.

    Raises:
        RegallocTrainError: Naming what is missing and how to install it.
    """
    try:
        find_llvm_tool("opt")
        find_llvm_tool("llc")
    except MLBridgeError as e:
        raise RegallocTrainError(str(e)) from e
    if not Path(plugin).is_file():
        raise RegallocTrainError(
            f"the llc plugin {plugin} is not on this node: every node needs the same mlbridge "
            "build at the same path (`mlbridge build`, or --build-dir)"
        )
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise RegallocTrainError(
            f"{e}: training needs PyTorch (pip install 'mlbridge[dev]')"
        ) from None


# -- training -----------------------------------------------------------------------------

#: The ``format`` of the trainer's checkpoints (:mod:`mlbridge.training.checkpoints`).
CHECKPOINT_FORMAT = "mlbridge-regalloc-checkpoint-1"

#: RegallocTrainConfig fields a resumed run may change: how long it runs, on how many workers.
_RESUMABLE_CHANGES = frozenset({"iterations", "jobs"})

#: The TensorBoard tags of :func:`train_regalloc` (and the curve's series). Step 0 is the
#: behaviour cloning; step k the k-th REINFORCE iteration.
METRIC_SAMPLED_VS_BASIC = "cost/sampled_vs_basic_pct"
METRIC_RELATIVE = "cost/mean_relative_change_pct"
METRIC_AGREEMENT = "cloning/agreement_pct"
METRIC_ENTROPY = "policy/entropy"
METRIC_LOSS = "policy/loss"
METRIC_WALL = "time/wall_s"
METRIC_ROLLOUTS = "rollouts/done"


class _Training:
    """What the stages of one :func:`train_regalloc` run share.

    The prepared modules (shared with the pool's workers) and their draws (one generator
    in the driver, so a seed gives the same draws and the same per-rollout seeds whatever
    the pool), the pool, the recorded observations for the export check, the metrics and
    the log.
    """

    def __init__(
        self,
        modules: list[TrainingModule],
        config: RegallocTrainConfig,
        pool: RolloutPool,
        settings: RolloutSettings,
        work: Path,
        log: Log | None,
        metrics: TrainingMetrics | None,
    ) -> None:
        self.modules = modules
        self.shared = {m.optimized: pool.share(m.optimized) for m in modules}
        self.module_of = {self.shared[m.optimized].path: m for m in modules}
        self.config = config
        self.pool = pool
        self.settings = settings
        self.work = work
        self.log = log
        self.metrics = metrics
        self.rng = np.random.default_rng(config.seed)
        self.samples: list[dict[str, Any]] = []  # for the export check
        self.new_samples = 0  # of those, recorded since the last checkpoint
        # (module, function) where the policy ran out of decisions, for the metrics.
        self.capped: set[tuple[str, str]] = set()
        self.rollouts = 0
        self.elapsed_s = 0.0  # the wall time of the earlier segments of a resumed run
        self.start = time.perf_counter()
        self.history: list[dict[str, float]] = []  # the metrics' scalars, for checkpoints

    def wall(self) -> float:
        """Seconds of training so far, the earlier segments of a resumed run included."""
        return self.elapsed_s + time.perf_counter() - self.start

    def see(self, samples: Iterable[dict[str, Any]]) -> None:
        """Keeps recorded observations for the export check."""
        before = len(self.samples)
        self.samples.extend(samples)
        self.new_samples += len(self.samples) - before

    def record(self, step: int, values: dict[str, float]) -> None:
        """The scalars of a step, to the metrics and the checkpoints' history."""
        self.history.append({"step": float(step), **{k: float(v) for k, v in values.items()}})
        if self.metrics is not None:
            self.metrics.record(step, values)

    def description(self, stage: str) -> str | None:
        """The progress display's name of a stage's rollouts (none without a log)."""
        return f"mlbridge train regalloc: {stage}" if self.log is not None else None

    def draw(self, n: int, *, spilling: bool = False) -> list[TrainingModule]:
        """``n`` modules drawn without replacement.

        With ``spilling``, among those where the basic policy spills (if any does).
        """
        pool = list(self.modules)
        if spilling and any(m.basic_cost > 0 for m in pool):
            pool = [m for m in pool if m.basic_cost > 0]
        if n >= len(pool):
            return list(pool)
        return [pool[i] for i in sorted(self.rng.choice(len(pool), size=n, replace=False))]

    def task(self, module: TrainingModule, seed: int, sampling_seed: int | None) -> RolloutTask:
        """The rollout of ``module`` with ``seed``: its function sample is drawn here.

        The seed draws the recorded decisions and, in a module with more than
        ``sample_functions`` functions, the functions the policy allocates.
        """
        sample = sample_functions(
            module.basic, self.config.sample_functions, _function_sample_seed(seed)
        )
        return RolloutTask(
            self.shared[module.optimized],
            seed,
            tuple(sample) if sample is not None else None,
            sampling_seed,
        )

    def rollouts_of(
        self, agent: RolloutAgent, tasks: Sequence[RolloutTask], stage: str
    ) -> list[Rollout]:
        """Runs ``tasks`` on the pool with ``agent`` answering; results in task order."""
        fn = functools.partial(_allocation_rollout, agent=agent, settings=self.settings)
        self.rollouts += len(tasks)
        runs = [r.value for r in self.pool.map(fn, tasks, description=self.description(stage))]
        for r in runs:
            source = str(self.module_of[r.module].source)
            if r.capped is not None and (source, r.capped) not in self.capped:
                self.capped.add((source, r.capped))
                _log(
                    f"{source}: the policy ran out of its {self.config.max_decisions} "
                    f"decisions in {r.capped}; the basic policy finished the rollout and "
                    "that function is left out of it",
                    self.log,
                )
        return runs


def _function_sample_seed(seed: int) -> int:
    """The seed of a rollout's function sample: apart from its decision draws' stream."""
    return int(np.random.SeedSequence([seed, 1]).generate_state(1)[0])


def _prepare(
    sources: Sequence[Path],
    config: RegallocTrainConfig,
    pool: RolloutPool,
    settings: RolloutSettings,
    work: Path,
    log: Log | None,
) -> list[TrainingModule]:
    """``opt-22 -O2`` of every module and the basic policy's costs, one rollout each."""
    t0 = time.perf_counter()
    (work / "opt").mkdir(parents=True, exist_ok=True)
    fn = functools.partial(_prepare_rollout, settings=settings)
    done = pool.map(
        fn,
        [pool.share(s) for s in sources],
        description="mlbridge train regalloc: preparation" if log is not None else None,
        unit="module",
    )
    modules = []
    for i, (source, prepared) in enumerate(zip(sources, done, strict=True)):
        data, costs = prepared.value
        out = work / "opt" / f"{i:04d}-{source.stem}.bc"
        out.write_bytes(data)
        modules.append(TrainingModule(source, out, costs))
    _log(
        f"prepared {len(modules)} training modules (opt-22 -O2, the basic policy's costs: "
        f"SpillReloadCost {sum(m.basic_cost for m in modules):.0f}) in "
        f"{time.perf_counter() - t0:.0f} s",
        log,
    )
    size = config.sample_functions
    large = [m for m in modules if size is not None and len(m.basic) > size]
    if large:
        _log(
            f"{len(large)} of {len(modules)} modules have more than {size} functions (the "
            f"most: {max(len(m.basic) for m in large)}): sampled, each rollout lets the "
            f"policy allocate {size} of them and llc's built-in basic policy the rest",
            log,
        )
    return modules


def baseline_name(split: bool) -> str:
    """The name of :func:`baseline_options`' policy, for messages."""
    return "split policy" if split else "basic policy"


def _recorded(runs: Sequence[Rollout]) -> tuple[list[dict[str, Any]], list[int]]:
    """The recorded observations of ``runs`` and their actions, in order."""
    samples: list[dict[str, Any]] = []
    actions: list[int] = []
    for r in runs:
        for name in r.observations:
            samples.extend(r.observations[name])
            actions.extend(r.actions[name])
    return samples, actions


def _clone(training: _Training, policy: Any) -> dict[str, Any]:
    """Records the teacher's decisions (rollouts on the pool) and trains ``policy``.

    The teacher is :func:`teacher_policy`: the basic policy, or the split policy. Then
    ``dagger_rounds`` rounds of DAgger: the policy allocates, the teacher labels.
    """
    import torch

    from mlbridge.regalloc.gnn import collate

    config, rng, log = training.config, training.rng, training.log
    teacher = baseline_name(config.split)
    t0 = time.perf_counter()
    chosen = training.draw(config.bc_modules)
    tasks = [training.task(m, int(rng.integers(2**63)), None) for m in chosen]
    runs = training.rollouts_of(RolloutAgent("basic"), tasks, "collection")
    samples, actions = _recorded(runs)
    capped = sum(r.capped is not None for r in runs)
    if not samples:
        raise RegallocTrainError(
            f"no decision recorded on {len(chosen)} modules (do their functions allocate "
            "nothing, or each ask more than --max-decisions?)"
        )
    training.see(samples)
    collected = time.perf_counter() - t0
    order = rng.permutation(len(samples))
    n_valid = max(1, len(samples) // 10)
    valid, train = order[:n_valid], order[n_valid:] if len(samples) > 1 else order
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.bc_learning_rate)

    def agreement_on(indices: np.ndarray) -> float:
        agree = 0
        for k in range(0, len(indices), 256):
            part = indices[k : k + 256]
            batch = collate([samples[i] for i in part], [actions[i] for i in part])
            got = policy.batch_actions(batch).numpy()
            agree += int((got == np.array([actions[i] for i in part])).sum())
        return agree / max(1, len(indices))

    def fit(epochs: int, stage: str) -> list[dict[str, Any]]:
        records = []
        for epoch in range(epochs):
            policy.train()
            rng.shuffle(train)
            losses = []
            for k in range(0, len(train), config.batch_size):
                part = train[k : k + config.batch_size]
                batch = collate([samples[i] for i in part], [actions[i] for i in part])
                logp, _ = policy.batch_log_probs(batch)
                loss = -logp.mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(float(loss.detach()))
            policy.eval()
            record = {
                "epoch": epoch + 1,
                "loss": float(np.mean(losses)) if losses else 0.0,
                "agreement_validation": agreement_on(valid),
            }
            records.append(record)
            _log(
                f"{stage} epoch {epoch + 1}/{epochs}: loss {record['loss']:.3f}, deterministic "
                f"policy = {teacher} on {record['agreement_validation'] * 100:.1f}% of "
                f"{len(valid)} held-aside decisions",
                log,
            )
        return records

    epochs = fit(config.bc_epochs, "cloning")
    dagger = []
    for k in range(config.dagger_rounds):
        t1 = time.perf_counter()
        stage = f"DAgger round {k + 1}/{config.dagger_rounds}"
        drawn = training.draw(config.bc_modules)
        tasks = [training.task(m, int(rng.integers(2**63)), None) for m in drawn]
        learner = RolloutAgent("learner", PolicyWeights.of(policy))
        new_samples, new_actions = _recorded(training.rollouts_of(learner, tasks, stage))
        first = len(samples)
        samples.extend(new_samples)
        actions.extend(new_actions)
        training.see(new_samples)
        new = rng.permutation(np.arange(first, len(samples)))
        # The policy made these decisions itself: its agreement with the teacher's labels
        # is its agreement in the states it reaches, where the cloning's is the teacher's.
        on_policy = agreement_on(new)
        n_new_valid = len(new) // 10
        valid = np.concatenate([valid, new[:n_new_valid]])
        train = np.concatenate([train, new[n_new_valid:]])
        _log(
            f"{stage}: the policy allocated {len(drawn)} modules; in the states it reached "
            f"it agrees with the {teacher} on {on_policy * 100:.1f}% of {len(new)} "
            f"decisions; training on all {len(samples)}",
            log,
        )
        dagger.append(
            {
                "round": k + 1,
                "modules": len(drawn),
                "decisions": len(new),
                "agreement_before": on_policy,
                "epochs": fit(config.dagger_epochs, stage),
                "seconds": time.perf_counter() - t1,
            }
        )
    agents = np.array([int(s["agent"][0]) for s in samples])
    by_agent = {}
    for agent, label in ((0, "priority"), (1, "coloring"), (2, "split")):
        idx = np.flatnonzero(agents == agent)
        if idx.size or agent != 2:
            by_agent[label] = {"decisions": int(idx.size), "agreement": agreement_on(idx)}
    result = {
        "modules": len(chosen),
        "rollouts_capped": capped,
        "decisions": len(samples),
        "collection_seconds": collected,
        "epochs": epochs,
        "dagger": dagger,
        "agreement_all": agreement_on(np.arange(len(samples))),
        "agreement_by_agent": by_agent,
        "seconds": time.perf_counter() - t0,
    }
    rounds = f" and {len(dagger)} rounds of DAgger" if dagger else ""
    _log(
        f"behaviour cloning of the {teacher}{rounds} on {len(samples)} decisions of "
        f"{len(chosen)} modules: the deterministic policy agrees on "
        f"{result['agreement_all'] * 100:.1f}% ("
        + ", ".join(f"{k} {v['agreement'] * 100:.1f}%" for k, v in by_agent.items())
        + f"), {result['seconds']:.0f} s",
        log,
    )
    return result


def _advantages(
    runs: Sequence[tuple[TrainingModule, Rollout]],
) -> tuple[list[tuple[float, float, list[dict[str, Any]], list[int]]], dict[str, float]]:
    """Per function: (advantage, decisions / kept, samples, actions), and the totals.

    The totals: the sampled and the basic policy's ``SpillReloadCost``, the functions
    where sampling did better and worse, and the mean relative change over the functions
    that spill under either.
    """
    items = []
    sampled = basic = 0.0
    better = worse = 0
    relative = []
    for module, r in runs:
        for name, n in r.decisions.items():
            cost = r.costs.get(name, FunctionCost()).spill_reload_cost
            base = module.basic.get(name, FunctionCost()).spill_reload_cost
            sampled += cost
            basic += base
            better += cost < base
            worse += cost > base
            advantage = (base - cost) / max(base, cost, 1.0)
            if base > 0 or cost > 0:
                relative.append(-advantage)
            if advantage != 0.0 and r.actions[name]:
                items.append(
                    (advantage, n / len(r.actions[name]), r.observations[name], r.actions[name])
                )
    rms = float(np.sqrt(np.mean([a * a for a, *_ in items]))) if items else 1.0
    items = [(a / max(rms, 1e-8), w, o, x) for a, w, o, x in items]
    return items, {
        "sampled_cost": sampled,
        "basic_cost": basic,
        "functions_better": better,
        "functions_worse": worse,
        # Per function that spills: (sampled - basic) / the larger, averaged.
        "mean_relative_change": float(np.mean(relative)) if relative else 0.0,
    }


def _reinforce_step(
    policy: Any, optimizer: Any, items: Sequence[Any], config: RegallocTrainConfig
) -> tuple[float, float]:
    """One REINFORCE update from ``items`` (see :func:`_advantages`): loss, mean entropy."""
    import torch

    from mlbridge.regalloc.gnn import collate

    samples, actions, weights = [], [], []
    for advantage, scale, observations, acts in items:
        samples.extend(observations)
        actions.extend(acts)
        weights.extend([advantage * scale] * len(acts))
    if not samples:
        return 0.0, 0.0
    policy.train()
    optimizer.zero_grad()
    # Every function's summed log-probability, over batches; one step for the iteration.
    n_functions = len(items)
    total_loss, entropies = 0.0, []
    for k in range(0, len(samples), config.batch_size):
        batch = collate(samples[k : k + config.batch_size], actions[k : k + config.batch_size])
        logp, entropy = policy.batch_log_probs(batch, config.temperature)
        w = torch.tensor(weights[k : k + config.batch_size], dtype=torch.float32)
        loss = -(w * logp).sum() / n_functions - config.entropy * entropy.sum() / len(samples)
        loss.backward()
        total_loss += float(loss.detach())
        entropies.append(entropy.detach())
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    optimizer.step()
    policy.eval()
    return total_loss, float(torch.cat(entropies).mean())


def _fine_tune_step(training: _Training, policy: Any, optimizer: Any, it: int) -> dict[str, Any]:
    """REINFORCE iteration ``it`` (from 0): sampled rollouts on the pool, one update here.

    Every rollout gets its decision seed and its sampling seed drawn here, in the order of
    the tasks, so the rollouts can run anywhere and finish in any order.
    """
    config, rng = training.config, training.rng
    t0 = time.perf_counter()
    policy.eval()
    drawn: list[TrainingModule] = []
    tasks: list[RolloutTask] = []
    for m in training.draw(config.modules_per_iteration, spilling=True):
        for _ in range(config.episodes_per_module):
            sampling_seed = int(rng.integers(2**63))
            tasks.append(training.task(m, int(rng.integers(2**63)), sampling_seed))
            drawn.append(m)
    agent = RolloutAgent("sample", PolicyWeights.of(policy))
    runs = list(zip(drawn, training.rollouts_of(agent, tasks, "sampled rollouts"), strict=True))
    items, totals = _advantages(runs)
    loss, entropy = _reinforce_step(policy, optimizer, items, config)
    for _, r in runs[:2]:  # a few for the export check
        training.see(s for name in r.observations for s in r.observations[name][:4])
    basic_cost = totals["basic_cost"]
    ratio = totals["sampled_cost"] / basic_cost - 1.0 if basic_cost else 0.0
    record = {
        "iteration": it + 1,
        "rollouts": len(runs),
        "decisions": sum(r.total_decisions for _, r in runs),
        **totals,
        "sampled_vs_basic": ratio,
        "functions_with_signal": len(items),
        "loss": loss,
        "entropy": entropy,
        "seconds": time.perf_counter() - t0,
        "elapsed_seconds": training.wall(),
    }
    _log(
        f"iteration {it + 1}/{config.iterations}: sampled SpillReloadCost "
        f"{totals['sampled_cost']:.0f} vs {baseline_name(training.config.split)} "
        f"{basic_cost:.0f} ({ratio * 100:+.1f}%"
        f"; {totals['mean_relative_change'] * 100:+.1f}% per spilling function), "
        f"functions better {totals['functions_better']}, worse "
        f"{totals['functions_worse']}, entropy {entropy:.3f}, {record['seconds']:.0f} s",
        training.log,
    )
    training.record(
        it + 1,
        {
            METRIC_SAMPLED_VS_BASIC: ratio * 100,
            METRIC_RELATIVE: totals["mean_relative_change"] * 100,
            METRIC_ENTROPY: entropy,
            METRIC_LOSS: loss,
            METRIC_WALL: training.wall(),
            METRIC_ROLLOUTS: training.rollouts,
        },
    )
    return record


def _validate(training: _Training, tuned: Any, cloned: Any) -> dict[str, Any]:
    """The deterministic cloned and fine-tuned policies on the same drawn modules.

    Each policy is exported to ONNX here; its file reaches the workers as the modules do,
    and each rollout allocates one module with one model in-process.
    """
    t0 = time.perf_counter()
    chosen = training.draw(training.config.validation_modules)
    models = []
    for policy, label in ((tuned, "tuned"), (cloned, "cloned")):
        folder = Path(tempfile.mkdtemp(prefix=f"validate-{label}-", dir=training.work))
        models.append(training.pool.share(policy.to_onnx(folder / "agent.onnx")))
    tasks = [(training.shared[m.optimized], model) for model in models for m in chosen]
    fn = functools.partial(_model_cost_rollout, settings=training.settings)
    training.rollouts += len(tasks)
    costs = [
        r.value
        for r in training.pool.map(fn, tasks, description=training.description("validation"))
    ]
    cost_tuned = float(sum(costs[: len(chosen)]))
    cost_cloned = float(sum(costs[len(chosen) :]))
    basic = sum(m.basic_cost for m in chosen)
    keep = "fine-tuned" if cost_tuned <= cost_cloned else "cloned"
    record = {
        "modules": len(chosen),
        "spill_reload_cost_basic_policy": basic,
        "spill_reload_cost_cloned": cost_cloned,
        "spill_reload_cost_fine_tuned": cost_tuned,
        "kept": keep,
        "seconds": time.perf_counter() - t0,
    }
    _log(
        f"validation on {len(chosen)} training modules: SpillReloadCost "
        f"{baseline_name(training.config.split)} "
        f"{basic:.0f}, cloned {cost_cloned:.0f}, fine-tuned {cost_tuned:.0f}: keeping the "
        f"{keep} policy",
        training.log,
    )
    return record


# -- checkpoints --------------------------------------------------------------------------

#: The features of a recorded observation (:func:`~mlbridge.regalloc.gnn.compact_observation`)
#: with one row per sample, and those with a variable number of rows.
_FIXED_FEATURES = ("agent", "node")
_RAGGED_FEATURES = ("node_features", "register_features", "block_features", MASK)


def _pack_samples(samples: Sequence[Mapping[str, Any]]) -> str | None:
    """Recorded observations as base64 of a compressed ``.npz``, or ``None`` if none.

    Each ragged feature is stored concatenated with its row counts; an edge list shared by
    consecutive samples of a function (:func:`~mlbridge.regalloc.gnn.compact_observation`)
    is stored once.
    """
    if not samples:
        return None
    arrays: dict[str, np.ndarray] = {}
    for name in _FIXED_FEATURES:
        arrays[name] = np.concatenate([np.asarray(s[name]).reshape(1) for s in samples])
    for name in _RAGGED_FEATURES:
        parts = [np.asarray(s[name]) for s in samples]
        arrays[name] = np.concatenate(parts)
        arrays[f"{name}.rows"] = np.array([p.shape[0] for p in parts], dtype=np.int64)
    arrays["function_name"] = np.array([str(s["function_name"][0]) for s in samples])
    edge_lists: list[np.ndarray] = []
    which = []
    for s in samples:
        if not edge_lists or s["edges"] is not edge_lists[-1]:
            edge_lists.append(s["edges"])
        which.append(len(edge_lists) - 1)
    arrays["edges"] = np.concatenate(edge_lists)
    arrays["edges.rows"] = np.array([e.shape[0] for e in edge_lists], dtype=np.int64)
    arrays["edges.of"] = np.array(which, dtype=np.int64)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _split(array: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    return np.split(array, np.cumsum(rows)[:-1]) if len(rows) else []


def _unpack_samples(text: str | None) -> list[dict[str, Any]]:
    if text is None:
        return []
    with np.load(io.BytesIO(base64.b64decode(text))) as data:
        a = {name: data[name] for name in data.files}
    if "block_features" not in a:  # a checkpoint from before the split agent: none
        a["block_features"] = np.zeros((0, len(BLOCK_FEATURES)), np.float32)
        a["block_features.rows"] = np.zeros(len(a["agent"]), np.int64)
    ragged = {name: _split(a[name], a[f"{name}.rows"]) for name in _RAGGED_FEATURES}
    edges = _split(a["edges"], a["edges.rows"])
    return [
        {
            **{name: a[name][i : i + 1].copy() for name in _FIXED_FEATURES},
            **{name: ragged[name][i].copy() for name in _RAGGED_FEATURES},
            "edges": edges[int(a["edges.of"][i])],
            "function_name": np.array([str(a["function_name"][i])], dtype=object),
        }
        for i in range(len(a["agent"]))
    ]


def _fingerprint(modules: Sequence[TrainingModule]) -> list[dict[str, Any]]:
    """The modules' names, SHA-256 and basic-policy costs, which a resumed run must share."""
    return [
        {"name": m.source.name, "sha256": file_digest(m.source), "basic_cost": m.basic_cost}
        for m in modules
    ]


@dataclass
class _Checkpoint:
    """What a resumed run continues from."""

    iteration: int
    policy: Any
    cloned: Any
    optimizer_state: dict[str, Any]
    result: dict[str, Any]
    history: list[dict[str, float]]
    samples: list[dict[str, Any]]
    capped: set[tuple[str, str]]
    rng_state: dict[str, Any]
    elapsed_s: float
    rollouts: int
    path: Path


def _save(
    training: _Training,
    folder: Path,
    iteration: int,
    policy: Any,
    cloned: Any,
    optimizer: Any,
    result: dict[str, Any],
    previous: int | None,
) -> None:
    """Writes the checkpoint of ``iteration``.

    The observations recorded since the ``previous`` checkpoint go into this one (the
    cloning's are most of them); a resume reads the chain.
    """
    new = training.samples[len(training.samples) - training.new_samples :]
    state = {
        "config": asdict(training.config),
        "modules": _fingerprint(training.modules),
        "policy": policy.to_json(),
        "cloned": cloned.to_json(),
        "optimizer": tensors_to_json(optimizer.state_dict()["state"]),
        "result": result,
        "history": training.history,
        "capped": sorted([m, f] for m, f in training.capped),
        "rng": training.rng.bit_generator.state,
        "elapsed_s": training.wall(),
        "rollouts": training.rollouts,
        "samples": {"previous_checkpoint": previous, "new": _pack_samples(new)},
    }
    try:
        save_checkpoint(folder, CHECKPOINT_FORMAT, iteration, state)
    except CheckpointError as e:
        raise RegallocTrainError(str(e)) from e
    training.new_samples = 0


def _load(folder: Path, config: RegallocTrainConfig, modules: list[dict[str, Any]]) -> _Checkpoint:
    from mlbridge.regalloc.gnn import RegallocGNN

    path = latest_checkpoint(folder)
    if path is None:
        raise RegallocTrainError(f"no checkpoint to resume from in {folder}")
    try:
        iteration, state = load_checkpoint(path, CHECKPOINT_FORMAT)
        saved, mine = dict(state["config"]), asdict(config)
        changed = sorted(k for k in mine if k not in _RESUMABLE_CHANGES and saved.get(k) != mine[k])
        if changed:
            diffs = ", ".join(f"{k}={saved.get(k)!r} there, {mine[k]!r} here" for k in changed)
            raise RegallocTrainError(
                f"{path} was taken with other settings ({diffs}): resume with the settings "
                "of the run (only --iterations and --workers may change)"
            )
        if state["modules"] != modules:
            raise RegallocTrainError(
                f"{path} was taken on other modules ({len(state['modules'])} there, "
                f"{len(modules)} here, or their contents or basic-policy costs differ): "
                "resume on the same corpus, selection and tools"
            )
        chunks = [_unpack_samples(state["samples"]["new"])]
        previous = state["samples"]["previous_checkpoint"]
        while previous is not None:
            _, before = load_checkpoint(
                folder / f"iteration-{previous:06d}.json", CHECKPOINT_FORMAT
            )
            chunks.append(_unpack_samples(before["samples"]["new"]))
            previous = before["samples"]["previous_checkpoint"]
        return _Checkpoint(
            iteration=iteration,
            policy=RegallocGNN.from_json(state["policy"], str(path)),
            cloned=RegallocGNN.from_json(state["cloned"], str(path)),
            optimizer_state=tensors_from_json(state["optimizer"]),
            result=dict(state["result"]),
            history=[dict(h) for h in state["history"]],
            samples=[s for chunk in reversed(chunks) for s in chunk],
            capped={(str(m), str(f)) for m, f in state["capped"]},
            rng_state=state["rng"],
            elapsed_s=float(state["elapsed_s"]),
            rollouts=int(state["rollouts"]),
            path=path,
        )
    except CheckpointError as e:
        raise RegallocTrainError(f"{e} (the run resumes from a chain of checkpoints)") from e
    except (KeyError, TypeError, ValueError, MLBridgeError) as e:
        if isinstance(e, RegallocTrainError):
            raise
        raise RegallocTrainError(
            f"{path} is damaged or of another version ({e}); start anew"
        ) from e


def prepare_checkpoints(folder: str | Path, resume: bool, log: Log) -> None:
    """Checks a run's checkpoint folder before the run (cheap: call it before starting Ray).

    To resume, the folder must hold a checkpoint; a new run removes a finished run's
    checkpoints and refuses an unfinished run's.

    Raises:
        RegallocTrainError: Saying what to do (resume, or remove the folder).
    """
    try:
        prepare_checkpoint_folder(folder, CHECKPOINT_FORMAT, resume=resume, say=log)
    except CheckpointError as e:
        raise RegallocTrainError(str(e)) from e


def train_regalloc(
    modules: Sequence[Path],
    config: RegallocTrainConfig | None = None,
    *,
    plugin: str | Path | None = None,
    work: str | Path | None = None,
    log: Log | None = None,
    pool: RolloutPool | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 1,
    resume: bool = False,
    metrics: TrainingMetrics | None = None,
) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    """Trains a :class:`~mlbridge.regalloc.gnn.RegallocGNN` on ``modules``.

    Every compilation is a rollout on ``pool``: the preparation of each module, the
    collection of the basic policy's decisions, the sampled rollouts of each REINFORCE
    iteration (the policy's weights, the module and the rollout's seeds go to the worker,
    which runs llc over the pipe and answers in Python; the recorded observations, actions
    and costs come back) and the validation's runs of the exported models. The gradient
    steps run here. The result is the same given ``config.seed``, the modules and the
    tools, whatever the pool and however the rollouts are spread over its workers.

    Args:
        modules: Training modules (the corpus's bitcode, before optimisation).
        config: Settings (default :class:`RegallocTrainConfig`).
        plugin: The llc plugin (default: the build's); on a Ray cluster every node needs
            it at this path.
        work: A folder for the optimised modules and the exported models (default: a
            temporary one, removed at the end).
        log: Called with one progress line per stage step.
        pool: Where the rollouts run (default: a :class:`LocalRolloutPool` of
            ``config.jobs`` threads, closed at the end; a pool passed in stays open).
        checkpoint_dir: Where to write checkpoints (``None``: none): one after the cloning
            (iteration 0), then every ``checkpoint_every`` iterations and after the last.
        checkpoint_every: See ``checkpoint_dir``.
        resume: Continue from the latest checkpoint in ``checkpoint_dir`` (its settings
            must be this run's, except ``iterations`` and ``jobs``); the result is that of
            a run never interrupted. The modules are prepared again (and must cost what
            they cost then).
        metrics: Gets the scalars of the cloning (step 0) and of every iteration (its
            history is replaced by the checkpoint's on resume).

    Returns:
        The trained policy (in eval mode), the training history (preparation, cloning,
        per iteration, validation; ``pool``: what ran where; ``rollouts``,
        ``wall_seconds``) and recorded observations (for checking the export).

    Raises:
        RegallocTrainError: If a tool fails, nothing can be recorded, a checkpoint cannot
            be written or resumed, or the pool loses every worker.
        MLBridgeError: If a pipe session fails.
    """
    import torch

    from mlbridge.regalloc.gnn import RegallocGNN

    config = config or RegallocTrainConfig()
    if not modules:
        raise ValueError("no training module")
    if config.episodes_per_module < 1 or config.modules_per_iteration < 1:
        raise ValueError("episodes_per_module and modules_per_iteration must be at least 1")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
    if resume and checkpoint_dir is None:
        raise ValueError("resume needs the checkpoint folder (checkpoint_dir)")
    plugin_file = Path(plugin) if plugin is not None else find_llc_plugin()
    settings = RolloutSettings(
        str(plugin_file),
        config.samples_per_function,
        config.max_decisions,
        config.temperature,
        config.timeout,
        config.split,
    )
    # Compilations run in other processes; more torch threads would only compete with them.
    torch.set_num_threads(1)
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None
    own_pool = pool is None
    if pool is None:
        pool = LocalRolloutPool(max(1, config.jobs))
    try:
        if folder is not None:
            prepare_checkpoints(folder, resume, log or (lambda _: None))
        with tempfile.TemporaryDirectory(prefix="mlbridge-train-regalloc-") as tmp:
            work_dir = Path(work) if work is not None else Path(tmp)
            work_dir.mkdir(parents=True, exist_ok=True)
            prepared = _prepare(list(modules), config, pool, settings, work_dir, log)
            training = _Training(prepared, config, pool, settings, work_dir, log, metrics)
            training.rollouts = len(prepared)
            result: dict[str, Any] = {
                "training_modules": len(prepared),
                "basic_policy_spill_reload_cost": sum(m.basic_cost for m in prepared),
                "iterations": [],
            }
            last_saved: int | None = None
            if resume:
                assert folder is not None
                saved = _load(folder, config, _fingerprint(prepared))
                policy, cloned = saved.policy, saved.cloned
                result.update(saved.result)
                result["iterations"] = list(saved.result.get("iterations", []))
                result["resumed_from_iteration"] = saved.iteration
                training.history = saved.history
                if metrics is not None:
                    metrics.history = [dict(h) for h in saved.history]
                training.samples, training.capped = saved.samples, saved.capped
                training.rng.bit_generator.state = saved.rng_state
                training.elapsed_s, training.rollouts = saved.elapsed_s, saved.rollouts
                first = last_saved = saved.iteration
                _log(f"resuming from {saved.path} (iteration {first}/{config.iterations})", log)
            else:
                torch.manual_seed(config.seed)
                policy = RegallocGNN(config.hidden, config.rounds, split=config.split)
                step0: dict[str, float] = {}
                if config.bc_modules > 0:
                    result["cloning"] = _clone(training, policy)
                    step0[METRIC_AGREEMENT] = result["cloning"]["agreement_all"] * 100
                training.record(
                    0, {**step0, METRIC_WALL: training.wall(), METRIC_ROLLOUTS: training.rollouts}
                )
                cloned = copy.deepcopy(policy)
                first = 0
            optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
            if resume:
                optimizer.load_state_dict(
                    {
                        "state": {int(k): v for k, v in saved.optimizer_state.items()},
                        "param_groups": optimizer.state_dict()["param_groups"],
                    }
                )
            elif folder is not None:
                _save(training, folder, 0, policy, cloned, optimizer, result, None)
                last_saved = 0
            iterations: Iterable[int] = range(first, config.iterations)
            if log is not None:
                iterations = track(
                    iterations, description="mlbridge train regalloc: REINFORCE", unit="iteration"
                )
            for it in iterations:
                result["iterations"].append(_fine_tune_step(training, policy, optimizer, it))
                done = it + 1
                if folder is not None and (
                    done % checkpoint_every == 0 or done == config.iterations
                ):
                    _save(training, folder, done, policy, cloned, optimizer, result, last_saved)
                    last_saved = done
            policy.eval()
            if config.iterations > 0 and config.validation_modules > 0:
                result["validation"] = _validate(training, policy, cloned)
                if result["validation"]["kept"] == "cloned":
                    policy = cloned
            result["capped_functions"] = sorted(f"{m}:{f}" for m, f in training.capped)
            result["pool"] = pool.summary()
            result["rollouts"] = training.rollouts
            result["wall_seconds"] = training.wall()
    except RolloutPoolError as e:
        hint = f" (the last checkpoint in {folder} resumes it: --resume)" if folder else ""
        raise RegallocTrainError(f"the training stopped: {e}{hint}") from e
    finally:
        if own_pool:
            pool.close()
    policy.eval()
    policy.metadata.update(
        {
            "trainer": f"mlbridge train regalloc (behaviour cloning of the "
            f"{baseline_name(config.split)}, then REINFORCE with its cost per function as "
            "the baseline)",
            "config": asdict(config),
            "training_modules": len(modules),
        }
    )
    return policy, result, training.samples


# -- held-out evaluation ------------------------------------------------------------------


def heldout_allocators(onnx_path: Path, split: bool = False) -> dict[str, list[str]]:
    """The allocators :func:`evaluate_heldout` compares, as llc options.

    With ``split`` (a model with a split agent) also the split policy, and the model runs
    with ``-mlbridge-regalloc-split``.
    """
    return {
        "greedy": [],
        "LLVM basic": ["-regalloc=basic"],
        "basic policy": _mlbridge(),
        **({"split policy": baseline_options(True)} if split else {}),
        "trained model": _mlbridge(f"-mlbridge-regalloc-model={onnx_path}", *_split_options(split)),
    }


@dataclass
class HeldoutRow:
    """One held-out module under one allocator.

    Attributes:
        project: The corpus project.
        module: The module (corpus id).
        allocator: See :func:`heldout_allocators`.
        spill_reload_cost: Over its functions.
        copy_cost: Over its functions.
        spills: Spill stores, folded ones included.
        reloads: Reloads, folded ones included.
        text_bytes: ``.text`` of its object.
        allocated_bytes: Every section of its object that occupies memory.
        seconds: Wall time of its llc and cost runs.
    """

    project: str
    module: str
    allocator: str
    spill_reload_cost: float
    copy_cost: float
    spills: float
    reloads: float
    text_bytes: int
    seconds: float
    allocated_bytes: int = 0


def evaluate_heldout(
    onnx_path: str | Path,
    modules: Sequence[Any],
    *,
    plugin: str | Path | None = None,
    jobs: int = 2,
    timeout: float = 600.0,
    log: Log | None = None,
    split: bool = False,
) -> list[HeldoutRow]:
    """Costs and ``.text`` of ``modules`` under each of :func:`heldout_allocators`.

    Args:
        onnx_path: The trained model.
        modules: :class:`mlbridge.corpus.ModuleEntry` objects (``.bitcode_path``,
            ``.project``, ``.id``).
        plugin: The llc plugin (default: the build's).
        jobs: Compilations at once.
        timeout: Bound of every tool run.
        log: Progress sink.
        split: The model has a split agent (see :func:`heldout_allocators`).

    Raises:
        RegallocTrainError: If a tool fails.
    """
    plugin_file = Path(plugin) if plugin is not None else find_llc_plugin()
    allocators = heldout_allocators(Path(onnx_path).resolve(), split)
    done = 0

    with tempfile.TemporaryDirectory(prefix="mlbridge-regalloc-eval-") as tmp:

        def one(item: tuple[int, Any]) -> list[HeldoutRow]:
            nonlocal done
            i, entry = item
            folder = Path(tmp) / f"{i:04d}"
            folder.mkdir()
            bc = optimize_module(entry.bitcode_path, folder / f"{i:04d}.bc", timeout)
            rows = []
            for name, options in allocators.items():
                t0 = time.perf_counter()
                costs, sizes = allocate(
                    bc, plugin_file, options, folder, text_bytes=True, timeout=timeout
                )
                assert sizes is not None
                rows.append(
                    HeldoutRow(
                        entry.project,
                        entry.id,
                        name,
                        sum(c.spill_reload_cost for c in costs.values()),
                        sum(c.copy_cost for c in costs.values()),
                        sum(c.spills + c.folded_spills for c in costs.values()),
                        sum(c.reloads + c.folded_reloads for c in costs.values()),
                        sizes.text,
                        time.perf_counter() - t0,
                        sizes.allocated,
                    )
                )
            done += 1
            by = {r.allocator: r for r in rows}
            _log(
                f"held-out {done}/{len(modules)} {entry.id}: SpillReloadCost basic policy "
                f"{by['basic policy'].spill_reload_cost:.0f}, trained model "
                f"{by['trained model'].spill_reload_cost:.0f}, greedy "
                f"{by['greedy'].spill_reload_cost:.0f}",
                log,
            )
            return rows

        with ThreadPoolExecutor(max(1, jobs)) as ex:
            results: Iterable[list[HeldoutRow]] = ex.map(one, enumerate(modules))
            if log is not None:
                results = track(
                    results,
                    total=len(modules),
                    description="mlbridge train regalloc: held-out",
                    unit="module",
                )
            return [row for rows in results for row in rows]


def summarize_heldout(rows: Sequence[HeldoutRow]) -> dict[str, dict[str, dict[str, float]]]:
    """Per project (then ``all``), per allocator: sums of costs and ``.text`` bytes."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    projects = list(dict.fromkeys(r.project for r in rows))
    for project in [*projects, "all"]:
        for r in rows:
            if project not in (r.project, "all"):
                continue
            s = out.setdefault(project, {}).setdefault(
                r.allocator,
                {"modules": 0, "spill_reload_cost": 0.0, "copy_cost": 0.0, "spills": 0.0,
                 "reloads": 0.0, "text_bytes": 0, "allocated_bytes": 0, "seconds": 0.0},
            )  # fmt: skip
            s["modules"] += 1
            for key in ("spill_reload_cost", "copy_cost", "spills", "reloads", "seconds"):
                s[key] += getattr(r, key)
            s["text_bytes"] += r.text_bytes
            s["allocated_bytes"] += r.allocated_bytes
    return out


def heldout_table(summary: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """The summary as a Markdown table (one row per project and allocator).

    Each cost and size beside its change against the basic policy and against greedy;
    sizes are every allocated section of the objects, with ``.text`` beside them.
    """
    lines = [
        "| project | allocator | SpillReloadCost | vs basic policy | vs greedy "
        "| allocated bytes | vs basic policy | vs greedy | .text bytes | vs basic policy "
        "| vs greedy |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def rel(value: float, base: Mapping[str, float], key: str) -> str:
        reference = float(base.get(key, 0.0))
        return f"{(value / reference - 1) * 100:+.1f}%" if reference else "n/a"

    for project, by in summary.items():
        basic, greedy = by.get("basic policy", {}), by.get("greedy", {})
        for name, s in by.items():
            cells = [project, name]
            for key, form in (
                ("spill_reload_cost", "{:.0f}"),
                ("allocated_bytes", "{:.0f}"),
                ("text_bytes", "{:.0f}"),
            ):
                value = float(s.get(key, 0.0))
                cells += [form.format(value), rel(value, basic, key), rel(value, greedy, key)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_metrics(path: str | Path, metrics: dict[str, Any]) -> Path:
    """Writes the training metrics as JSON (with the machine they came from)."""
    path = Path(path)
    machine = {"node": platform.node(), "python": platform.python_version()}
    path.write_text(json.dumps({"machine": machine, **metrics}, indent=2, default=str) + "\n")
    return path


def stderr_log(line: str) -> None:
    """The progress sink of the command line."""
    print(f"mlbridge train regalloc: {line}", file=sys.stderr, flush=True)
