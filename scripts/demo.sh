#!/usr/bin/env bash
# The main job on the bundled example: set up, inspect the CNN's shape contract, check
# shapes against it, and run it at its bound and far below it.
# Usage: bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
set -x
./build/kiln inspect examples/cnn.kiln
./build/kiln check examples/cnn.kiln --input_shapes=1x3x17x5
./build/kiln check examples/cnn.kiln --input_shapes=1x3x65x5 || true
./build/kiln_runner --model_path=examples/cnn.kiln --print_output=summary
./build/kiln_runner --model_path=examples/cnn.kiln --input_shapes=1x3x17x5 --print_output=summary --num_executions=3
./build/kiln_runner --model_path=examples/mlp.kiln --input_shapes=3x16 --print_output=all
