"""Real programs built with the ML register allocator behave as with LLVM's greedy one.

Every function of Lua, bzip2 and MuJS is allocated by ``llc-22 -regalloc=mlbridge`` (with
``-verify-machineinstrs``), with the built-in policy and with random policies, also with
the split agent (legality never depends on the model), and with the built-in split policy
(the splits a good policy makes: around the blocks of its uses in hot loops, where the
random policies mostly spill or split around blocks it only lives through), once more with
only the regions whose borders spill placement chose; each program
runs its check
(mlbridge.regalloc.programs) and must give greedy's transcript exactly: the Lua script's
output, bzip2's compressed bytes and exact round trip, the JavaScript's output. So must the
programs built with the built-in trained agents ``regalloc-split``, named as a user names
them (``-mlbridge-regalloc-model=regalloc-split``, from a registry of the test's own).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import built_plugin

from mlbridge.corpus.fetch import default_corpus_dir
from mlbridge.regalloc.programs import (
    PROGRAMS,
    build_program,
    mlbridge_allocator,
    optimize_modules,
    run_program,
)

POLICIES = {
    "basic": ("-mlbridge-regalloc-policy=basic",),
    "random-seed-1": ("-mlbridge-regalloc-policy=random", "-mlbridge-regalloc-seed=1"),
    "random-seed-2": ("-mlbridge-regalloc-policy=random", "-mlbridge-regalloc-seed=2"),
    "random-split-seed-1": (
        "-mlbridge-regalloc-split",
        "-mlbridge-regalloc-policy=random",
        "-mlbridge-regalloc-seed=1",
    ),
    "split": ("-mlbridge-regalloc-split", "-mlbridge-regalloc-policy=split"),
    # Regions with borders placed by spill placement only (the default offers both kinds).
    "split-placed": (
        "-mlbridge-regalloc-split",
        "-mlbridge-regalloc-policy=split",
        "-mlbridge-regalloc-region-borders=placed",
    ),
}


@pytest.fixture(scope="module")
def greedy_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[Path], str]]:
    """Per program: its optimized modules and the transcript of its greedy build."""
    out = {}
    for name, program in PROGRAMS.items():
        work = tmp_path_factory.mktemp(f"regalloc-{name}")
        modules = optimize_modules(program, default_corpus_dir(), work / "opt")
        binary = build_program(program, modules, [], work / "greedy")
        out[name] = (modules, run_program(program, binary))
    return out


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_allocated_by_the_ml_allocator_behaves_as_with_greedy(
    name: str,
    policy: str,
    greedy_builds: dict[str, tuple[list[Path], str]],
    tmp_path: Path,
) -> None:
    program = PROGRAMS[name]
    modules, expected = greedy_builds[name]
    options = mlbridge_allocator(built_plugin("llc"), *POLICIES[policy])
    binary = build_program(program, modules, options, tmp_path / policy)
    assert run_program(program, binary) == expected


@pytest.fixture(scope="module")
def builtin_agents_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A registry holding ``regalloc-split``, the one llc reads (MLBRIDGE_MODEL_REGISTRY)."""
    from mlbridge.models import Registry
    from mlbridge.models.builtin import ensure_builtin_models
    from mlbridge.problems import builtin_model

    root = tmp_path_factory.mktemp("regalloc-registry")
    ensure_builtin_models([builtin_model("regalloc")], Registry(root), tfaot=False)
    before = os.environ.get("MLBRIDGE_MODEL_REGISTRY")
    os.environ["MLBRIDGE_MODEL_REGISTRY"] = str(root)
    try:
        yield root
    finally:
        if before is None:
            del os.environ["MLBRIDGE_MODEL_REGISTRY"]
        else:
            os.environ["MLBRIDGE_MODEL_REGISTRY"] = before


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_allocated_by_the_builtin_trained_agents_behaves_as_with_greedy(
    name: str,
    greedy_builds: dict[str, tuple[list[Path], str]],
    builtin_agents_registry: Path,
    tmp_path: Path,
) -> None:
    program = PROGRAMS[name]
    modules, expected = greedy_builds[name]
    options = mlbridge_allocator(
        built_plugin("llc"),
        "-mlbridge-regalloc-split",
        # A model that fails stops llc (-mlbridge-regalloc-on-model-failure=fail, the
        # default): every function is allocated by the agents.
        "-mlbridge-regalloc-model=regalloc-split",
    )
    binary = build_program(program, modules, options, tmp_path / "regalloc-split")
    assert run_program(program, binary) == expected


def test_lua_check_exercises_what_it_claims(
    greedy_builds: dict[str, tuple[list[Path], str]],
) -> None:
    transcript = greedy_builds["lua"][1]
    for word in ("sorted", "closures", "strings", "coroutines", "metatables", "pcall"):
        assert f"{word}\t" in transcript
    assert "coroutines\t34\t514229" in transcript  # fib(9), fib(29)
