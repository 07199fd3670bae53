#!/usr/bin/env bash
# Installs Kiln's build and test dependencies (Debian 12) and configures + builds Kiln.
# Usage: bash scripts/setup.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"

PACKAGES=(g++ cmake ninja-build pkg-config libflatbuffers-dev flatbuffers-compiler libcli11-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev libonnx-dev libprotobuf-dev protobuf-compiler
          libxnnpack-dev libpthreadpool-dev libstb-dev)
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${PACKAGES[@]}" >/dev/null

# Python: the python3 on PATH (pyenv's, which pip serves) gets the build tools, pinned.
PY="$(command -v python3)"
"$PY" -m pip install -q "scikit-build-core==1.1.2" "nanobind==2.4.0" "numpy>=1.23" "pytest==9.0.3" "onnx==1.17.0"

# Release (-O3) is the default build type; pass -DCMAKE_BUILD_TYPE=Debug by hand for a debug build.
# KILN_PYTHON builds the extension kiln._kiln beside the tools.
cmake -S . -B "$BUILD_DIR" -G Ninja -DKILN_PYTHON=ON -DPython_EXECUTABLE="$PY" >/dev/null
cmake --build "$BUILD_DIR"

# The kiln package into that python3: pip install with the build directory above, whose objects
# are all compiled already (a plain `pip install .` works too, building in build-py/ from scratch).
"$PY" -m pip install -q --no-build-isolation -Cbuild-dir="$BUILD_DIR" -Ccmake.define.KILN_BUILD_TESTS=ON .
