"""The ``mlbridge compile`` command (registered in :data:`mlbridge.cli.COMMANDS`)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from mlbridge.errors import CLIError, MLBridgeError

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the arguments of ``mlbridge compile``."""
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model to compile")
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        required=True,
        help="the shared object to write (model.so), or with --static the archive "
        "(libNAME_native.a); NAME.specs.json is written beside it",
    )
    p.add_argument(
        "--name",
        help="model name, a C identifier (default: from the output file name); with "
        "--static the linked-in functions are mlbridge_aot_NAME_*",
    )
    p.add_argument(
        "--static",
        action="store_true",
        help="write a static library and NAME_mlbridge.h to link into a tool",
    )
    p.add_argument(
        "--dim",
        metavar="SYMBOL=N",
        action="append",
        default=[],
        help="the value of a symbolic dimension of the model's inputs (repeatable); a "
        "symbolic leading dimension the inputs share left without one is a dynamic batch",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", help="list the operators and specs on stderr"
    )


def _default_name(out: Path) -> str:
    stem = out.name.split(".")[0]
    stem = stem[3:] if stem.startswith("lib") else stem
    name = re.sub(r"\W", "_", stem) or "model"
    return name if re.match(r"[A-Za-z_]", name) else f"m_{name}"


def _dims(items: list[str]) -> dict[str, int]:
    dims = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value.isdigit() or int(value) <= 0:
            raise CLIError(f"--dim {item!r}: expected SYMBOL=N with N a positive integer")
        dims[key] = int(value)
    return dims


def run(args: argparse.Namespace) -> int:
    """Run ``mlbridge compile``; errors become :class:`mlbridge.errors.CLIError`."""
    from mlbridge.native.compile import compile_onnx_outputs

    out = Path(args.output)
    name = args.name or _default_name(out)
    try:
        outputs = compile_onnx_outputs(
            Path(args.model), out, name=name, static=args.static, dims=_dims(args.dim)
        )
    except MLBridgeError as e:
        raise CLIError(str(e)) from None
    if args.verbose:
        print(f"operators: {', '.join(outputs.ops)}", file=sys.stderr)
        for spec in outputs.features:
            print(f"input  {spec.name} {spec.type.llvm_name} {list(spec.shape)}", file=sys.stderr)
        for spec in outputs.advice:
            print(f"output {spec.name} {spec.type.llvm_name} {list(spec.shape)}", file=sys.stderr)
    batch = f", dynamic batch '{outputs.batch_symbol}'" if outputs.batch_symbol else ""
    print(
        f"mlbridge compile: {name}: {len(outputs.features)} inputs, {len(outputs.advice)} "
        f"outputs{batch}, in {outputs.seconds:.1f} s",
        file=sys.stderr,
    )
    print(outputs.path)
    return 0
