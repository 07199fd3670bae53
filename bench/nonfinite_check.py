#!/usr/bin/env python3
"""What execute's NaN/Inf input check costs on the delegated path (MethodOptions::check_finite_inputs).

    python3 bench/nonfinite_check.py [--build build] [--runs 40] [--rounds 5] [--out bench/results/nonfinite_check.md]

Per zoo model with a float input (its bound and its smallest shape): kiln_runner with the default
delegate, with the check (the default) and with --no_finite_check, alternating over --rounds
rounds of --runs executions each in one process per run; the cost is the ratio of the medians
(median over rounds of the per-round medians). Inputs: the runner's ones at --input_shapes.
"""

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from ort_compare import ITERATION, contract_args, dim_points, input_shapes, kiln_export, shape_text, zoo_models  # noqa: E402


def median_ms(build, kiln, shapes, runs, check):
    cmd = [os.path.join(build, "kiln_runner"), f"--model_path={kiln}", f"--input_shapes={shapes}",
           f"--num_executions={runs + 3}", "--print_output=none"] + ([] if check else ["--no_finite_check"])
    r = subprocess.run(cmd, capture_output=True, text=True)
    times = [float(m.group(3)) for m in ITERATION.finditer(r.stdout + r.stderr)]
    if r.returncode or len(times) != runs + 3:
        raise RuntimeError(" ".join(cmd) + ": " + (r.stdout + r.stderr)[-300:])
    return statistics.median(times[3:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "nonfinite_check.md"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kiln_nfcheck_")
    rows = []
    for m in zoo_models():
        if not any(i["dtype"] == "float32" for i in m["inputs"]):
            continue
        kiln = os.path.join(work, m["name"] + ".kiln")
        if kiln_export(a.build, m, kiln, contract_args(m["dims"]), None):
            continue
        for label, point in dim_points(m["dims"], m.get("bench_points")):
            if label not in ("min", "max"):
                continue
            shapes = shape_text(input_shapes(m, point))
            on, off = [], []
            try:
                for _ in range(a.rounds):
                    on.append(median_ms(a.build, kiln, shapes, a.runs, True))
                    off.append(median_ms(a.build, kiln, shapes, a.runs, False))
            except RuntimeError as e:  # a shape a guard refuses
                print(f"{m['name']} {shapes}: skipped ({e})", file=sys.stderr)
                continue
            row = (m["name"], shapes, statistics.median(on), statistics.median(off))
            rows.append(row)
            print(f"{row[0]:16s} {row[1]:28s} check {row[2]:9.3f} ms  none {row[3]:9.3f} ms  {row[2] / row[3]:.3f}x",
                  file=sys.stderr)
    lines = [f"# Cost of execute's NaN/Inf input check ({datetime.date.today().isoformat()})", "",
             f"Command: `python3 bench/nonfinite_check.py --runs {a.runs} --rounds {a.rounds}`. kiln_runner, default "
             "delegate, with the check and with `--no_finite_check`, alternating; median over rounds of the per-round "
             "medians.", "", "| model | shapes | with check (ms) | without (ms) | ratio |", "|---|---|---|---|---|"]
    for name, shapes, on, off in rows:
        lines.append(f"| {name} | {shapes} | {on:.3f} | {off:.3f} | {on / off:.3f}x |")
    ratios = [on / off for _, _, on, off in rows]
    if ratios:
        lines += ["", f"Geomean ratio: {statistics.geometric_mean(ratios):.4f}x over {len(ratios)} rows."]
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
