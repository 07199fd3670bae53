"""Before/after of two bench/ort_compare.py runs (same command, two builds): the geomean of
Kiln / ONNX Runtime per thread count over the small shapes (ONNX Runtime under 1 ms in both
runs) and over the heavy ones (1 ms or more in both), and the rows more than 10% worse.

    python3 bench/small_shape_geomean.py BEFORE.json AFTER.json
    python3 bench/small_shape_geomean.py B1.json,B2.json,B3.json A1.json,A2.json,A3.json

With several runs per side (comma-separated, e.g. the two builds' runs alternated), each row
takes the minimum of Kiln's and of ONNX Runtime's times over them: on a noisy host one run's
rows under 1 ms moved by 1.3-3x with no code change.
"""
import json
import math
import statistics
import sys


def rows(paths):
    out = {}
    for path in paths.split(","):
        for m in json.load(open(path))["models"]:
            for r in m.get("rows", []):
                if r.get("kiln_xnnpack_ms") and r.get("ort_ms"):
                    k = (m["model"], r["shape"], r["threads"])
                    o, n = out.get(k, (r["ort_ms"], r["kiln_xnnpack_ms"]))
                    out[k] = (min(o, r["ort_ms"]), min(n, r["kiln_xnnpack_ms"]))
    return out


def round_ratios(paths):
    """Per row, Kiln / ONNX Runtime of every interleaved round of every run (the runs'
    kiln_xnnpack_round_ms and ort_round_ms; runs before those fields have none)."""
    out = {}
    for path in paths.split(","):
        for m in json.load(open(path))["models"]:
            for r in m.get("rows", []):
                kr, orr = r.get("kiln_xnnpack_round_ms") or [], r.get("ort_round_ms") or []
                if len(kr) == len(orr):
                    out.setdefault((m["model"], r["shape"], r["threads"]), []).extend(
                        k / o for k, o in zip(kr, orr) if k and o)
    return {k: v for k, v in out.items() if v}


def paired(paths):
    """Per row, the median of round_ratios: the ratio a host whose speed shifts between rounds
    moves least."""
    return {k: statistics.median(v) for k, v in round_ratios(paths).items()}


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def main(before_path, after_path):
    b, a = rows(before_path), rows(after_path)
    classes = (("small (ORT < 1 ms in both runs)", lambda o1, o2: o1 < 1 and o2 < 1),
               ("heavy (ORT >= 1 ms in both runs)", lambda o1, o2: o1 >= 1 and o2 >= 1))
    print("| threads | shapes | rows | Kiln/ORT before | Kiln/ORT after | rows >10% worse (after/before) |")
    print("|---:|---|---:|---:|---:|---|")
    for t in sorted({k[2] for k in a}):
        for label, pred in classes:
            keys = [k for k in b if k in a and k[2] == t and pred(b[k][0], a[k][0])]
            rb = [b[k][1] / b[k][0] for k in keys]
            ra = [a[k][1] / a[k][0] for k in keys]
            worse = ", ".join(f"{k[0]} {k[1]} {ra[i] / rb[i]:.2f}" for i, k in enumerate(keys) if ra[i] / rb[i] > 1.10)
            print(f"| {t} | {label} | {len(keys)} | {geomean(rb):.3f} | {geomean(ra):.3f} | {worse or '-'} |")
    pb, pa = paired(before_path), paired(after_path)
    if pa:
        print()
        print("Paired by round (per row the median over all rounds of Kiln / ORT in the same round; rows as above"
              " with ORT's min; '-' where a side has no round fields):")
        print()
        print("| threads | shapes | rows | before | after |")
        print("|---:|---|---:|---:|---:|")
        for t in sorted({k[2] for k in a}):
            for label, pred in classes:
                keys = [k for k in a if k[2] == t and k in b and pred(b[k][0], a[k][0])]
                kb, ka = [k for k in keys if k in pb], [k for k in keys if k in pa]
                gb = f"{geomean([pb[k] for k in kb]):.3f} ({len(kb)})" if kb else "-"
                ga = f"{geomean([pa[k] for k in ka]):.3f} ({len(ka)})" if ka else "-"
                print(f"| {t} | {label} | {len(keys)} | {gb} | {ga} |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
