#!/usr/bin/env python3
"""Kiln and ONNX Runtime at 1 and 2 threads on a shared CPU.

    python3 -m pip install -r bench/requirements.txt
    python3 bench/contention.py [--build build] [--models resnet_small,...] [--loads idle,busy1,...]
                                [--runs 25] [--warmup 3] [--out bench/results/contention.md]

What a phone does to an inference: other processes run on the same cores, and a background
inference runs below the UI thread's priority. Per load configuration the script starts the
busy-looping processes itself (`sh -c 'while :; do :; done'`, at normal priority), measures,
and stops them:
  idle        nothing else running
  busy1       one busy process, the measured process at equal priority
  busy2       two busy processes, equal priority
  busy1_nice  one busy process, the measured process under `nice -n 10`
  busy2_nice  two busy processes, the measured process under `nice -n 10`
Each measurement is its own process (kiln_runner, or this script's --ort-worker mode for ONNX
Runtime), started under the same `nice` as the configuration says, with the same .npy inputs.
Kiln runs with its default delegate (XNNPACK). Times: the median of --runs after --warmup
(kiln_runner's `Iteration i of N: X ms` lines; time.perf_counter() around session.run), per
process; a cell is the median over --repeats processes, the runtimes and thread counts
alternating (one process per cell swings by up to 2x under load: where the scheduler puts it).

Models: the zoo's CNNs (resnet_small, mobilenet_v2, unet_decoder), a transformer (bert_tiny), the
GRU (gru_seq), and torchvision's squeezenet1_1 exported with H, W up to 224 (the issue's
2x3x224x224), each at its bound and at a middle shape.

Targets (issue 21), per loaded configuration and model (geomean over the shapes): Kiln's 2-thread
latency at most 1.1x its own 1-thread latency, and at most ONNX Runtime's 2-thread latency.
Writes OUT (Markdown) and OUT with .json.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

LOADS = {
    "idle": (0, 0),
    "busy1": (1, 0),
    "busy2": (2, 0),
    "busy1_nice": (1, 10),
    "busy2_nice": (2, 10),
}
DEFAULT_MODELS = "resnet_small,mobilenet_v2,unet_decoder,bert_tiny,gru_seq,squeezenet1_1"
SQUEEZENET_DIMS = {"N": {"min": 1, "max": 2}, "H": {"min": 32, "max": 224}, "W": {"min": 32, "max": 224}}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def ort_worker(argv):
    """--ort-worker ONNX THREADS WARMUP RUNS IN0.npy[,IN1.npy...]: prints the timed runs (ms) as JSON."""
    import numpy as np
    import onnxruntime as ort
    onnx, threads, warmup, runs, inputs = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), argv[4].split(",")
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    s = ort.InferenceSession(onnx, so, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(p) for i, p in zip(s.get_inputs(), inputs)}
    for _ in range(warmup):
        s.run(None, feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        s.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps(times))


def start_load(busy):
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(busy)]


def stop_load(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def niced(cmd, nice):
    return (["nice", "-n", str(nice)] if nice else []) + cmd


def median_kiln(build, kiln, paths, shapes_text, threads, warmup, runs, nice):
    from ort_compare import ITERATION
    cmd = niced([os.path.join(build, "kiln_runner"), f"--model_path={kiln}", f"--inputs={','.join(paths)}",
                 f"--input_shapes={shapes_text}", f"--num_executions={warmup + runs}", f"--cpu_threads={threads}",
                 "--print_output=none"], nice)
    r = subprocess.run(cmd, capture_output=True, text=True)
    times = [float(m.group(3)) for m in ITERATION.finditer(r.stdout + "\n" + r.stderr)]
    if r.returncode or len(times) != warmup + runs:
        raise RuntimeError("kiln_runner failed: " + " ".join((r.stdout + r.stderr).split())[:400])
    return statistics.median(times[warmup:])


def median_ort(onnx, paths, threads, warmup, runs, nice):
    cmd = niced([sys.executable, os.path.abspath(__file__), "--ort-worker", onnx, str(threads), str(warmup), str(runs),
                 ",".join(paths)], nice)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("onnxruntime failed: " + r.stderr[-400:])
    return statistics.median(json.loads(r.stdout.strip().splitlines()[-1]))


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return float(__import__("math").exp(sum(__import__("math").log(x) for x in xs) / len(xs))) if xs else None


def prepare(models, build, work):
    """Exports each model (its contract, default delegate) and writes inputs at its bench shapes."""
    from ort_compare import (contract_args, dim_points, ensure_torchvision_onnx, input_shapes, kiln_export,
                             make_inputs, shape_text, torchvision_models, zoo_models)
    cache = os.path.join(build, "bench", "onnx")
    available = {m["name"]: m for m in zoo_models() + torchvision_models(cache)}
    chosen = []
    for name in models:
        if name not in available:
            raise SystemExit(f"unknown model '{name}'")
        m = dict(available[name])
        if name == "squeezenet1_1":
            m["dims"] = SQUEEZENET_DIMS
        chosen.append(m)
    skipped = ensure_torchvision_onnx(chosen, cache)
    prepared = []
    for m in chosen:
        if m["name"] in skipped:
            log(f"{m['name']}: skipped ({skipped[m['name']]})")
            continue
        kiln = os.path.join(work, m["name"] + ".kiln")
        err = kiln_export(build, m, kiln, contract_args(m["dims"]), None)
        if err:
            raise SystemExit(f"{m['name']}: {err}")
        points = [p for p in dim_points(m["dims"], m.get("bench_points")) if p[0] in ("mid", "max")] or \
            dim_points(m["dims"], m.get("bench_points"))[-2:]
        for label, point in points:
            shapes = input_shapes(m, point)
            _, paths = make_inputs(m, shapes, os.path.join(work, m["name"], label))
            prepared.append({"model": m["name"], "onnx": m["onnx"], "kiln": kiln, "label": label,
                             "shapes": shape_text(shapes), "paths": paths})
    return prepared


def markdown(result):
    lines = [f"# Kiln and ONNX Runtime on a shared CPU ({result['date']})", "",
             f"Command: `{result['command']}`  ", f"Kiln build: `{result['build']}` at commit {result['commit']}; "
             f"ONNX Runtime {result['ort_version']}; {result['cpu']}, {os.cpu_count()} cores. Median of "
             f"{result['runs']} runs after {result['warmup']} warm-up runs per process; each cell the median of "
             f"{result.get('repeats', 1)} processes.", "",
             "Targets per loaded configuration and model (geomean over its shapes): Kiln 2t / Kiln 1t <= 1.1, "
             "Kiln 2t / ORT 2t <= 1.0.", ""]
    lines += ["## Summary (geomean per model over its shapes)", "",
              "| load | model | Kiln 2t / 1t | ORT 2t / 1t | Kiln 2t / ORT 2t | Kiln 1t / ORT 1t |", "|---|---|---|---|---|---|"]
    for load in result["loads"]:
        rows = [r for r in result["rows"] if r["load"] == load]
        for model in dict.fromkeys(r["model"] for r in rows):
            rs = [r for r in rows if r["model"] == model]
            k = geomean([r["kiln2"] / r["kiln1"] for r in rs])
            o = geomean([r["ort2"] / r["ort1"] for r in rs])
            ko = geomean([r["kiln2"] / r["ort2"] for r in rs])
            k1 = geomean([r["kiln1"] / r["ort1"] for r in rs])
            mark = "" if load == "idle" or (k <= 1.1 and ko <= 1.0) else " (missed)"
            lines.append(f"| {load} | {model} | {k:.2f}x{mark} | {o:.2f}x | {ko:.2f}x | {k1:.2f}x |")
    lines += ["", "## Every row (ms)", "", "| load | model | shape | Kiln 1t | Kiln 2t | ORT 1t | ORT 2t |",
              "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['load']} | {r['model']} | {r['shapes']} | {r['kiln1']:.2f} | {r['kiln2']:.2f} | "
                     f"{r['ort1']:.2f} | {r['ort2']:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--ort-worker":
        return ort_worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3, help="processes per cell (median)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "contention.md"))
    a = ap.parse_args()
    import onnxruntime
    work = tempfile.mkdtemp(prefix="kiln_contention_")
    prepared = prepare(a.models.split(","), a.build, work)
    rows = []
    loads = a.loads.split(",")
    for load in loads:
        busy, nice = LOADS[load]
        procs = start_load(busy)
        try:
            time.sleep(0.5)
            for p in prepared:
                row = {"load": load, "model": p["model"], "shapes": p["shapes"]}
                samples = {}
                for _ in range(a.repeats):
                    for t in (1, 2):
                        samples.setdefault(f"kiln{t}", []).append(
                            median_kiln(a.build, p["kiln"], p["paths"], p["shapes"], t, a.warmup, a.runs, nice))
                        samples.setdefault(f"ort{t}", []).append(median_ort(p["onnx"], p["paths"], t, a.warmup, a.runs, nice))
                row.update({k: statistics.median(v) for k, v in samples.items()})
                row["samples"] = samples
                log(f"{load:11s} {p['model']:14s} {p['shapes']:20s} kiln {row['kiln1']:8.2f} {row['kiln2']:8.2f}  "
                    f"ort {row['ort1']:8.2f} {row['ort2']:8.2f}")
                rows.append(row)
        finally:
            stop_load(procs)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
    result = {"date": datetime.date.today().isoformat(), "command": " ".join(["python3", "bench/contention.py"] + sys.argv[1:]),
              "build": a.build, "commit": commit, "ort_version": onnxruntime.__version__, "cpu": cpu, "runs": a.runs,
              "warmup": a.warmup, "repeats": a.repeats, "loads": loads, "rows": rows}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(markdown(result))
    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump(result, f, indent=1)
    print(markdown(result))


if __name__ == "__main__":
    main()
