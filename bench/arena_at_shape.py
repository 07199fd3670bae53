#!/usr/bin/env python3
"""The arena that follows the shape, for every zoo model: at each bench point (every dim at its
minimum, in the middle, at the bound; the KV-cache decoder's decode steps T = 1 from its
manifest), the bytes the values take after bind (`Method.arena_bytes_in_use`) against the
most bytes alive at one step at that shape (`Method.live_lower_bound_bytes`, which no arena
can beat), for the portable and the delegated plan. Also the arena allocated at the bound.

    python3 bench/arena_at_shape.py [--build build] [--out bench/results/arena_at_shape.md]

Needs the kiln package (pip install .) and the build's `kiln` tool. The goal: in use within
10% of the lower bound at every shape.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_compare as oc  # noqa: E402  (the zoo's models, contracts and bench points)

import kiln  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(oc.ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(oc.ROOT, "bench", "results", "arena_at_shape.md"))
    a = ap.parse_args()
    rows, worst = [], (0.0, "")
    with tempfile.TemporaryDirectory() as tmp:
        for model in oc.zoo_models():
            path = os.path.join(tmp, model["name"] + ".kiln")
            err = oc.kiln_export(a.build, model, path, oc.contract_args(model["dims"]), None)
            if err:
                rows.append(f"| {model['name']} | - | {err} | | | | | |")
                continue
            program = kiln.load(path)
            methods = {"portable": program.method("forward", use_delegate=False),
                       "xnnpack": program.method("forward", use_delegate=True)}
            if not methods["xnnpack"].coverage["running"]:
                del methods["xnnpack"]
            for label, point in oc.dim_points(model["dims"], model.get("bench_points")):
                fitted = oc.fit_point(a.build, path, model, point)
                if fitted is None:
                    continue
                shapes = oc.input_shapes(model, fitted)
                for plan, m in methods.items():
                    m.check(shapes)
                    used, lower = m.arena_bytes_in_use, m.live_lower_bound_bytes
                    ratio = used / lower if lower else 1.0
                    if ratio > worst[0]:
                        worst = (ratio, f"{model['name']} {oc.shape_text(shapes)} {plan}")
                    rows.append(f"| {model['name']} | {label} | {oc.shape_text(shapes)} | {plan} | {m.arena_bytes:,} | "
                                f"{used:,} | {lower:,} | {ratio:.3f}x |")
    lines = ["# Arena at shape", "",
             f"`python3 bench/arena_at_shape.py`, commit {oc.git_commit()}. Bytes. *allocated*: the arena a Method",
             "allocates (the plan at the bound); *in use*: what the values take after bind at that shape",
             "(placement by shape); *live lower bound*: the most bytes alive at one step at that shape.", "",
             "| model | point | input shapes | plan | allocated | in use | live lower bound | in use / lower |",
             "|---|---|---|---|---:|---:|---:|---:|", *rows, "",
             f"Worst: {worst[0]:.3f}x ({worst[1]})."]
    oc.write_report(a.out, lines)


if __name__ == "__main__":
    main()
