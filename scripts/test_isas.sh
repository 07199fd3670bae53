#!/usr/bin/env bash
# Every row of the ISA tables this CPU has, each forced in turn: the kernel and delegate-kernel
# tests, the zoo end to end (float and quantized models against ONNX Runtime's outputs) and the
# convolution gates (each kernel path's epilogue against the portable kernels),
# under KILN_MAX_ISA=plain, avx2 and avx512vnni (kernels/simd/isa.h). The default run (ctest)
# already took the best row; a cap this CPU cannot reach is named and skipped.
# Usage: bash scripts/test_isas.sh [BUILD_DIR]   (a built toolchain profile with tests)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
flags="$(grep -m1 '^flags' /proc/cpuinfo || true)"
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
for cap in plain avx2 avx512vnni; do
  case "$cap" in
    avx2) has avx2 fma || { echo "test_isas: skipped avx2 (this CPU lacks AVX2/FMA)"; continue; } ;;
    avx512vnni) has avx512f avx512bw avx512vl avx512_vnni || { echo "test_isas: skipped avx512vnni (this CPU lacks AVX-512 VNNI)"; continue; } ;;
  esac
  echo "test_isas: KILN_MAX_ISA=$cap"
  KILN_MAX_ISA=$cap "$BUILD/kiln_kernel_tests" --gtest_brief=1
  KILN_MAX_ISA=$cap "$BUILD/kiln_delegate_tests" --gtest_brief=1
  KILN_MAX_ISA=$cap "$BUILD/kiln_tests" --gtest_brief=1 --gtest_filter='Models/Zoo.*:*QuantizedZoo*:ConvGate.*'
done
