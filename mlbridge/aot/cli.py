"""The ``mlbridge aot`` command (registered in :data:`mlbridge.cli.COMMANDS`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mlbridge.errors import MLBridgeError

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the arguments of ``mlbridge aot``."""
    p.add_argument("saved_model", metavar="SAVED_MODEL", help="the SavedModel folder")
    p.add_argument("--name", required=True, help="model name: a C identifier, names the files")
    p.add_argument("--output-dir", metavar="DIR", default=".", help="where to write (default: .)")
    p.add_argument(
        "--signature", default="serving_default", help="signature key (default: serving_default)"
    )
    p.add_argument("--tag", default="serve", help="meta graph tag set (default: serve)")
    p.add_argument(
        "--target-triple",
        metavar="TRIPLE",
        help="LLVM target triple of the model code (default: this machine); for another "
        "architecture only the header, objects and wrapper source are written",
    )
    p.add_argument(
        "--tf-python", metavar="PATH", help="the interpreter of an existing TensorFlow venv"
    )
    p.add_argument(
        "--no-create-tf-env",
        action="store_true",
        help="fail instead of creating a TensorFlow environment when none is found",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every feature and advice spec of the signature on stderr",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``mlbridge aot``; errors become :class:`mlbridge.errors.CLIError`."""
    from mlbridge.aot.compile import compile_saved_model
    from mlbridge.errors import CLIError

    try:
        outputs = compile_saved_model(
            args.saved_model,
            args.name,
            Path(args.output_dir),
            signature=args.signature,
            tag=args.tag,
            target_triple=args.target_triple,
            tf_python=args.tf_python,
            create_tf_env=not args.no_create_tf_env,
            verbose=args.verbose,
        )
    except MLBridgeError as e:
        raise CLIError(str(e)) from None
    print(outputs.shared_object or outputs.header)
    return 0
