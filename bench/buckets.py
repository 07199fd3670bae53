#!/usr/bin/env python3
"""Buckets against one dynamic method and a static export per length, for the zoo's encoder
(bert_tiny) over a spread of real sequence lengths at batch 1: file size, arena bytes and
median latency (Python API, same process, same run).

    python3 bench/buckets.py [--build build] [--runs 200] [--out bench/results/buckets.md]

Dynamic: one program with seq in [1, 128]. Buckets: --bucket seq=16,32,64,128 (inputs padded,
mask 0 on the padding). Static: one program per length (seq pinned), the lower bound on latency
and arena that shipping every length would cost in files.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_compare as oc  # noqa: E402

import kiln  # noqa: E402

LENGTHS = [5, 17, 33, 60, 100, 128]
BUCKETS = [16, 32, 64, 128]


def export(build, onnx, out, *args):
    r = subprocess.run([os.path.join(build, "kiln"), "export", onnx, "-o", out, "--dim", "batch=1", *args],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stdout + r.stderr)


def median_ms(fn, runs):
    fn()  # warm up (and bind)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(oc.ROOT, "build"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--out", default=os.path.join(oc.ROOT, "bench", "results", "buckets.md"))
    a = ap.parse_args()
    onnx = os.path.join(oc.ZOO, "models", "bert_tiny.onnx")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        dyn, bkt = os.path.join(tmp, "dynamic.kiln"), os.path.join(tmp, "buckets.kiln")
        export(a.build, onnx, dyn, "--dim", "seq=1..128")
        export(a.build, onnx, bkt, "--bucket", "seq=" + ",".join(map(str, BUCKETS)), "--pad", "input_ids=0",
               "--pad", "attention_mask=0")
        d = kiln.load(dyn).method("forward")
        b = kiln.load(bkt).method("forward")
        bucket_arena = max(kiln.load(bkt).method(n).arena_bytes for n in b.buckets)
        static_sizes = 0
        for n in LENGTHS:
            ids = np.random.default_rng(n).integers(1, 1000, (1, n), dtype=np.int64)
            mask = np.ones((1, n), np.int64)
            st = os.path.join(tmp, f"static{n}.kiln")
            export(a.build, onnx, st, "--dim", f"seq={n}")
            static_sizes += os.path.getsize(st)
            s = kiln.load(st).methods["forward"]
            t_dyn = median_ms(lambda: d(ids, mask), a.runs)
            in_use = d.arena_bytes_in_use
            t_bkt = median_ms(lambda: b(ids, mask), a.runs)
            t_st = median_ms(lambda: s(ids, mask), a.runs)
            np.testing.assert_allclose(b(ids, mask), s(ids, mask), rtol=1e-4, atol=1e-4)
            rows.append(f"| {n} | {t_dyn:.3f} | {t_bkt:.3f} ({b.last_bucket.split('=')[1]}) | {t_st:.3f} | "
                        f"{in_use:,} / {d.arena_bytes:,} | {bucket_arena:,} | {s.arena_bytes:,} |")
        sizes = (os.path.getsize(dyn), os.path.getsize(bkt), static_sizes)
    lines = ["# Buckets vs one dynamic method vs a static export per length", "",
             f"`python3 bench/buckets.py`, commit {oc.git_commit()}, bert_tiny (2 layers, hidden 64) at batch 1,",
             f"median of {a.runs} calls from Python per cell (same process, same run; the machine is noisy).",
             f"Buckets: {', '.join(map(str, BUCKETS))}. Arena: bytes in use at that length / allocated (dynamic),",
             "the one arena the buckets share, and the static program's.", "",
             "| seq | dynamic ms | buckets ms (bucket) | static ms | dynamic arena in use / allocated | buckets arena | static arena |",
             "|---:|---:|---:|---:|---:|---:|---:|", *rows, "",
             f"File sizes: dynamic {sizes[0]:,} bytes; buckets {sizes[1]:,} (weights stored once); a static file per "
             f"length, {len(LENGTHS)} lengths: {sizes[2]:,} in all."]
    oc.write_report(a.out, lines)


if __name__ == "__main__":
    main()
