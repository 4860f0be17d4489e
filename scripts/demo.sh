#!/usr/bin/env bash
# `make demo` at the foundation stage: the ML inline advisor and its trained
# default model are not built yet, so this runs each plugin on a sample and
# shows what it did.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
BIN=/usr/lib/llvm-22/bin
MLBRIDGE="$ROOT/.venv/bin/mlbridge"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

say() { printf '\n== %s\n' "$*"; }

cat <<'TXT'
mlbridge demo (foundation stage)

The main job -- compiling real code with the ML inline advisor on the built-in
default model -- arrives with the LLVM-plugin work. Until then this demo builds
everything (done) and runs each plugin on a sample from examples/.
TXT

llvm_plugin=$("$MLBRIDGE" plugin-path llvm --build-dir "$BUILD")
llc_plugin=$("$MLBRIDGE" plugin-path llc --build-dir "$BUILD")
mlir_plugin=$("$MLBRIDGE" plugin-path mlir --build-dir "$BUILD")

say "clang-22: examples/sample.c -> LLVM IR (-O2, LLVM passes off, so nothing is decided yet)"
"$BIN/clang" -O2 -Xclang -disable-llvm-passes -S -emit-llvm \
  "$ROOT/examples/sample.c" -o "$WORK/sample.ll"
echo "wrote $(grep -c '^define' "$WORK/sample.ll") functions"

say "opt-22 + $(basename "$llvm_plugin"): mlbridge-function-features asks a policy through the runner API"
"$BIN/opt" -load-pass-plugin="$llvm_plugin" -passes=mlbridge-function-features \
  -mlbridge-print-features -S "$WORK/sample.ll" -o "$WORK/advised.ll"
echo "-- advice recorded in the IR:"
grep -E '^attributes #[0-9]+ = .*mlbridge-advice' "$WORK/advised.ll" \
  | sed -E 's/.*("mlbridge-advice"="[a-z]+").*/  \1/' | sort | uniq -c
grep -E '^define' "$WORK/advised.ll" | sed -E 's/^define[^@]*@([a-z_]+).*#([0-9]+).*/  @\1 uses attribute group #\2/'

say "llc-22 + $(basename "$llc_plugin"): the pre-codegen hook notes each function in the assembly"
"$BIN/llc" -load-pass-plugin="$llc_plugin" "$WORK/sample.ll" -o "$WORK/sample.s"
grep '# mlbridge:' "$WORK/sample.s"

say "mlir-opt-22 + $(basename "$mlir_plugin"): mlbridge-annotate-loops annotates every loop"
"$BIN/mlir-opt" --load-pass-plugin="$mlir_plugin" \
  --pass-pipeline='builtin.module(func.func(mlbridge-annotate-loops))' \
  "$ROOT/examples/loops.mlir" | grep -E '(affine|scf)\.for|mlbridge\.' | sed 's/^/  /'

cat <<'TXT'

Next: `make test` runs every suite; docs/plugins.md lists the passes and
options; docs/serialization.md defines the wire formats a model side speaks.
TXT
