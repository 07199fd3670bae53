#!/usr/bin/env bash
# Sets up (dependencies + build + the Python package) and runs the whole test suite: ctest,
# then pytest.
# Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
ctest --test-dir build --output-on-failure -j2
# The Python package, installed by setup.sh (python/tests; KILN_BUILD_DIR finds kiln_runner).
KILN_BUILD_DIR="$PWD/build" python3 -m pytest -q python/tests
