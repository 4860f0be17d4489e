"""Writes a linear inlining policy (mlbridge.inliner.policy) as an ONNX model.

    make_linear_inline_model.py OUT.onnx NAME=WEIGHT... [--bias B]

inline iff sum(WEIGHT * sign(x) * log(1 + |x|)) + B > 0, over the named features.
"""

from __future__ import annotations

import argparse

from mlbridge.inliner.policy import LinearPolicy

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("weights", nargs="+", metavar="NAME=WEIGHT")
p.add_argument("--bias", type=float, default=0.0)
args = p.parse_args()
names = [w.split("=", 1)[0] for w in args.weights]
values = [float(w.split("=", 1)[1]) for w in args.weights]
LinearPolicy(names, values, args.bias).to_onnx(args.out)
print(f"wrote {args.out}: inputs {', '.join(names)}")
