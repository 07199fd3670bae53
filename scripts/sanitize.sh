#!/usr/bin/env bash
# The sanitizer and fuzzing job (.ci/run runs it after the tests):
#   1. builds everything with clang 14, AddressSanitizer + UndefinedBehaviorSanitizer
#      (-DKILN_SANITIZE=ON) and libFuzzer coverage;
#   2. runs the whole test suite through the sanitized binaries (the end-to-end tests too);
#   3. runs each fuzz target (scripts/fuzz.sh) from its committed seed corpus: FUZZ_RUNS
#      executions with a fixed seed (deterministic: what passed here passes in CI), or
#      FUZZ_SECONDS each when given;
#   4. builds the concurrency test with ThreadSanitizer (build-tsan) and runs it.
# Usage: bash scripts/sanitize.sh [BUILD_DIR] [FUZZ_SECONDS]
# The whole suite runs; the model sweeps (DelegateVsPortable, PortableThreads, FusedVsUnfused)
# run their fixed shapes only (every dim at its minimum, middle and bound, and each dim alone
# at its minimum), not the 24 random ones the main job adds: KILN_SWEEP_RANDOM_SHAPES=24 runs
# those too (20 minutes more here). A long fuzz run of an existing build: bash scripts/fuzz.sh build-asan --runs 1000000
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-asan}"
SECONDS_PER_TARGET="${2:-}"
FUZZ_RUNS="${FUZZ_RUNS:-20000}"
export KILN_SWEEP_RANDOM_SHAPES="${KILN_SWEEP_RANDOM_SHAPES:-0}"
SUDO=""; if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq clang-14 libclang-rt-14-dev llvm-14 g++ cmake ninja-build libflatbuffers-dev \
  flatbuffers-compiler libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libonnx-dev \
  libprotobuf-dev protobuf-compiler libxnnpack-dev libpthreadpool-dev libstb-dev pkg-config >/dev/null
CMAKE=cmake; if [ -x /usr/bin/cmake ]; then CMAKE=/usr/bin/cmake; fi
# Line tables are all a sanitizer's report needs; full debug info cost a fifth of code generation.
LINES_ONLY="-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG"
CC=clang-14 CXX=clang++-14 $CMAKE -S . -B "$BUILD_DIR" -G Ninja -DKILN_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "$LINES_ONLY" "-DKILN_TEST_COMPILE_OPTIONS=-O0;-gline-tables-only" >/dev/null
$CMAKE --build "$BUILD_DIR"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$BUILD_DIR" -j2 --output-on-failure
if [ -n "$SECONDS_PER_TARGET" ]; then bash scripts/fuzz.sh "$BUILD_DIR" --seconds "$SECONDS_PER_TARGET"
else bash scripts/fuzz.sh "$BUILD_DIR" --runs "$FUZZ_RUNS"; fi

# ThreadSanitizer: several Methods of one Program on six threads at once, with different shapes,
# delegated and portable, outputs checked (tests/runtime/concurrency_test.cc); only that test
# and the libraries it needs are built.
TSAN_DIR="${TSAN_DIR:-build-tsan}"
CC=clang-14 CXX=clang++-14 $CMAKE -S . -B "$TSAN_DIR" -G Ninja -DKILN_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "$LINES_ONLY" >/dev/null
$CMAKE --build "$TSAN_DIR" --target kiln_concurrency_test
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" "$TSAN_DIR/kiln_concurrency_test"
echo "sanitizers and fuzzing: ok"
