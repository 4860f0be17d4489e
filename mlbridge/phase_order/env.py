"""A Gymnasium environment for phase ordering: ``opt-22`` with ``mlbridge-phase-order``.

Each episode is one compilation of one module: :meth:`PhaseOrderEnv.reset` starts
``opt-22 -passes=mlbridge-phase-order`` with the pipe runner on a fresh private FIFO pair
and returns the pass's first observation; :meth:`PhaseOrderEnv.step` answers one decision
(``0..N-1`` applies sub-sequence ``i``, ``N`` stops). The pass reports the module's code
size after each applied step on the outcome channel; the reward of a step is the decrease
it brought (``code_size`` before minus after; 0 for stop). The episode ends when the agent
stops (terminated), when the pass reaches its step limit (truncated) or when the compiler
exits.

N is learnt from the pass: the ``action_count`` feature of the first observation (the
environment runs the pass once at construction to read it and the observation's length),
never from a Python copy of the pass's action set.

Every wait is bounded; the compiler is reaped and the FIFOs removed on :meth:`reset`,
:meth:`close`, and any error.

It is phase ordering's environment, so it lives in the problem's package and needs the
``gym`` extra (Gymnasium); the generic parts it is built on (:class:`CompilerSession`)
are in :mod:`mlbridge.gym`, which never imports a problem.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from mlbridge.compiler.fifo import FifoChannel
from mlbridge.compiler.pipe import DEFAULT_CONNECT_TIMEOUT, Observation
from mlbridge.gym.env import CompilationError, CompilerSession
from mlbridge.phase_order.command import (
    ACTION_COUNT,
    ACTION_HISTORY,
    CODE_SIZE,
    FEATURES,
    OBSERVATION,
    STEP,
    TraceStep,
    parse_pipeline,
    parse_trace,
    phase_order_command,
)

__all__ = ["PHASE_ORDER_ENV_ID", "EpisodeSummary", "PhaseOrderEnv", "register"]

#: The id :func:`register` gives :class:`PhaseOrderEnv`.
PHASE_ORDER_ENV_ID = "mlbridge/PhaseOrder-v0"

Array = np.ndarray[Any, np.dtype[Any]]


@dataclass
class EpisodeSummary:
    """A finished episode, as :meth:`PhaseOrderEnv.step` reports it in ``info["episode"]``.

    Attributes:
        module: The module compiled.
        actions: The actions answered, in order (the stop action included).
        initial_size: The code-size estimate of the first observation.
        final_size: The code-size estimate after the last applied step.
        output: The optimised module (bitcode), valid until the next reset.
        trace: The pass's trace lines (``-mlbridge-phase-order-trace``).
        stderr: What opt wrote on standard error.
        pipeline: The applied sub-sequences as one pipeline (the trace's last line):
            ``opt-22 -passes=<pipeline>`` makes :attr:`output`'s module of :attr:`module`
            in one run; ``""`` if none was applied.
    """

    module: Path
    actions: list[int]
    initial_size: int
    final_size: int
    output: Path
    trace: list[TraceStep] = field(default_factory=list)
    stderr: str = ""
    pipeline: str = ""


class PhaseOrderEnv(gymnasium.Env[dict[str, Array], int]):
    """Phase ordering of one module per episode, through ``mlbridge-phase-order``.

    Args:
        modules: The modules (bitcode or textual IR) episodes draw from: uniformly with
            the environment's seeded generator, or the one ``reset(options={"module": m})``
            names.
        plugin: The opt plugin (default: the build's, :func:`mlbridge.phase_order.find_plugin`).
        max_steps: The pass's step limit (``-mlbridge-phase-order-max-steps``).
        observation: ``counts`` or ``ir2vec`` (``-mlbridge-phase-order-observation``).
        ir2vec_vocab: The vocabulary for ``ir2vec`` (a path or a registered model name).
        actions: A file of sub-sequences (``-mlbridge-phase-order-actions``); default the
            pass's built-in set.
        serdes: The pipe SerDes.
        opt: The opt to run (default: LLVM 22's).
        timeout: Bound of each read and write on the FIFOs, seconds (also the pass's
            ``timeout-ms``, so that neither side waits forever for the other).
        connect_timeout: Bound of the wait for opt to open the FIFOs.
        exit_timeout: Bound of the wait for opt to exit after the session.
        workdir_parent: Where to make the private folder (default: the temporary folder).

    Observations are dicts with the pass's features (``observation`` float32 [D], ``step``,
    ``code_size``, ``action_count`` int64 [1], ``action_history`` float32 [N]: how often
    each sub-sequence has been applied so far); actions are ``Discrete(N + 1)``.
    ``info`` holds ``module`` and, at the end of an episode, ``episode``
    (an :class:`EpisodeSummary`).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        modules: Sequence[str | Path],
        *,
        plugin: str | Path | None = None,
        max_steps: int = 15,
        observation: str = "counts",
        ir2vec_vocab: str | Path | None = None,
        actions: str | Path | None = None,
        serdes: str = "bitstream",
        opt: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        exit_timeout: float = 120.0,
        workdir_parent: str | Path | None = None,
    ) -> None:
        super().__init__()
        if not modules:
            raise ValueError("PhaseOrderEnv needs at least one module")
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.modules = [Path(m) for m in modules]
        missing = [str(m) for m in self.modules if not m.is_file()]
        if missing:
            raise FileNotFoundError(f"no such module(s): {', '.join(missing[:5])}")
        self.max_steps = max_steps
        self.serdes = serdes
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.exit_timeout = exit_timeout
        self._options: dict[str, Any] = {
            "plugin": plugin,
            "opt": opt,
            "runner": "pipe",
            "channel": "{base}",
            "serdes": serdes,
            "timeout_ms": int(timeout * 1000),
            "max_steps": max_steps,
            "observation": observation,
            "ir2vec_vocab": ir2vec_vocab,
            "actions": actions,
            "trace": True,
        }
        if workdir_parent is not None:
            Path(workdir_parent).mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix="mlbridge-phase-order-", dir=workdir_parent))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.workdir, True)
        self._run: CompilerSession | None = None
        self._run_stop: weakref.finalize[Any, Any] | None = None
        self._last: Observation | None = None
        self._module: Path | None = None
        self._actions: list[int] = []
        self._initial_size = 0
        self._size = 0
        #: Episodes started so far.
        self.episodes = 0
        try:
            first = self._probe()
        except BaseException:
            self.close()
            raise
        #: N, the number of sub-sequences (the stop action is N).
        self.n_actions = int(first[ACTION_COUNT][0])
        if self.n_actions < 1:
            self.close()
            raise CompilationError(f"the pass reports {self.n_actions} actions")
        #: D, the observation's length.
        self.observation_dim = int(first[OBSERVATION].size)
        self.observation_space = self._spaces(self.observation_dim, self.n_actions)
        self.action_space = spaces.Discrete(self.n_actions + 1)

    def _spaces(self, dim: int, n_actions: int) -> spaces.Dict:
        # Finite bounds (the largest float32 and int64): Gymnasium's checker refuses
        # infinite ones.
        big = float(np.finfo(np.float32).max)
        top = int(np.iinfo(np.int64).max)
        return spaces.Dict(
            OrderedDict(
                [
                    (OBSERVATION, spaces.Box(-big, big, shape=(dim,), dtype=np.float32)),
                    (STEP, spaces.Box(0, self.max_steps, shape=(1,), dtype=np.int64)),
                    (CODE_SIZE, spaces.Box(0, top, shape=(1,), dtype=np.int64)),
                    (ACTION_COUNT, spaces.Box(0, top, shape=(1,), dtype=np.int64)),
                    (
                        ACTION_HISTORY,
                        spaces.Box(0, self.max_steps, shape=(n_actions,), dtype=np.float32),
                    ),
                ]
            )
        )

    @property
    def stop_action(self) -> int:
        """The action that ends the episode (N)."""
        return self.n_actions

    @property
    def output_path(self) -> Path:
        """Where opt writes the optimised module (the last episode's until the next reset)."""
        return self.workdir / "output.bc"

    # -- the compiler -----------------------------------------------------------------

    def _start(self, module: Path) -> CompilerSession:
        self._end()
        self.output_path.unlink(missing_ok=True)
        argv = phase_order_command(module, self.output_path, **self._options)
        channel = FifoChannel(parent=self.workdir)
        try:
            # The pass's runner ends every session with an end record: require it, so
            # that a crash of opt is an error rather than a quiet end.
            run = CompilerSession(
                [a.replace("{base}", str(channel.base)) for a in argv],
                channel,
                self.workdir,
                self.serdes,
                self.timeout,
                self.connect_timeout,
                require_end=True,
            )
        except BaseException:
            channel.close()
            raise
        self._run = run
        # Reap opt even if the environment is dropped without close().
        self._run_stop = weakref.finalize(self, CompilerSession.stop, run.proc, run.ci, channel)
        run.ci.connect(run.abort_if_exited)
        return run

    def _end(self) -> None:
        stop, self._run_stop, self._run = self._run_stop, None, None
        if stop is not None:
            stop()

    def _probe(self) -> Observation:
        """Runs the pass on the first module until its first observation, then stops it."""
        run = self._start(self.modules[0])
        try:
            obs = run.ci.evaluate()
            if obs is None:
                raise CompilationError(
                    f"the pass asked for no decision on {self.modules[0]}: {run.stderr()[-2000:]}"
                )
            missing = [n for n in FEATURES if n not in obs]
            if missing:
                raise CompilationError(
                    f"the pass's observation lacks {missing} (it has {list(obs)}): is the "
                    "plugin a version of mlbridge-phase-order this environment knows?"
                )
            run.ci.respond(int(obs[ACTION_COUNT][0]))
            return obs
        finally:
            self._end()

    def _convert(self, obs: Observation) -> dict[str, Array]:
        out = {}
        for name in FEATURES:
            space = self.observation_space[name]
            out[name] = np.array(obs[name], dtype=space.dtype).reshape(space.shape)
        return out

    # -- the Gymnasium API ------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Array], dict[str, Any]]:
        """Stops any running compilation, starts opt on a module, returns its observation.

        ``options={"module": path}`` picks the module; otherwise one of ``modules`` is
        drawn with the environment's generator (seeded by ``seed``).
        """
        super().reset(seed=seed)
        if options and options.get("module") is not None:
            module = Path(options["module"])
        else:
            module = self.modules[int(self.np_random.integers(len(self.modules)))]
        self.episodes += 1
        try:
            run = self._start(module)
            obs = run.ci.evaluate()
            if obs is None:
                raise CompilationError(
                    f"the pass asked for no decision on {module}: {run.stderr()[-2000:]}"
                )
        except BaseException:
            self._end()
            raise
        self._module = module
        self._last = obs
        self._actions = []
        self._initial_size = self._size = int(obs[CODE_SIZE][0])
        return self._convert(obs), {"module": str(module)}

    def step(self, action: Any) -> tuple[dict[str, Array], float, bool, bool, dict[str, Any]]:
        """Answers the pass's decision with ``action``; returns the next observation.

        The reward is the code-size decrease the step brought (from the pass's outcome
        message); 0 for the stop action. At the end of the episode the observation is the
        last one again and ``info["episode"]`` is an :class:`EpisodeSummary`.
        """
        if self._run is None or self._last is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        run, last = self._run, self._last
        action = int(action)
        if not 0 <= action <= self.n_actions:
            raise ValueError(f"action {action} is outside 0..{self.n_actions} (N stops)")
        try:
            run.ci.respond(action)
            self._actions.append(action)
            obs = run.ci.evaluate()
            reward = 0.0
            if action != self.n_actions:
                if last.outcome is None:
                    raise CompilationError(
                        f"the pass sent no outcome for step {last.id} of {self._module}: is "
                        "its runner a pipe runner with a score spec (docs/phase-order.md)?"
                    )
                after = int(np.asarray(last.outcome).reshape(-1)[0])
                reward = float(self._size - after)
                self._size = after
            if obs is None:
                return self._finish(last, reward, stopped=action == self.n_actions)
        except BaseException:
            self._end()
            raise
        self._last = obs
        return self._convert(obs), reward, False, False, {"module": str(self._module)}

    def _finish(
        self, last: Observation, reward: float, *, stopped: bool
    ) -> tuple[dict[str, Array], float, bool, bool, dict[str, Any]]:
        run = self._run
        assert run is not None and self._module is not None
        try:
            code = run.wait(self.exit_timeout)
            stderr = run.stderr()
            if code != 0:
                raise CompilationError(f"opt exited with code {code}: {stderr[-2000:]}")
        finally:
            self._end()
            self._last = None
        summary = EpisodeSummary(
            module=self._module,
            actions=list(self._actions),
            initial_size=self._initial_size,
            final_size=self._size,
            output=self.output_path,
            trace=parse_trace(stderr),
            stderr=stderr,
            pipeline=parse_pipeline(stderr) or "",
        )
        # The pass ended the session without a stop: its step limit.
        truncated = not stopped and len(self._actions) >= self.max_steps
        info = {"module": str(self._module), "episode": summary}
        return self._convert(last), reward, not truncated, truncated, info

    def close(self) -> None:
        """Stops any running compilation and removes the private folder (idempotent)."""
        self._end()
        self._finalizer()
        super().close()


def register() -> None:
    """Register :data:`PHASE_ORDER_ENV_ID` with Gymnasium (idempotent).

    ``gymnasium.make("mlbridge/PhaseOrder-v0", modules=[...], plugin=...)`` then makes a
    :class:`PhaseOrderEnv`.
    """
    if PHASE_ORDER_ENV_ID not in gymnasium.registry:
        gymnasium.register(
            id=PHASE_ORDER_ENV_ID,
            entry_point="mlbridge.phase_order.env:PhaseOrderEnv",
            disable_env_checker=True,
        )
