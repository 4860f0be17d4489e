"""``mlbridge models ...``: list, register, show, locate, remove and check registered models.

The ``models`` entry of :data:`mlbridge.cli.COMMANDS` calls :func:`add_arguments` and
:func:`run`; errors are raised as :class:`mlbridge.errors.CLIError`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from mlbridge.errors import CLIError, MLBridgeError, SpecError
from mlbridge.models.builtin import BuiltinModel
from mlbridge.models.compat import check_compatible
from mlbridge.models.registry import RegisteredModel, Registry, default_registry_dir
from mlbridge.models.specs import MODEL_KINDS
from mlbridge.models.tasks import TASKS, get_task, task_names
from mlbridge.tensor_spec import TensorSpec

__all__ = ["add_arguments", "run"]


def _add_registry_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--registry",
        metavar="DIR",
        help="the registry folder (default: $MLBRIDGE_MODEL_REGISTRY, else "
        "$XDG_DATA_HOME/mlbridge/models, else ~/.local/share/mlbridge/models)",
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``models`` subcommands to ``p``."""
    sub = p.add_subparsers(dest="models_command", metavar="SUBCOMMAND", required=True)

    q = sub.add_parser(
        "list",
        help="list the registered models and the task each answers",
        description="List the registered models: name, kind, task (the pass family it "
        "answers and the option that takes it), inputs, outputs, size.",
    )
    q.add_argument("--json", action="store_true", help="print a JSON array of model.json objects")
    q.add_argument(
        "--task", choices=task_names(), help="only the models of this task (pass family)"
    )
    _add_registry_argument(q)

    q = sub.add_parser(
        "register",
        help="copy a model file into the registry under a name",
        description="Copy FILE (an ONNX model or a TF AOT shared object built by `mlbridge "
        "aot`) into the registry as NAME, with its input and output tensor specs: read from "
        "the ONNX graph, or from the NAME.specs.json sidecar beside the .so (or --specs).",
    )
    q.add_argument("name", metavar="NAME", help="letters, digits, '_', '.', '-'")
    q.add_argument("file", metavar="FILE", help="the .onnx model or the AOT .so")
    q.add_argument(
        "--kind", choices=MODEL_KINDS, help="the model kind (default: from the file name)"
    )
    q.add_argument(
        "--specs", metavar="SPECS.json", help="TF AOT: the specs file (default: the sidecar)"
    )
    q.add_argument("--force", action="store_true", help="replace a model registered as NAME")
    q.add_argument(
        "--native",
        action="store_true",
        help="compile the ONNX model FILE to native code first (mlbridge compile, "
        "docs/native.md) and register the shared object as kind native",
    )
    q.add_argument("--description", metavar="TEXT", help="a description to store with it")
    q.add_argument(
        "--task",
        choices=task_names(),
        help="the pass family the model answers ("
        + "; ".join(f"{t.name}: {t.option}" for t in TASKS)
        + "); default: told from the model's advice name",
    )
    _add_registry_argument(q)

    q = sub.add_parser(
        "path",
        help="print the path of a registered model's file",
        description="Print the absolute path of NAME's model file, e.g. for "
        "-mlbridge-model=$(mlbridge models path NAME).",
    )
    q.add_argument("name", metavar="NAME", help="the registered model's name")
    _add_registry_argument(q)

    q = sub.add_parser("show", help="print a registered model's kind, file and tensor specs")
    q.add_argument("name", metavar="NAME", help="the registered model's name")
    q.add_argument("--json", action="store_true", help="print its model.json object")
    q.add_argument("--verify", action="store_true", help="also check the file's size and SHA-256")
    _add_registry_argument(q)

    q = sub.add_parser("remove", help="remove a registered model and its files")
    q.add_argument("name", metavar="NAME", help="the registered model's name")
    _add_registry_argument(q)

    q = sub.add_parser(
        "install-builtin",
        help="register the models mlbridge ships with (inliner-oz, phase-order-oz, "
        "regalloc-split and their native and TF AOT forms)",
        description="Build the built-in models from their training output (kept in each "
        "problem's package, e.g. mlbridge/inliner/models/) and register them: NAME as "
        "ONNX, NAME-native compiled through MLIR (mlbridge compile; for regalloc-split, "
        "whose graph has control flow, the network's own compiler), and for the inliner "
        "also NAME-aot compiled ahead of time by TensorFlow (needs the TensorFlow "
        "environment; --no-tfaot skips it). Models built from the same training output "
        "(and export code) are kept.",
    )
    q.add_argument(
        "--no-tfaot", action="store_true", help="leave out the TF AOT forms (no TensorFlow)"
    )
    _add_registry_argument(q)

    q = sub.add_parser(
        "check",
        help="check that a registered model fits a compiler's features",
        description="Apply MLGO's versioning rule: every model input must be one of the "
        "features in SPECS.json with the same element type and shape (-1 matches any "
        "size); features the model does not read are fine. Exit status 1 lists every "
        "difference.",
    )
    q.add_argument("name", metavar="NAME", help="the registered model's name")
    q.add_argument(
        "--features",
        metavar="SPECS.json",
        required=True,
        help='a JSON list of tensor specs, or an object with a "features" list (a pipe '
        "header or a .specs.json sidecar)",
    )
    _add_registry_argument(q)


def _registry(args: argparse.Namespace) -> Registry:
    return Registry(args.registry if args.registry else default_registry_dir())


def _size_text(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _spec_text(spec: TensorSpec) -> str:
    return f"{spec.name}:{spec.type.llvm_name}[{','.join(str(d) for d in spec.shape)}]"


def _json_object(model: RegisteredModel) -> dict[str, Any]:
    return {**model.to_dict(), "path": str(model.path)}


def _print_json(value: object) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _run_list(args: argparse.Namespace) -> int:
    registry = _registry(args)
    models = registry.list()
    if args.task:
        models = [m for m in models if m.task == args.task]
    if args.json:
        _print_json([_json_object(m) for m in models])
        return 0
    if not models:
        which = f"no {args.task} models" if args.task else "no models"
        print(f"{which} registered in {registry.root}", file=sys.stderr)
        return 0
    rows = [("NAME", "KIND", "TASK", "OPTION", "INPUTS", "OUTPUTS", "SIZE")]
    for m in models:
        task = get_task(m.task) if m.task else None
        rows.append(
            (m.name, m.kind, m.task or "-", task.usage() if task else "-",
             str(len(m.features)), " ".join(_spec_text(s) for s in m.advice),
             _size_text(m.size))
        )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _register_native(args: argparse.Namespace) -> RegisteredModel:
    import re
    import tempfile

    from mlbridge.native import compile_onnx

    if args.kind not in (None, "native") or args.specs:
        raise CLIError("--native compiles an ONNX model; leave out --kind and --specs")
    with tempfile.TemporaryDirectory(prefix="mlbridge-native-") as tmp:
        name = re.sub(r"\W", "_", args.name)
        name = name if re.match(r"[A-Za-z_]", name) else f"m_{name}"
        so = compile_onnx(Path(args.file), Path(tmp) / f"{name}.so", name=name)
        return _registry(args).register(
            args.name,
            so,
            kind="native",
            force=args.force,
            description=args.description,
            task=args.task,
        )


def _run_register(args: argparse.Namespace) -> int:
    if args.native:
        model = _register_native(args)
    else:
        model = _registry(args).register(
            args.name,
            args.file,
            kind=args.kind,
            specs=args.specs,
            force=args.force,
            description=args.description,
            task=args.task,
        )
    task = get_task(model.task) if model.task else None
    answers = f"task {model.task}, for {task.usage()}" if task else "no task"
    print(
        f"registered {model.name} ({model.kind}, {answers}, "
        f"{_count(len(model.features), 'input')}, {_count(len(model.advice), 'output')}): "
        f"{model.path}"
    )
    if task is None and model.kind != "ir2vec-vocab":
        advice = ", ".join(s.name for s in model.advice) or "none"
        print(
            f"mlbridge models: note: the advice of {model.name!r} ({advice}) names no "
            "mlbridge pass, so it was registered without a task; pass --task to record "
            "which pass it answers",
            file=sys.stderr,
        )
    return 0


def _run_path(args: argparse.Namespace) -> int:
    print(_registry(args).path(args.name))
    return 0


def _run_show(args: argparse.Namespace) -> int:
    registry = _registry(args)
    model = registry.verify(args.name) if args.verify else registry.get(args.name)
    if args.json:
        _print_json(_json_object(model))
        return 0
    print(f"name:        {model.name}")
    print(f"kind:        {model.kind}")
    task = get_task(model.task) if model.task else None
    print(f"task:        {f'{model.task}: {task.title}, {task.usage()}' if task else '-'}")
    print(f"file:        {model.path}")
    print(f"size:        {model.size} bytes")
    print(f"sha256:      {model.sha256}{' (verified)' if args.verify else ''}")
    print(f"registered:  {model.registered_at}")
    if model.description is not None:
        print(f"description: {model.description}")
    for title, specs in (("inputs", model.features), ("outputs", model.advice)):
        print(f"{title} ({len(specs)}):")
        width = max((len(s.name) for s in specs), default=0)
        for s in specs:
            shape = "[" + ",".join(str(d) for d in s.shape) + "]"
            print(f"  {s.name.ljust(width)}  {s.type.llvm_name:<8}  {shape}")
    return 0


def _run_remove(args: argparse.Namespace) -> int:
    registry = _registry(args)
    registry.remove(args.name)
    print(f"removed {args.name} from {registry.root}")
    return 0


def _read_features(path: Path) -> list[TensorSpec]:
    try:
        obj = orjson.loads(path.read_bytes())
    except OSError as e:
        raise CLIError(f"cannot read --features {path}: {e.strerror}") from None
    except orjson.JSONDecodeError as e:
        raise CLIError(f"--features {path} is not valid JSON: {e}") from None
    if isinstance(obj, dict) and "features" in obj:
        obj = obj["features"]
    if not isinstance(obj, list):
        raise CLIError(
            f"--features {path} must be a JSON list of tensor specs or an object with a "
            '"features" list'
        )
    try:
        return [TensorSpec.from_dict(item) for item in obj]
    except SpecError as e:
        raise CLIError(f"--features {path}: {e}") from None


def _run_check(args: argparse.Namespace) -> int:
    features = _read_features(Path(args.features))
    model = _registry(args).get(args.name)
    differences = check_compatible(features, model.features)
    if differences:
        count = len(differences)
        raise CLIError(
            f"model '{model.name}' does not fit the features in {args.features} ({count} "
            f"difference{'s' if count != 1 else ''}):\n"
            + "\n".join(f"  - {d}" for d in differences)
            + "\n  the features are: "
            + " ".join(_spec_text(f) for f in features)
        )
    print(
        f"model '{model.name}' fits the features in {args.features} (it reads "
        f"{len(model.features)} of {len(features)})"
    )
    return 0


def _run_install_builtin(
    args: argparse.Namespace, builtin_models: Callable[[], Sequence[BuiltinModel]] | None
) -> int:
    from mlbridge.models.builtin import ensure_builtin_models

    if builtin_models is None:
        raise CLIError(
            "install-builtin needs the list of built-in models: call "
            "mlbridge.models.cli.run(args, builtin_models=mlbridge.problems.builtin_models)"
        )
    registry = _registry(args)
    for model in ensure_builtin_models(
        builtin_models(), registry, tfaot=not args.no_tfaot, log=True
    ):
        print(f"{model.name}: {model.kind}, task {model.task}, {model.path}")
    return 0


_RUNNERS = {
    "list": _run_list,
    "register": _run_register,
    "path": _run_path,
    "show": _run_show,
    "remove": _run_remove,
    "check": _run_check,
}


def run(
    args: argparse.Namespace,
    *,
    builtin_models: Callable[[], Sequence[BuiltinModel]] | None = None,
) -> int:
    """Run the ``models`` subcommand named by ``args.models_command``.

    Args:
        args: The parsed command line.
        builtin_models: The models ``install-builtin`` registers; the command line passes
            :func:`mlbridge.problems.builtin_models` (this generic layer knows no problem).
    """
    try:
        if args.models_command == "install-builtin":
            return _run_install_builtin(args, builtin_models)
        return _RUNNERS[args.models_command](args)
    except MLBridgeError as e:
        raise CLIError(str(e)) from None
