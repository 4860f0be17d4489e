"""Large modules in register-allocation training: sampled functions and a clean decision cap.

Real llc-22 with the plugin on real corpus modules: a rollout lets the policy allocate
only the sampled functions (llc's built-in basic policy allocates the others, which the
cost pass shows to cost what they cost without any model), the sample is reproducible from
the rollout's seed, the corpus's largest module (left out by the old 3000-instruction
bound) is selected and rolled out, a rollout over the decision cap ends without an
error from llc, and a labelled rollout (DAgger's) allocates with its policy while it records
the labeller's answers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import built_plugin

from mlbridge.corpus import default_corpus_dir, load_manifest
from mlbridge.regalloc.interface import MASK
from mlbridge.regalloc.trainer import (
    allocate,
    optimize_module,
    rollout,
    sample_functions,
    select_modules,
)

#: The instruction bound that used to leave larger modules out.
OLD_MAX_INSTRUCTIONS = 3000


@pytest.fixture(scope="module")
def plugin() -> Path:
    return built_plugin("llc")


@pytest.fixture(scope="module")
def manifest():  # noqa: ANN201 - mlbridge.corpus.Manifest
    return load_manifest(default_corpus_dir())


def _optimized(entry, folder: Path) -> Path:  # noqa: ANN001 - a ModuleEntry
    return optimize_module(entry.bitcode_path, folder / f"{Path(entry.bitcode).stem}.bc")


def _random_legal(seed: int):  # noqa: ANN202 - a policy
    rng = np.random.default_rng(seed)

    def choose(obs) -> int:  # noqa: ANN001 - an observation
        return int(rng.choice(np.flatnonzero(np.asarray(obs[MASK]).reshape(-1))))

    return choose


@pytest.fixture(scope="module")
def several_functions(manifest, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN001, ANN201
    """A small training module with at least 6 functions, optimised, and its basic costs."""
    entry = next(
        e
        for e in manifest.select("train", min_instructions=300, max_instructions=1500)
        if int(e.stats.get("defined_functions", 0)) >= 6
    )
    folder = tmp_path_factory.mktemp("regalloc-sampling")
    module = _optimized(entry, folder)
    basic, _ = allocate(module, built_plugin("llc"), ["-regalloc=mlbridge"], folder)
    assert len(basic) >= 6
    return module, basic


def test_only_the_sampled_functions_are_the_policys_the_rest_cost_as_the_builtin(
    several_functions, plugin: Path, tmp_path: Path
):  # noqa: ANN001
    module, basic = several_functions
    sample = sample_functions(basic, 2, seed=11)
    assert sample is not None and len(sample) == 2 and set(sample) <= set(basic)
    assert sample_functions(basic, 2, seed=11) == sample  # same seed, same sample
    assert sample_functions(basic, len(basic), seed=11) is None  # small: not sampled
    asked: list[str] = []
    random_choice = _random_legal(5)

    def choose(obs) -> int:  # noqa: ANN001 - an observation
        asked.append(str(obs.context))
        return random_choice(obs)

    r = rollout(module, choose, plugin, tmp_path, keep_per_function=4,
                rng=np.random.default_rng(0), model_functions=sample)  # fmt: skip
    assert asked and set(asked) <= set(sample)
    assert set(r.decisions) <= set(sample) and r.capped is None
    # The compiler's cost pass: every unsampled function costs what the built-in policy's
    # allocation of it costs.
    for name in set(basic) - set(sample):
        assert r.costs[name] == basic[name], name
    # The same seeds repeat the rollout exactly.
    again = rollout(module, _random_legal(5), plugin, tmp_path, keep_per_function=4,
                    rng=np.random.default_rng(0), model_functions=sample)  # fmt: skip
    assert again.costs == r.costs and again.decisions == r.decisions


def _legal_end(last: bool):  # noqa: ANN202 - a policy
    def choose(obs) -> int:  # noqa: ANN001 - an observation
        legal = np.flatnonzero(np.asarray(obs[MASK]).reshape(-1))
        return int(legal[-1] if last else legal[0])

    return choose


def test_a_labelled_rollout_allocates_with_its_policy_and_records_the_labels(
    several_functions, plugin: Path, tmp_path: Path
):  # noqa: ANN001
    """DAgger's rollouts: the learner allocates, the teacher's answers are recorded."""
    module, _ = several_functions
    plain = rollout(module, _legal_end(False), plugin, tmp_path, keep_per_function=64,
                    rng=np.random.default_rng(0))  # fmt: skip
    labelled = rollout(module, _legal_end(False), plugin, tmp_path, keep_per_function=64,
                       rng=np.random.default_rng(0), label=_legal_end(True))  # fmt: skip
    assert labelled.costs == plain.costs and labelled.decisions == plain.decisions
    masks = [o[MASK] for f in labelled.observations for o in labelled.observations[f]]
    recorded = [a for f in labelled.actions for a in labelled.actions[f]]
    assert recorded == [int(np.flatnonzero(m)[-1]) for m in masks]
    first = [int(np.flatnonzero(m)[0]) for m in masks]
    assert recorded != first  # some decisions had a choice: the labels are not the actions


def test_a_rollout_over_the_decision_cap_ends_without_an_error(
    several_functions, plugin: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
):  # noqa: ANN001
    module, basic = several_functions
    r = rollout(module, _random_legal(2), plugin, tmp_path, keep_per_function=4,
                rng=np.random.default_rng(0), max_decisions=5)  # fmt: skip
    err = capfd.readouterr().err
    assert "error:" not in err, err
    # The function where the policy ran out is left out; every function was allocated.
    assert r.capped is not None and r.capped not in r.decisions
    assert set(r.costs) == set(basic)


def test_the_largest_module_is_selected_and_rolled_out_with_a_small_sample(
    manifest, plugin: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
):  # noqa: ANN001
    largest = max(manifest.ok_modules(split="train"), key=lambda e: e.stats["instructions"])
    assert largest.stats["instructions"] > OLD_MAX_INSTRUCTIONS
    assert largest.id in {e.id for e in select_modules(manifest, "train")}
    module = _optimized(largest, tmp_path)
    basic, _ = allocate(module, plugin, ["-regalloc=mlbridge"], tmp_path)
    sample = sample_functions(basic, 2, seed=3)
    assert sample is not None
    r = rollout(module, _random_legal(1), plugin, tmp_path, keep_per_function=4,
                rng=np.random.default_rng(0), model_functions=sample,
                max_decisions=400)  # fmt: skip
    assert "error:" not in capfd.readouterr().err
    assert set(r.decisions) <= set(sample) and set(r.costs) == set(basic)
