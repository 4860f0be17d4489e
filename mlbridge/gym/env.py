"""A Gymnasium environment around a real compiler that asks its model over the pipe protocol.

Each episode is one compilation: :meth:`CompilerEnv.reset` starts the compiler on a fresh
private FIFO pair (``{base}`` in the command) and returns its first observation;
:meth:`CompilerEnv.step` sends one decision and returns the next observation; when the
compiler exits the episode terminates and the reward hook measures the result (e.g. the
output's size). Spaces come from the compiler's header: one ``Box`` per feature in a
``Dict``, and an action space from the advice spec (``Discrete(n)`` when ``n_actions``
is given, as for the inliner's yes/no decision).

Every wait is bounded, and the compiler process is reaped and the FIFOs removed on
:meth:`~CompilerEnv.reset`, :meth:`~CompilerEnv.close`, and any error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import gymnasium
import numpy as np
from gymnasium import spaces

from mlbridge._process import die_with_parent, killed_by_signal
from mlbridge.compiler.fifo import GYM_PREFIX, FifoChannel, remove_stale_channels
from mlbridge.compiler.pipe import DEFAULT_CONNECT_TIMEOUT, Observation, PipeCompilerInterface
from mlbridge.errors import MLBridgeError, PipeClosedError, PipeTimeoutError
from mlbridge.serdes import Header
from mlbridge.tensor_spec import ElementType, TensorSpec

__all__ = [
    "CompilationError",
    "CompilationResult",
    "CompilerEnv",
    "RewardFn",
    "inliner_command",
    "inliner_env",
    "observation_space_for",
]

Array = np.ndarray[Any, np.dtype[Any]]


@dataclass
class CompilationResult:
    """A finished compilation, as a reward hook sees it.

    Attributes:
        argv: The command that ran (placeholders substituted).
        returncode: The compiler's exit status.
        output: The file ``{output}`` stood for (``None`` if the command has none).
        workdir: The environment's private working folder (removed by ``close()``).
        stderr: What the compiler wrote on standard error.
        decisions: The number of decisions answered in the episode.
        contexts: The contexts seen, in order of first appearance.
        header: The compiler's header.
    """

    argv: list[str]
    returncode: int
    output: Path | None
    workdir: Path
    stderr: str
    decisions: int
    contexts: list[str] = field(default_factory=list)
    header: Header | None = None


#: A reward hook: measures a finished compilation.
RewardFn = Callable[[CompilationResult], float]


class CompilationError(MLBridgeError):
    """The compiler failed (non-zero exit, or it exited before connecting)."""


def _feature_space(spec: TensorSpec) -> spaces.Space[Any]:
    if spec.is_dynamic or spec.type is ElementType.STRING:
        raise ValueError(
            f"feature {spec.name!r} ({spec.type.llvm_name} {list(spec.shape)}) has no fixed-size "
            "numeric space: leave it out with features=[...]"
        )
    shape = tuple(spec.shape)
    if spec.type is ElementType.BOOL:
        return spaces.MultiBinary(shape if shape else 1)
    dtype = spec.type.numpy_dtype
    if spec.type.is_integer:
        info = np.iinfo(dtype)
        return spaces.Box(int(info.min), int(info.max), shape=shape, dtype=dtype)
    return spaces.Box(-np.inf, np.inf, shape=shape, dtype=dtype)


def observation_space_for(header: Header, features: Sequence[str] | None = None) -> spaces.Dict:
    """A ``Dict`` space with one ``Box`` (``MultiBinary`` for bool) per feature of ``header``.

    Args:
        header: The compiler's header.
        features: The feature names to keep (default: all, in header order).

    Raises:
        ValueError: For an unknown name, or a feature without a fixed-size numeric space
            (dynamic shape, string).
    """
    by_name = {s.name: s for s in header.features}
    names = list(by_name) if features is None else list(features)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown feature(s) {unknown}; the header has {list(by_name)}")
    # An OrderedDict keeps the header's order (a plain dict would be sorted by name).
    return spaces.Dict(OrderedDict((n, _feature_space(by_name[n])) for n in names))


def _action_space(advice: TensorSpec | None, n_actions: int | None) -> spaces.Space[Any]:
    if advice is None:
        raise ValueError("the compiler's header has no advice spec: nothing to act on")
    if advice.is_dynamic or advice.type is ElementType.STRING:
        raise ValueError(
            f"advice {advice.name!r} ({advice.type.llvm_name} {list(advice.shape)}) has no "
            "fixed-size numeric space"
        )
    if n_actions is not None:
        if not advice.type.is_integer or advice.element_count != 1:
            raise ValueError(
                f"n_actions needs a one-element integer advice; {advice.name!r} is "
                f"{advice.type.llvm_name} {list(advice.shape)}"
            )
        return spaces.Discrete(n_actions)
    return _feature_space(advice)


class CompilerSession:
    """One running compilation: the channel, the process and the model side.

    Shared by :class:`CompilerEnv` and the problems' environments
    (:class:`mlbridge.phase_order.env.PhaseOrderEnv`).
    ``require_end``: the compiler ends every session with an end record (mlbridge's own
    runner does), so a compiler that stops without one is an error, not a quiet end.
    """

    def __init__(
        self,
        argv: list[str],
        channel: FifoChannel,
        workdir: Path,
        serdes: str,
        timeout: float,
        connect_timeout: float,
        capture: str | os.PathLike[str] | BinaryIO | None = None,
        *,
        require_end: bool = False,
    ) -> None:
        self.argv = argv
        self.channel = channel
        self.stderr_path = workdir / "stderr.txt"
        self.contexts: list[str] = []
        with open(workdir / "stdout.txt", "wb") as out, open(self.stderr_path, "wb") as err:
            # The compiler dies with the trainer (stock opt spins on a closed pipe).
            self.proc = subprocess.Popen(
                die_with_parent(argv),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
        self.ci = PipeCompilerInterface(
            channel.base,
            serdes,
            timeout=timeout,
            connect_timeout=connect_timeout,
            capture=capture,
            require_end=require_end,
        )

    def abort_if_exited(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise CompilationError(
                f"the compiler ({self.argv[0]}) exited with code {code} before opening "
                f"{self.channel.in_path}: {self.stderr_tail()}"
            )

    def stderr(self) -> str:
        """Everything the compiler wrote on stderr so far ("" if unreadable)."""
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def stderr_tail(self, limit: int = 2000) -> str:
        return self.stderr()[-limit:].strip()

    def next_observation(self) -> Observation | None:
        obs = self.ci.evaluate()
        if obs is not None and obs.context is not None and obs.context not in self.contexts:
            self.contexts.append(obs.context)
        return obs

    def wait(self, exit_timeout: float) -> int:
        try:
            return self.proc.wait(exit_timeout)
        except subprocess.TimeoutExpired:
            raise PipeTimeoutError(
                f"the compiler ({self.argv[0]}) did not exit within {exit_timeout:g} s after "
                "the session ended"
            ) from None

    @staticmethod
    def stop(proc: subprocess.Popen[bytes], ci: PipeCompilerInterface, ch: FifoChannel) -> None:
        """Close the model side, reap the compiler (terminate, then kill), remove the FIFOs."""
        try:
            ci.close()
        finally:
            try:
                if proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(5.0)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait(30.0)
            finally:
                ch.close()


class CompilerEnv(gymnasium.Env[dict[str, Array], Any]):
    """A compilation as an episode: one step per decision the compiler asks its model for.

    Args:
        command: The compiler command line. ``{base}`` is replaced by the channel base,
            ``{output}`` by a file in the environment's private folder (handed to the reward
            hook), ``{workdir}`` by that folder. E.g. :func:`inliner_command`.
        reward: The reward hook, run on the finished compilation (the reward of the last
            step); ``None`` for a reward of 0. See :mod:`mlbridge.gym.rewards`.
        header: The compiler's header (feature and advice specs). ``None``: the
            environment runs the compiler once to read it (the compilation is stopped at
            its first decision).
        features: The features to observe (default: all in the header).
        n_actions: Make the action space ``Discrete(n_actions)`` (for a one-element
            integer advice, e.g. 2 for the inliner); otherwise a ``Box`` of the advice.
        serdes: The pipe SerDes (``bitstream`` is LLVM's protocol).
        output_name: The file name ``{output}`` stands for.
        timeout: Bound of each read and write on the FIFOs, seconds.
        connect_timeout: Bound of the wait for the compiler to open the FIFOs.
        exit_timeout: Bound of the wait for the compiler to exit after its last decision.
        max_steps: Truncate an episode after this many decisions (the compiler is stopped).
        capture: A folder: each episode's traffic is captured to
            ``<capture>/episode-<n>.bitstream`` (see :mod:`mlbridge.logs`).
        workdir_parent: Where to make the private folder (default: the temporary folder).

    An episode whose compilation asks for no decision at all returns an all-zero
    observation from :meth:`reset` with ``info["finished"] = True``; the next
    :meth:`step` then ends it (its action is ignored).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        command: Sequence[str],
        *,
        reward: RewardFn | None = None,
        header: Header | None = None,
        features: Sequence[str] | None = None,
        n_actions: int | None = None,
        serdes: str = "bitstream",
        output_name: str = "output",
        timeout: float = 60.0,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        exit_timeout: float = 120.0,
        max_steps: int | None = None,
        capture: str | os.PathLike[str] | None = None,
        workdir_parent: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__()
        if not any("{base}" in a for a in command):
            raise ValueError("the command must contain {base} (the channel base)")
        if "/" in output_name or not output_name:
            raise ValueError(f"output_name must be a plain file name, got {output_name!r}")
        self.command = list(command)
        #: The file name ``{output}`` stands for.
        self.output_name = output_name
        self.reward_fn = reward
        self.serdes = serdes
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.exit_timeout = exit_timeout
        self.max_steps = max_steps
        self.capture_dir = Path(capture) if capture is not None else None
        if workdir_parent is not None:
            Path(workdir_parent).mkdir(parents=True, exist_ok=True)
        # The pid in the name lets `mlbridge pipe clean` (and the next environment) sweep
        # the folder of a trainer that was killed.
        remove_stale_channels(workdir_parent, prefix=GYM_PREFIX)
        self.workdir = Path(
            tempfile.mkdtemp(prefix=f"{GYM_PREFIX}{os.getpid()}-", dir=workdir_parent)
        )
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.workdir, True)
        self._episode: CompilerSession | None = None
        self._episode_stop: weakref.finalize[Any, Any] | None = None
        self._last_obs: dict[str, Array] | None = None
        self._done = True
        self._no_decisions = False
        self.episodes = 0
        self.steps = 0
        #: The last finished compilation (``None`` before the first one ends).
        self.last_result: CompilationResult | None = None
        try:
            self.header = header if header is not None else self._probe_header()
            self.feature_names = (
                [s.name for s in self.header.features] if features is None else list(features)
            )
            self.observation_space = observation_space_for(self.header, self.feature_names)
            self.action_space = _action_space(self.header.advice, n_actions)
        except BaseException:
            self.close()
            raise
        self._advice = self.header.advice
        self._specs = {s.name: s for s in self.header.features}

    # -- episodes -----------------------------------------------------------------------

    @property
    def output_path(self) -> Path:
        """The file ``{output}`` stands for (the last episode's output until the next reset)."""
        return self.workdir / self.output_name

    def _argv(self, base: Path) -> list[str]:
        subst = {
            "{base}": str(base),
            "{output}": str(self.output_path),
            "{workdir}": str(self.workdir),
        }
        argv = []
        for a in self.command:
            for k, v in subst.items():
                a = a.replace(k, v)
            argv.append(a)
        return argv

    def _start(self) -> CompilerSession:
        self._end_episode()
        try:
            self.output_path.unlink()
        except FileNotFoundError:
            pass
        channel = FifoChannel(parent=self.workdir)
        capture = None
        if self.capture_dir is not None:
            self.capture_dir.mkdir(parents=True, exist_ok=True)
            capture = self.capture_dir / f"episode-{self.episodes}.{self.serdes}"
        try:
            ep = CompilerSession(
                self._argv(channel.base),
                channel,
                self.workdir,
                self.serdes,
                self.timeout,
                self.connect_timeout,
                capture,
            )
        except BaseException:
            channel.close()
            raise
        self._episode = ep
        # Reap the compiler even if the environment is dropped without close().
        self._episode_stop = weakref.finalize(self, CompilerSession.stop, ep.proc, ep.ci, channel)
        ep.ci.connect(ep.abort_if_exited)
        return ep

    def _end_episode(self) -> None:
        """Stop the running compilation, if any: reap the process, remove the FIFOs."""
        stop, self._episode_stop, self._episode = self._episode_stop, None, None
        if stop is not None:
            stop()
        self._done = True

    def _probe_header(self) -> Header:
        try:
            ep = self._start()
            try:
                ep.next_observation()
            except PipeClosedError:
                pass
            header = ep.ci.header
        finally:
            self._end_episode()
        if header is None:
            raise CompilationError(
                f"the compiler ({self.command[0]}) sent no header: pass header= (e.g. from "
                "mlbridge.logs.read_log(...).header)"
            )
        return header

    def _convert(self, obs: Observation) -> dict[str, Array]:
        out = {}
        for name in self.feature_names:
            space = self.observation_space[name]
            out[name] = np.array(obs[name], dtype=space.dtype).reshape(space.shape)
        return out

    def _zero_observation(self) -> dict[str, Array]:
        return {
            n: np.zeros(s.shape, dtype=s.dtype)
            for n, s in self.observation_space.spaces.items()  # type: ignore[union-attr]
        }

    def _advice_value(self, action: Any) -> Any:
        assert self._advice is not None
        if isinstance(self.action_space, spaces.Discrete):
            return int(action)
        dtype = self._advice.type.numpy_dtype
        return np.asarray(action, dtype=dtype).reshape(self._advice.shape)

    def _finish(self, ep: CompilerSession) -> float:
        """The compiler ended the session: wait for it, measure, end the episode."""
        try:
            code = ep.wait(self.exit_timeout)
            if code < 0:
                raise CompilationError(
                    killed_by_signal(ep.argv[0], code, ep.ci.answered, ep.stderr_tail())
                )
            if code != 0:
                raise CompilationError(
                    f"the compiler ({ep.argv[0]}) exited with code {code}: {ep.stderr_tail()}"
                )
            result = CompilationResult(
                argv=ep.argv,
                returncode=code,
                output=self.output_path if any("{output}" in a for a in self.command) else None,
                workdir=self.workdir,
                stderr=ep.stderr_tail(100_000),
                decisions=ep.ci.answered,
                contexts=list(ep.contexts),
                header=ep.ci.header,
            )
        finally:
            self._end_episode()
        self.last_result = result
        return float(self.reward_fn(result)) if self.reward_fn is not None else 0.0

    def _info(self, obs: Observation | None, **extra: Any) -> dict[str, Any]:
        info: dict[str, Any] = {"step": self.steps}
        if obs is not None:
            info["context"] = obs.context
            info["id"] = obs.id
        info.update(extra)
        return info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Array], dict[str, Any]]:
        """Stop any running compilation, start a new one, return its first observation."""
        super().reset(seed=seed)
        self.episodes += 1
        self.steps = 0
        try:
            ep = self._start()
            obs = ep.next_observation()
        except BaseException:
            self._end_episode()
            raise
        self._done = False
        if obs is None:
            self._no_decisions = True
            self._last_obs = self._zero_observation()
            return self._zero_observation(), self._info(None, finished=True)
        self._no_decisions = False
        self._last_obs = self._convert(obs)
        return self._convert(obs), self._info(obs)

    def step(self, action: Any) -> tuple[dict[str, Array], float, bool, bool, dict[str, Any]]:
        """Send ``action`` as the advice; return the next observation.

        When the compiler finishes, ``terminated`` is true, the observation is the last
        one again, and the reward is the reward hook's measure of the compilation
        (``info["result"]`` is the :class:`CompilationResult`).
        """
        if self._done or self._episode is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        ep = self._episode
        assert self._last_obs is not None
        last = {k: v.copy() for k, v in self._last_obs.items()}
        try:
            if self._no_decisions:
                obs = None
            else:
                ep.ci.respond(self._advice_value(action))
                self.steps += 1
                if self.max_steps is not None and self.steps >= self.max_steps:
                    self._end_episode()
                    return last, 0.0, False, True, self._info(None, truncated=True)
                obs = ep.next_observation()
            if obs is None:
                reward = self._finish(ep)
                return last, reward, True, False, self._info(None, result=self.last_result)
        except BaseException:
            self._end_episode()
            raise
        self._last_obs = self._convert(obs)
        return self._convert(obs), 0.0, False, False, self._info(obs)

    @property
    def compiler_pid(self) -> int | None:
        """The running compiler's process id (``None`` between episodes)."""
        return self._episode.proc.pid if self._episode is not None else None

    @property
    def channel_base(self) -> Path | None:
        """The running episode's channel base (``None`` between episodes)."""
        return self._episode.channel.base if self._episode is not None else None

    def close(self) -> None:
        """Stop any running compilation and remove the private folder (idempotent)."""
        self._end_episode()
        self._finalizer()
        super().close()


def inliner_command(
    module: str | os.PathLike[str],
    *,
    opt: str = "opt-22",
    passes: str = "default<O2>",
    include_default: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """Stock ``opt`` 22 with the ML inliner asking over the pipe, writing textual IR.

    Returns:
        The command template (``{base}`` and ``{output}`` placeholders).
    """
    argv = [
        opt,
        "-S",
        f"-passes={passes}",
        "-enable-ml-inliner=release",
        "-inliner-interactive-channel-base={base}",
    ]
    if include_default:
        argv.append("-inliner-interactive-include-default")
    return [*argv, *extra, str(module), "-o", "{output}"]


def inliner_env(
    module: str | os.PathLike[str],
    *,
    reward: RewardFn | None = None,
    opt: str = "opt-22",
    passes: str = "default<O2>",
    include_default: bool = False,
    **kwargs: Any,
) -> CompilerEnv:
    """A :class:`CompilerEnv` for LLVM's ML inliner on ``module``.

    Actions are ``Discrete(2)`` (0: do not inline, 1: inline); the output IR is at
    ``env.output_path``. The remaining keyword arguments go to :class:`CompilerEnv`.
    """
    kwargs.setdefault("n_actions", 2)
    kwargs.setdefault("output_name", "output.ll")
    return CompilerEnv(
        inliner_command(module, opt=opt, passes=passes, include_default=include_default),
        reward=reward,
        **kwargs,
    )
