#!/usr/bin/env python3
"""Where the time goes on heavy shapes (issue 25): Kiln against ONNX Runtime on the classes that
stayed slower (CNNs at batch 4 and 320x320, channel shuffle at batch 8, a 1-D conv audio
separator and a mel front end over 16,000 samples at batch 2, a conv+GRU over 1,000 steps at
batch 4, a transformer encoder at 4 x 128), in the same run:

- totals at 1 and 2 threads (median of --runs, Kiln's execute against session.run);
- per layer at 1 thread: Kiln's profile (kiln_runner --profile_json) joined by node name with
  ONNX Runtime's (enable_profiling), the convolutions' and MatMuls' GFLOP/s beside the
  single-core FMA peak of bench/results/peak.md;
- per op type, both runtimes.

    /usr/bin/python3 bench/export_heavy.py          # the four models of its own (torch 1.13)
    python3 bench/heavy_profile.py [--models a,b] [--threads 1,2] [--runs 10] [--rounds 5] [--out bench/results/heavy_profile.md]

The torchvision models come from bench/export_torchvision.py's cache (exported on demand, as
bench/ort_compare.py does), with the contract N=1..8, H,W=32..320.
"""
import argparse
import collections
import datetime
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ort_compare as oc  # noqa: E402  (models, inputs, runners: one copy of each)

ROOT = os.path.dirname(HERE)
TV_DIMS = {"N": {"min": 1, "max": 8}, "H": {"min": 32, "max": 320}, "W": {"min": 32, "max": 320}}
NORMAL = {"kind": "normal"}


def heavy_input(name, dims, dtype="float32", gen=NORMAL):
    return [{"name": name, "dtype": dtype, "dims": dims, "gen": gen}]


# name: (source, contract, input spec, the heavy point)
CASES = {
    "squeezenet1_1": ("torchvision", TV_DIMS, None, {"N": 4, "H": 320, "W": 320}),
    "efficientnet_b0": ("torchvision", TV_DIMS, None, {"N": 4, "H": 320, "W": 320}),
    "mobilenet_v3_small": ("torchvision", TV_DIMS, None, {"N": 4, "H": 320, "W": 320}),
    "resnet18": ("torchvision", TV_DIMS, None, {"N": 4, "H": 320, "W": 320}),
    "shufflenet_v2_x0_5": ("torchvision", TV_DIMS, None, {"N": 8, "H": 224, "W": 224}),
    # the rows of ort_compare's heavy shapes still above 1.0x after the first passes
    "mnasnet0_5": ("torchvision", TV_DIMS, None, {"N": 2, "H": 128, "W": 128}),
    "regnet_x_400mf": ("torchvision", TV_DIMS, None, {"N": 2, "H": 128, "W": 128}),
    "mobilenet_v2": ("zoo", None, None, {"batch": 2, "H": 224, "W": 224}),
    "seg_lraspp_mobilenet_v3_large": ("torchvision", TV_DIMS, None, {"N": 2, "H": 128, "W": 128}),
    "resnet_small": ("zoo", None, None, {"batch": 8}),
    "unet_decoder": ("zoo", None, None, {"H": 128, "W": 128}),
    "convnext_tiny": ("torchvision", TV_DIMS, None, {"N": 1, "H": 80, "W": 80}),
    "googlenet": ("torchvision", TV_DIMS, None, {"N": 2, "H": 128, "W": 128}),
    "densenet121": ("torchvision", TV_DIMS, None, {"N": 2, "H": 128, "W": 128}),
    "swin_t": ("torchvision", TV_DIMS, None, {"N": 2, "H": 128, "W": 128}),
    "conv1d_separator": ("heavy", {"B": {"min": 1, "max": 4}, "T": {"min": 800, "max": 32000, "step": 8}},
                         heavy_input("x", ["B", 1, "T"]), {"B": 2, "T": 16000}),
    "mel_frontend": ("heavy", {"B": {"min": 1, "max": 4}, "T": {"min": 400, "max": 32000}},
                     heavy_input("x", ["B", 1, "T"]), {"B": 2, "T": 16000}),
    "conv_gru_long": ("heavy", {"B": {"min": 1, "max": 4}, "T": {"min": 1, "max": 1000}},
                      heavy_input("x", ["B", 40, "T"]), {"B": 4, "T": 1000}),
    "transformer_encoder": ("heavy", {"B": {"min": 1, "max": 4}, "S": {"min": 1, "max": 128}},
                            heavy_input("ids", ["B", "S"], "int64", {"kind": "int", "low": 0, "high": 1000}),
                            {"B": 4, "S": 128}),
}


def model_of(name, opts):
    source, dims, inputs, _ = CASES[name]
    if source == "zoo":
        return next(m for m in oc.zoo_models() if m["name"] == name)
    if source == "torchvision":
        onnx_path = os.path.join(opts.onnx_cache, name + ".onnx")
        inputs = oc.TORCHVISION_INPUTS
    else:
        onnx_path = os.path.join(opts.heavy_cache, name + ".onnx")
    return {"name": name, "source": source, "onnx": onnx_path, "extra_args": [], "dims": dims, "inputs": inputs}


def layer_flops(onnx_path, feeds):
    """{node name: FLOPs} of the Conv, ConvTranspose, MatMul and Gemm nodes at these inputs."""
    m = onnx.load(onnx_path)
    for inp in m.graph.input:
        if inp.name in feeds:
            shape = inp.type.tensor_type.shape
            for d, v in zip(shape.dim, feeds[inp.name].shape):
                d.ClearField("dim_param")
                d.dim_value = int(v)
    m = shape_inference.infer_shapes(m)
    shapes = {}
    for vi in list(m.graph.value_info) + list(m.graph.output) + list(m.graph.input):
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if dims and all(d > 0 for d in dims):
            shapes[vi.name] = dims
    for init in m.graph.initializer:
        shapes[init.name] = list(init.dims)
    flops = {}
    for n in m.graph.node:
        out = shapes.get(n.output[0])
        if not out:
            continue
        if n.op_type in ("Conv", "ConvTranspose") and n.input[1] in shapes:
            w = shapes[n.input[1]]  # Conv: [M, C/g, k...]; ConvTranspose: [C, M/g, k...]
            per_out = 2 * w[1] * int(np.prod(w[2:]))
            if n.op_type == "Conv":
                flops[n.name] = per_out * int(np.prod(out))
            else:
                inp = shapes.get(n.input[0])
                flops[n.name] = 2 * w[1] * int(np.prod(w[2:])) * int(np.prod(inp)) if inp else None
        elif n.op_type in ("MatMul", "Gemm") and n.input[0] in shapes:
            k = shapes[n.input[0]][-1] if n.op_type == "MatMul" else shapes[n.input[0]][-1]
            flops[n.name] = 2 * k * int(np.prod(out))
    return flops


def kiln_profile(opts, kiln, paths, shapes, threads):
    """[(op, node, ms per run)] from kiln_runner --profile_json at `threads`."""
    out = os.path.join(opts.work, "kiln_profile.json")
    cmd = [os.path.join(opts.build, "kiln_runner"), f"--model_path={kiln}", f"--inputs={','.join(paths)}",
           f"--input_shapes={oc.shape_text(shapes)}", f"--num_executions={1 + opts.runs}", f"--cpu_threads={threads}",
           "--print_output=none", "--profile", f"--profile_json={out}", "--delegate=xnnpack"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("kiln_runner --profile failed: " + (r.stdout + r.stderr)[:400])
    with open(out) as f:
        return [(row["op"], row["node"], row["ms_per_run"]) for row in json.load(f)]


def ort_profile(opts, onnx_path, feeds, threads):
    """{node name: (op type, ms per run)} from ONNX Runtime's profiler at `threads`."""
    s = oc.ort_session(onnx_path, threads, profile_prefix=os.path.join(opts.work, "ort_profile"))
    for _ in range(opts.runs + 1):
        s.run(None, feeds)
    path = s.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    durs = collections.defaultdict(list)
    ops = {}
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        node = e["name"][: -len("_kernel_time")]
        durs[node].append(e["dur"] / 1e3)
        ops[node] = e.get("args", {}).get("op_name", "?")
    # The first run warms up: the mean of the others.
    return {n: (ops[n], float(np.mean(d[1:] if len(d) > 1 else d))) for n, d in durs.items()}


FUSABLE = {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "Tanh", "Add"}


def graph_chains(onnx_path):
    """{node name: output names of it and of up to three single-consumer activation or Add
    successors}: ONNX Runtime names a node it rewrote to NCHWc after its (fused) output,
    `<output>_nchwc`."""
    g = onnx.load(onnx_path, load_external_data=False).graph
    consumers = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            consumers[i].append(n)
    chains = {}
    for n in g.node:
        outs, cur = list(n.output), n
        for _ in range(3):
            nxt = consumers.get(cur.output[0], []) if cur.output else []
            if len(nxt) != 1 or nxt[0].op_type not in FUSABLE:
                break
            cur = nxt[0]
            outs += list(cur.output)
        chains[n.name] = outs
    return chains


def match(node, ort_nodes, chains):
    """ONNX Runtime's node for Kiln's: the same name, its fused form, or the NCHWc node named
    after the first output along the chain that ONNX Runtime has a node for."""
    if not node:
        return None  # a layout change at a region edge: no ONNX node
    for candidate in (node, node + "_fused", node + "_token"):
        if candidate in ort_nodes:
            return candidate
    for out in chains.get(node, []):
        for candidate in (out + "_nchwc", out):
            if candidate in ort_nodes:
                return candidate
    return None


def bench_case(name, opts):
    source, _, _, point = CASES[name]
    point = dict(point, **opts.point)
    model = model_of(name, opts)
    dims = model["dims"]
    if not os.path.exists(model["onnx"]):
        return {"name": name, "error": f"{model['onnx']} is missing (run bench/export_heavy.py or export_torchvision.py)"}
    kiln = os.path.join(opts.work, name + ".kiln")
    err = oc.kiln_export(opts.build, model, kiln, oc.contract_args(dims), "xnnpack")
    if err:
        return {"name": name, "error": err}
    shapes = oc.input_shapes(model, point)
    arrays, paths = oc.make_inputs(model, shapes, os.path.join(opts.work, "inputs", name))
    rec = {"name": name, "shape": oc.shape_text(shapes), "totals": {}, "layers": [], "by_op": {}}
    for t in opts.threads:
        # Interleaved rounds (Kiln, then ONNX Runtime, --rounds times): a shared host's load
        # drifts over seconds, and both runtimes should meet the same drift.
        session = oc.ort_session(model["onnx"], t)
        feeds = oc.ort_feeds(session, model, arrays)
        kt, ot = [], []
        per_round = max(1, opts.runs // opts.rounds)
        for _ in range(opts.rounds):
            # ONNX Runtime's pool threads spin for a while after a run: a kiln_runner started
            # at once found the second core taken (Kiln at 2 threads ran as slow as at 1 on the
            # short models), so each side starts after a pause, as in bench/ort_compare.py.
            time.sleep(0.2)
            kt += oc.run_kiln(opts.build, kiln, paths, shapes, t, 1, per_round, "xnnpack")
            time.sleep(0.2)
            ot += oc.run_ort(session, feeds, 1, per_round)[0]
        rec["totals"][t] = (oc.median(kt), oc.median(ot))
    session = oc.ort_session(model["onnx"], 1)
    feeds = oc.ort_feeds(session, model, arrays)
    flops = layer_flops(model["onnx"], feeds)
    krows = kiln_profile(opts, kiln, paths, shapes, 1)
    onodes = ort_profile(opts, model["onnx"], feeds, 1)
    chains = graph_chains(model["onnx"])
    for op, node, ms in krows:
        o = match(node, onodes, chains)
        f = flops.get(node)
        rec["layers"].append({"op": op, "node": node, "kiln_ms": ms, "ort_ms": onodes[o][1] if o else None,
                              "gflops": f / ms / 1e6 if f and ms > 0 else None})
    kb, ob = collections.defaultdict(float), collections.defaultdict(float)
    for op, _, ms in krows:
        kb[op] += ms
    for op, ms in onodes.values():
        ob[op] += ms
    rec["by_op"] = {"kiln": dict(kb), "ort": dict(ob)}
    return rec


def peak_line():
    path = os.path.join(HERE, "results", "peak.md")
    if not os.path.exists(path):
        return "single-core peak: run `bash bench/peak.sh` (bench/results/peak.md)"
    with open(path) as f:
        rows = [line.strip() for line in f if line.startswith("| f32 FMA") or line.startswith("| memory")]
    return "Single-core limits (bench/results/peak.md): " + "; ".join(r.strip("| ").replace(" | ", ": ") for r in rows)


def markdown(recs, opts):
    fmt = lambda v, p=3: "-" if v is None else f"{v:.{p}f}"  # noqa: E731
    lines = ["# Heavy shapes: where the time goes (issue 25)", "",
             f"Command: `python3 bench/heavy_profile.py --runs {opts.runs} --rounds {opts.rounds}` ({datetime.date.today()}, "
             f"{oc.git_commit()}); CPU: {oc.cpu_model()}; ONNX Runtime {ort.__version__}.", "", peak_line(), "",
             "| model | shape | " + " | ".join(f"Kiln ms ({t}t) | ORT ms ({t}t) | Kiln/ORT ({t}t)" for t in opts.threads) + " |",
             "|---|---|" + "---:|---:|---:|" * len(opts.threads)]
    for r in recs:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['error']} |")
            continue
        cells = []
        for t in opts.threads:
            k, o = r["totals"][t]
            cells += [fmt(k), fmt(o), fmt(k / o, 2)]
        lines.append(f"| {r['name']} | {r['shape']} | " + " | ".join(cells) + " |")
    for r in recs:
        if "error" in r:
            continue
        lines += ["", f"## {r['name']} {r['shape']}, 1 thread", "",
                  "Largest layers (Kiln's profile; ONNX Runtime's node of the same name, or its NCHWc node "
                  "named after the fused output; GFLOP/s of Kiln's):", "",
                  "| op | node | Kiln ms | ORT ms | Kiln/ORT | Kiln GFLOP/s |", "|---|---|---:|---:|---:|---:|"]
        for layer in sorted(r["layers"], key=lambda x: -x["kiln_ms"])[: opts.top]:
            ratio = layer["kiln_ms"] / layer["ort_ms"] if layer["ort_ms"] else None
            lines.append(f"| {layer['op']} | {layer['node'][:48]} | {fmt(layer['kiln_ms'])} | {fmt(layer['ort_ms'])} | "
                         f"{fmt(ratio, 2)} | {fmt(layer['gflops'], 1)} |")
        lines += ["", "By op type (ms): Kiln " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(
            r["by_op"]["kiln"].items(), key=lambda x: -x[1])[:8]),
                  "", "ONNX Runtime " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(
                      r["by_op"]["ort"].items(), key=lambda x: -x[1])[:8])]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(CASES))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per runtime and thread count")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds the runs are split into")
    ap.add_argument("--top", type=int, default=12, help="layers listed per model")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", help="scratch (default BUILD/bench/heavy)")
    ap.add_argument("--onnx-cache", help="torchvision ONNX files (default BUILD/bench/onnx)")
    ap.add_argument("--heavy-cache", help="bench/export_heavy.py's ONNX files (default BUILD/bench/onnx_heavy)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "heavy_profile.md"))
    ap.add_argument("--point", default="", help="DIM=V,... overriding the cases' heavy points (e.g. N=1,H=80,W=80)")
    opts = ap.parse_args()
    opts.threads = [int(t) for t in opts.threads.split(",")]
    opts.point = {k: int(v) for k, v in (p.split("=") for p in opts.point.split(",") if p)}
    opts.work = opts.work or os.path.join(opts.build, "bench", "heavy")
    opts.onnx_cache = opts.onnx_cache or os.path.join(opts.build, "bench", "onnx")
    opts.heavy_cache = opts.heavy_cache or os.path.join(opts.build, "bench", "onnx_heavy")
    os.makedirs(opts.work, exist_ok=True)
    names = [n for n in opts.models.split(",") if n]
    tv = [model_of(n, opts) for n in names if CASES[n][0] == "torchvision"]
    skipped = oc.ensure_torchvision_onnx(tv, opts.onnx_cache)
    recs = []
    for n in names:
        oc.log(f"{n} ...")
        recs.append({"name": n, "error": skipped[n]} if n in skipped else bench_case(n, opts))
    lines = markdown(recs, opts)
    with open(opts.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(opts.out)[0] + ".json", "w") as f:
        json.dump(recs, f, indent=1, default=str)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
