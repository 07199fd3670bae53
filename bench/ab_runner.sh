#!/usr/bin/env bash
# Two kiln_runner builds, A and B, on the heavy models (bench/export_heavy.py and
# heavy_profile.py put them in build/bench/heavy), runs interleaved A, B, B, A... so that a
# machine's drift falls on both: per model, the median over RUNS runs of each run's median
# iteration of 20 executions, in ms, and B/A.
# Usage: bash bench/ab_runner.sh A_RUNNER B_RUNNER THREADS RUNS MODEL...
#   e.g. bash bench/ab_runner.sh /tmp/base/build/kiln_runner build/kiln_runner 2 5 mnasnet0_5
set -euo pipefail
A=$1 B=$2 T=$3 R=$4
shift 4
H=${KILN_HEAVY_DIR:-build/bench/heavy}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
one_run() {  # the median iteration of 20 executions
  "$1" --model_path="$H/$2.kiln" --inputs="$H/inputs/$2/input_0.npy" --print_output=none --num_executions=20 \
    --cpu_threads="$T" | grep -oE '^Iteration [0-9]+ of [0-9]+: [0-9.]+' | awk '{print $5}' | median
}
for m in "$@"; do
  a=() b=()
  for i in $(seq 1 "$R"); do  # A B, then B A: the second of two runs measured slower on a busy host
    if ((i % 2)); then
      a+=("$(one_run "$A" "$m")")
      b+=("$(one_run "$B" "$m")")
    else
      b+=("$(one_run "$B" "$m")")
      a+=("$(one_run "$A" "$m")")
    fi
  done
  ma=$(printf '%s\n' "${a[@]}" | median)
  mb=$(printf '%s\n' "${b[@]}" | median)
  echo "$m threads=$T A $ma B $mb B/A $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.3f", b / a}')"
done
