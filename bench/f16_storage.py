"""Half precision: what Kiln's choice (float16 weights converted to float32 at export, compute
in float32) costs in file size, against keeping float16 in the file. For each zoo model it
writes the float16 variant onnxconverter_common would (float32 I/O, every float initializer
stored as float16 and Cast to float32 where read), exports both with `kiln export`, and
compares the files, the Kiln outputs against ONNX Runtime on the float32 model, and the
float16 model in ONNX Runtime.

    python3 bench/f16_storage.py [--models mobilenet_v2 bert_tiny ...] [--out bench/results/f16_storage.md]

Needs build/kiln and build/kiln_runner, onnx 1.17 and onnxruntime 1.31.1 (pip).
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = os.path.join(ROOT, "zoo")


def to_f16_weights(model):
    """Every float initializer stored as float16 and Cast back to float32 where it is read."""
    g = model.graph
    casts, inits = [], []
    for t in g.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype != np.float32:
            inits.append(t)
            continue
        inits.append(numpy_helper.from_array(a.astype(np.float16), t.name + "__f16"))
        casts.append(helper.make_node("Cast", [t.name + "__f16"], [t.name], to=TensorProto.FLOAT, name=t.name + "__cast"))
    del g.initializer[:]
    g.initializer.extend(inits)
    nodes = list(g.node)
    del g.node[:]
    g.node.extend(casts + nodes)
    return model


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=["mobilenet_v2", "resnet_small", "bert_tiny", "gpt_tiny"])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/f16_storage.md"))
    args = ap.parse_args()
    manifest = json.load(open(os.path.join(ZOO, "manifest.json")))
    by_name = {m["name"]: m for m in manifest["models"]}
    kiln, runner = os.path.join(ROOT, "build/kiln"), os.path.join(ROOT, "build/kiln_runner")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            m = by_name[name]
            src = os.path.join(ZOO, m["onnx"])
            f16 = os.path.join(tmp, name + "_f16.onnx")
            onnx.save(to_f16_weights(onnx.load(src)), f16)
            sizes = {}
            for tag, path in (("f32", src), ("f16", f16)):
                out = os.path.join(tmp, f"{name}_{tag}.kiln")
                run([kiln, "export", path, "-o", out] + m["export_args"])
                sizes[tag] = (os.path.getsize(path), os.path.getsize(out))
            case = m["cases"][-1]  # the bound-most reference case
            inputs = [os.path.join(ZOO, p) for p in case["inputs"]]
            feeds = {i.name: np.load(p) for i, p in zip(onnx.load(src).graph.input, inputs)}
            ref32 = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)
            ref16 = ort.InferenceSession(f16, providers=["CPUExecutionProvider"]).run(None, feeds)
            outp = os.path.join(tmp, name + "_out")
            run([runner, "--model_path=" + os.path.join(tmp, f"{name}_f16.kiln"), "--inputs=" + ",".join(inputs),
                 "--output_file=" + outp, "--output_format=npy", "--print_output=none"])
            kiln16 = [np.load(f"{outp}-{k}.npy") for k in range(len(ref32))]

            def rel(a, b):
                return max(float(np.max(np.abs(x.astype(np.float64) - y) / (1 + np.abs(y)))) if x.size else 0.0
                           for x, y in zip(a, b))

            rows.append((name, case["input_shapes"], sizes["f32"][0], sizes["f16"][0], sizes["f32"][1], sizes["f16"][1],
                         rel(kiln16, ref32), rel(ref16, ref32), rel(kiln16, ref16)))
    with open(args.out, "w") as f:
        f.write("# float16 weights: Kiln's storage choice measured\n\n")
        f.write("Command: `python3 bench/f16_storage.py` (zoo models with every float initializer stored as float16 and\n"
                "Cast to float32 where read, as onnxconverter_common writes with keep_io_types=True). Kiln converts\n"
                "float16 weights to float32 at export and computes in float32; the file therefore holds float32.\n\n")
        f.write("| model | case | ONNX f32 | ONNX f16 | .kiln from f32 | .kiln from f16 | Kiln(f16 model) vs ORT f32 | "
                "ORT(f16 model) vs ORT f32 | Kiln vs ORT (f16 model) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
        for r in rows:
            f.write(f"| {r[0]} | {r[1]} | {r[2]:,} | {r[3]:,} | {r[4]:,} | {r[5]:,} | {r[6]:.2e} | {r[7]:.2e} | {r[8]:.2e} |\n")
        f.write("\nErrors are max |a - b| / (1 + |b|) over the outputs at the case's shapes.\n")
    print(open(args.out).read())


if __name__ == "__main__":
    main()
