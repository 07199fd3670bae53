#!/usr/bin/env bash
# Kiln's batched matmul (two run-time operands) against OpenBLAS, BLIS, Eigen and oneDNN (Debian
# packages), each in its own binary so their BLAS symbols never mix. Needs a built Kiln (BUILD).
# Usage: bash bench/matmul_libs.sh [BUILD_DIR]   -> bench/results/matmul_libs.md
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
SUDO=""; if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
$SUDO apt-get install -y -qq libopenblas-dev libblis-dev libeigen3-dev libdnnl-dev >/dev/null
OUT=$(mktemp -d)
KILN_LIBS="$BUILD/libkiln_delegates.a $BUILD/libkiln_format.a $BUILD/libkiln_kernels.a $BUILD/libkiln_core.a"
FLAGS="-O3 -std=c++20 -Isrc -I$BUILD/gen"
declare -A EXTRA=([OPENBLAS]="-I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas"
                  [BLIS]="-lblis" [EIGEN]="-I/usr/include/eigen3" [DNNL]="-fopenmp -ldnnl")
for lib in OPENBLAS BLIS EIGEN DNNL; do
  g++ $FLAGS -DLIB_$lib bench/matmul_libs.cc $KILN_LIBS -lXNNPACK -lpthreadpool -lpthread ${EXTRA[$lib]} -o "$OUT/mm_$lib"
done
{
  echo "# Batched matmul with two run-time operands: Kiln's kernel vs libraries"
  echo
  echo "Command: \`bash bench/matmul_libs.sh\` ($(date -u +%Y-%m-%d), $(git rev-parse --short HEAD)); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) logical CPUs."
  echo "Each library in its own binary beside Kiln's kernel in the same process; median of repeated calls (3 warm-ups), microseconds."
  echo "Packages: $(dpkg-query -W -f='${Package} ${Version}; ' libopenblas0-pthread libblis4-pthread libeigen3-dev libdnnl2 2>/dev/null || true)"
  echo
  echo "| library | shape (batch x M x K x N) | threads | Kiln us | library us | library / Kiln | max abs diff |"
  echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
  for lib in OPENBLAS BLIS EIGEN DNNL; do
    "$OUT/mm_$lib" | awk '{printf "| %s | %s | %s | %s | %s | %.2fx | %s |\n", $1, $2, $3, $4, $5, $5 / $4, $6}'
  done
} > bench/results/matmul_libs.md
cat bench/results/matmul_libs.md
