#!/usr/bin/env bash
# Installs Kiln's build and test dependencies (Debian 12) and configures + builds Kiln.
# Usage: bash scripts/setup.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"

PACKAGES=(g++ cmake ninja-build libflatbuffers-dev flatbuffers-compiler libcli11-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev libonnx-dev libprotobuf-dev protobuf-compiler)
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${PACKAGES[@]}" >/dev/null

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR"
