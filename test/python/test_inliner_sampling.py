"""Large modules in inliner training: sampled call sites, not exclusion (real opt-22, corpus).

zstd's module with the most calls to functions it defines (``zstd_compress.c``, about 1000
inlining decisions, far above the 400 that used to leave a module out) is trained on with
a tiny sample; a sampled compilation is reproducible from its seed, and the compiler's own
record of the session (its observations, which carry LLVM's default decision, and the
answers it got) shows that every unsampled decision got the default. The tests build a
corpus of zstd alone (from the archives the set-up fetched), so that the corpus's largest
modules (sqlite3's amalgamation: 15,000 decisions, 20 s a compilation) stay out of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mlbridge.corpus import load_manifest
from mlbridge.inliner.policy import DEFAULT_FEATURE
from mlbridge.inliner.trainer import evaluate_policy, sample_call_sites, stock_text_size
from mlbridge.logs import read_log

#: The old `--max-calls` default: modules above it were left out.
OLD_MAX_CALLS = 400
#: Decisions a policy makes per rollout in these tests: few, so that each stays short.
SAMPLE = 8


def _calls(entry: object) -> int:
    return int(entry.stats.get("calls_to_defined", 0))  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def zstd_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus of zstd alone, built with `mlbridge corpus build` (about 7 s)."""
    folder = tmp_path_factory.mktemp("zstd-corpus")
    argv = [sys.executable, "-m", "mlbridge", "corpus", "build", "--projects", "zstd",
            "--offline", "--output", str(folder)]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder


@pytest.fixture(scope="module")
def largest(zstd_corpus: Path) -> tuple[Path, int]:
    """zstd's module with the most calls to functions it defines, and that count."""
    entry = max(load_manifest(zstd_corpus).ok_modules(split="train"), key=_calls)
    assert _calls(entry) > OLD_MAX_CALLS
    return entry.bitcode_path, _calls(entry)


def _never(observation: object) -> int:
    return 0


def test_same_seed_same_sample_and_another_seed_another():
    first = sample_call_sites(1000, SAMPLE, seed=7)
    assert first is not None and len(first) == SAMPLE and max(first) < 1000
    assert sample_call_sites(1000, SAMPLE, seed=7) == first
    assert sample_call_sites(1000, SAMPLE, seed=8) != first
    # Small modules are not sampled, and sampling can be switched off.
    assert sample_call_sites(SAMPLE, SAMPLE, seed=7) is None
    assert sample_call_sites(1000, None, seed=7) is None


def test_a_sampled_compilation_gives_the_unsampled_sites_the_default_and_repeats(
    largest: tuple[Path, int], tmp_path: Path
):
    module, _ = largest
    decisions = evaluate_policy(lambda obs: int(np.asarray(obs[DEFAULT_FEATURE])[0]), module)[1]
    sample = sample_call_sites(decisions, SAMPLE, seed=3)
    assert sample is not None
    runs = []
    for k in range(2):
        capture = tmp_path / f"session-{k}.bitstream"
        size, asked = evaluate_policy(_never, module, sample=sample, capture=capture)
        (context,) = read_log(capture).contexts
        runs.append((size, asked, context))
    (size, asked, context), (size2, asked2, context2) = runs
    # The same sample gives the same compilation.
    assert (size, asked) == (size2, asked2)
    answers = [int(s.advice[0]) for s in context.steps]
    assert answers == [int(s.advice[0]) for s in context2.steps]
    # Every unsampled decision got what the compiler itself sent as its default; the
    # sampled ones got the policy's "no".
    assert len(context.steps) == asked > OLD_MAX_CALLS
    overridden = 0
    for position, step in enumerate(context.steps):
        default = int(step.observation[DEFAULT_FEATURE][0])
        if position in sample:
            assert answers[position] == 0
            overridden += default
        else:
            assert answers[position] == default, position
    # The sample did change something, and the size says so (not the stock -Oz result).
    assert overridden > 0
    assert size != stock_text_size(module)


def test_training_includes_a_module_the_old_filter_left_out(
    zstd_corpus: Path, largest: tuple[Path, int], tmp_path: Path
):
    _, calls = largest
    output = tmp_path / "p.json"
    # --min-calls leaves the largest module alone: before, --max-calls 400 left it out.
    argv = [sys.executable, "-m", "mlbridge", "train", "inliner", "--no-ray", "--workers", "2",
            "--corpus", str(zstd_corpus), "--min-calls", str(calls), "--sample-call-sites",
            str(SAMPLE), "--iterations", "1", "--pairs", "1", "--modules-per-iteration", "1",
            "--sigma", "0.5",
            "-o", str(output)]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "1 train modules from" in proc.stderr
    assert f"1 of 1 modules ask more than {SAMPLE} inlining decisions" in proc.stderr
    meta = json.loads(output.read_text())["metadata"]
    assert meta["modules"] == 1 and meta["sampled_modules"] == 1
    assert meta["sample_call_sites"] == SAMPLE


def test_max_calls_is_deprecated_and_sets_the_sample(tmp_path: Path):
    argv = [sys.executable, "-m", "mlbridge", "train", "inliner", "--no-ray", "--max-calls",
            "-1", "-o", str(tmp_path / "p.json")]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "--max-calls is deprecated" in proc.stderr
    assert "--sample-call-sites must be at least 0, got -1" in proc.stderr
