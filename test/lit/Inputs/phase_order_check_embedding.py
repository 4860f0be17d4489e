"""Checks the phase-order pass's IR2Vec observation against LLVM's own llvm-ir2vec.

    phase_order_check_embedding.py OBSERVATIONS.jsonl VOCAB.json INPUT.ll

The first line of OBSERVATIONS.jsonl (phase_order_agent.py --dump-observations) is the
observation of step 0, i.e. of INPUT.ll as it was read. It must equal the sum of the
function embeddings ``llvm-ir2vec embeddings --level=func`` prints for INPUT.ll with the
same vocabulary (which prints two decimals: the tolerance allows for that rounding).
Prints a summary; exit status 1 on a mismatch.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from mlbridge.ir2vec.vocab import find_llvm_ir2vec


def main(argv: list[str]) -> int:
    observations, vocab, module = argv
    with open(observations) as f:
        seen = np.array(json.loads(f.readline()), dtype=np.float64)
    out = subprocess.run(
        [find_llvm_ir2vec(), "embeddings", "--level=func", f"--ir2vec-vocab-path={vocab}", module],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    rows = [
        np.array(line.strip().strip("[]").split(), dtype=np.float64)
        for line in out.splitlines()
        if line.strip().startswith("[")
    ]
    expected = np.sum(rows, axis=0)
    tolerance = 0.005 * len(rows) + 1e-4 * np.abs(expected)
    worst = float(np.max(np.abs(seen - expected) - tolerance))
    ok = seen.shape == expected.shape and worst <= 0
    print(
        f"embedding {'matches' if ok else 'DIFFERS FROM'} llvm-ir2vec: dim {seen.size}, "
        f"{len(rows)} functions, nonzero {int(np.count_nonzero(seen))}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
