#!/usr/bin/env python3
"""Quantized models: Kiln int8 against Kiln float and ONNX Runtime int8, same run.

    python3 bench/int8_bench.py [--models NAME,...] [--threads 1,2] [--runs 20] [--warmup 3]
                                [--build build] [--out bench/results/int8_bench.md]

Models: zoo/quantized/manifest.json (zoo/quantized/make_quantized.py: the zoo's models quantized
by ONNX Runtime's quantizer, static QDQ or dynamic). Shapes: each entry's cases (the float
zoo's: minimum, far below, the bound). Per shape and thread count, the median of --runs after
--warmup of: Kiln on the quantized .kiln, Kiln on the float model's .kiln (same contract),
ONNX Runtime on the quantized ONNX and on the float ONNX (default optimizations). Kiln's times
are kiln_runner's per-iteration lines (execute only); ONNX Runtime's are perf_counter around
session.run. Also the .kiln sizes. Writes OUT (Markdown) and OUT with .json.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ZOO = os.path.join(ROOT, "zoo")


def cpu_isa():
    """The x86 ISA extensions that decide the int8 kernels: 'AVX-512 VNNI', 'AVX2' or the machine."""
    try:
        flags = open("/proc/cpuinfo").read().split()
    except OSError:
        return os.uname().machine
    if "avx512_vnni" in flags:
        return "x86-64 with AVX-512 VNNI"
    return "x86-64 with AVX2, no AVX-512 VNNI" if "avx2" in flags else os.uname().machine


def kiln_times(build, kiln, inputs, threads, runs, warmup):
    cmd = [os.path.join(build, "kiln_runner"), f"--model_path={kiln}", "--inputs=" + ",".join(inputs),
           "--print_output=none", f"--num_executions={runs + warmup}", f"--cpu_threads={threads}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    t = [float(x) for x in re.findall(r"Iteration \d+ of \d+: ([0-9.]+) ms", out)]
    return statistics.median(t[warmup:])


def ort_times(onnx_path, feeds, threads, runs, warmup):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    t = []
    for _ in range(runs + warmup):
        t0 = time.perf_counter()
        s.run(None, feeds)
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t[warmup:])


def export(build, onnx_path, kiln, args):
    subprocess.run([os.path.join(build, "kiln"), "export", onnx_path, "-o", kiln] + args, check=True, capture_output=True)


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "int8_bench.md"))
    a = ap.parse_args()
    with open(os.path.join(ZOO, "quantized", "manifest.json"), encoding="utf-8") as f:
        models = json.load(f)["models"]
    with open(os.path.join(ZOO, "manifest.json"), encoding="utf-8") as f:
        floats = {m["name"]: m for m in json.load(f)["models"]}
    if a.models:
        models = [m for m in models if m["name"] in a.models.split(",")]
    work = os.path.join(a.build, "bench", "int8")
    os.makedirs(work, exist_ok=True)
    rows = []
    for m in models:
        fm = floats[m["float_model"]]
        qk, fk = os.path.join(work, m["name"] + ".kiln"), os.path.join(work, fm["name"] + ".kiln")
        export(a.build, os.path.join(ZOO, m["onnx"]), qk, m["export_args"])
        export(a.build, os.path.join(ZOO, fm["onnx"]), fk, fm["export_args"])
        sizes = (os.path.getsize(qk), os.path.getsize(fk))
        names = [i.name for i in ort.InferenceSession(os.path.join(ZOO, m["onnx"]), providers=["CPUExecutionProvider"]).get_inputs()]
        for c in m["cases"]:
            inputs = [os.path.join(ZOO, p) for p in c["inputs"]]
            feeds = {n: np.load(p) for n, p in zip(names, inputs)}
            for t in [int(x) for x in a.threads.split(",")]:
                r = {"model": m["name"], "kind": m["kind"], "shape": c["input_shapes"], "threads": t,
                     "kiln_int8": kiln_times(a.build, qk, inputs, t, a.runs, a.warmup),
                     "kiln_float": kiln_times(a.build, fk, inputs, t, a.runs, a.warmup),
                     "ort_int8": ort_times(os.path.join(ZOO, m["onnx"]), feeds, t, a.runs, a.warmup),
                     "ort_float": ort_times(os.path.join(ZOO, fm["onnx"]), feeds, t, a.runs, a.warmup),
                     "kiln_bytes": sizes[0], "kiln_float_bytes": sizes[1]}
                rows.append(r)
                print(f"{r['model']:24} {r['shape']:32} t{t}: kiln int8 {r['kiln_int8']:.3f} float {r['kiln_float']:.3f} "
                      f"ort int8 {r['ort_int8']:.3f} float {r['ort_float']:.3f} ms", flush=True)
    lines = ["# int8: Kiln against Kiln float and ONNX Runtime int8", "",
             f"`python3 bench/int8_bench.py` (onnxruntime {ort.__version__}); median of {a.runs} runs after {a.warmup}; ms.",
             f"CPU: {cpu_isa()} (Kiln's int8 kernels and ONNX Runtime's both pick their ISA at run time).", "",
             "| model | shape | threads | Kiln int8 | Kiln float | ORT int8 | ORT float | int8/float (Kiln) | Kiln int8 / ORT int8 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['shape']} | {r['threads']} | {r['kiln_int8']:.3f} | {r['kiln_float']:.3f} | "
                     f"{r['ort_int8']:.3f} | {r['ort_float']:.3f} | {r['kiln_int8'] / r['kiln_float']:.2f} | "
                     f"{r['kiln_int8'] / r['ort_int8']:.2f} |")
    lines += ["", "Geomeans (per kind and thread count):", "",
              "| kind | threads | Kiln int8 / Kiln float | Kiln int8 / ORT int8 | ORT int8 / ORT float |", "|---|---|---|---|---|"]
    for kind in ("static", "dynamic"):
        for t in sorted({r["threads"] for r in rows}):
            sel = [r for r in rows if r["kind"] == kind and r["threads"] == t]
            if sel:
                lines.append(f"| {kind} | {t} | {geomean([r['kiln_int8'] / r['kiln_float'] for r in sel]):.2f} | "
                             f"{geomean([r['kiln_int8'] / r['ort_int8'] for r in sel]):.2f} | "
                             f"{geomean([r['ort_int8'] / r['ort_float'] for r in sel]):.2f} |")
    lines += ["", "File sizes: int8 .kiln / float .kiln:", ""]
    seen = set()
    for r in rows:
        if r["model"] not in seen:
            seen.add(r["model"])
            lines.append(f"- {r['model']}: {r['kiln_bytes']} / {r['kiln_float_bytes']} bytes = {r['kiln_bytes'] / r['kiln_float_bytes']:.2f}")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(a.out)[0] + ".json", "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1)
    print("\n".join(lines[-20:]))


if __name__ == "__main__":
    sys.exit(main())
