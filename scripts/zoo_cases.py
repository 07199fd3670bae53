#!/usr/bin/env python3
"""Exports every zoo, op-zoo and quantized-zoo model with the host's `kiln export` (its contract
from the manifest) into OUT_DIR and writes OUT_DIR/cases.tsv: every reference case of every
model (each dim's minimum, shapes far below the bound, the bound), for tests/cross/kiln_replay.cc
to record on this machine and compare on another (scripts/test_arm64.sh).

Usage: python3 scripts/zoo_cases.py KILN_BINARY OUT_DIR [--only NAME ...]
Standard library only (any python3)."""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = os.path.join(ROOT, "zoo")
MANIFESTS = [("zoo", "manifest.json"), ("ops", "ops/manifest.json"), ("quantized", "quantized/manifest.json")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kiln")
    ap.add_argument("out_dir")
    ap.add_argument("--only", nargs="*", default=None, help="model names (default: every model)")
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out_dir, "out"), exist_ok=True)
    lines, failed = [], []
    for prefix, manifest in MANIFESTS:
        with open(os.path.join(ZOO, manifest)) as f:
            models = json.load(f)["models"]
        for m in models:
            if args.only is not None and m["name"] not in args.only:
                continue
            tag = f"{prefix}_{m['name']}"
            kiln_file = f"{tag}.kiln"
            cmd = [args.kiln, "export", os.path.join(ZOO, m["onnx"]), "-o", os.path.join(args.out_dir, kiln_file)]
            cmd += m["export_args"]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                failed.append(f"{tag}: {' '.join(cmd)}\n{r.stdout}")
                continue
            quanta = str(m["quanta"]) if "quanta" in m else "-"
            ties = str(m["outputs"].index(m["ties"])) if "ties" in m else "-"  # a detector's scores
            for c in m["cases"]:
                inputs = ",".join(os.path.join(ZOO, p) for p in c["inputs"])
                lines.append("\t".join([tag, c["name"], kiln_file, str(m.get("tolerance", 1e-4)), quanta, inputs,
                                        f"out/{tag}-{c['name']}", ties]))
    with open(os.path.join(args.out_dir, "cases.tsv"), "w") as f:
        f.write("# model\tcase\tkiln_file\ttolerance\tquanta\tinputs\toutput_prefix\tties (scripts/zoo_cases.py)\n")
        f.write("\n".join(lines) + "\n")
    print(f"zoo_cases: {len(lines)} cases written to {args.out_dir}/cases.tsv")
    for f in failed:
        print("export failed:", f, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
