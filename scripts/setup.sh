#!/usr/bin/env bash
# Installs Kiln's build and test dependencies (Debian 12) and configures + builds Kiln.
# Usage: bash scripts/setup.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"

PACKAGES=(g++ cmake ninja-build libflatbuffers-dev flatbuffers-compiler libcli11-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev libonnx-dev libprotobuf-dev protobuf-compiler
          libxnnpack-dev libpthreadpool-dev)
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${PACKAGES[@]}" >/dev/null

# Release (-O3) is the default build type; pass -DCMAKE_BUILD_TYPE=Debug by hand for a debug build.
cmake -S . -B "$BUILD_DIR" -G Ninja >/dev/null
cmake --build "$BUILD_DIR"
