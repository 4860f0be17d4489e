"""``mlbridge ir2vec vocab``: the command line of :mod:`mlbridge.ir2vec`.

The ``ir2vec`` entry of :data:`mlbridge.cli.COMMANDS` calls :func:`add_arguments` and
:func:`run`; errors are raised as :class:`mlbridge.errors.CLIError`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from mlbridge.errors import CLIError, MLBridgeError
from mlbridge.ir2vec.vocab import TransEConfig, build_vocabulary


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``ir2vec`` subcommands to ``p``."""
    sub = p.add_subparsers(dest="ir2vec_command", metavar="SUBCOMMAND", required=True)
    d = TransEConfig()
    q = sub.add_parser(
        "vocab",
        help="build an IR2Vec vocabulary (llvm-ir2vec triplets, TransE) and register it",
        description=(
            "Run llvm-ir2vec (LLVM 22) in triplet mode over LLVM IR files, learn entity "
            "embeddings with TransE (numpy, seeded) and write the vocabulary JSON that "
            "LLVM's IR2VecVocabAnalysis and -mlbridge-phase-order-ir2vec-vocab read "
            "(docs/phase-order.md). With --register, the vocabulary is kept in the model "
            "registry (kind ir2vec-vocab) so that the pass option can name it."
        ),
    )
    q.add_argument(
        "inputs",
        nargs="*",
        type=Path,
        metavar="INPUT",
        help="*.bc/*.ll files or folders searched for them (default: the corpus's bitcode, "
        "see `mlbridge corpus build`)",
    )
    q.add_argument("-o", "--output", type=Path, help="the vocabulary JSON file to write")
    q.add_argument("--register", metavar="NAME", help="register it in the model registry")
    q.add_argument("--force", action="store_true", help="replace a vocabulary named NAME")
    q.add_argument("--registry", metavar="DIR", help="the registry folder (docs/models.md)")
    q.add_argument("--dim", type=int, default=d.dim, help=f"embedding dimension ({d.dim})")
    q.add_argument("--epochs", type=int, default=d.epochs, help=f"epochs ({d.epochs})")
    q.add_argument("--batch-size", type=int, default=d.batch_size, help=f"({d.batch_size})")
    q.add_argument(
        "--learning-rate", type=float, default=d.learning_rate, help=f"({d.learning_rate})"
    )
    q.add_argument("--margin", type=float, default=d.margin, help=f"({d.margin})")
    q.add_argument("--seed", type=int, default=d.seed, help=f"({d.seed})")
    q.add_argument("--jobs", type=int, default=2, help="llvm-ir2vec processes at a time (2)")
    q.add_argument("--llvm-ir2vec", metavar="PATH", help="the llvm-ir2vec binary")


def _default_inputs() -> list[Path]:
    from mlbridge.corpus.fetch import default_corpus_dir

    bc = default_corpus_dir() / "bc"
    if not bc.is_dir():
        raise CLIError(
            f"no INPUT given and no corpus bitcode in {bc}: name IR files or folders, or "
            "run `mlbridge corpus build` first"
        )
    return [bc]


def _vocab(args: argparse.Namespace) -> int:
    if args.output is None and args.register is None:
        raise CLIError("say where the vocabulary goes: -o FILE, --register NAME, or both")
    config = TransEConfig(
        dim=args.dim,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        margin=args.margin,
        seed=args.seed,
    )
    inputs = args.inputs or _default_inputs()
    with tempfile.TemporaryDirectory(prefix="mlbridge-ir2vec-") as tmp:
        output = args.output or Path(tmp) / f"{args.register}.json"
        result = build_vocabulary(inputs, output, config, tool=args.llvm_ir2vec, jobs=args.jobs)
        summary = (
            f"{result.files} files, {result.triplets} unique triplets of "
            f"{result.total_triplets}, {result.entities} entities, dim {result.dim}, "
            f"{config.epochs} epochs, final loss {result.final_loss:.4f}, "
            f"{result.seconds:.1f} s"
        )
        print(f"mlbridge ir2vec: {summary}", file=sys.stderr)
        if args.output is not None:
            print(f"wrote {result.path} (dim {result.dim})")
        if args.register is not None:
            from mlbridge.models import Registry

            model = Registry(args.registry).register(
                args.register,
                output,
                kind="ir2vec-vocab",
                force=args.force,
                description=f"IR2Vec vocabulary (TransE, seed {config.seed}): {summary}",
            )
            print(f"registered {model.name} (ir2vec-vocab, dim {result.dim}): {model.path}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run ``mlbridge ir2vec SUBCOMMAND``."""
    try:
        return _vocab(args)
    except MLBridgeError as e:
        raise CLIError(str(e)) from None
