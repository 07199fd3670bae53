#!/usr/bin/env bash
# The sanitizer and fuzzing job (.ci/run runs it after the tests):
#   1. builds everything with clang 14, AddressSanitizer + UndefinedBehaviorSanitizer
#      (-DKILN_SANITIZE=ON) and libFuzzer coverage;
#   2. runs the whole test suite through the sanitized binaries (the end-to-end tests too);
#   3. runs each fuzz target (scripts/fuzz.sh) from its committed seed corpus: FUZZ_RUNS
#      executions with a fixed seed (deterministic: what passed here passes in CI), or
#      FUZZ_SECONDS each when given.
# Usage: bash scripts/sanitize.sh [BUILD_DIR] [FUZZ_SECONDS]
# CI leaves out the three model sweeps' instances on mobilenet_v2, resnet_small and swin_tiny
# (15 of the 20 sanitized minutes; they run unsanitized in the main job): KILN_SANITIZE_EXCLUDE=""
# runs everything. A long fuzz run of an existing build: bash scripts/fuzz.sh build-asan --runs 1000000
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-asan}"
SECONDS_PER_TARGET="${2:-}"
FUZZ_RUNS="${FUZZ_RUNS:-20000}"
EXCLUDE="${KILN_SANITIZE_EXCLUDE-(DelegateVsPortable|PortableThreads|FusedVsUnfused).*/(mobilenet_v2|resnet_small|swin_tiny)}"
SUDO=""; if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq clang-14 libclang-rt-14-dev llvm-14 g++ cmake ninja-build libflatbuffers-dev \
  flatbuffers-compiler libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libonnx-dev \
  libprotobuf-dev protobuf-compiler libxnnpack-dev libpthreadpool-dev >/dev/null
CMAKE=cmake; if [ -x /usr/bin/cmake ]; then CMAKE=/usr/bin/cmake; fi
CC=clang-14 CXX=clang++-14 $CMAKE -S . -B "$BUILD_DIR" -G Ninja -DKILN_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
$CMAKE --build "$BUILD_DIR"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$BUILD_DIR" -j2 --output-on-failure ${EXCLUDE:+-E "$EXCLUDE"}
if [ -n "$SECONDS_PER_TARGET" ]; then bash scripts/fuzz.sh "$BUILD_DIR" --seconds "$SECONDS_PER_TARGET"
else bash scripts/fuzz.sh "$BUILD_DIR" --runs "$FUZZ_RUNS"; fi
echo "sanitizers and fuzzing: ok"
