#!/usr/bin/env python3
"""What the Python bindings add per call, on a model whose work is nothing (Relu of one
float), against kiln_runner's in-process time for the same program in the same run.

    python3 bench/python_overhead.py [--calls 20000] [--build build]

Reports, per call: `method(x)` (numpy in, numpy out: bind + copy in + execute + copy out +
the Python wrapper), `method.run(x)`, execute alone timed inside the extension without Python,
and kiln_runner's mean per execution (`--num_executions`, one process), and the binding
overhead = method(x) - kiln_runner; for scale, ONNX Runtime's `session.run` from Python on the
same ONNX model (when onnxruntime is installed). Needs the kiln package and onnx.
"""
import argparse
import os
import re
import subprocess
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

import kiln


def one_element_model() -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "one",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def per_call_us(fn, calls: int) -> float:
    for _ in range(min(1000, calls)):
        fn()
    best = float("inf")
    for _ in range(5):  # the best of 5 batches: the least disturbed by the machine
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "one.kiln")
        kiln.export_onnx(one_element_model(), path, delegate="none")
        m = kiln.load(path).methods["forward"]
        x = np.ones(1, np.float32)
        call = per_call_us(lambda: m(x), a.calls)
        run = per_call_us(lambda: m.run(x), a.calls)
        execute_only = min(m._impl.time_execute_ns(a.calls) for _ in range(5)) / 1000
        r = subprocess.run([os.path.join(a.build, "kiln_runner"), f"--model_path={path}", "--input_shapes=1",
                            f"--num_executions={a.calls}", "--print_output=none"], capture_output=True, text=True,
                           check=True)
        mean_ms = float(re.search(r"mean ([0-9.]+)", r.stdout).group(1))
        runner = mean_ms * 1000
        try:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            sess = ort.InferenceSession(one_element_model().SerializeToString(), opts, providers=["CPUExecutionProvider"])
            ort_call = per_call_us(lambda: sess.run(None, {"x": x}), a.calls)
        except ImportError:
            ort_call = None
    print("| per call (1-element Relu) | us |")
    print("|---|---:|")
    print(f"| `method(x)` from Python | {call:.2f} |")
    print(f"| `method.run(x)` from Python | {run:.2f} |")
    print(f"| execute() in the extension, no Python | {execute_only:.3f} |")
    print(f"| kiln_runner, mean per execution | {runner:.3f} |")
    print(f"| binding overhead: `method(x)` - kiln_runner | {call - runner:.2f} |")
    if ort_call is not None:
        print(f"| for scale: ONNX Runtime `session.run` from Python, same model | {ort_call:.2f} |")


if __name__ == "__main__":
    main()
