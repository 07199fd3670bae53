#!/usr/bin/env bash
# One command: Kiln and ExecuTorch side by side on the zoo's and the torchvision sweep's torch
# models; writes bench/compare/results.md and results.json.
#   bash bench/compare/run.sh [--models mobilenet_v2,bert_tiny] [--threads 1,2] [--runs 20] [--resume]
# Environment: KILN_COMPARE_VENV (default /work/venv-et), KILN_BUILD (a build configured with
# -DKILN_PYTHON=ON; default ./build). The virtualenv is made (and the kiln package of that
# build copied into it) when missing, and Kiln re-copied when the build's kiln_runner differs
# from the copy (a stale copy measured an older Kiln once); KILN_COMPARE_REFRESH=1 re-copies it
# anyway.
# Not part of CI: never install ExecuTorch or torch 2.x for the tests.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${KILN_COMPARE_VENV:-/work/venv-et}"
BUILD="${KILN_BUILD:-$ROOT/build}"
if [ ! -x "$VENV/bin/python" ] || [ ! -x "$VENV/kiln-build/kiln_runner" ] || [ "${KILN_COMPARE_REFRESH:-0}" = 1 ] ||
  ! cmp -s "$BUILD/kiln_runner" "$VENV/kiln-build/kiln_runner"; then
  bash "$HERE/setup_venv.sh" "$VENV" "$BUILD"
fi
cd "$ROOT"
exec "$VENV/bin/python" "$HERE/compare.py" --build "$VENV/kiln-build" "$@"
