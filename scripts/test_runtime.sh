#!/usr/bin/env bash
# The runtime-only profile, what an app links: installs only what the runtime needs
# (FlatBuffers, XNNPACK, pthreadpool) and its tests (googletest, pkg-config), configures with
# -DKILN_TOOLCHAIN=OFF (no ONNX, protobuf, CLI11, nlohmann-json or stb; -fno-exceptions
# -fno-rtti), builds, runs its tests (the public API on the bundled programs; the installed
# package consumed by examples/embed through find_package and pkg-config) and prints the
# stripped sizes. .ci/run runs it first, before anything of the toolchain is installed.
# Usage: bash scripts/test_runtime.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-runtime}"
PACKAGES=(g++ cmake ninja-build pkg-config binutils libflatbuffers-dev flatbuffers-compiler libxnnpack-dev
          libpthreadpool-dev libgtest-dev)
SUDO=""; if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${PACKAGES[@]}" >/dev/null

cmake -S . -B "$BUILD_DIR" -G Ninja -DKILN_TOOLCHAIN=OFF >/dev/null
# The profile looked for none of the toolchain's dependencies.
if grep -E "^(ONNX_DIR|Protobuf_[A-Z_]*|CLI11_DIR|nlohmann_json_DIR|STB_LIBRARY|Python_EXECUTABLE)(:[A-Z]*)?=" \
     "$BUILD_DIR/CMakeCache.txt"; then
  echo "the runtime-only profile looked for a toolchain dependency (above)" >&2
  exit 1
fi
cmake --build "$BUILD_DIR"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2
bash scripts/runtime_size.sh "$BUILD_DIR"
