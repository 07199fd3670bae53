#!/usr/bin/env bash
# Runs each libFuzzer target of a sanitized build (scripts/sanitize.sh builds it) from its
# committed seed corpus and dictionary; new finds go to a scratch dir, the corpus stays as it is.
# Usage: bash scripts/fuzz.sh BUILD_DIR [--runs N | --seconds S] [TARGET...]
#   --runs N     N executions per target with a fixed seed (deterministic; CI: 20,000)
#   --seconds S  S seconds per target
# The long run before closing a fuzzing issue: bash scripts/fuzz.sh build-asan --runs 1000000
# Prints each target's executions, speed, coverage and peak memory; exits non-zero on the
# first crash, leak, hang or sanitizer report, leaving the input in the printed directory.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:?usage: fuzz.sh BUILD_DIR [--runs N | --seconds S] [TARGET...]}"
shift
budget="-runs=20000 -seed=1"
case "${1:-}" in
  --runs) budget="-runs=$2 -seed=1"; shift 2 ;;
  --seconds) budget="-max_total_time=$2"; shift 2 ;;
esac
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(load npy server onnx specs); fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for t in "${targets[@]}"; do
  work=$(mktemp -d)
  cp -r "fuzz/corpus/$t/." "$work/"
  dict=""; if [ -f "fuzz/dict/$t.dict" ]; then dict="-dict=fuzz/dict/$t.dict"; fi
  # Inputs up to 64 KiB; the server's up to 4 KiB (dozens of requests, each an inference: longer
  # ones cost seconds apiece; a line over the 64 KiB limit has its own row in the unit test).
  max_len=65536; if [ "$t" = server ]; then max_len=4096; fi
  echo "fuzz_$t: $budget"
  start=$(date +%s)
  set +e
  "$BUILD_DIR/fuzz_$t" $budget -max_len=$max_len -rss_limit_mb=3072 -timeout=30 \
    -print_final_stats=1 -artifact_prefix="$work/" $dict "$work" > "$work.log" 2>&1
  status=$?
  set -e
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|ERROR|SUMMARY" "$work.log" || true
  grep -E "^#[0-9]+.*(DONE|cov:)" "$work.log" | tail -1 || true
  echo "  $(( $(date +%s) - start )) s"
  if [ $status -ne 0 ]; then
    tail -40 "$work.log"
    echo "fuzz_$t failed (exit $status); the input is in $work"
    exit 1
  fi
  rm -rf "$work" "$work.log"
done
rm -rf /tmp/kiln_fuzz_server_out  # fuzz_server's requests' output files
echo "fuzzing: ok"
