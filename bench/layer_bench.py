#!/usr/bin/env python3
"""One-layer benchmark: depthwise convolutions at the shapes of MobileNetV2, MobileNetV3 and
EfficientNet-B0 (or, with --kind dense, the dense layers where issue 25's profile found the
gaps: the 3-channel stems and the 1x1 convolutions over 16-24 channels), Kiln (XNNPACK
delegate and Kiln's own kernels) against ONNX Runtime CPU on the same one-node ONNX model,
in the same run.

    python3 -m pip install -r bench/requirements.txt
    python3 bench/layer_bench.py [--threads 1,2] [--runs 50] [--build build] [--out bench/results/layer_bench.md]
    python3 bench/layer_bench.py --batch 4 --size 320 --out bench/results/layer_bench_heavy.md   # issue 25's heavy shapes
    python3 bench/layer_bench.py --kind dense --batch 4 --size 320 --out bench/results/layer_bench_dense.md

Each depthwise layer is a Conv with group = C (+ bias, Relu6 as Clip(0, 6) where the network has it)
on [N, C, H, W] (N = --batch, default 1; H and W scaled by --size / 224). Kiln's time is the Conv step of `kiln_runner --profile` (the operator alone)
and the whole execute (with the NCHW <-> NHWC changes at the region edges); ONNX Runtime's is
`session.run` (which includes its own layout reorders for NCHWc).
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (network, channels, H, W, kernel, stride): the depthwise layers of each network at 224x224.
LAYERS = [
    ("mobilenet_v2", 32, 112, 112, 3, 1), ("mobilenet_v2", 96, 112, 112, 3, 2), ("mobilenet_v2", 144, 56, 56, 3, 1),
    ("mobilenet_v2", 144, 56, 56, 3, 2), ("mobilenet_v2", 192, 28, 28, 3, 1), ("mobilenet_v2", 384, 14, 14, 3, 1),
    ("mobilenet_v2", 576, 14, 14, 3, 2), ("mobilenet_v2", 960, 7, 7, 3, 1),
    ("mobilenet_v3", 16, 112, 112, 3, 2), ("mobilenet_v3", 72, 56, 56, 5, 2), ("mobilenet_v3", 120, 28, 28, 5, 1),
    ("mobilenet_v3", 240, 28, 28, 3, 1), ("mobilenet_v3", 480, 14, 14, 3, 1), ("mobilenet_v3", 672, 14, 14, 5, 2),
    ("mobilenet_v3", 960, 7, 7, 5, 1),
    ("efficientnet_b0", 32, 112, 112, 3, 1), ("efficientnet_b0", 144, 56, 56, 3, 1),
    ("efficientnet_b0", 144, 56, 56, 5, 2), ("efficientnet_b0", 240, 28, 28, 5, 1), ("efficientnet_b0", 480, 14, 14, 3, 1),
    ("efficientnet_b0", 672, 14, 14, 5, 1), ("efficientnet_b0", 1152, 7, 7, 5, 1), ("efficientnet_b0", 1152, 7, 7, 3, 1),
    ("mnasnet0_5", 16, 112, 112, 3, 1), ("mnasnet0_5", 24, 112, 112, 3, 2), ("mnasnet0_5", 48, 56, 56, 3, 1),
    ("mnasnet0_5", 48, 56, 56, 5, 2), ("mnasnet0_5", 72, 28, 28, 5, 1), ("mnasnet0_5", 144, 28, 28, 5, 2),
    ("mnasnet0_5", 240, 14, 14, 5, 1),
]

# (network, in channels, out channels, H, W, kernel, stride) at 224x224: the dense layers of
# issue 25's largest per-layer gaps (bench/results/heavy_profile.md): the 3-channel stems and
# the 1x1 convolutions over few input channels.
DENSE_LAYERS = [
    ("squeezenet1_1_stem", 3, 64, 224, 224, 3, 2), ("efficientnet_b0_stem", 3, 32, 224, 224, 3, 2),
    ("mobilenet_v3_stem", 3, 16, 224, 224, 3, 2), ("shufflenet_v2_stem", 3, 24, 224, 224, 3, 2),
    ("resnet18_stem", 3, 64, 224, 224, 7, 2), ("resnet_small_stem", 3, 16, 224, 224, 3, 1),
    ("efficientnet_b0_expand", 16, 96, 112, 112, 1, 1), ("efficientnet_b0_expand", 24, 144, 56, 56, 1, 1),
    ("mobilenet_v3_expand", 16, 72, 56, 56, 1, 1), ("shufflenet_v2_pw", 24, 24, 56, 56, 1, 1),
    ("squeezenet1_1_squeeze", 128, 16, 56, 56, 1, 1), ("mnasnet0_5_project", 16, 8, 112, 112, 1, 1),
    ("mnasnet0_5_expand", 8, 24, 112, 112, 1, 1), ("mobilenet_v2_expand", 64, 384, 14, 14, 1, 1),
    ("mobilenet_v2_expand", 160, 960, 7, 7, 1, 1), ("mobilenet_v2_project", 960, 160, 7, 7, 1, 1),
    # 1x1 layers of 24 output channels (a block and a half) and few-input expands to 72-88
    ("mobilenet_v2_project", 96, 24, 56, 56, 1, 1), ("mobilenet_v2_project", 144, 24, 56, 56, 1, 1),
    ("mobilenet_v2_project", 32, 16, 112, 112, 1, 1), ("mobilenet_v3_project", 72, 24, 28, 28, 1, 1),
    ("mobilenet_v3_project", 88, 24, 28, 28, 1, 1), ("mobilenet_v3_expand", 24, 88, 28, 28, 1, 1),
    # the dense 3x3 stride-1 layers (Winograd F(2x2, 3x3)): resnet18's four stages, squeezenet's expands
    ("resnet18_3x3", 64, 64, 56, 56, 3, 1), ("resnet18_3x3", 128, 128, 28, 28, 3, 1),
    ("resnet18_3x3", 256, 256, 14, 14, 3, 1), ("resnet18_3x3", 512, 512, 7, 7, 3, 1),
    ("squeezenet1_1_expand3x3", 16, 64, 56, 56, 3, 1), ("squeezenet1_1_expand3x3", 32, 128, 28, 28, 3, 1),
    ("squeezenet1_1_expand3x3", 64, 256, 14, 14, 3, 1),
]


def layer_model(n, c, h, w, k, s, path, out_channels=None):
    """A one-Conv model: depthwise (group = c) unless out_channels is given (dense, group 1)."""
    m = out_channels or c
    rng = np.random.default_rng(c * 1000 + m + h + k * 7 + s)
    cin = 1 if out_channels is None else c
    weight = numpy_helper.from_array(rng.standard_normal((m, cin, k, k)).astype(np.float32) * (1.0 / (cin * k * k)) ** 0.5, "w")
    bias = numpy_helper.from_array(rng.standard_normal(m).astype(np.float32) * 0.1, "b")
    conv = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c // cin, kernel_shape=[k, k], strides=[s, s],
                            pads=[k // 2] * 4, name="conv")
    oh, ow = (h + 2 * (k // 2) - k) // s + 1, (w + 2 * (k // 2) - k) // s + 1
    graph = helper.make_graph([conv], "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, m, oh, ow])], [weight, bias])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return 2.0 * n * m * cin * oh * ow * k * k


def kiln_times(build, kiln_path, x_path, threads, runs, work):
    prof = os.path.join(work, "profile.json")
    r = subprocess.run([os.path.join(build, "kiln_runner"), f"--model_path={kiln_path}", f"--inputs={x_path}",
                        f"--num_executions={runs + 1}", f"--cpu_threads={threads}", "--print_output=none",
                        "--profile", f"--profile_json={prof}"], capture_output=True, text=True, check=True)
    whole = [float(m) for m in re.findall(r"Iteration \d+ of \d+: ([0-9.]+) ms", r.stdout)][1:]
    rows = json.load(open(prof))
    conv = sum(row["ms_per_run"] for row in rows if row["op"].startswith("Conv"))
    return conv, statistics.median(whole)


def ort_time(onnx_path, x, threads, runs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        sess.run(None, {"x": x})
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, {"x": x})
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "layer_bench.md"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224, help="the network's input side (layers scaled from 224)")
    ap.add_argument("--layers", default="", help="only layers whose name contains one of these (comma-separated)")
    ap.add_argument("--kind", choices=("depthwise", "dense"), default="depthwise")
    opts = ap.parse_args()
    work = os.path.join(opts.build, "bench", "layers")
    os.makedirs(work, exist_ok=True)
    threads = [int(t) for t in opts.threads.split(",")]
    rows = []
    n = opts.batch
    layers = LAYERS if opts.kind == "depthwise" else DENSE_LAYERS
    for net, c, *rest in layers:
        m, (h, w, k, s) = (rest[0], rest[1:]) if opts.kind == "dense" else (None, rest)
        h, w = h * opts.size // 224, w * opts.size // 224
        name = f"{net}_n{n}_c{c}" + (f"_m{m}" if m else "") + f"_{h}x{w}_k{k}s{s}"
        if opts.layers and not any(part in name for part in opts.layers.split(",")):
            continue
        onnx_path, kiln_path, x_path = (os.path.join(work, name + e) for e in (".onnx", ".kiln", "_x.npy"))
        flops = layer_model(n, c, h, w, k, s, onnx_path, m)
        subprocess.run([os.path.join(opts.build, "kiln"), "export", onnx_path, "-o", kiln_path], check=True,
                       capture_output=True)
        x = np.random.default_rng(c).standard_normal((n, c, h, w)).astype(np.float32)
        np.save(x_path, x)
        for t in threads:
            conv_ms, kiln_ms = kiln_times(opts.build, kiln_path, x_path, t, opts.runs, work)
            ort_ms = ort_time(onnx_path, x, t, opts.runs)
            rows.append(dict(layer=f"{net} N={n} C={c}" + (f"->{m}" if m else "") + f" {h}x{w} k{k} s{s}", threads=t, flops=flops, kiln_conv_ms=conv_ms,
                             kiln_ms=kiln_ms, ort_ms=ort_ms))
            print(f"{name} t={t}: Kiln conv {conv_ms:.3f} ms, whole {kiln_ms:.3f} ms; ORT {ort_ms:.3f} ms", flush=True)
    title = "Depthwise convolution" if opts.kind == "depthwise" else "Dense convolution"
    lines = [f"# {title}, one layer: Kiln vs ONNX Runtime", "",
             f"Command: `python3 bench/layer_bench.py --kind {opts.kind} --threads {opts.threads} --runs {opts.runs} "
             f"--batch {n} --size {opts.size}`",
             "",
             f"- Date: {datetime.datetime.now().isoformat(timespec='seconds')}",
             f"- CPU: {cpu_name()}; ONNX Runtime {ort.__version__}",
             "- Kiln conv: the Conv step alone (from `--profile`); Kiln whole: execute, with the NCHW <-> NHWC",
             "  changes at the region edges; ORT: `session.run` (ORT_ENABLE_ALL, its NCHWc reorders included).",
             "- Ratios below 1 mean Kiln is faster.", "",
             "| layer | threads | Kiln conv ms | GFLOP/s | Kiln whole ms | ORT ms | GFLOP/s | conv / ORT | whole / ORT |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['layer']} | {r['threads']} | {r['kiln_conv_ms']:.3f} | {r['flops'] / r['kiln_conv_ms'] / 1e6:.1f} | "
                     f"{r['kiln_ms']:.3f} | {r['ort_ms']:.3f} | {r['flops'] / r['ort_ms'] / 1e6:.1f} | "
                     f"{r['kiln_conv_ms'] / r['ort_ms']:.2f}x | {r['kiln_ms'] / r['ort_ms']:.2f}x |")
    lines += ["", "Geometric means:", "", "| threads | conv / ORT | whole / ORT |", "| ---: | ---: | ---: |"]
    for t in threads:
        sel = [r for r in rows if r["threads"] == t]
        g = lambda key: float(np.exp(np.mean([np.log(r[key] / r["ort_ms"]) for r in sel])))
        lines.append(f"| {t} | {g('kiln_conv_ms'):.2f}x | {g('kiln_ms'):.2f}x |")
    os.makedirs(os.path.dirname(opts.out), exist_ok=True)
    open(opts.out, "w").write("\n".join(lines) + "\n")
    json.dump(rows, open(os.path.splitext(opts.out)[0] + ".json", "w"), indent=1)
    print("wrote", opts.out)


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
