#!/usr/bin/env bash
# arm64 (aarch64): cross-builds the runtime-only profile (core, kernels, format, delegates,
# runtime) with its kernel, delegate-kernel and public-API tests using Debian's cross toolchain
# (cmake/aarch64-linux-gnu.cmake), and runs the tests under qemu-aarch64. Nothing is built
# under emulation. The API tests run the bundled programs, exported on x86-64, on arm64. The
# tests run on the multiarch libc6:arm64 (see cmake/aarch64-linux-gnu.cmake).
# Installs what it needs: the cross compiler, qemu-user, FlatBuffers and googletest for arm64
# (multiarch, beside the host's) and XNNPACK/pthreadpool/cpuinfo for arm64, which Debian does
# not ship Multi-Arch: same (installing them would remove the host's), so they are unpacked
# into a sysroot under the build directory instead.
# Then the zoo across machines: every zoo, op-zoo and quantized-zoo model is exported on x86-64
# by the host's `kiln` (KILN_HOST_BUILD, default build/; set up by scripts/setup.sh when it has
# no kiln yet), every reference case (minimum, far below, bound) runs there, delegated and
# portable (kiln_replay record), and the same .kiln files run on arm64 under qemu against
# x86-64's outputs within each model's tolerance (kiln_replay compare).
# Usage: bash scripts/test_arm64.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-arm64}"
SUDO=""; if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if ! dpkg --print-foreign-architectures | grep -qx arm64; then $SUDO dpkg --add-architecture arm64; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq g++-aarch64-linux-gnu qemu-user cmake ninja-build pkg-config binutils \
  flatbuffers-compiler libflatbuffers-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libc6:arm64 libstdc++6:arm64 \
  >/dev/null

SYSROOT="$PWD/$BUILD_DIR/sysroot"
mkdir -p "$SYSROOT/debs"
(cd "$SYSROOT/debs" && apt-get download -qq libxnnpack0:arm64 libxnnpack-dev:arm64 libpthreadpool0:arm64 \
   libpthreadpool-dev:arm64 libcpuinfo0:arm64 2>/dev/null)
for deb in "$SYSROOT"/debs/*.deb; do dpkg -x "$deb" "$SYSROOT"; done
export KILN_ARM64_SYSROOT="$SYSROOT"

CMAKE=cmake; if [ -x /usr/bin/cmake ]; then CMAKE=/usr/bin/cmake; fi
$CMAKE -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DKILN_TOOLCHAIN=OFF >/dev/null
$CMAKE --build "$BUILD_DIR"
# Every test of the three executables (kernel, delegate-kernel, API) under emulation, and the
# install consumed by examples/embed through find_package and pkg-config, cross-built.
ctest --test-dir "$BUILD_DIR" -j2 --output-on-failure --timeout 300
QEMU=(qemu-aarch64 -L / -E LD_LIBRARY_PATH="$SYSROOT/usr/lib/aarch64-linux-gnu")
# The kernel tests again with every table capped to its plain C++ row (what a CPU of another
# architecture runs); the rows that tests pick by name (qgemm's neon, neondot) ran above.
for t in kiln_kernel_tests kiln_delegate_tests; do KILN_MAX_ISA=plain "${QEMU[@]}" "$BUILD_DIR/$t" --gtest_brief=1; done

HOST_BUILD="${KILN_HOST_BUILD:-build}"
if [ ! -x "$HOST_BUILD/kiln" ]; then bash scripts/setup.sh "$HOST_BUILD"; fi
$CMAKE --build "$HOST_BUILD" --target kiln kiln_replay
ZOO_DIR="$BUILD_DIR/zoo-x86"
rm -rf "$ZOO_DIR"
python3 scripts/zoo_cases.py "$HOST_BUILD/kiln" "$ZOO_DIR"
"$HOST_BUILD/kiln_replay" record "$ZOO_DIR/cases.tsv"
"${QEMU[@]}" "$BUILD_DIR/kiln_replay" compare "$ZOO_DIR/cases.tsv"

# What it costs to embed, arm64 beside x86-64's runtime-only build (scripts/test_runtime.sh,
# which .ci/run runs first) when there is one.
X86_BUILD=(); if [ -f build-runtime/libkiln_core.a ]; then X86_BUILD=(build-runtime); fi
bash scripts/runtime_size.sh "${X86_BUILD[@]}" "$BUILD_DIR"
