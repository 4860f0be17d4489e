#!/usr/bin/env bash
# mlbridge set-up: installs everything the build and the tests need on a
# Debian bookworm machine, then stops. Idempotent: every step checks first and
# a second run with nothing changed takes seconds.
#
#   scripts/setup.sh          (what `make setup`, `make test`, `make demo` run)
#
# Steps:
#   1. Debian packages: LLVM/Clang/MLIR 22, gRPC + protobuf C++, ninja, GoogleTest,
#      make and tcl (the corpus's configure steps).
#   2. ONNX Runtime headers: Debian trixie's libonnxruntime-dev (headers only),
#      downloaded with a private apt state (the system's sources stay untouched),
#      checksum-verified, unpacked into .deps/onnxruntime/include.
#   3. Python virtual environment .venv with mlbridge installed editable and its
#      pinned development dependencies (pyproject.toml, extra "dev").
#   4. ONNX Runtime library: the onnxruntime wheel's libonnxruntime.so.1.N.M,
#      linked as .deps/onnxruntime/lib/libonnxruntime.so{,.1}.
#   5. TensorFlow venv .deps/tf-venv (tensorflow-cpu, pinned) for `mlbridge aot`.
#   6. C corpus: source archives pinned in corpus/recipe.json (Debian's archive, PyPI
#      source distributions through pip) into .deps/corpus-sources, compiled to LLVM 22
#      bitcode in .deps/corpus (cached).
#
# When a step had work to do, the end prints how long each such step took and writes
# it to .deps/setup-timings.json ({"steps": [{"name", "seconds"}], "finished"}; `make
# demo` shows it). A run with nothing to do leaves that file alone.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.deps"
VENV="$ROOT/.venv"
PYTHON="${MLBRIDGE_PYTHON:-python3}"

ORT_DEB_VERSION="1.21.0+dfsg-1"
ORT_DEB_SHA256="14f7d959d5deacbcf1504830d4189f91fc67382b399ed9ae9d3aa9c4050ced08"

APT_PACKAGES=(
  llvm-22-dev llvm-22-tools clang-22 libclang-rt-22-dev lld-22
  libmlir-22-dev mlir-22-tools
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  ninja-build libgtest-dev pkg-config
  make tcl   # the corpus's configure steps (sqlite3's amalgamation is made by tclsh)
)

step() { printf 'mlbridge setup: %s\n' "$*" >&2; }
die() { printf 'mlbridge setup: error: %s\n' "$*" >&2; exit 1; }

# Phase timings of the steps that had work to do: "name seconds" each.
TIMINGS=()
now() { date +%s.%N; }
took() {  # took NAME START: NAME had work to do since START
  TIMINGS+=("$1 $(awk -v a="$2" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')")
}
# changed_since MARK PATH...: whether anything at or under PATH... is newer than MARK.
changed_since() {
  local mark="$1"; shift
  [ -n "$(find "$@" -newer "$mark" -print -quit 2>/dev/null)" ]
}

# ---------------------------------------------------------------- 1. apt
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  step "installing Debian packages: ${missing[*]}"
  [ "$(id -u)" = 0 ] || die "installing ${missing[*]} needs root (apt-get install)"
  t0=$(now)
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  took apt "$t0"
else
  step "Debian packages: all present"
fi

# --------------------------------------------- 2. ONNX Runtime headers (trixie)
ORT_DIR="$DEPS/onnxruntime"
ORT_STAMP="$ORT_DIR/.headers-$ORT_DEB_VERSION"
if [ ! -f "$ORT_STAMP" ]; then
  step "fetching ONNX Runtime headers (Debian trixie libonnxruntime-dev $ORT_DEB_VERSION)"
  t0=$(now)
  APTDIR="$DEPS/apt-trixie"
  mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/download"
  # The Debian archive the system's apt sources name (no mirror is written here).
  ARCHIVE=$("$PYTHON" "$ROOT/mlbridge/_apt.py") \
    || die "cannot tell which Debian archive to use (see above)"
  echo "deb $ARCHIVE trixie main" > "$APTDIR/sources.list"
  APT_OPTS=(-o "Dir::Etc::SourceList=$APTDIR/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
            -o "Dir::State::Lists=$APTDIR/lists" -o "Dir::Cache=$APTDIR/cache"
            -o "APT::Sandbox::User=root")
  apt-get "${APT_OPTS[@]}" update -qq
  (cd "$APTDIR/download" && rm -f ./*.deb \
    && apt-get "${APT_OPTS[@]}" download -qq "libonnxruntime-dev=$ORT_DEB_VERSION")
  deb=$(ls "$APTDIR"/download/libonnxruntime-dev_*.deb)
  echo "$ORT_DEB_SHA256  $deb" | sha256sum -c --quiet - \
    || die "checksum mismatch for $deb (expected $ORT_DEB_SHA256)"
  rm -rf "$ORT_DIR/include" "$APTDIR/unpacked"
  dpkg-deb -x "$deb" "$APTDIR/unpacked"
  mkdir -p "$ORT_DIR"
  cp -r "$APTDIR/unpacked/usr/include/onnxruntime" "$ORT_DIR/include"
  touch "$ORT_STAMP"
  took "onnxruntime headers" "$t0"
else
  step "ONNX Runtime headers: present ($ORT_DEB_VERSION)"
fi

# ------------------------------------------------------------- 3. Python venv
PY_STAMP="$VENV/.mlbridge-setup"
py_inputs_hash=$(cat "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)
t0=$(now)
if [ ! -x "$VENV/bin/python" ]; then
  step "creating Python virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
if [ ! -f "$PY_STAMP" ] || [ "$(cat "$PY_STAMP")" != "$py_inputs_hash" ]; then
  step "installing mlbridge (editable) and its pinned dependencies into .venv"
  "$VENV/bin/pip" install -q --disable-pip-version-check -e "$ROOT[dev]"
  echo "$py_inputs_hash" > "$PY_STAMP"
  took venv "$t0"
else
  step "Python environment: up to date"
fi

# ------------------------------------------------ 4. ONNX Runtime library link
ort_lib=$("$VENV/bin/python" - <<'EOF'
import glob, os, onnxruntime
libs = sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), "capi", "libonnxruntime.so.*")))
print(libs[0] if libs else "")
EOF
)
[ -n "$ort_lib" ] || die "the onnxruntime wheel in .venv has no capi/libonnxruntime.so.*"
mkdir -p "$ORT_DIR/lib"
ln -sfn "$ort_lib" "$ORT_DIR/lib/libonnxruntime.so.1"
ln -sfn "libonnxruntime.so.1" "$ORT_DIR/lib/libonnxruntime.so"

# ------------------------------------------- 5. TensorFlow venv (TF AOT) --
# TensorFlow pins protobuf<6, which conflicts with .venv's protobuf 7, so it
# gets a venv of its own: .deps/tf-venv, pinned and stamped by
# mlbridge.aot.tfenv (a no-op when the stamp matches). `mlbridge aot` and the
# TF AOT tests run saved_model_cli there.
TF_VENV="$DEPS/tf-venv"
MARK="$DEPS/.setup-mark"
mkdir -p "$DEPS"
touch "$MARK"
t0=$(now)
step "TensorFlow environment $TF_VENV (for mlbridge aot)"
"$VENV/bin/python" -m mlbridge.aot.tfenv "$TF_VENV" >/dev/null \
  || die "creating the TensorFlow environment $TF_VENV failed (see above)"
# The environment's stamp is rewritten only when it was (re)created.
if changed_since "$MARK" "$TF_VENV/.mlbridge-tf-env"; then took tensorflow "$t0"; fi
# -- end TensorFlow venv --

# ------------------------------------------ 6. C corpus (mlbridge corpus, docs/corpus.md)
# Fetches the pinned source archives of corpus/recipe.json (sha256-checked) and builds the
# LLVM 22 bitcode corpus into .deps/corpus; both steps do nothing when already done.
# One progress bar while compiling (plain lines every 10% off a terminal). A fetch writes
# archives into .deps/corpus-sources; a build that unpacks or compiles writes under
# .deps/corpus: either means the step had work to do.
CORPUS_ROOT="${MLBRIDGE_CACHE_DIR:-$DEPS}"   # where `mlbridge corpus` puts it (docs/corpus.md)
step "C corpus: fetch (corpus/recipe.json) and build into $CORPUS_ROOT/corpus"
touch "$MARK"
t0=$(now)
"$VENV/bin/mlbridge" corpus fetch
"$VENV/bin/mlbridge" corpus build --jobs "${MLBRIDGE_CORPUS_JOBS:-2}"
if changed_since "$MARK" "$CORPUS_ROOT/corpus-sources" "$CORPUS_ROOT/corpus"; then
  took corpus "$t0"
fi
rm -f "$MARK"
# ------------------------------------------------------------------------ end 6. corpus

if ((${#TIMINGS[@]})); then
  # "phase timings: apt 120 s, venv 80 s, ..." on stderr, the same in .deps/setup-timings.json.
  "$VENV/bin/python" - "$DEPS/setup-timings.json" "${TIMINGS[@]}" <<'PY'
import datetime, json, os, sys
path, entries = sys.argv[1], sys.argv[2:]
steps = [{"name": e.rsplit(" ", 1)[0], "seconds": float(e.rsplit(" ", 1)[1])} for e in entries]
finished = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
with open(path + ".partial", "w") as f:
    json.dump({"steps": steps, "finished": finished}, f, indent=2)
    f.write("\n")
os.replace(path + ".partial", path)
total = sum(s["seconds"] for s in steps)
shown = ", ".join(f"{s['name']} {s['seconds']:.0f} s" for s in steps)
print(f"mlbridge setup: phase timings: {shown} (total {total:.0f} s; in {path})", file=sys.stderr)
PY
fi
step "done"
