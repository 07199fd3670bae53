#!/usr/bin/env python3
"""The diagnosis loop for "the model works in Python but rejects our camera frames":

1. export a small CNN static at 224 and inspect its input signature;
2. run it at the device's shape (256) from Python and catch the contract error;
3. choose: here, re-export with bounded dims H, W in [32, 512] step 32, run at 256, and check
   how much of the model the XNNPACK delegate still takes.

    python3 python/examples/diagnosis_loop.py [WORK_DIR]

Needs the kiln package (pip install .) and onnx (pip install onnx==1.17.0) to build the model.
"""
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import kiln


def small_cnn() -> onnx.ModelProto:
    """conv 3x3/2 -> relu -> conv 3x3 -> relu -> global average pool -> fully connected, at
    [1, 3, 224, 224] (static, as an exporter specialized to its example writes it)."""
    rng = np.random.default_rng(0)
    w = lambda name, *s: numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), name)
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"]),
        n("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("Relu", ["c2"], ["r2"]),
        n("GlobalAveragePool", ["r2"], ["g"]),
        n("Flatten", ["g"], ["f"]),
        n("Gemm", ["f", "wf", "bf"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        [w("w1", 16, 3, 3, 3), w("b1", 16), w("w2", 32, 16, 3, 3), w("b2", 32), w("wf", 10, 32), w("bf", 10)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main(work: str) -> int:
    model = small_cnn()
    frame = np.random.default_rng(1).standard_normal((1, 3, 256, 256)).astype(np.float32)

    print("== 1. export static at 224, and inspect")
    static_path = os.path.join(work, "cnn_static.kiln")
    kiln.export_onnx(model, static_path)
    forward = kiln.load(static_path).methods["forward"]
    print("inputs:", forward.inputs)

    print("== 2. run at the camera's 256x256")
    try:
        forward(frame)
        print("unexpected: the static program accepted 256")
        return 1
    except kiln.ContractError as e:
        print("kiln.ContractError:", e)

    print("== 3. re-export with bounded dims, run at 256, check coverage")
    dynamic_path = os.path.join(work, "cnn_dynamic.kiln")
    summary = kiln.export_onnx(model, dynamic_path, inputs={"x": [1, 3, "H", "W"]},
                               dims={"H": (32, 512, 32), "W": (32, 512, 32)})
    print(summary.strip().splitlines()[0])
    forward = kiln.load(dynamic_path).methods["forward"]
    print("inputs:", forward.inputs)
    logits = forward(frame)
    print("logits at 256x256:", logits.shape, "first values", np.round(logits[0, :3], 4))
    c = forward.coverage
    print(f"delegated: {c['delegated_instructions']}/{c['instructions']} instructions, "
          f"{100 * c['flops_fraction']:.1f}% of FLOPs at the bound ({c['backend']}, running: {c['running']})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.makedirs(sys.argv[1], exist_ok=True)
        sys.exit(main(sys.argv[1]))
    with tempfile.TemporaryDirectory() as d:
        sys.exit(main(d))
