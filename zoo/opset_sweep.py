#!/usr/bin/python3
"""Re-export every zoo model at other ONNX opsets and check Kiln against ONNX Runtime.

torch writes the same model differently per opset (Upsample vs Resize, NonZero-based
arange before opset 11, Squeeze/Split axes as attributes or inputs...). This exports each
zoo model with torch at each requested opset into OUT/<opset>/, runs `kiln export` with the
model's contract from zoo/manifest.json, runs `kiln_runner` on every reference case's
inputs, and compares with ONNX Runtime on the same ONNX file (zoo/reference/run_ort.py),
because before opset 11 the ONNX file itself can differ from torch's own results.

    /usr/bin/python3 zoo/opset_sweep.py --opsets 9,10,11,12,13,14,15,16,17 [--only bert_tiny]

Needs Debian's torch (so it runs under /usr/bin/python3), a build in build/, and a second
interpreter with onnxruntime for run_ort.py (zoo/reference/requirements.txt): --ort-python,
else $KILN_ORT_PYTHON, else the first python3 on PATH (pyenv's). Exit status 1 if any model
fails.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

ZOO = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ZOO)
import make_zoo  # noqa: E402
from ort_reference import ort_outputs, ort_python  # noqa: E402


def check_model(build, ort_py, out_dir, index, spec, manifest):
    name = spec["name"]
    try:
        make_zoo.export_one(index, spec)
    except Exception as e:  # torch cannot export this model at this opset
        return f"torch export failed: {str(e).splitlines()[0][:150]}", True
    onnx_path = os.path.join(out_dir, name + ".onnx")
    kiln_path = os.path.join(out_dir, name + ".kiln")
    r = subprocess.run([os.path.join(build, "kiln"), "export", onnx_path, "-o", kiln_path] +
                       make_zoo.dims_args(spec["dims"]), capture_output=True, text=True)
    if r.returncode != 0:
        return "kiln export failed: " + (r.stdout + r.stderr).strip()[:400], False
    summary = [line.strip() for line in r.stdout.splitlines() if "ONNX nodes" in line][0]
    worst, bad = 0.0, []
    for case in manifest[name]["cases"]:
        inputs = [os.path.join(ZOO, p) for p in case["inputs"]]
        prefix = os.path.join(out_dir, name + "_out")
        r = subprocess.run([os.path.join(build, "kiln_runner"), f"--model_path={kiln_path}",
                            "--inputs=" + ",".join(inputs), f"--input_shapes={case['input_shapes']}",
                            f"--output_file={prefix}", "--output_format=npy", "--print_output=none"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            bad.append(f"{case['name']}: kiln_runner failed: {(r.stdout + r.stderr).strip()[:300]}")
            continue
        for i, ref in enumerate(ort_outputs(ort_py, onnx_path, inputs)):
            got = np.load(f"{prefix}-{i}.npy")
            if got.shape != ref.shape:
                bad.append(f"{case['name']} output {i}: shape {got.shape}, ONNX Runtime {ref.shape}")
                continue
            err = float(np.max(np.abs(got - ref) / (1 + np.abs(ref)))) if got.size else 0.0
            worst = max(worst, err)
            if err > 1e-4:
                bad.append(f"{case['name']} output {i}: error {err:.2e}")
    return f"{summary}; max error {worst:.1e}" + ("; " + "; ".join(bad) if bad else ""), not bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opsets", default="9,10,11,12,13,14,15,16,17")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--build", default=os.path.join(ZOO, "..", "build"))
    ap.add_argument("--out", default="/tmp/kiln-opset-sweep")
    ap.add_argument("--ort-python", help="python with onnxruntime for reference/run_ort.py "
                    "(default: $KILN_ORT_PYTHON, else python3 on PATH)")
    opts = ap.parse_args()
    ort_py = ort_python(opts.ort_python)
    torch.set_num_threads(1)
    specs = make_zoo.build_specs()
    with open(os.path.join(ZOO, "manifest.json")) as f:
        manifest = {m["name"]: m for m in json.load(f)["models"]}
    only = set(opts.only.split(",")) if opts.only else None
    failures = 0
    for opset in [int(x) for x in opts.opsets.split(",")]:
        make_zoo.OPSET = opset
        make_zoo.MODELS = os.path.join(opts.out, str(opset))
        os.makedirs(make_zoo.MODELS, exist_ok=True)
        for index, spec in enumerate(specs):
            if only and spec["name"] not in only:
                continue
            if spec.get("min_opset", 0) > opset:
                print(f"opset {opset:2d} {spec['name']:14s} skip needs opset {spec['min_opset']}", flush=True)
                continue
            text, ok = check_model(opts.build, ort_py, make_zoo.MODELS, index, spec, manifest)
            failures += not ok
            label = "skip" if text.startswith("torch export failed") else "ok  " if ok else "FAIL"
            print(f"opset {opset:2d} {spec['name']:14s} {label} {text}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
