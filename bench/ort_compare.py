#!/usr/bin/env python3
"""Side-by-side latency: Kiln (XNNPACK delegate, portable) vs ONNX Runtime CPU.

    python3 -m pip install -r bench/requirements.txt
    python3 bench/ort_compare.py [--models resnet_small,bert_tiny] [--threads 1,2] [--runs 20]
                                 [--warmup 2] [--portable] [--build build] [--out bench/results/ort_compare.md]
                                 [--quick]

Models: every model of zoo/manifest.json (its contract from `dims`, inputs from `input_dims`
and `input_generators`) and the zoo/torchvision_sweep.py models (input x [N,3,H,W], contract
N=1..2, H,W=32..128). Their ONNX files are exported by bench/export_torchvision.py under
/usr/bin/python3 (torch 1.13) into build/bench/onnx/ when missing; without torch they are
reported as skipped.

Per model: the minimum of every dim, a middle shape and the bound; seeded inputs written as
.npy so kiln_runner (--inputs=) and ONNX Runtime read identical data. Per shape and thread
count: ONNX Runtime, Kiln with the XNNPACK delegate (if this build's `kiln export` and
`kiln_runner` have --delegate; else Kiln runs portable, labelled so) and, with --portable,
Kiln portable (`--delegate=none`). Then a static export pinned to the middle shape against
the dynamic export at that shape (budget: dynamic within 5% of static).

Timing: the --runs are split into --rounds interleaved rounds (Kiln, then ONNX Runtime, each
round after --warmup discarded runs); the median of all runs is reported. Kiln's times are the
runner's `Iteration i of N: X ms` lines (one process per round, execute() only); ONNX
Runtime's are time.perf_counter() around session.run (inputs already numpy).
Writes OUT (Markdown) and OUT with .json (every number, every sample).
"""

import argparse
import datetime
import glob
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
import zlib

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ZOO = os.path.join(ROOT, "zoo")
sys.path.insert(0, HERE)
from export_torchvision import sweep_default_models  # noqa: E402  (no torch import at module level)

# zoo/torchvision_sweep.py's contract: torch.onnx.export(..., input_names=["x"],
# dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}}) and `kiln export --dim N=1..2 --dim H=32..128 --dim W=32..128`.
TORCHVISION_DIMS = {"N": {"min": 1, "max": 2}, "H": {"min": 32, "max": 128}, "W": {"min": 32, "max": 128}}
TORCHVISION_INPUTS = [{"name": "x", "dtype": "float32", "dims": ["N", 3, "H", "W"], "gen": {"kind": "normal"}}]
ORT_VERSION_PINNED = "1.31.1"
BUDGET = 1.05  # dynamic within 5% of static
ERR_LIMIT = 1e-3  # Kiln vs ORT outputs, checked once per shape (first thread count)
ITERATION = re.compile(r"^Iteration (\d+) of (\d+): ([0-9.eE+-]+) ms\s*$", re.M)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Models, shapes, inputs


def zoo_models():
    with open(os.path.join(ZOO, "manifest.json")) as f:
        manifest = json.load(f)
    models = []
    for m in manifest["models"]:
        args, extra = m["export_args"], []
        i = 0
        while i < len(args):  # the contract's --dim pairs come from `dims`; keep anything else
            if args[i] == "--dim":
                i += 2
                continue
            extra.append(args[i])
            i += 1
        inputs = [{"name": n, "dtype": t, "dims": d, "gen": g}
                  for n, t, d, g in zip(m["inputs"], m["input_dtypes"], m["input_dims"], m["input_generators"])]
        models.append({"name": m["name"], "source": "zoo", "onnx": os.path.join(ZOO, m["onnx"]), "extra_args": extra,
                       "dims": m["dims"], "inputs": inputs, "bench_points": m.get("bench_points")})
    return models


def torchvision_models(cache):
    return [{"name": n, "source": "torchvision", "onnx": os.path.join(cache, n + ".onnx"), "extra_args": [],
             "dims": TORCHVISION_DIMS, "inputs": TORCHVISION_INPUTS} for n in sweep_default_models().split(",") if n]


def dim_points(dims, bench_points=None):
    """[(label, {dim: value})]: every dim at its minimum, in the middle (on its step), at its max;
    or the manifest's `bench_points` (e.g. decode steps T = 1 at several cache lengths). A dim
    with `sum_of` is the sum of the dims it names."""
    def mid(d):
        step = d.get("step", 1)
        return d["min"] + ((d["max"] - d["min"]) // 2 // step) * step
    if bench_points:
        points = [(b["label"], dict(b["dims"])) for b in bench_points]
    else:
        points = [("min", {k: d["min"] for k, d in dims.items()}), ("mid", {k: mid(d) for k, d in dims.items()}),
                  ("max", {k: d["max"] for k, d in dims.items()})]
    for _, p in points:
        for k, d in dims.items():
            if "sum_of" in d:
                p[k] = sum(p[part] for part in d["sum_of"])
    out = []
    for label, p in points:
        if all(p != q for _, q in out):
            out.append((label, p))
    return out


def admissible(build, kiln, model, point):
    r = subprocess.run([os.path.join(build, "kiln"), "check", kiln,
                        f"--input_shapes={shape_text(input_shapes(model, point))}"], capture_output=True, text=True)
    return r.returncode == 0


def fit_point(build, kiln, model, point, tries=64):
    """The point itself if the program accepts it (ranges, steps and guards, by `kiln check`), else
    the nearest accepted point found by moving one dim, then all dims, by up to `tries` steps."""
    if admissible(build, kiln, model, point):
        return point
    dims = model["dims"]

    def moved(q, k, delta):
        d = dims[k]
        v = q[k] + delta * d.get("step", 1)
        return v if d["min"] <= v <= d["max"] else None

    for delta in range(1, tries + 1):
        for sign in (-1, 1):
            for k in dims:
                v = moved(point, k, sign * delta)
                if v is not None and admissible(build, kiln, model, {**point, k: v}):
                    return {**point, k: v}
            q = {k: moved(point, k, sign * delta) for k in dims}
            if len(dims) > 1 and None not in q.values() and admissible(build, kiln, model, q):
                return q
    return None


def input_shapes(model, point):
    return [[point[d] if isinstance(d, str) else int(d) for d in inp["dims"]] for inp in model["inputs"]]


def shape_text(shapes):
    return ",".join("x".join(map(str, s)) for s in shapes)


def make_inputs(model, shapes, directory):
    """Seeded by model/shape: normal f32, int64 in the generator's [low, high), masks of ones,
    full lengths."""
    rng = np.random.default_rng(zlib.crc32(f"{model['name']}/{shape_text(shapes)}".encode()))
    os.makedirs(directory, exist_ok=True)
    arrays, paths = [], []
    for i, (inp, shape) in enumerate(zip(model["inputs"], shapes)):
        kind, dtype = inp["gen"]["kind"], np.dtype(inp["dtype"])
        if kind == "normal":
            a = rng.standard_normal(shape, dtype=np.float32).astype(dtype)
        elif kind == "int":
            a = rng.integers(inp["gen"]["low"], inp["gen"]["high"], size=shape, dtype=np.int64).astype(dtype)
        elif kind in ("mask", "left_mask"):
            a = np.ones(shape, dtype=dtype)
        elif kind == "lengths":  # full length: every frame is valid
            a = np.full(shape, shapes[inp["gen"]["input"]][inp["gen"]["axis"]], dtype=dtype)
        else:
            raise ValueError(f"{model['name']}: unknown input generator {inp['gen']}")
        path = os.path.join(directory, f"input_{i}.npy")
        np.save(path, np.ascontiguousarray(a))
        arrays.append(a)
        paths.append(path)
    return arrays, paths


def ensure_torchvision_onnx(models, cache):
    """Export missing torchvision ONNX files with /usr/bin/python3; {name: skip reason}."""
    missing = [m["name"] for m in models if m["source"] == "torchvision" and not os.path.exists(m["onnx"])]
    if not missing:
        return {}
    python = "/usr/bin/python3"
    if not os.path.exists(python):
        return {n: f"{python} not found (the torchvision ONNX files are exported with Debian's torch)" for n in missing}
    log(f"exporting {len(missing)} torchvision models with {python} bench/export_torchvision.py ...")
    r = subprocess.run([python, os.path.join(HERE, "export_torchvision.py"), "--models", ",".join(missing), "--out",
                        cache], capture_output=True, text=True)
    reasons = {}
    for line in r.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("status") == "skipped":
            reasons[rec["model"]] = rec.get("reason", "")
        elif rec.get("status") not in ("ok", "cached"):
            reasons[rec["model"]] = f"torchvision export {rec.get('status')}: {rec.get('reason', '')}"
    for n in missing:
        if n not in reasons and not os.path.exists(os.path.join(cache, n + ".onnx")):
            reasons[n] = "torchvision export failed: " + (r.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return reasons


# ---------------------------------------------------------------------------------------------
# Kiln


def has_flag(binary, args, flag):
    try:
        r = subprocess.run([binary] + args + ["--help"], capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return re.search(re.escape(flag) + r"\b", r.stdout + r.stderr) is not None


def kiln_export(build, model, out, dims_args, delegate):
    cmd = [os.path.join(build, "kiln"), "export", model["onnx"], "-o", out] + model["extra_args"] + dims_args
    if delegate:
        cmd += ["--delegate", delegate]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return "kiln export failed: " + " ".join((r.stdout + r.stderr).split())[:400]
    return None


def contract_args(dims):
    out = []
    for k, d in dims.items():
        out += ["--dim", f"{k}={d['min']}..{d['max']}" + (f":{d['step']}" if d.get("step", 1) != 1 else "")]
    return out


def pinned_args(point):
    out = []
    for k, v in point.items():
        out += ["--dim", f"{k}={v}"]
    return out


def run_kiln(build, kiln, paths, shapes, threads, warmup, runs, delegate_flag, output_prefix=None):
    cmd = [os.path.join(build, "kiln_runner"), f"--model_path={kiln}", f"--inputs={','.join(paths)}",
           f"--input_shapes={shape_text(shapes)}", f"--num_executions={warmup + runs}", f"--cpu_threads={threads}",
           "--print_output=none"]
    if delegate_flag:
        cmd.append(f"--delegate={delegate_flag}")
    if output_prefix:  # written after the timed iterations
        cmd += [f"--output_file={output_prefix}", "--output_format=npy"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    times = [float(m.group(3)) for m in ITERATION.finditer(r.stdout + "\n" + r.stderr)]
    if r.returncode or len(times) != warmup + runs:
        raise RuntimeError("kiln_runner failed: " + " ".join((r.stdout + r.stderr).split())[:400])
    return times[warmup:]


def flop_share(build, kiln):
    """The delegate's coverage / delegated-FLOP key from `kiln inspect --json`, if it reports one."""
    r = subprocess.run([os.path.join(build, "kiln"), "inspect", kiln, "--json"], capture_output=True, text=True)
    if r.returncode:
        return None
    try:
        info = json.loads(r.stdout)
    except ValueError:
        return None
    for m in info.get("methods", []):  # kiln inspect --json: methods[].delegate.flop_coverage (0..1)
        d = m.get("delegate")
        if isinstance(d, dict) and "flop_coverage" in d:
            return {"key": f"methods[{m.get('name')}].delegate.flop_coverage", "value": d["flop_coverage"],
                    "instructions": f"{d.get('delegated_instructions')}/{d.get('instructions')}",
                    "layout_changes": d.get("layout_changes"), "regions": d.get("regions")}
    pattern = re.compile("coverage|flop", re.I)
    scopes = [("", info)] + [(f"methods[{m.get('name', i)}].", m) for i, m in enumerate(info.get("methods", []))]
    for prefix, scope in scopes:
        for k, v in scope.items():
            if pattern.search(k):
                return {"key": prefix + k, "value": v}
    return None


def render_share(share):
    if not share:
        return "-"
    v = share["value"]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "percent" in share["key"].lower() or "pct" in share["key"].lower() or v > 1:
            return f"{v:.1f}%"
        return f"{100 * v:.1f}%"
    return json.dumps(v, separators=(",", ":"))[:80]


# ---------------------------------------------------------------------------------------------
# ONNX Runtime


def ort_session(onnx, threads, profile_prefix=None):
    """The benchmark's session; with `profile_prefix`, ONNX Runtime's profiler on (its file
    starts with that path)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return ort.InferenceSession(onnx, so, providers=["CPUExecutionProvider"])


def ort_feeds(session, model, arrays):
    names = [i.name for i in session.get_inputs()]
    by_name = {inp["name"]: a for inp, a in zip(model["inputs"], arrays)}
    if all(n in by_name for n in names):
        return {n: by_name[n] for n in names}
    return dict(zip(names, arrays))  # positional if the graph renamed its inputs


def run_ort(session, feeds, warmup, runs):
    """(times in ms, the outputs of the last run)."""
    for _ in range(warmup):
        session.run(None, feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        outputs = session.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return times, outputs


def max_rel_err(prefix, reference):
    """max |kiln - ORT| / max |ORT| over the outputs (a sanity check that both ran the same model)."""
    worst = 0.0
    for i, ref in enumerate(reference):
        path = f"{prefix}-{i}.npy"
        if not os.path.exists(path):
            return None
        got = np.load(path)
        if got.shape != ref.shape:
            return float("inf")
        scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-30)
        worst = max(worst, float(np.abs(got.astype(np.float64) - ref).max()) / scale if ref.size else 0.0)
    return worst


# ---------------------------------------------------------------------------------------------
# Benchmark


def round_sizes(runs, rounds):
    """`runs` split over `rounds` rounds as evenly as they go (at least one run each)."""
    rounds = max(1, min(rounds, runs))
    return [runs // rounds + (1 if i < runs % rounds else 0) for i in range(rounds)]


def median(xs):
    return statistics.median(xs) if xs else None


def paired_ratio(kiln_rounds, ort_rounds):
    """The median over rounds of Kiln's round median / ONNX Runtime's round median in the same
    round: a shared host's speed shifts by up to 1.5x between rounds seconds apart, which the
    ratio of the whole-row medians takes whole whenever the two runtimes' slow rounds differ."""
    if not kiln_rounds or not ort_rounds or len(kiln_rounds) != len(ort_rounds):
        return None
    return median([k / o for k, o in zip(kiln_rounds, ort_rounds) if k and o]) or None


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def bench_model(model, opts, env):
    name, build, work = model["name"], opts.build, opts.work
    rec = {"model": name, "source": model["source"], "onnx": os.path.relpath(model["onnx"], ROOT),
           "dims": model["dims"], "rows": [], "dyn_static": [], "flop_share": None, "skipped": None, "errors": []}
    kdir = os.path.join(work, "kiln")
    os.makedirs(kdir, exist_ok=True)
    primary = env["delegate"]  # "xnnpack" or None (portable-only build)
    variant = primary or "portable"
    dyn = os.path.join(kdir, f"{name}.dyn.{variant}.kiln")
    err = kiln_export(build, model, dyn, contract_args(model["dims"]), primary)
    if err:
        rec["skipped"] = err
        return rec
    rec["flop_share"] = flop_share(build, dyn)
    points = dim_points(model["dims"], model.get("bench_points"))
    if opts.quick:
        points = [p for p in points if p[0] == "mid"] or points[len(points) // 2:][:1]
    fitted = []
    for label, point in points:  # guards (e.g. length % 4 == 0) can reject the plain min/mid/max
        q = fit_point(build, dyn, model, point)
        text = shape_text(input_shapes(model, point))
        if q is None:
            rec["errors"].append(f"no shape near {label} {text} satisfies the contract (kiln check)")
        elif q != point:
            rec.setdefault("adjusted", []).append(f"{label} {text} -> {shape_text(input_shapes(model, q))} "
                                                  f"(guards; see kiln check)")
        if q is not None and all(q != p for _, p in fitted):
            fitted.append((label, q))
    points = fitted
    if not points:
        rec["skipped"] = "no benchmark shape satisfies the contract"
        return rec
    try:
        sessions = {t: ort_session(model["onnx"], t) for t in opts.threads}
    except Exception as e:
        rec["skipped"] = f"ONNX Runtime cannot load the model: {' '.join(str(e).split())[:300]}"
        return rec
    for label, point in points:
        shapes = input_shapes(model, point)
        text = shape_text(shapes)
        arrays, paths = make_inputs(model, shapes, os.path.join(work, "inputs", name, text.replace(",", "_")))
        for t in opts.threads:
            row = {"shape": text, "point": label, "threads": t}
            log(f"  {name} {text} threads={t}")
            # Kiln first, then ONNX Runtime: ORT's pool threads keep spinning for a while after a
            # run, and would take a core from a kiln_runner started right after it.
            prefix = os.path.join(os.path.dirname(paths[0]), "kiln_out")
            measures = [("kiln_xnnpack" if primary else "kiln_portable", primary)]
            if primary and opts.portable:
                measures.append(("kiln_portable", "none"))
            check = t == opts.threads[0]
            outputs = {}
            # Interleaved rounds (Kiln, then ONNX Runtime, --rounds times, the runs split among
            # them): a shared host's load drifts over seconds, and both should meet the same drift.
            reference = None
            for rnd, per_round in enumerate(round_sizes(opts.runs, opts.rounds)):
                time.sleep(0.1)  # let the previous ONNX Runtime run's threads stop spinning
                for key, flag in measures:
                    if key + "_error" in row:
                        continue
                    out_prefix = f"{prefix}_{key}"
                    keep = check and rnd == 0
                    for stale in glob.glob(out_prefix + "-*.npy") if keep else []:
                        os.remove(stale)
                    try:
                        got = run_kiln(build, dyn, paths, shapes, t, opts.warmup, per_round, flag,
                                       out_prefix if keep else None)
                        row.setdefault(key + "_samples", []).extend(got)
                        row.setdefault(key + "_round_ms", []).append(median(got))
                        if keep:
                            outputs[key] = out_prefix
                    except RuntimeError as e:
                        row[key + "_error"] = str(e)
                time.sleep(0.1)  # and kiln_runner's
                if "ort_error" in row:
                    continue
                try:
                    samples, ref = run_ort(sessions[t], ort_feeds(sessions[t], model, arrays), opts.warmup, per_round)
                    row.setdefault("ort_samples", []).extend(samples)
                    row.setdefault("ort_round_ms", []).append(median(samples))
                    reference = ref if reference is None else reference
                except Exception as e:
                    row["ort_error"] = " ".join(str(e).split())[:300]
            if check and reference is not None:
                for key, out_prefix in outputs.items():
                    row[key + "_max_rel_err"] = err = max_rel_err(out_prefix, reference)
                    if err is None or err > ERR_LIMIT:
                        rec["errors"].append(f"{text} {key}: outputs differ from ONNX Runtime (max rel err {err})")
            row["ort_ms"] = median(row.get("ort_samples"))
            for key in ("kiln_xnnpack", "kiln_portable"):
                row[key + "_ms"] = median(row.get(key + "_samples"))
                ok = row[key + "_ms"] and row["ort_ms"]
                row[key + "_ratio"] = row[key + "_ms"] / row["ort_ms"] if ok else None
                row[key + "_paired_ratio"] = paired_ratio(row.get(key + "_round_ms"), row.get("ort_round_ms"))
            for key in ("ort_error", "kiln_xnnpack_error", "kiln_portable_error"):
                if key in row:
                    rec["errors"].append(f"{text} threads={t} {key[:-6]}: {row[key]}")
            rec["rows"].append(row)
    del sessions

    # Static export pinned to the middle shape vs the dynamic export at that shape; alternating
    # runs so drift (another process, thermal) hits both alike.
    label, point = next(p for p in points if p[0] == "mid") if any(p[0] == "mid" for p in points) else points[0]
    shapes = input_shapes(model, point)
    text = shape_text(shapes)
    static = os.path.join(kdir, f"{name}.static_{text.replace(',', '_')}.{variant}.kiln")
    err = kiln_export(build, model, static, pinned_args(point), primary)
    if err:
        rec["dyn_static"].append({"shape": text, "error": "static " + err})
        rec["errors"].append(f"static export at {text}: {err}")
        return rec
    _, paths = make_inputs(model, shapes, os.path.join(work, "inputs", name, text.replace(",", "_")))
    rounds = 1 if opts.quick else 2
    for t in opts.threads:
        log(f"  {name} {text} threads={t} dynamic vs static")
        d, s = [], []
        try:
            for _ in range(rounds):
                s += run_kiln(build, static, paths, shapes, t, opts.warmup, opts.runs, primary)
                d += run_kiln(build, dyn, paths, shapes, t, opts.warmup, opts.runs, primary)
        except RuntimeError as e:
            rec["dyn_static"].append({"shape": text, "threads": t, "error": str(e)})
            rec["errors"].append(f"dynamic vs static at {text} threads={t}: {e}")
            continue
        ratio = median(d) / median(s)
        rec["dyn_static"].append({"shape": text, "threads": t, "variant": variant, "dynamic_ms": median(d),
                                  "static_ms": median(s), "ratio": ratio, "within_budget": ratio <= BUDGET,
                                  "dynamic_samples": d, "static_samples": s})
    return rec


# ---------------------------------------------------------------------------------------------
# Report


def fmt_ms(v):
    return "-" if v is None else f"{v:.3f}"


def fmt_ratio(v):
    return "-" if v is None else f"{v:.2f}x"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def write_report(path, lines):
    """Writes a markdown report (creating its folder) and prints it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def git_commit():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True).stdout
        return head.strip() + (" (working tree modified)" if dirty.strip() else "")
    except OSError:
        return "unknown"


def markdown(result):
    env, opts = result["env"], result["options"]
    primary = env["delegate"]
    lines = [
        "# Kiln vs ONNX Runtime: CPU latency",
        "",
        f"Command: `{result['command']}`",
        "",
        f"- Date: {result['date']}",
        f"- CPU: {result['cpu']} ({os.cpu_count()} logical CPUs)",
        f"- ONNX Runtime: {result['ort_version']} (CPUExecutionProvider)"
        + ("" if result["ort_version"] == ORT_VERSION_PINNED else f" — not the pinned {ORT_VERSION_PINNED}"),
        f"- Kiln: commit {result['kiln_commit']}, binaries in `{opts['build']}`; "
        + ("XNNPACK delegate: yes (`kiln export --delegate xnnpack`, `kiln_runner --delegate=xnnpack`)" if primary
           else "**this build's `kiln export`/`kiln_runner` have no `--delegate` flag: Kiln ran portable only**"),
        f"- ONNX Runtime settings: intra_op_num_threads = threads, inter_op_num_threads = 1, ORT_SEQUENTIAL, "
        f"ORT_ENABLE_ALL, default spinning and allocator; timed with time.perf_counter() around session.run",
        f"- Kiln settings: `kiln_runner --cpu_threads=threads --num_executions=warmup + the round's runs`, "
        f"execute() time from its `Iteration` lines (portable kernels use one thread whatever --cpu_threads says)",
        f"- Timing: {opts.get('rounds', 1)} interleaved rounds (Kiln, then ONNX Runtime), each after {opts['warmup']} "
        f"discarded warm-up run{'' if opts['warmup'] == 1 else 's'}; median of {opts['runs']} runs in all"
        + ("; --quick: middle shape only" if opts["quick"] else "; shapes: every dim at min, middle, max"),
        "",
        "## Latency",
        "",
        "Ratio = Kiln / ONNX Runtime (below 1 means Kiln is faster).",
        "",
        "| model | shape | threads | ORT ms | Kiln-xnnpack ms | ratio | Kiln portable ms | ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for rec in result["models"]:
        if rec["skipped"]:
            lines.append(f"| {rec['model']} | skipped: {rec['skipped'][:200].replace('|', '/')} | | | | | | |")
            continue
        for r in rec["rows"]:
            def cell(key):
                return "fail" if key + "_error" in r else fmt_ms(r.get(key + "_ms"))
            lines.append(f"| {rec['model']} | {r['shape']} | {r['threads']} | "
                         f"{'fail' if 'ort_error' in r else fmt_ms(r['ort_ms'])} | {cell('kiln_xnnpack')} | "
                         f"{fmt_ratio(r['kiln_xnnpack_ratio'])} | {cell('kiln_portable')} | "
                         f"{fmt_ratio(r['kiln_portable_ratio'])} |")
    errs = [r[k] for rec in result["models"] for r in rec["rows"] for k in r if k.endswith("_max_rel_err")]
    if errs:
        worst = max(e if e is not None else float("inf") for e in errs)
        lines += ["", f"Output check: Kiln's outputs against ONNX Runtime's at every shape (first thread count), worst "
                      f"max |Kiln - ORT| / max |ORT| = {worst:.1e} (limit {ERR_LIMIT:.0e})."]
    lines += ["", "Geometric mean of the ratios per thread count:", "",
              "| threads | Kiln-xnnpack / ORT | paired by round | rows | Kiln portable / ORT | paired by round | rows |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for t, g in result["geomean"].items():
        lines.append(f"| {t} | {fmt_ratio(g['kiln_xnnpack'])} | {fmt_ratio(g.get('kiln_xnnpack_paired'))} | "
                     f"{g['kiln_xnnpack_rows']} | {fmt_ratio(g['kiln_portable'])} | "
                     f"{fmt_ratio(g.get('kiln_portable_paired'))} | {g['kiln_portable_rows']} |")
    lines += ["", "Paired by round: per row the median over the interleaved rounds of Kiln's round median over "
              "ONNX Runtime's in the same round (a shared host's speed moves between rounds)."]
    lines += ["", "## Delegated FLOP share", "",
              "From `kiln inspect F.kiln --json` (first top-level or per-method key containing 'coverage' or 'flop'; "
              "'-' if the build reports none).", "",
              "| model | delegated FLOP share | delegated instructions | regions | layout changes |",
              "| --- | ---: | ---: | ---: | ---: |"]
    for rec in result["models"]:
        if not rec["skipped"]:
            share = rec["flop_share"] or {}
            lines.append(f"| {rec['model']} | {render_share(share or None)} | {share.get('instructions', '-')} | "
                         f"{share.get('regions', '-')} | {share.get('layout_changes', '-')} |")
    lines += ["", "## Dynamic vs static export", "",
              f"Static: `kiln export` with every dim pinned (`--dim NAME=V`) to the middle shape; dynamic: the "
              f"contract export run at that shape; alternating runs, medians. Budget: dynamic / static <= {BUDGET:.2f}.",
              "", "| model | shape | threads | Kiln | dynamic ms | static ms | dynamic / static | budget |",
              "| --- | --- | ---: | --- | ---: | ---: | ---: | --- |"]
    for rec in result["models"]:
        for d in rec["dyn_static"]:
            if "error" in d:
                lines.append(f"| {rec['model']} | {d['shape']} | {d.get('threads', '-')} | | fail | fail | - | - |")
                continue
            lines.append(f"| {rec['model']} | {d['shape']} | {d['threads']} | {d['variant']} | {fmt_ms(d['dynamic_ms'])} | "
                         f"{fmt_ms(d['static_ms'])} | {d['ratio']:.3f} | {'ok' if d['within_budget'] else 'OVER'} |")
    adjusted = [(rec["model"], a) for rec in result["models"] for a in rec.get("adjusted", [])]
    if adjusted:
        lines += ["", "## Shapes moved to satisfy guards", ""] + [f"- {m}: {a}" for m, a in adjusted]
    errors = [(rec["model"], e) for rec in result["models"] for e in rec["errors"]]
    if errors:
        lines += ["", "## Failures", ""] + [f"- {m}: {e.replace('|', '/')}" for m, e in errors]
    return "\n".join(lines) + "\n"


def summarize(models, threads):
    out = {}
    for t in threads:
        g = {}
        for key in ("kiln_xnnpack", "kiln_portable"):
            ratios = [r[key + "_ratio"] for m in models for r in m["rows"] if r["threads"] == t and r[key + "_ratio"]]
            g[key], g[key + "_rows"] = geomean(ratios), len(ratios)
            paired = [r.get(key + "_paired_ratio") for m in models for r in m["rows"] if r["threads"] == t]
            g[key + "_paired"] = geomean([x for x in paired if x])
        out[str(t)] = g
    return out


def main():
    ap = argparse.ArgumentParser(description="Kiln vs ONNX Runtime CPU latency on the zoo and torchvision models.")
    ap.add_argument("--models", help="comma-separated names (default: every zoo and torchvision sweep model)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--runs", type=int, help="timed runs per measurement (default 20; 5 with --quick)")
    ap.add_argument("--warmup", type=int, help="discarded runs before them, in each round (default 2; 1 with --quick)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved Kiln / ONNX Runtime rounds the runs are split "
                    "into (default 5)")
    ap.add_argument("--portable", action="store_true",
                    help="also run Kiln portable (--delegate=none) when the build has the XNNPACK delegate")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="directory with kiln and kiln_runner")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "ort_compare.md"), help="Markdown report; "
                    "the JSON goes next to it with .json")
    ap.add_argument("--work", help="scratch dir for .kiln files and inputs (default BUILD/bench)")
    ap.add_argument("--onnx-cache", help="torchvision ONNX cache (default BUILD/bench/onnx)")
    ap.add_argument("--quick", action="store_true", help="smoke test: middle shape only, few runs")
    opts = ap.parse_args()
    opts.threads = [int(t) for t in opts.threads.split(",") if t]
    opts.runs = opts.runs or (5 if opts.quick else 20)
    opts.warmup = opts.warmup if opts.warmup is not None else (1 if opts.quick else 2)
    opts.build = os.path.abspath(opts.build)
    opts.work = os.path.abspath(opts.work or os.path.join(opts.build, "bench"))
    cache = os.path.abspath(opts.onnx_cache or os.path.join(opts.build, "bench", "onnx"))
    out_md = opts.out if opts.out.endswith(".md") else opts.out + ".md"
    out_json = out_md[:-3] + ".json"

    for b in ("kiln", "kiln_runner"):
        if not os.access(os.path.join(opts.build, b), os.X_OK):
            ap.error(f"{os.path.join(opts.build, b)} is missing; build Kiln first")
    delegate = ("xnnpack" if has_flag(os.path.join(opts.build, "kiln"), ["export"], "--delegate")
                and has_flag(os.path.join(opts.build, "kiln_runner"), [], "--delegate") else None)
    if not delegate:
        log("note: kiln export / kiln_runner have no --delegate flag; Kiln runs portable only")
    if delegate is None and opts.portable:
        log("note: --portable is implied (portable is the only Kiln variant in this build)")

    models = zoo_models() + torchvision_models(cache)
    if opts.models:
        wanted = [n for n in opts.models.split(",") if n]
        known = {m["name"]: m for m in models}
        unknown = [n for n in wanted if n not in known]
        if unknown:
            ap.error(f"unknown models {unknown}; known: {', '.join(known)}")
        models = [known[n] for n in wanted]
    skips = ensure_torchvision_onnx(models, cache)

    env = {"delegate": delegate}
    records = []
    for m in models:
        log(f"{m['name']}:")
        if m["name"] in skips:
            records.append({"model": m["name"], "source": m["source"], "skipped": skips[m["name"]], "rows": [],
                            "dyn_static": [], "flop_share": None, "errors": []})
            log(f"  skipped: {skips[m['name']]}")
            continue
        records.append(bench_model(m, opts, env))
        if records[-1]["skipped"]:
            log(f"  skipped: {records[-1]['skipped']}")

    result = {
        "command": "python3 " + shlex.join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "ort_version": ort.__version__,
        "numpy_version": np.__version__,
        "kiln_commit": git_commit(),
        "env": env,
        "options": {"threads": opts.threads, "runs": opts.runs, "warmup": opts.warmup, "rounds": opts.rounds,
                    "quick": opts.quick,
                    "portable": opts.portable or delegate is None, "build": os.path.relpath(opts.build)},
        "settings": {"ort": {"intra_op_num_threads": "threads", "inter_op_num_threads": 1,
                             "execution_mode": "ORT_SEQUENTIAL", "graph_optimization_level": "ORT_ENABLE_ALL",
                             "providers": ["CPUExecutionProvider"]},
                     "kiln": {"delegate": delegate or "none (flag not supported by this build)",
                              "portable_runner_flag": "--delegate=none" if delegate else "(none)"}},
        "models": records,
        "geomean": summarize(records, opts.threads),
    }
    os.makedirs(os.path.dirname(os.path.abspath(out_md)), exist_ok=True)
    with open(out_json, "w") as f:
        json.dump(result, f, indent=1)
    text = markdown(result)
    with open(out_md, "w") as f:
        f.write(text)
    print(text)
    log(f"wrote {out_md} and {out_json}")


if __name__ == "__main__":
    main()
