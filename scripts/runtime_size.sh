#!/usr/bin/env bash
# Stripped sizes of the runtime-only profile: the five static libraries an app links and the
# embedding example (examples/embed, built by the install test) as the minimal app; one column
# per build directory, each stripped with its own architecture's strip (x86-64: strip; arm64:
# aarch64-linux-gnu-strip), so x86-64 and arm64 sit side by side.
# Usage: bash scripts/runtime_size.sh [BUILD_DIR ...]   (default build-runtime; each a
#        -DKILN_TOOLCHAIN=OFF build whose tests ran, e.g. build-runtime and build-arm64)
set -euo pipefail
[ $# -gt 0 ] || set -- build-runtime
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT

arch_of() {  # the architecture of an ELF file or of the first member of an archive
  local m
  m="$(readelf -h "$1" 2>/dev/null | awk -F: '/Machine:/ {print $2; exit}')"
  case "$m" in
    *AArch64*) echo arm64 ;;
    *X86-64*) echo x86-64 ;;
    *) echo unknown ;;
  esac
}
strip_for() { if [ "$1" = arm64 ]; then echo aarch64-linux-gnu-strip; else echo strip; fi; }
stripped_size() {  # stripped_size FILE ARCH
  local out="$TMP/$(basename "$1")"
  cp "$1" "$out"
  "$(strip_for "$2")" --strip-unneeded "$out"
  stat -c %s "$out"
}

header="| file |"; rule="|---|"
declare -A cell
rows=(core kernels format delegates runtime total embed)
for dir in "$@"; do
  arch="$(arch_of "$dir/libkiln_core.a")"
  header+=" $arch ($dir) |"; rule+="---|"
  total=0
  for lib in core kernels format delegates runtime; do
    n="$(stripped_size "$dir/libkiln_$lib.a" "$arch")"; total=$((total + n))
    cell[$lib,$dir]="$n"
  done
  cell[total,$dir]="**$total**"
  app="$dir/embed-test/cmake/kiln_embed"
  cell[embed,$dir]="-"
  if [ -x "$app" ]; then cell[embed,$dir]="$(stripped_size "$app" "$arch")"; fi
done
echo "$header"; echo "$rule"
for r in "${rows[@]}"; do
  case "$r" in
    total) line="| **the five static libraries** |" ;;
    embed) line="| kiln_embed (examples/embed, static Kiln, shared XNNPACK) |" ;;
    *) line="| libkiln_$r.a |" ;;
  esac
  for dir in "$@"; do line+=" ${cell[$r,$dir]} |"; done
  echo "$line"
done
# The shared library the minimal app loads besides (XNNPACK, as the build found it).
for dir in "$@"; do
  xnn="$(sed -n 's/^XNNPACK_LIB:FILEPATH=//p' "$dir/CMakeCache.txt")"
  if [ -n "$xnn" ]; then
    echo "$(arch_of "$dir/libkiln_core.a"): + shared $(basename "$(readlink -f "$xnn")"): $(stat -L -c %s "$xnn") bytes"
  fi
done
