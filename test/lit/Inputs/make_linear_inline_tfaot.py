"""Compiles a linear inlining policy (mlbridge.inliner.policy) with ``mlbridge aot``.

    make_linear_inline_tfaot.py OUT_DIR NAME FEATURE=WEIGHT... [--bias B]

inline iff sum(WEIGHT * sign(x) * log(1 + |x|)) + B > 0, over the named features: the
same policy as make_linear_inline_model.py writes as ONNX, compiled ahead of time with
TensorFlow into OUT_DIR/NAME.so (its NAME.specs.json beside it).
"""

from __future__ import annotations

import argparse

from mlbridge.inliner.policy import LinearPolicy

p = argparse.ArgumentParser()
p.add_argument("out_dir")
p.add_argument("name", help="the AOT model name (a C identifier)")
p.add_argument("weights", nargs="+", metavar="FEATURE=WEIGHT")
p.add_argument("--bias", type=float, default=0.0)
args = p.parse_args()
names = [w.split("=", 1)[0] for w in args.weights]
values = [float(w.split("=", 1)[1]) for w in args.weights]
so = LinearPolicy(names, values, args.bias).to_tfaot(args.out_dir, name=args.name)
print(f"wrote {so.name}: inputs {', '.join(names)}")
