#!/usr/bin/env python3
"""Two kiln_runner builds on one program, per step: runs alternated (A B, then B A) so that a
noisy machine's drift falls on both, each run's `--profile_json` read, and per step the median
over the runs of each build, B/A, the total, and the steps that moved most.

A step computed inside the next one (`in_next`: a depthwise convolution whose rows went straight
to the 1x1 convolution after it) is counted with that next step in both builds, so that a pair
fused in one build and not in the other compares like with like ("+next" in the table).

    python3 bench/profile_ab.py OLD/kiln_runner build/kiln_runner build/bench/heavy/mobilenet_v2.kiln \
        [--threads 1] [--rounds 4] [--executions 20] [--top 10] [--inputs x.npy]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile


def profile(runner, model, threads, executions, inputs):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "profile.json")
        cmd = [runner, f"--model_path={model}", "--print_output=none", f"--num_executions={executions}",
               f"--cpu_threads={threads}", "--profile", f"--profile_json={path}"]
        if inputs:
            cmd.append(f"--inputs={inputs}")
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        with open(path) as f:
            return json.load(f)


def steps(rows, merged):
    """[(key, ms)]: each step, a step of `merged` (indices) folded into the one after it."""
    out = []
    carry, label = 0.0, ""
    for i, r in enumerate(rows):
        if i in merged and i + 1 < len(rows):
            carry += r["ms_per_run"]
            label += r["node"] + " +next "
            continue
        out.append(((i, label + r["op"] + " " + r["node"] + " " + r["shape"]), r["ms_per_run"] + carry))
        carry, label = 0.0, ""
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("model")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--executions", type=int, default=20)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--inputs")
    args = ap.parse_args()
    runs = {args.a: [], args.b: []}
    for i in range(args.rounds):
        for r in (args.a, args.b) if i % 2 == 0 else (args.b, args.a):
            runs[r].append(profile(r, args.model, args.threads, args.executions, args.inputs))
    merged = {i for rows in runs[args.a] + runs[args.b] for i, r in enumerate(rows) if r.get("in_next")}
    med = {}
    for r in runs:
        per = {}
        for rows in runs[r]:
            for key, ms in steps(rows, merged):
                per.setdefault(key, []).append(ms)
        med[r] = {k: statistics.median(v) for k, v in per.items()}
    keys = [k for k in med[args.a] if k in med[args.b]]
    ta = sum(med[args.a][k] for k in keys)
    tb = sum(med[args.b][k] for k in keys)
    print(f"total A {ta:.3f} ms  B {tb:.3f} ms  B/A {tb / ta:.3f}  ({args.rounds} runs each, {args.threads} thread(s))")
    moved = sorted(keys, key=lambda k: med[args.b][k] - med[args.a][k])
    print("| step | A ms | B ms | B/A |\n|---|---:|---:|---:|")
    for k in moved[: args.top] + moved[-args.top:][::-1]:
        a, b = med[args.a][k], med[args.b][k]
        print(f"| {k[1]} | {a:.3f} | {b:.3f} | {b / a if a else 0:.2f} |")


if __name__ == "__main__":
    main()
