"""Generate the SavedModels that mlbridge's AOT tests and benchmark compile.

``python test/python/support/aot_testmodels.py OUT_DIR [--tf-python PATH]`` runs
``_tf_testmodels.py`` in the TensorFlow environment; see that file for the models.
Nothing binary is committed: the build and the tests make them with this.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlbridge.aot.tfenv import TFEnvironmentError, run_tf_script

__all__ = ["MODELS", "generate"]

#: The models written, each as ``OUT_DIR/<name>/`` and ``OUT_DIR/<name>.answers.json``.
MODELS = ("mixed", "dense50k")

_SCRIPT = Path(__file__).with_name("_tf_testmodels.py")


def generate(out_dir: str | Path, tf_python: str | Path | None = None) -> Path:
    """Write the test SavedModels and TensorFlow's answers into ``out_dir``; return it.

    Raises:
        TFEnvironmentError: If no TensorFlow environment can be had.
        RuntimeError: If the generator fails (with its stderr tail).
    """
    out = Path(out_dir).resolve()
    run_tf_script(_SCRIPT, str(out), what="generating the test models", tf_python=tf_python)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    p = argparse.ArgumentParser(prog="aot_testmodels.py")
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.add_argument("--tf-python", metavar="PATH")
    args = p.parse_args(argv)
    try:
        generate(args.out_dir, args.tf_python)
    except (TFEnvironmentError, RuntimeError) as e:
        print(f"mlbridge: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
