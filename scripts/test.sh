#!/usr/bin/env bash
# Sets up (dependencies + build + the Python package) and runs the whole test suite: ctest,
# then pytest.
# Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
# Debian's torch 1.13 for kiln.export from /usr/bin/python3 (python/tests/test_system_torch.py).
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torch python3-torchvision >/dev/null
ctest --test-dir build --output-on-failure -j2
# Each ISA row this CPU has, forced in turn (KILN_MAX_ISA): kernels, delegate kernels, the zoo.
bash scripts/test_isas.sh build
# The Python package, installed by setup.sh (python/tests; KILN_BUILD_DIR finds kiln_runner).
# torch 2.13.0 is a CPU build that lies on disk (no download): with onnxscript it tests the
# kiln.export paths (dynamo and TorchScript exporters). Never another torch version here.
python3 -m pip install -q "torch==2.13.0" "onnxscript==0.7.2"
KILN_BUILD_DIR="$PWD/build" python3 -m pytest -q python/tests
# What a fresh machine checks after the setup: the installed package imports from anywhere.
(cd / && python3 -c "import kiln; print('kiln', kiln.__version__, 'from', kiln.__file__)")
