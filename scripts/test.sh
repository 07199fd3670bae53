#!/usr/bin/env bash
# Sets up (dependencies + build) and runs the whole test suite with ctest.
# Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
ctest --test-dir build --output-on-failure -j2
