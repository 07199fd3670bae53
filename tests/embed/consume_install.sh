#!/usr/bin/env bash
# ctest Install.EmbedExampleBuildsAgainstInstalledPackage: installs the runtime component of
# BUILD_DIR into a scratch prefix, builds examples/embed out of tree against it twice (CMake's
# find_package(kiln) and pkg-config), runs both on the bundled example programs and checks
# what they print.
#   bash tests/embed/consume_install.sh CMAKE BUILD_DIR SOURCE_DIR
# A cross build (scripts/test_arm64.sh) consumes its install the same way, for the target:
#   KILN_CONSUME_TOOLCHAIN   the CMake toolchain file the app's build uses
#   KILN_CONSUME_EMULATOR    the command that runs the app (qemu-aarch64 -L / ...)
#   KILN_CONSUME_CXX, KILN_CONSUME_LDFLAGS   the compiler and the link flags of the pkg-config half
set -euo pipefail
CMAKE="$1"; BUILD="$2"; SRC="$3"
TOOLCHAIN=(); if [ -n "${KILN_CONSUME_TOOLCHAIN:-}" ]; then TOOLCHAIN=(-DCMAKE_TOOLCHAIN_FILE="$KILN_CONSUME_TOOLCHAIN"); fi
read -r -a RUN <<< "${KILN_CONSUME_EMULATOR:-}"
CXX_PC="${KILN_CONSUME_CXX:-c++}"
read -r -a LDFLAGS_PC <<< "${KILN_CONSUME_LDFLAGS:-}"
WORK="$BUILD/embed-test"
rm -rf "$WORK"
mkdir -p "$WORK"
"$CMAKE" --install "$BUILD" --prefix "$WORK/prefix" --component runtime >/dev/null

# Only the public headers are installed.
internal="$(find "$WORK/prefix" -name '*.h' ! -path '*/include/kiln/*' | head -3)"
if [ -n "$internal" ]; then echo "internal headers installed: $internal" >&2; exit 1; fi

GEN=(); if command -v ninja >/dev/null; then GEN=(-G Ninja); fi
"$CMAKE" -S "$SRC/examples/embed" -B "$WORK/cmake" "${GEN[@]}" "${TOOLCHAIN[@]}" -DCMAKE_PREFIX_PATH="$WORK/prefix" >/dev/null
"$CMAKE" --build "$WORK/cmake" >/dev/null

expect() {  # expect FILE TEXT: FILE contains the line TEXT
  if ! grep -qxF -- "$2" "$1"; then
    echo "expected the line '$2' in the output of kiln_embed:" >&2
    cat "$1" >&2
    exit 1
  fi
}
"${RUN[@]}" "$WORK/cmake/kiln_embed" "$SRC/examples/cnn.kiln" > "$WORK/cnn.txt"
expect "$WORK/cnn.txt" "  input  'pixels' f32 [batch, 3, H, W]"
expect "$WORK/cnn.txt" "  input  'pixels' 4x3x64x64"
expect "$WORK/cnn.txt" "  input  'pixels' 1x3x1x1"
[ "$(grep -c "^  output 'logits' " "$WORK/cnn.txt")" = 3 ] || { cat "$WORK/cnn.txt" >&2; exit 1; }
"${RUN[@]}" "$WORK/cmake/kiln_embed" "$SRC/examples/mlp.kiln" 3x16 64x16 > "$WORK/mlp.txt"
expect "$WORK/mlp.txt" "  dim batch in [1, 64] step 1"
expect "$WORK/mlp.txt" "  input  'x' 3x16"
expect "$WORK/mlp.txt" "  output 'probs' 64x10 sum 64"  # softmax rows: each sums to 1

# A shape outside the contract: the app reports the runtime's message and exits 1.
if "${RUN[@]}" "$WORK/cmake/kiln_embed" "$SRC/examples/mlp.kiln" 65x16 > "$WORK/bad.txt" 2> "$WORK/bad.err"; then
  echo "kiln_embed accepted batch 65 (bound 64)" >&2; exit 1
fi
grep -q "^bind failed (out of range): bind: input 'x' (#0) dim 0 ('batch') is 65, outside its range \[1, 64\]" "$WORK/bad.err" \
  || { cat "$WORK/bad.err" >&2; exit 1; }

# pkg-config: the same program compiled by hand.
if command -v pkg-config >/dev/null; then
  export PKG_CONFIG_PATH="$(dirname "$(find "$WORK/prefix" -name kiln.pc)")"
  # shellcheck disable=SC2046
  "$CXX_PC" -std=c++17 "$SRC/examples/embed/main.cc" $(pkg-config --cflags --libs kiln) "${LDFLAGS_PC[@]}" \
    -o "$WORK/kiln_embed_pc"
  "${RUN[@]}" "$WORK/kiln_embed_pc" "$SRC/examples/mlp.kiln" 3x16 64x16 > "$WORK/mlp_pc.txt"
  cmp "$WORK/mlp.txt" "$WORK/mlp_pc.txt"
else
  echo "pkg-config not installed: the pkg-config half was skipped" >&2
  exit 1
fi
echo "embed example: ok"
