"""A real C corpus as LLVM 22 bitcode, with a manifest: ``mlbridge corpus build``.

The recipe (``corpus/recipe.json``) pins open-source C projects by registry path and
sha256 and says how to compile each; :func:`fetch_sources` downloads the archives,
:func:`build_corpus` compiles every translation unit with clang-22 at
``-O2 -Xclang -disable-llvm-passes`` (so the inliner still has work to do) and writes a
manifest with per-module statistics read by :mod:`mlbridge.ir`. Projects are split into
``train`` and ``heldout`` by project, never by file. See docs/corpus.md.

Typical use by other tooling::

    from mlbridge.corpus import default_corpus_dir, load_manifest
    manifest = load_manifest(default_corpus_dir())
    for module in manifest.ok_modules(split="heldout"):
        print(module.bitcode_path)
"""

from __future__ import annotations

from mlbridge.corpus.build import BuildReport, build_corpus, find_clang
from mlbridge.corpus.errors import ChecksumError, CorpusError
from mlbridge.corpus.fetch import (
    default_corpus_dir,
    default_sources_dir,
    fetch_sources,
    verify_archive,
)
from mlbridge.corpus.manifest import Manifest, ModuleEntry, load_manifest
from mlbridge.corpus.recipe import SPLITS, Project, Recipe, default_recipe_path, load_recipe

__all__ = [
    "SPLITS",
    "BuildReport",
    "ChecksumError",
    "CorpusError",
    "Manifest",
    "ModuleEntry",
    "Project",
    "Recipe",
    "build_corpus",
    "default_corpus_dir",
    "default_recipe_path",
    "default_sources_dir",
    "fetch_sources",
    "find_clang",
    "load_manifest",
    "load_recipe",
    "verify_archive",
]
