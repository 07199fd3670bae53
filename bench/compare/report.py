"""Renders bench/compare/results.json as Markdown (compare.py calls it; on its own:
`python3 bench/compare/report.py [results.json] [results.md]`, no torch needed).

Hypotheses for rows where ExecuTorch is faster or accepts more live in hypotheses.json
(written by hand after reading profiles and messages); a row without one says so.
"""
from __future__ import annotations

import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT = 1e-3


def load_hypotheses():
    path = os.path.join(HERE, "hypotheses.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {}


def hyp(h, *keys):
    for k in keys:
        if k in h:
            return h[k]
    return "_no hypothesis written yet_"


def fmt_bytes(n):
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def fmt_err(v):
    if v is None:
        return "-"
    if v == float("inf") or (isinstance(v, str) and v == "inf"):
        return "shape differs"
    v = float(v)
    return f"{v:.1e}" + ("" if v < LIMIT else " **!**")


def fmt_ms(v):
    return "-" if v is None else f"{v:.3f}"


def cell(text, width=400):
    """Text for a table cell: one line, pipes escaped, code-formatted."""
    if text is None:
        return "-"
    t = " ⏎ ".join(ln.strip() for ln in str(text).splitlines() if ln.strip())
    if len(t) > width:
        t = t[:width] + " …"
    return "`" + t.replace("|", "\\|").replace("`", "'") + "`"


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def dims_text(dims):
    out = []
    for k, d in dims.items():
        s = f"{k} {d['min']}..{d['max']}" + (f":{d['step']}" if d.get("step", 1) > 1 else "")
        if d.get("sum_of"):
            s += " (= " + " + ".join(d["sum_of"]) + ")"
        out.append(s)
    return ", ".join(out)


def et_status(m):
    et = m.get("et", {})
    if not et.get("ok"):
        return "refused"
    fixed = " (after torch.export's suggested fixes: " + "; ".join(
        m["torch_export"]["with_fixes"]["fixes"]) + ")" if m.get("torch_export", {}).get("with_fixes", {}).get("ok") else ""
    if et.get("xnnpack_error"):
        return "portable only (XNNPACK lowering refused)" + fixed
    return "XNNPACK" + fixed


def ratios(m, t):
    return [p["latency"][str(t)]["ratio"] for p in m.get("points", []) if str(t) in p.get("latency", {})]


def worst(m, key):
    vals = [p.get(key) for p in m.get("points", []) if p.get(key) is not None]
    return max(vals) if vals else None


def summary_table(res, lines):
    t1, t2 = (res["threads"] + [None, None])[:2]
    lines += ["| model | dims (Kiln contract asked) | ExecuTorch program | Kiln program | .pte | .kiln | "
              "ET planned buffers | Kiln arena (bound) | ET delegated nodes | Kiln delegated (instr, FLOPs) | "
              "worst err vs ORT ET / Kiln | worst err vs eager ET / Kiln | "
              + " | ".join(f"Kiln/ET {t} thr (geomean)" for t in res["threads"]) + " |",
              "|" + "---|" * (12 + len(res["threads"]))]
    for m in res["models"]:
        if "worker_error" in m:
            lines.append(f"| {m['name']} | worker failed: {cell(m['worker_error'][-300:])} |" + " |" * 13)
            continue
        et, k = m.get("et", {}), m.get("kiln", {})
        cov = k.get("coverage") or {}
        kdel = (f"{cov.get('delegated_instructions')}/{cov.get('instructions')}, {100 * cov.get('flops_fraction', 0):.1f}%"
                if cov else "-")
        edel = (f"{et['delegated_nodes']}/{et['delegated_nodes'] + et['non_delegated_nodes']} "
                f"({et['delegated_subgraphs']} subgraphs)" if et.get("ok") else "-")
        geo = [geomean(ratios(m, t)) for t in res["threads"]]
        lines.append(
            f"| {m['name']} | {dims_text(m['dims'])} | {et_status(m)} | {'ok' if k.get('ok') else 'refused'} | "
            f"{fmt_bytes(et.get('bytes'))} | {fmt_bytes(k.get('bytes'))} | {fmt_bytes(et.get('planned_bytes'))} | "
            f"{fmt_bytes(k.get('arena_bytes'))} | {edel} | {kdel} | "
            f"{fmt_err(worst(m, 'et_vs_ort'))} / {fmt_err(worst(m, 'kiln_vs_ort'))} | "
            f"{fmt_err(worst(m, 'et_vs_eager'))} / {fmt_err(worst(m, 'kiln_vs_eager'))} | "
            + " | ".join("-" if g is None else f"{g:.2f}x" for g in geo) + " |")


def latency_table(res, lines):
    head = "| model | point | input shapes |"
    for t in res["threads"]:
        head += f" ET {t} thr ms | Kiln {t} thr ms | Kiln/ET |"
    lines += [head + " kiln_runner 1 thr ms | Kiln arena in use |",
              "|" + "---|" * (3 + 3 * len(res["threads"]) + 2)]
    for m in res["models"]:
        for p in m.get("points", []):
            row = f"| {m['name']} | {p['label']} | {p['shapes']}" + (f" ({p['moved']})" if p.get("moved") else "") + " |"
            for t in res["threads"]:
                lat = p.get("latency", {}).get(str(t))
                if lat:
                    mark = " **ET faster**" if lat["ratio"] > 1.0 else ""
                    row += f" {fmt_ms(lat['et_ms'])} | {fmt_ms(lat['kiln_ms'])} | {lat['ratio']:.2f}x{mark} |"
                else:
                    row += " - | - | - |"
            runner = p.get("runner") or {}
            row += f" {fmt_ms(runner.get('ms_1t'))} | {fmt_bytes(p.get('kiln_arena_in_use'))} |"
            lines.append(row)


def correctness_table(res, lines):
    lines += ["| model | point | input shapes | ET vs ORT | ET vs eager | Kiln vs ORT | Kiln vs eager | "
              "kiln_runner vs ORT | error |", "|---|---|---|---|---|---|---|---|---|"]
    for m in res["models"]:
        for p in m.get("points", []):
            err = "; ".join(x for x in (p.get("et_error") and "ET: " + p["et_error"],
                                        p.get("kiln_error") and "Kiln: " + p["kiln_error"],
                                        (p.get("runner") or {}).get("error")) if x)
            lines.append(f"| {m['name']} | {p['label']} | {p['shapes']} | {fmt_err(p.get('et_vs_ort'))} | "
                         f"{fmt_err(p.get('et_vs_eager'))} | {fmt_err(p.get('kiln_vs_ort'))} | "
                         f"{fmt_err(p.get('kiln_vs_eager'))} | {fmt_err((p.get('runner') or {}).get('vs_ref'))} | "
                         f"{cell(err) if err else ''} |")


def coverage_section(res, lines):
    lines += ["| model | ExecuTorch: ops left to the portable kernels (count) | Kiln: declined by the delegate |",
              "|---|---|---|"]
    for m in res["models"]:
        et, k = m.get("et", {}), m.get("kiln", {})
        nd = ", ".join(f"{op} x{n}" for op, n in sorted(et.get("non_delegated_ops", {}).items())) or "-"
        dec = (k.get("coverage") or {}).get("declined") or []
        counts = {}
        for op, why in dec:
            counts[f"{op} ({why})"] = counts.get(f"{op} ({why})", 0) + 1
        kd = ", ".join(f"{t} x{n}" for t, n in sorted(counts.items())) or "-"
        if et.get("ok"):
            lines.append(f"| {m['name']} | {et.get('backend')}: {nd} | {kd} |")
        elif "name" in m:
            lines.append(f"| {m['name']} | - | {kd} |")


def probe_cell(side):
    if not side:
        return "-"
    if side.get("accepted"):
        extra = ""
        if "vs_eager" in side:
            e = side["vs_eager"]
            extra = (" — output matches eager torch" if e is not None and e != float("inf") and float(e) < LIMIT
                     else f" — **output differs from eager torch** (rel. err {fmt_err(e)}, shapes "
                          f"{side.get('out_shapes')} vs eager {side.get('eager_shapes')})")
        elif "eager_error" in side:
            extra = f" — eager torch refuses it: {cell(side['eager_error'], 200)}"
        return "**accepted**" + extra
    return cell(side.get("message"))


def refusals_section(res, lines):
    lines += ["| model | input shapes | why it is outside the contract | ExecuTorch | Kiln (Python) | kiln_runner |",
              "|---|---|---|---|---|---|"]
    for m in res["models"]:
        for p in m.get("refusals", []):
            kr = p.get("kiln_runner") or {}
            lines.append(f"| {m['name']} | {p['shapes']} | {p['reason']} | {probe_cell(p.get('et'))} | "
                         f"{probe_cell(p.get('kiln'))} | {cell(kr.get('message')) if kr else '-'} |")


def export_section(res, lines):
    lines += ["| model | torch Dims | torch.export | ExecuTorch lowering | ONNX for Kiln | Kiln export | "
              "Kiln's contract and guards |", "|---|---|---|---|---|---|---|"]
    for m in res["models"]:
        if "worker_error" in m:
            continue
        te, et, k, ox = m.get("torch_export", {}), m.get("et", {}), m.get("kiln", {}), m.get("onnx", {})
        if te.get("ok"):
            parts = []
            for d, r in te.get("ranges", {}).items():
                parts.append(f"{d} -> {r['expr']} " + ", ".join(f"{s} in [{lo}, {hi}]" for s, (lo, hi) in r["ranges"].items()))
            tx = "ok; " + "; ".join(parts)
            if te.get("asserts"):
                tx += f"; {len(te['asserts'])} runtime assertions: " + cell("; ".join(te["asserts"][:3]), 300)
        else:
            tx = "**refused**: " + cell(te.get("error"), 700)
            wf = te.get("with_fixes")
            if wf:
                tx += f"; again with its suggested fixes ({'; '.join(wf['fixes'])}): " + (
                    "ok; " + "; ".join(f"{d} -> {r['expr']} " + ", ".join(
                        f"{s} in [{lo}, {hi}]" for s, (lo, hi) in r["ranges"].items())
                        for d, r in wf.get("ranges", {}).items()) if wf.get("ok") else "refused: " + cell(wf.get("error"), 300))
        if et.get("ok"):
            ex = "ok" + ("" if not et.get("xnnpack_error") else "; XNNPACK refused: " + cell(et["xnnpack_error"], 500)
                         + "; portable-only program made instead")
            if et.get("edge_inputs") and et.get("edge_inputs") != et.get("export_inputs"):
                ex += ("; **to_edge changed the inputs** from " + ", ".join(et["export_inputs"]) + " to "
                       + ", ".join(et["edge_inputs"]) + " (ranges " + ", ".join(
                           f"{k} in [{lo}, {hi}]" for k, (lo, hi) in et.get("edge_ranges", {}).items()) + ")")
        else:
            ex = "**refused**: " + cell(et.get("error"), 500)
        onnx = ox.get("exporter", "-") if ox.get("ok") else "failed: " + cell(ox.get("error"), 300)
        if ox.get("dynamo_error"):
            onnx += "; dynamo exporter: " + cell(ox["dynamo_error"], 300)
        kx = "ok" if k.get("ok") else "**refused**: " + cell(k.get("error"), 500)
        contract = []
        declared = {n: (d["min"], d["max"], d.get("step", 1)) for n, d in m["dims"].items()}
        for name, lo, hi, step in k.get("contract_dims", []):
            if declared.get(name) != (lo, hi, step):
                contract.append(f"{name} narrowed to {lo}..{hi}" + (f":{step}" if step > 1 else ""))
        contract += [f"guard {g}" for g in k.get("guards", [])]
        lines.append(f"| {m['name']} | {', '.join(f'{a}={b}' for a, b in m.get('torch_dims', {}).items())} | {tx} | "
                     f"{ex} | {onnx} | {kx} | {'; '.join(contract) or 'as declared'} |")


def classic_section(res, lines):
    c = res.get("classic")
    if not c:
        return
    p = c["probe"]
    lines += ["MobileNetV2 (the zoo's) exported with no dynamic dims at 1x3x224x224 both ways, fed 1x3x256x256 "
              "(ones).", "",
              f"- ExecuTorch (`Method.set_inputs` + `execute`, XNNPACK, {fmt_bytes(c['et']['bytes'])} .pte): "
              "the exception, then the runtime's log lines on stderr:", "", "```",
              (p.get("et") or {}).get("message") or "(accepted)", "```", "",
              "- Kiln, Python (`method.check` / `method(x)`):", "", "```", (p.get("kiln") or {}).get("message") or "(accepted)",
              "```", "", "- `kiln_runner --input_shapes=1x3x256x256`:", "", "```",
              (p.get("kiln_runner") or {}).get("message") or "-", "```", "",
              f"- `kiln check FILE --input_shapes=1x3x256x256 --explain --model=MODEL.onnx` (exit "
              f"{c['kiln_check_explain']['exit']}):", "", "```", c["kiln_check_explain"]["output"][:3000], "```", ""]


def et_refuses_in_contract(res, lines):
    """Shapes inside the declared contract that ExecuTorch's program refuses (Kiln runs them all
    unless its own column says otherwise)."""
    rows = []
    for m in res["models"]:
        for p in m.get("points", []):
            if p.get("et_error"):
                rows.append(f"| {m['name']} | {p['label']} | {p['shapes']} | {cell(p['et_error'], 500)} | "
                            f"{'runs' if not p.get('kiln_error') else cell(p['kiln_error'])} |")
    if rows:
        lines += ["| model | point | input shapes | ExecuTorch | Kiln |", "|---|---|---|---|---|"] + rows
    else:
        lines.append("None in this run.")


def et_wins(res, lines, h):
    """Every row where ExecuTorch is faster or accepts more, grouped under its hypothesis."""
    groups = {}  # hypothesis text -> rows

    def add(text, *keys):
        groups.setdefault(hyp(h, *keys), []).append(text)

    for m in res["models"]:
        name = m["name"]
        for p in m.get("points", []):
            for t, lat in p.get("latency", {}).items():
                if lat["ratio"] > 1.0:
                    add(f"{name} {p['label']} {p['shapes']}, {t} thread(s): ExecuTorch {lat['et_ms']:.3f} ms, Kiln "
                        f"{lat['kiln_ms']:.3f} ms ({lat['ratio']:.2f}x)",
                        f"{name}/{p['label']}/{t}", f"{name}/{t}", f"threads/{t}", f"{name}/speed", "speed")
        for p in m.get("refusals", []):
            e, k = p.get("et") or {}, p.get("kiln") or {}
            if e.get("accepted") and not k.get("accepted"):
                add(f"{name}: ExecuTorch accepts {p['shapes']} ({p['reason']}), Kiln refuses{probe_cell(e)[12:]}",
                    f"{name}/accept/{p['shapes']}", f"{name}/accept", "accept")
        if m.get("et", {}).get("ok") and not m.get("kiln", {}).get("ok"):
            add(f"{name}: ExecuTorch exports, Kiln refuses: {cell(m['kiln'].get('error'), 400)}", f"{name}/export")
    if not groups:
        lines.append("None in this run.")
    for text, rows in groups.items():
        lines += [f"**Hypothesis.** {text}", ""] + [f"- {r}" for r in rows] + [""]


def load_remark(res):
    """What the 1-minute load averages say about the machine during the run (the harness itself
    keeps one core busy: about 1)."""
    try:
        loads = [float(res[k].split()[0]) for k in ("load_start", "load_end")]
    except (KeyError, ValueError, IndexError):
        return "load not recorded"
    if max(loads) <= 1.6:
        return "otherwise idle: the harness's own process makes the load of about 1"
    return ("other processes were running: absolute times are noisy, and 2-thread times measure Kiln's "
            "thread pool under load (see README.md)")


def write(res, path):
    h = load_hypotheses()
    v = res.get("versions", {})
    lines = ["# Kiln vs ExecuTorch: the same torch modules, Dims and shapes, in one run", "",
             f"Regenerate: `{res['command']}` (see `bench/compare/README.md`; the JSON beside this file has every "
             "sample). Render only: `python3 bench/compare/report.py`.", "",
             f"- Date: {res['date']}; CPU: {res['cpu']}; load average at start / end: "
             f"{res.get('load_start', '-')} / {res.get('load_end', '-')} (2 cores; {load_remark(res)}; both "
             "runtimes alternate within each round, so the ratio is the number to read)",
             f"- torch {v.get('torch')}, executorch {v.get('executorch')}, torchvision {v.get('torchvision')}, "
             f"onnxruntime {v.get('onnxruntime')}, onnx {v.get('onnx')}, onnxscript {v.get('onnxscript')}",
             f"- Kiln: {res.get('kiln_snapshot', 'the build given to run.sh')}; harness at commit {res['kiln_commit']}",
             f"- Timing: {res['warmup']} warm-up calls, then the median of {res['runs']} rounds; each round makes one "
             "call of each runtime in one process (order alternating): ExecuTorch `Method.set_inputs` + "
             "`execute()` (its planner reuses input buffers for activations, so inputs are set for every "
             "execute), Kiln a copy into the views of `Method.bind` + `execute()` (which returns new numpy "
             "arrays: an output copy ExecuTorch does not make). `kiln_runner` is the CLI's median (execute "
             "only, another process). Ratio = Kiln / ExecuTorch: below 1, Kiln is faster.",
             "- Errors: max |a - ref| / max |ref| over all outputs; **!** marks one above 1e-3. Inputs: seeded "
             "normal floats, ids in range, masks of ones, full lengths (as bench/ort_compare.py).", ""]
    lines += ["## Summary", ""]
    summary_table(res, lines)
    lines += ["", "## Where ExecuTorch is faster or accepts more", ""]
    et_wins(res, lines, h)
    lines += ["", "## Latency", ""]
    latency_table(res, lines)
    lines += ["", "## Correctness", ""]
    correctness_table(res, lines)
    lines += ["", "## Delegated coverage", "",
              "ExecuTorch: nodes of the edge program inside XNNPACK subgraphs vs left to portable kernels "
              "(`get_delegation_info`; `getitem`/`sym_size` are bookkeeping nodes). Kiln: instructions and FLOPs "
              "(at the bound) the XNNPACK delegate runs, and what it declined.", ""]
    coverage_section(res, lines)
    lines += ["", "## What each refuses", "",
              "Ones of each input's dtype at shapes outside the contract. ExecuTorch's column is the exception "
              "text after the runtime's log lines (C++ stderr), as a user of the Python bindings sees them; an "
              "accepted shape is run and compared with eager torch on the same input.", ""]
    refusals_section(res, lines)
    lines += ["", "### Shapes inside the declared contract that ExecuTorch's program refuses", ""]
    et_refuses_in_contract(res, lines)
    lines += ["", "## The classic failure: static at 224, fed 256", ""]
    classic_section(res, lines)
    lines += ["## Export-side differences", "",
              "The same module and Dims; torch.export's verdict and what it recorded, ExecuTorch's lowering, the "
              "ONNX Kiln read, Kiln's verdict and the contract it wrote (narrowed dims, guards kept for bind).", ""]
    export_section(res, lines)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results.json")
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.splitext(src)[0] + ".md"
    with open(src) as f:
        write(json.load(f), dst)


if __name__ == "__main__":
    main()
