#!/usr/bin/env bash
# Stripped sizes of the runtime-only profile: the five static libraries an app links and the
# embedding example (examples/embed, built by the install test) as the minimal app.
# Usage: bash scripts/runtime_size.sh [BUILD_DIR]   (a -DKILN_TOOLCHAIN=OFF build, tests run;
#        STRIP=aarch64-linux-gnu-strip for a cross build)
set -euo pipefail
BUILD_DIR="${1:-build-runtime}"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
total=0
printf '| file | stripped bytes |\n|---|---|\n'
for lib in core kernels format delegates runtime; do
  cp "$BUILD_DIR/libkiln_$lib.a" "$TMP/"
  "${STRIP:-strip}" --strip-unneeded "$TMP/libkiln_$lib.a"
  n=$(stat -c %s "$TMP/libkiln_$lib.a"); total=$((total + n))
  printf '| libkiln_%s.a | %d |\n' "$lib" "$n"
done
printf '| **the five static libraries** | **%d** |\n' "$total"
app="$BUILD_DIR/embed-test/cmake/kiln_embed"
if [ -x "$app" ]; then
  strip -o "$TMP/kiln_embed" "$app"
  printf '| kiln_embed (examples/embed, static Kiln) | %d |\n' "$(stat -c %s "$TMP/kiln_embed")"
  for so in $(ldd "$app" | awk '/libXNNPACK|libpthreadpool|libcpuinfo/ {print $3}'); do
    printf '| + shared %s | %d |\n' "$(basename "$so")" "$(stat -L -c %s "$so")"
  done
fi
