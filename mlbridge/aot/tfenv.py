"""The TensorFlow environment that ``mlbridge aot`` runs ``saved_model_cli`` in.

TensorFlow pins ``protobuf<6`` while mlbridge's own environment uses protobuf 7, so
TensorFlow lives in a virtual environment of its own, used only as a subprocess. It is
found, in this order:

1. ``--tf-python PATH`` (the interpreter of an existing environment);
2. ``$MLBRIDGE_TF_PYTHON``;
3. ``<checkout>/.deps/tf-venv`` (made by ``scripts/setup.sh``);
4. ``<cache>/tf-<version>`` where ``<cache>`` is ``$MLBRIDGE_CACHE_DIR`` or
   ``~/.cache/mlbridge``; created there on first use unless creation is turned off.

Run ``python -m mlbridge.aot.tfenv [DIR]`` to create (or check) one explicitly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mlbridge.errors import MLBridgeError
from mlbridge.paths import find_source_dir

__all__ = [
    "TF_PACKAGES",
    "TF_VERSION",
    "TFEnvironmentError",
    "cache_dir",
    "create_tf_env",
    "default_tf_env_dir",
    "find_tf_python",
    "run_tf_script",
    "tf_subprocess_env",
]

#: The TensorFlow release whose AOT output links with the runtime sources it ships.
TF_VERSION = "2.19.1"

#: What the environment holds, pinned: TensorFlow and the two packages whose versions
#: it is most particular about.
TF_PACKAGES = (f"tensorflow-cpu=={TF_VERSION}", "protobuf==5.29.5", "numpy==2.1.3")

_STAMP = ".mlbridge-tf-env"


class TFEnvironmentError(MLBridgeError):
    """The TensorFlow environment is missing, broken or cannot be created."""


def cache_dir() -> Path:
    """Return mlbridge's cache folder: ``$MLBRIDGE_CACHE_DIR`` or ``~/.cache/mlbridge``."""
    env = os.environ.get("MLBRIDGE_CACHE_DIR")
    if env:
        return Path(env).resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mlbridge"


def default_tf_env_dir() -> Path:
    """Return where a TensorFlow environment is created when none is found."""
    return cache_dir() / f"tf-{TF_VERSION}"


def _stamp_text() -> str:
    return "\n".join(TF_PACKAGES) + "\n"


def _is_ready(env_dir: Path) -> bool:
    stamp = env_dir / _STAMP
    return (
        (env_dir / "bin" / "python").is_file()
        and stamp.is_file()
        and (stamp.read_text(encoding="utf-8") == _stamp_text())
    )


def create_tf_env(env_dir: Path, *, log: bool = True) -> Path:
    """Create (or complete) a TensorFlow environment in ``env_dir``; return its python.

    Idempotent: an environment whose stamp lists the pinned packages is left alone.

    Args:
        env_dir: The folder of the virtual environment.
        log: Whether to report progress on stderr.

    Raises:
        TFEnvironmentError: If ``venv`` or ``pip`` fails (the message has pip's output tail).
    """
    env_dir = Path(env_dir)
    python = env_dir / "bin" / "python"
    if _is_ready(env_dir):
        return python
    if log:
        print(
            f"mlbridge aot: creating the TensorFlow environment {env_dir} "
            f"({', '.join(TF_PACKAGES)}; about 600 MB, a minute or so)",
            file=sys.stderr,
            flush=True,
        )
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    steps = []
    if not python.is_file():
        steps.append([sys.executable, "-m", "venv", str(env_dir)])
    steps.append(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         *TF_PACKAGES]
    )  # fmt: skip
    for argv in steps:
        proc = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace"
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise TFEnvironmentError(
                f"creating the TensorFlow environment {env_dir} failed "
                f"({' '.join(argv[:4])} ... exit status {proc.returncode}):\n{tail}"
            )
    (env_dir / _STAMP).write_text(_stamp_text(), encoding="utf-8")
    return python


def _check_python(python: Path, where: str) -> Path:
    if not python.is_file():
        raise TFEnvironmentError(
            f"{where} {python} does not exist; create a TensorFlow environment with "
            f"`python -m mlbridge.aot.tfenv DIR` (or `scripts/setup.sh` in a checkout) and "
            "pass DIR/bin/python"
        )
    return python


def find_tf_python(tf_python: str | Path | None = None, *, create: bool = True) -> Path:
    """Return the interpreter of the TensorFlow environment to use (see the module doc).

    Args:
        tf_python: An explicit interpreter (``--tf-python``); must exist.
        create: Whether to create the cache environment when no environment is found.

    Raises:
        TFEnvironmentError: If the given interpreter does not exist, or none is found and
            ``create`` is false (the message says the command that creates one), or the
            creation fails.
    """
    if tf_python is not None:
        return _check_python(Path(tf_python), "--tf-python")
    env = os.environ.get("MLBRIDGE_TF_PYTHON")
    if env:
        return _check_python(Path(env), "$MLBRIDGE_TF_PYTHON")
    source = find_source_dir()
    if source is not None:
        checkout_env = source / ".deps" / "tf-venv"
        if _is_ready(checkout_env):
            return checkout_env / "bin" / "python"
    cached = default_tf_env_dir()
    if _is_ready(cached):
        return cached / "bin" / "python"
    if not create:
        raise TFEnvironmentError(
            "no TensorFlow environment found (looked at $MLBRIDGE_TF_PYTHON, "
            f"<checkout>/.deps/tf-venv and {cached}); create one with "
            f"`python -m mlbridge.aot.tfenv {cached}` or pass --tf-python PATH"
        )
    return create_tf_env(cached)


def tf_subprocess_env() -> dict[str, str]:
    """The environment of a TensorFlow subprocess.

    It lacks the main environment's ``PYTHONPATH``/``PYTHONHOME``, and TensorFlow's C++
    logging is quiet.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def run_tf_script(
    script: Path,
    *args: str,
    what: str,
    tf_python: str | Path | None = None,
    timeout: float = 600,
) -> str:
    """Runs ``script`` with the TensorFlow environment's interpreter.

    The script is a file of this package that imports TensorFlow, not mlbridge.

    Returns:
        Its standard output.

    Raises:
        TFEnvironmentError: If no TensorFlow environment can be had.
        RuntimeError: If the script fails or times out, naming ``what`` and its stderr tail.
    """
    python = find_tf_python(tf_python)
    try:
        proc = subprocess.run(
            [str(python), str(script), *args], capture_output=True, text=True,
            errors="replace", env=tf_subprocess_env(), stdin=subprocess.DEVNULL,
            timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
        raise RuntimeError(f"{what} failed:\n{tail}")
    return proc.stdout


def main(argv: list[str] | None = None) -> int:
    """``python -m mlbridge.aot.tfenv [DIR]``: create or check a TensorFlow environment."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: python -m mlbridge.aot.tfenv [DIR]", file=sys.stderr)
        return 2
    target = Path(args[0]) if args else default_tf_env_dir()
    try:
        python = create_tf_env(target)
    except TFEnvironmentError as e:
        print(f"mlbridge: error: {e}", file=sys.stderr)
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
