#!/usr/bin/env bash
# The main job on bundled examples: set up, export a zoo model (ONNX) under a bounded
# dynamic contract, inspect and check it, and run it at its bound and far below it; then
# the same with a BERT-style encoder whose two inputs share dims.
# Usage: bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
mkdir -p build/demo
set -x
# A UNet-style decoder: H and W are dynamic, multiples of 8 in [8, 128].
./build/kiln export zoo/models/unet_decoder.onnx -o build/demo/unet.kiln --dim H=8..128:8 --dim W=8..128:8
./build/kiln inspect build/demo/unet.kiln
./build/kiln check build/demo/unet.kiln --input_shapes=1x3x24x40
./build/kiln check build/demo/unet.kiln --input_shapes=1x3x20x40 || true   # off-step: refused with the fix
./build/kiln_runner --model_path=build/demo/unet.kiln --print_output=summary               # at the bound
./build/kiln_runner --model_path=build/demo/unet.kiln --input_shapes=1x3x8x16 --print_output=summary --num_executions=3
./build/kiln_runner --model_path=build/demo/unet.kiln --inputs=zoo/cases/unet_decoder/24x40/input_0.npy --print_output=summary
# BERT-style encoder: input_ids and attention_mask share dims batch and seq.
./build/kiln export zoo/models/bert_tiny.onnx -o build/demo/bert.kiln --dim batch=1..4 --dim seq=1..128
./build/kiln_runner --model_path=build/demo/bert.kiln --input_shapes=2x17,2x17 --print_output=summary
./build/kiln_runner --model_path=build/demo/bert.kiln --input_shapes=2x17,2x18 || true      # unequal shared dim: refused
