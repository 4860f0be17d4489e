#!/usr/bin/env bash
# mlbridge set-up: installs everything the build and the tests need on a
# Debian bookworm machine, then stops. Idempotent: every step checks first and
# a second run with nothing changed takes seconds.
#
#   scripts/setup.sh          (what `make setup`, `make test`, `make demo` run)
#
# Steps:
#   1. Debian packages: LLVM/Clang/MLIR 22, gRPC + protobuf C++, ninja, GoogleTest.
#   2. ONNX Runtime headers: Debian trixie's libonnxruntime-dev (headers only),
#      downloaded with a private apt state (the system's sources stay untouched),
#      checksum-verified, unpacked into .deps/onnxruntime/include.
#   3. Python virtual environment .venv with mlbridge installed editable and its
#      pinned development dependencies (pyproject.toml, extra "dev").
#   4. ONNX Runtime library: the onnxruntime wheel's libonnxruntime.so.1.N.M,
#      linked as .deps/onnxruntime/lib/libonnxruntime.so{,.1}.
#   5. TensorFlow venv .deps/tf-venv (tensorflow-cpu, pinned) for `mlbridge aot`.
#   6. C corpus: source archives pinned in corpus/recipe.json (Debian's archive) into
#      .deps/corpus-sources, compiled to LLVM 22 bitcode in .deps/corpus (cached).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.deps"
VENV="$ROOT/.venv"
PYTHON="${MLBRIDGE_PYTHON:-python3}"

ORT_DEB_VERSION="1.21.0+dfsg-1"
ORT_DEB_SHA256="14f7d959d5deacbcf1504830d4189f91fc67382b399ed9ae9d3aa9c4050ced08"

APT_PACKAGES=(
  llvm-22-dev llvm-22-tools clang-22 libclang-rt-22-dev
  libmlir-22-dev mlir-22-tools
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  ninja-build libgtest-dev pkg-config
)

step() { printf '\n== mlbridge setup: %s\n' "$*" >&2; }
die() { printf 'mlbridge setup: error: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- 1. apt
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  step "installing Debian packages: ${missing[*]}"
  [ "$(id -u)" = 0 ] || die "installing ${missing[*]} needs root (apt-get install)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  step "Debian packages: all present"
fi

# --------------------------------------------- 2. ONNX Runtime headers (trixie)
ORT_DIR="$DEPS/onnxruntime"
ORT_STAMP="$ORT_DIR/.headers-$ORT_DEB_VERSION"
if [ ! -f "$ORT_STAMP" ]; then
  step "fetching ONNX Runtime headers (Debian trixie libonnxruntime-dev $ORT_DEB_VERSION)"
  APTDIR="$DEPS/apt-trixie"
  mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/download"
  echo "deb http://deb.debian.org/debian trixie main" > "$APTDIR/sources.list"
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
else
  step "ONNX Runtime headers: present ($ORT_DEB_VERSION)"
fi

# ------------------------------------------------------------- 3. Python venv
PY_STAMP="$VENV/.mlbridge-setup"
py_inputs_hash=$(cat "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ]; then
  step "creating Python virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
if [ ! -f "$PY_STAMP" ] || [ "$(cat "$PY_STAMP")" != "$py_inputs_hash" ]; then
  step "installing mlbridge (editable) and its pinned dependencies into .venv"
  "$VENV/bin/pip" install -q --disable-pip-version-check -e "$ROOT[dev]"
  echo "$py_inputs_hash" > "$PY_STAMP"
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
step "TensorFlow environment $TF_VENV (for mlbridge aot)"
"$VENV/bin/python" -m mlbridge.aot.tfenv "$TF_VENV" >/dev/null \
  || die "creating the TensorFlow environment $TF_VENV failed (see above)"
# -- end TensorFlow venv --

# ------------------------------------------ 6. C corpus (mlbridge corpus, docs/corpus.md)
# Fetches the pinned source archives of corpus/recipe.json (sha256-checked) and builds the
# LLVM 22 bitcode corpus into .deps/corpus; both steps do nothing when already done.
step "C corpus: fetch (corpus/recipe.json) and build into $DEPS/corpus"
"$VENV/bin/mlbridge" corpus fetch
"$VENV/bin/mlbridge" corpus build --jobs "${MLBRIDGE_CORPUS_JOBS:-2}"
# ------------------------------------------------------------------------ end 6. corpus

step "done"
