#!/usr/bin/env python3
"""Where Kiln's time goes on a shared CPU: kiln_runner --profile under each load.

    python3 bench/contention_profile.py [--build build] [--models resnet_small,...] [--loads busy2,...]
                                        [--repeats 3] [--runs 30] [--out bench/results/contention_profile.md]

bench/contention.py measures latency; this script says why it is what it is. For every load
configuration (the same as contention.py's; it starts and stops the busy processes), model
and thread count, it runs --repeats processes of `kiln_runner --profile` and reports per
process: the median latency, the share of execute's wall time the calling thread was on a
core (CPU time over wall time: below 100%, the OS ran something else on its core or the
caller slept waiting for workers), the caller's wait for workers' chunks in flight, the
workers' share of the parallel items, and the jobs the caller ran alone because the workers
found no free core. A run whose latency doubles while the caller was on a core only half the
time lost its time to the scheduler's placement, not to the pool.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import contention  # noqa: E402

THREADS = re.compile(r"Threads: (\d+); the caller was on a core ([0-9.]+)% of the wall time"
                     r"(?:.*?per execution ([0-9.]+) parallel jobs, ([0-9.]+)% of their items on the workers; "
                     r"the caller waited ([0-9.]+) ms .*?; ([0-9.]+) jobs on the caller alone)?")
MEDIAN = re.compile(r"median ([0-9.]+)")


def profile_once(build, p, threads, warmup, runs, nice):
    cmd = contention.niced([os.path.join(build, "kiln_runner"), f"--model_path={p['kiln']}",
                            f"--inputs={','.join(p['paths'])}", f"--input_shapes={p['shapes']}",
                            f"--num_executions={warmup + runs}", f"--cpu_threads={threads}", "--print_output=none",
                            "--profile"], nice)
    r = subprocess.run(cmd, capture_output=True, text=True)
    t, m = THREADS.search(r.stdout), MEDIAN.search(r.stdout)
    if r.returncode or not t or not m:
        raise RuntimeError("kiln_runner failed: " + " ".join((r.stdout + r.stderr).split())[-400:])
    return {"ms": float(m.group(1)), "on_core": float(t.group(2)),
            "jobs": float(t.group(3) or 0), "worker_share": float(t.group(4) or 0),
            "wait_ms": float(t.group(5) or 0), "alone": float(t.group(6) or 0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="resnet_small,mobilenet_v2,unet_decoder,bert_tiny")
    ap.add_argument("--loads", default="idle,busy1,busy2,busy1_nice,busy2_nice")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "contention_profile.md"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kiln_contention_profile_")
    prepared = [p for p in contention.prepare(a.models.split(","), a.build, work) if p["label"] == "mid"]
    rows = []
    for load in a.loads.split(","):
        busy, nice = contention.LOADS[load]
        procs = contention.start_load(busy)
        try:
            time.sleep(0.5)
            for p in prepared:
                for _ in range(a.repeats):
                    for t in (1, 2):
                        r = profile_once(a.build, p, t, a.warmup, a.runs, nice)
                        r.update(load=load, model=p["model"], shapes=p["shapes"], threads=t)
                        rows.append(r)
                        contention.log(f"{load:11s} {p['model']:14s} {t}t {r['ms']:8.2f} ms  on core {r['on_core']:5.1f}%  "
                                       f"wait {r['wait_ms']:.3f} ms  workers {r['worker_share']:.1f}%  alone {r['alone']:.1f}")
        finally:
            contention.stop_load(procs)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = [f"# Where Kiln's time goes on a shared CPU ({time.strftime('%Y-%m-%d')})", "",
           f"Command: `python3 bench/contention_profile.py {' '.join(sys.argv[1:])}`  ",
           f"Kiln build at commit {commit}. One row per process (kiln_runner --profile, median of {a.runs} runs after "
           f"{a.warmup} warm-up runs), the middle shape of each model.", "",
           "on core: the calling thread's CPU time over execute's wall time. wait: the caller waiting for workers' "
           "chunks in flight, per execution. workers: their share of the parallel items. alone: jobs per execution "
           "the caller ran by itself because the workers had found no free core.", "",
           "## Summary: median latency per cell, and the processes split by where the caller ran", "",
           "| load | model | threads | median ms | on core (each process) | wait ms | workers | alone jobs |",
           "|---|---|---|---|---|---|---|---|"]
    cells = {}
    for r in rows:
        cells.setdefault((r["load"], r["model"], r["threads"]), []).append(r)
    for (load, model, t), rs in cells.items():
        each_ms = ", ".join("%.2f" % x["ms"] for x in rs)
        each_core = ", ".join("%.0f%%" % x["on_core"] for x in rs)
        out.append(f"| {load} | {model} | {t} | {statistics.median(x['ms'] for x in rs):.2f} ({each_ms}) | {each_core} | "
                   f"{statistics.median(x['wait_ms'] for x in rs):.3f} | "
                   f"{statistics.median(x['worker_share'] for x in rs):.1f}% | "
                   f"{statistics.median(x['alone'] for x in rs):.1f} |")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
