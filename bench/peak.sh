#!/usr/bin/env bash
# The single-core limits the heavy kernels are held against (issue 25): f32 FMA peak (AVX2 and,
# where the CPU has it, AVX-512) and memory bandwidth (read, triad), from bench/peak.cc.
# Usage: bash bench/peak.sh [OUT]   -> bench/results/peak.md (default)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-bench/results/peak.md}"
BIN="$(mktemp -d)/peak"
g++ -O3 -std=c++17 bench/peak.cc -o "$BIN"
"$BIN" > "$BIN.txt"
val() { awk -v k="$1" '$1 == k {print $2}' "$BIN.txt"; }
{
  echo "# Single-core limits"
  echo
  echo "Command: \`bash bench/peak.sh\` ($(date -u +%Y-%m-%d), $(git rev-parse --short HEAD)); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512bw|avx512vl|avx512_vnni)$' | tr '\n' ' ')"
  echo
  echo "| limit | one core |"
  echo "|---|---|"
  echo "| f32 FMA peak, AVX2 (12 chains of 8) | $(val fma_avx2_gflops) GFLOP/s |"
  echo "| f32 FMA peak, AVX-512 (24 chains of 16) | $(val fma_avx512_gflops) GFLOP/s |"
  echo "| f32 GEMM tile in L1, AVX2 (6 rows x 16, broadcast A, k = 256) | $(val gemm_avx2_gflops) GFLOP/s |"
  echo "| f32 GEMM tile in L1, AVX-512 (6 rows x 32) | $(val gemm_avx512_gflops) GFLOP/s |"
  echo "| f32 GEMM tile in L1, AVX-512 (12 rows x 32) | $(val gemm_avx512_12x32_gflops) GFLOP/s |"
  echo "| memory read (sum over 512 MiB) | $(val read_gbps) GB/s |"
  echo "| memory triad a = b + s*c (3 x 512 MiB) | $(val triad_gbps) GB/s |"
  echo
  echo "Best of 5 (FMA, GEMM) or 3 (memory) runs. Shared cloud host: another tenant's load lowers these. The GEMM"
  echo "tile is the ceiling of a broadcast-FMA microkernel with its operands in L1 (its loads compete with the FMAs):"
  echo "what a dense layer can reach, against which 'x% of peak' is read."
} > "$OUT"
cat "$OUT"
