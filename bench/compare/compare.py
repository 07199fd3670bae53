"""Kiln and ExecuTorch side by side: the same torch modules, the same Dims, the same shapes,
measured in one process. Run through bench/compare/run.sh (which makes the virtualenv):

    bash bench/compare/run.sh [--models mobilenet_v2,bert_tiny] [--threads 1,2] [--runs 20]

Per model (each in its own worker process, `compare.py model NAME`):
  export  torch.export.export with a torch Dim per Kiln dim (a dim with a step s becomes
          s * Dim), then ExecuTorch: to_edge_transform_and_lower(XnnpackPartitioner) ->
          to_executorch -> .pte; Kiln: the ONNX of that same ExportedProgram (torch's dynamo
          exporter; TorchScript's when torch.export refuses) -> kiln.export_onnx with the same
          bounds -> .kiln.
  run     at the minimum, far below the bound, the middle and the bound: ExecuTorch through its
          pybindings, Kiln through its Python API and kiln_runner; every output against ONNX
          Runtime (on the ONNX Kiln read) and against eager torch.
  time    per shape and thread count, ExecuTorch's Method.execute() and Kiln's Method.execute()
          alternately in one process (inputs written once, outside the timed call); medians.
  refuse  the manifest's rejected shapes and each dim past its bound: ExecuTorch's exception and
          log lines (captured from the C++ stderr, in a child process: a runtime that aborts
          cannot take the worker with it), Kiln's ContractError and kiln_runner's output.
Then `compare.py classic`: a program exported static at 224 fed 1x3x256x256, both ways.
Results: per-model JSON under --work, merged into --out (.json) and rendered (.md, report.py).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models as zoo  # noqa: E402
from models import ROOT, ort_compare  # noqa: E402

ERR_LIMIT = 1e-3


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def first_lines(text, n=12, width=600):
    """An exception's message as a user sees it: its lines (traceback excluded), trimmed."""
    lines = [ln.rstrip() for ln in str(text).strip().splitlines() if ln.strip()]
    out = "\n".join(ln[:width] for ln in lines[:n])
    return out + ("\n..." if len(lines) > n else "")


@contextlib.contextmanager
def captured_fd2():
    """Captures what C++ code writes to file descriptor 2 (ExecuTorch's ET_LOG lines)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        box = {"text": ""}
        try:
            yield box
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            box["text"] = "\n".join(ln for ln in tmp.read().decode(errors="replace").splitlines()
                                    if "cpuinfo" not in ln)


def flat_outputs(out):
    """A module's outputs as a list of numpy arrays: a tensor, a tuple/list, or a dict (the
    segmentation models return {'out': ...}) in its order."""
    if isinstance(out, dict):
        out = list(out.values())
    elif not isinstance(out, (tuple, list)):
        out = [out]
    return [o.detach().numpy() for o in out]


def rel_err(got, ref):
    import numpy as np

    worst = 0.0
    if len(got) != len(ref):
        return float("inf")
    for g, r in zip(got, ref):
        g, r = np.asarray(g), np.asarray(r)
        if g.shape != r.shape:
            return float("inf")
        if r.size == 0:
            continue
        scale = max(float(np.abs(r.astype(np.float64)).max()), 1e-30)
        worst = max(worst, float(np.abs(g.astype(np.float64) - r.astype(np.float64)).max()) / scale)
    return worst


# ---------------------------------------------------------------------------------------------
# Export


def torch_dims(model):
    """{dim name: torch Dim}: Dim(name, min, max), or step * Dim(name_div_step) for a stepped dim
    (torch.export's way of saying 'multiples of step'; Kiln's is min..max:step)."""
    from torch.export import Dim

    out = {}
    for k, d in model["dims"].items():
        step = d.get("step", 1)
        if step > 1:
            out[k] = step * Dim(f"{k}_div{step}", min=-(-d["min"] // step), max=d["max"] // step)
        else:
            out[k] = Dim(k, min=d["min"], max=d["max"])
    return out


def dynamic_shapes(model, dims):
    """Per input (by position), {axis: Dim}; a dim missing from `dims` is left static."""
    spec = []
    for inp in model["inputs"]:
        axes = {i: dims[a] for i, a in enumerate(inp["dims"]) if isinstance(a, str) and a in dims}
        spec.append(axes or None)
    return tuple(spec)


def apply_fixes(message, dims):
    """torch.export's 'Suggested fixes:' applied to `dims`: `X = Dim('X', min=.., max=..)` replaces
    a Dim, `X = 5` makes the dim static (at the example's size). Returns (dims, fixes applied)."""
    import re

    from torch.export import Dim

    if "Suggested fixes:" not in message:
        return None, []
    new, applied = dict(dims), []
    for line in message.split("Suggested fixes:", 1)[1].splitlines():
        line = line.strip()
        m = re.match(r"^(\w+) = Dim\('(\w+)'(?:, min=(\d+))?(?:, max=(\d+))?\)$", line)
        if m and m.group(1) in dims:
            old = dims[m.group(1)]
            lo = int(m.group(3)) if m.group(3) else old.min
            hi = int(m.group(4)) if m.group(4) else old.max
            new[m.group(1)] = Dim(m.group(1), min=lo, max=hi)
            applied.append(line)
        elif re.match(r"^(\w+) = (\d+)$", line) and line.split()[0] in dims:
            new.pop(line.split()[0])
            applied.append(line)
    return (new, applied) if applied else (None, [])


def torch_inputs(model, shapes):
    import torch

    arrays, _ = ort_compare.make_inputs(model, shapes, tempfile.mkdtemp(prefix="kiln-cmp-"))
    return arrays, tuple(torch.from_numpy(a.copy()) for a in arrays)


def torch_ranges(ep, model, dims):
    """What torch recorded for each declared dim: the symbolic size of the first axis that
    carries it and the range of each free symbol; and the shape assertions the program keeps."""
    user = set(ep.graph_signature.user_inputs)
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in user]
    seen = {}
    for node, inp in zip(placeholders, model["inputs"]):
        val = node.meta.get("val")
        for i, a in enumerate(inp["dims"]):
            if isinstance(a, str) and a not in seen and val is not None:
                expr = val.shape[i]
                text = str(expr)
                free = getattr(getattr(expr, "node", None), "expr", None)
                ranges = {}
                for sym in getattr(free, "free_symbols", ()):
                    vr = ep.range_constraints.get(sym)
                    if vr is not None:
                        ranges[str(sym)] = [int(vr.lower), int(vr.upper) if vr.upper.is_finite else None]
                seen[a] = {"expr": text, "ranges": ranges}
    asserts = []
    for n in ep.graph.nodes:
        if n.op == "call_function" and "assert" in str(n.target):
            msg = next((a for a in n.args if isinstance(a, str)), str(n.target))
            asserts.append(first_lines(msg, 2, 300))
    return seen, asserts


def onnx_from(ep, module, model, example, names):
    """The ONNX Kiln reads: torch's dynamo exporter on the same ExportedProgram, or the
    TorchScript exporter on the module when there is no ExportedProgram."""
    import io

    import torch

    if ep is not None:
        try:
            prog = torch.onnx.export(ep, (), dynamo=True, opset_version=18, verbose=False)
            return prog.model_proto.SerializeToString(), "dynamo (torch.export program)", None
        except Exception as e:  # fall through to TorchScript
            dynamo_error = first_lines(e)
    else:
        dynamo_error = "no ExportedProgram"
    buf = io.BytesIO()
    axes = {n: {i: a for i, a in enumerate(inp["dims"]) if isinstance(a, str)} for n, inp in zip(names, model["inputs"])}
    with torch.no_grad():
        torch.onnx.export(module, example, buf, dynamo=False, opset_version=17, input_names=names,
                          dynamic_axes={n: d for n, d in axes.items() if d})
    return buf.getvalue(), "torchscript (torch.onnx.export, dynamo=False)", dynamo_error


def kiln_export(onnx_bytes, path, model, static=False):
    import kiln
    import onnx

    proto = onnx.load_from_string(onnx_bytes)
    init = {i.name for i in proto.graph.initializer}
    names = [i.name for i in proto.graph.input if i.name not in init]
    dims = [] if static else [kiln.Dim(k, d["min"], d["max"], d.get("step", 1)) for k, d in model["dims"].items()]
    inputs = None if static else {n: list(inp["dims"]) for n, inp in zip(names, model["inputs"])}
    summary = kiln.export_onnx(onnx_bytes, path, dims=dims, inputs=inputs)
    return summary


def et_lower(ep, path, use_xnnpack=True):
    """ExecuTorch's documented flow. Returns the program's facts (sizes, planned buffers,
    delegation)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools.backend_debug import get_delegation_info
    from executorch.exir import to_edge_transform_and_lower

    def inputs_and_ranges(prog):
        user = set(prog.graph_signature.user_inputs)
        shapes = [str(tuple(n.meta["val"].shape)) for n in prog.graph.nodes if n.op == "placeholder" and n.name in user]
        ranges = {str(k): [int(v.lower), int(v.upper) if v.upper.is_finite else None]
                  for k, v in prog.range_constraints.items()}
        return shapes, ranges

    export_inputs, export_ranges = inputs_and_ranges(ep)  # before lowering, which may change ep
    t0 = time.perf_counter()
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()] if use_xnnpack else [])
    prog = edge.exported_program()
    info = get_delegation_info(prog.graph_module)
    edge_inputs, edge_ranges = inputs_and_ranges(prog)  # what the edge program kept of the Dims
    et = edge.to_executorch()
    buf = et.buffer
    with open(path, "wb") as f:
        f.write(buf)
    plan = et.executorch_program.execution_plan[0]
    non_delegated = {op: b.non_delegated for op, b in info.delegation_by_operator.items() if b.non_delegated}
    delegated = {op: b.delegated for op, b in info.delegation_by_operator.items() if b.delegated}
    return {"path": path, "bytes": len(buf), "seconds": time.perf_counter() - t0,
            "planned_buffers": [int(s) for s in plan.non_const_buffer_sizes],
            "planned_bytes": int(sum(plan.non_const_buffer_sizes)),
            "delegated_subgraphs": info.num_delegated_subgraphs, "delegated_nodes": info.num_delegated_nodes,
            "non_delegated_nodes": info.num_non_delegated_nodes, "non_delegated_ops": non_delegated,
            "delegated_ops": delegated, "backend": "XnnpackBackend" if use_xnnpack else "portable only",
            "edge_inputs": edge_inputs, "edge_ranges": edge_ranges,
            "export_inputs": export_inputs, "export_ranges": export_ranges}


def export_both(model, work):
    """Both exports from one module and one ExportedProgram. Returns (module, record)."""
    import torch

    module = model["module"]()
    names = [i["name"] for i in model["inputs"]]
    example_shapes = ort_compare.input_shapes(model, zoo.example_point(model))
    _, example = torch_inputs(model, example_shapes)
    dims = torch_dims(model)
    rec = {"example_shapes": example_shapes,
           "torch_dims": {k: str(v) for k, v in dims.items()}, "torch_export": {}, "et": {}, "kiln": {}}
    ep = None
    t0 = time.perf_counter()
    try:
        ep = torch.export.export(module, example, dynamic_shapes=dynamic_shapes(model, dims))
        ranges, asserts = torch_ranges(ep, model, dims)
        rec["torch_export"] = {"ok": True, "seconds": time.perf_counter() - t0, "ranges": ranges, "asserts": asserts}
    except Exception as e:
        rec["torch_export"] = {"ok": False, "error": first_lines(e, 16), "type": type(e).__name__}
        # What a user does next: apply torch's suggested fixes and export again. ExecuTorch gets
        # that narrower program; Kiln keeps the declared contract (TorchScript's ONNX below).
        fixed, applied, message = dims, [], str(e)
        for _ in range(3):  # the suggestions can come in rounds
            nxt, more = apply_fixes(message, fixed)
            if nxt is None:
                break
            fixed = nxt
            applied += more
            try:
                ep = torch.export.export(module, example, dynamic_shapes=dynamic_shapes(model, fixed))
                ranges, asserts = torch_ranges(ep, model, fixed)
                rec["torch_export"]["with_fixes"] = {"ok": True, "fixes": applied, "ranges": ranges, "asserts": asserts,
                                                     "torch_dims": {k: str(v) for k, v in fixed.items()}}
                break
            except Exception as e2:
                message = str(e2)
                rec["torch_export"]["with_fixes"] = {"ok": False, "fixes": applied, "error": first_lines(e2, 16)}
        if ep is None and model.get("torch_hints"):
            # Where torch states a guard but offers no fix, the Dims a user writes after reading it.
            from torch.export import Dim

            fixed = dict(fixed if fixed is not None else dims)
            for k, (rng, why) in model["torch_hints"].items():
                if rng is None:
                    fixed.pop(k, None)
                    applied.append(f"{k} static (by hand: {why})")
                else:
                    fixed[k] = Dim(k, min=rng[0], max=rng[1])
                    applied.append(f"{k} = Dim('{k}', min={rng[0]}, max={rng[1]}) (by hand: {why})")
            try:
                ep = torch.export.export(module, example, dynamic_shapes=dynamic_shapes(model, fixed))
                ranges, asserts = torch_ranges(ep, model, fixed)
                rec["torch_export"]["with_fixes"] = {"ok": True, "fixes": applied, "ranges": ranges, "asserts": asserts,
                                                     "torch_dims": {k: str(v) for k, v in fixed.items()}}
            except Exception as e3:
                rec["torch_export"]["with_fixes"] = {"ok": False, "fixes": applied, "error": first_lines(e3, 16)}
    onnx_path = os.path.join(work, model["name"] + ".onnx")
    try:
        narrowed = not rec["torch_export"]["ok"]
        onnx_bytes, how, dynamo_error = onnx_from(None if narrowed else ep, module, model, example, names)
        if narrowed and ep is not None:
            dynamo_error = "torch.export needed its suggested fixes (a narrower contract): Kiln reads the full one"
        with open(onnx_path, "wb") as f:
            f.write(onnx_bytes)
        rec["onnx"] = {"ok": True, "path": onnx_path, "exporter": how, "dynamo_error": dynamo_error,
                       "bytes": len(onnx_bytes)}
    except Exception as e:
        rec["onnx"] = {"ok": False, "error": first_lines(e, 16)}
    if rec["onnx"]["ok"]:
        kiln_path = os.path.join(work, model["name"] + ".kiln")
        try:
            t0 = time.perf_counter()
            summary = kiln_export(onnx_bytes, kiln_path, model)
            rec["kiln"] = {"ok": True, "path": kiln_path, "bytes": os.path.getsize(kiln_path), "summary": summary,
                           "seconds": time.perf_counter() - t0}
        except Exception as e:
            rec["kiln"] = {"ok": False, "error": first_lines(e, 16), "type": type(e).__name__}
    if ep is not None:
        for use_xnnpack in (True, False):
            try:
                pte = os.path.join(work, model["name"] + ("" if use_xnnpack else "_portable") + ".pte")
                rec["et"] = {"ok": True, **et_lower(ep, pte, use_xnnpack),
                             **({"xnnpack_error": rec["et"]["error"]} if not use_xnnpack else {})}
                break
            except Exception as e:
                rec["et"] = {"ok": False, "error": first_lines(e, 16), "type": type(e).__name__,
                             "backend": "XnnpackBackend" if use_xnnpack else "portable only",
                             **({"xnnpack_error": rec["et"]["error"]} if not use_xnnpack else {})}
    else:
        rec["et"] = {"ok": False, "error": "no ExportedProgram (torch.export refused)"}
    return module, rec


# ---------------------------------------------------------------------------------------------
# Running


class EtMethod:
    """An ExecuTorch Method with the Program it points into (the pybindings' Method does not
    keep its Program alive) and the bytes the Program was loaded from."""

    def __init__(self, pte_path, threads):
        from executorch.extension.pybindings import portable_lib as pl

        # The pool is reset before the program loads: its XNNPACK runtime keeps the pool it
        # was created with.
        pl._unsafe_reset_threadpool(threads)
        with open(pte_path, "rb") as f:
            self.buffer = f.read()
        self.program = pl._load_program_from_buffer(self.buffer)
        self.method = self.program.load_method("forward")

    def set_inputs(self, tensors):
        self.method.set_inputs(tensors)

    def execute(self):
        self.method.execute()

    def get_outputs(self):
        return self.method.get_outputs()


def et_run(method, tensors):
    with captured_fd2() as err:
        try:
            method.set_inputs(list(tensors))
            method.execute()
            outs = [o.numpy().copy() for o in method.get_outputs()]
            error = None
        except Exception as e:
            outs, error = None, first_lines(e)
    if error is not None:
        error = "\n".join(x for x in (err["text"], error) if x)
    return outs, error


def kiln_run(method, arrays):
    try:
        return method.run(*arrays), None
    except Exception as e:
        return None, f"{type(e).__name__}: {first_lines(e)}"


def ort_session(onnx_path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])


def ort_run(session, arrays):
    feeds = {i.name: a for i, a in zip(session.get_inputs(), arrays)}
    return session.run(None, feeds)


def fit_point(kmethod, model, point):
    """The point if Kiln's contract admits it, else the nearest one it admits (one dim moved)."""
    def ok(p):
        try:
            kmethod.check(ort_compare.input_shapes(model, p))
            return True
        except Exception:
            return False

    if ok(point):
        return point, None
    for delta in range(1, 65):
        for sign in (-1, 1):
            for k, d in model["dims"].items():
                v = point[k] + sign * delta * d.get("step", 1)
                if d["min"] <= v <= d["max"] and ok({**point, k: v}):
                    return {**point, k: v}, f"moved {k} {point[k]} -> {v} (Kiln's contract)"
    return point, "no admissible point nearby"


def time_alternating(et_m, k_m, tensors, arrays, shapes, warmup, runs):
    """Milliseconds of one call each, ExecuTorch and Kiln interleaved (which goes first alternates
    every round). A call writes the inputs and executes: ExecuTorch `set_inputs` + `execute()`
    (its planner reuses the input buffers for activations, so every execute needs its inputs set
    again), Kiln a copy into the views `bind` returned + `execute()` (which also copies the
    outputs out)."""
    import numpy as np

    et_in = list(tensors)
    views = k_m.bind(*shapes)

    def et_call():
        et_m.set_inputs(et_in)
        et_m.execute()

    def kiln_call():
        for v, a in zip(views, arrays):
            np.copyto(v, a, casting="same_kind")
        k_m.execute()

    for _ in range(warmup):
        et_call()
        kiln_call()
    et_t, k_t = [], []
    for r in range(runs):
        pair = [(et_call, et_t), (kiln_call, k_t)]
        for call, acc in (pair if r % 2 == 0 else pair[::-1]):
            t0 = time.perf_counter()
            call()
            acc.append((time.perf_counter() - t0) * 1e3)
    return et_t, k_t


def run_points(model, module, rec, opts, work):
    import kiln
    import torch

    et_ok, kiln_ok = rec["et"].get("ok"), rec["kiln"].get("ok")
    program = kiln.load(rec["kiln"]["path"]) if kiln_ok else None
    k1 = program.method("forward", cpu_threads=1) if program else None
    session = ort_session(rec["onnx"]["path"]) if rec.get("onnx", {}).get("ok") else None
    results = []
    for label, point in zoo.points(model):
        if k1 is not None:
            point, moved = fit_point(k1, model, point)
        else:
            moved = None
        shapes = ort_compare.input_shapes(model, point)
        row = {"label": label, "point": point, "shapes": ort_compare.shape_text(shapes), "moved": moved}
        arrays, tensors = torch_inputs(model, shapes)
        with torch.no_grad():
            eager = module(*[t.clone() for t in tensors])
        eager = flat_outputs(eager)
        ref = ort_run(session, arrays) if session else None
        if et_ok:
            m = EtMethod(rec["et"]["path"], 1)
            outs, row["et_error"] = et_run(m, tensors)
            if outs is not None:
                row["et_vs_eager"] = rel_err(outs, eager)
                row["et_vs_ort"] = rel_err(outs, ref) if ref is not None else None
        if kiln_ok:
            outs, row["kiln_error"] = kiln_run(k1, arrays)
            if outs is not None:
                row["kiln_vs_eager"] = rel_err(outs, eager)
                row["kiln_vs_ort"] = rel_err(outs, ref) if ref is not None else None
                k1.bind(*shapes)
                row["kiln_arena_in_use"] = k1.arena_bytes_in_use
            row["runner"] = run_runner(model, rec, shapes, arrays, ref if ref is not None else eager, opts, work)
        if et_ok and kiln_ok and not row.get("et_error") and not row.get("kiln_error"):
            row["latency"] = {}
            for t in opts.threads:
                et_m = EtMethod(rec["et"]["path"], t)
                k_m = program.method("forward", cpu_threads=t)
                et_t, k_t = time_alternating(et_m, k_m, tensors, arrays, shapes, opts.warmup, opts.runs)
                row["latency"][str(t)] = {"et_ms": statistics.median(et_t), "kiln_ms": statistics.median(k_t),
                                          "ratio": statistics.median(k_t) / statistics.median(et_t),
                                          "et_samples": et_t, "kiln_samples": k_t}
                del et_m, k_m
        log(f"  {model['name']} {label} {row['shapes']}: " + json.dumps(
            {k: v for k, v in row.items() if k in ("et_vs_ort", "kiln_vs_ort", "et_error", "kiln_error")})[:300]
            + " " + " ".join(f"t{t}: ET {v['et_ms']:.3f} ms Kiln {v['kiln_ms']:.3f} ms"
                             for t, v in row.get("latency", {}).items()))
        results.append(row)
    return results


def run_runner(model, rec, shapes, arrays, reference, opts, work):
    """kiln_runner on the same inputs: its outputs against the reference, its execute median."""
    import numpy as np

    d = os.path.join(work, "runner")
    os.makedirs(d, exist_ok=True)
    paths = []
    for i, a in enumerate(arrays):
        p = os.path.join(d, f"input_{i}.npy")
        np.save(p, np.ascontiguousarray(a))
        paths.append(p)
    prefix = os.path.join(d, "out")
    for f in os.listdir(d):
        if f.startswith("out-"):
            os.remove(os.path.join(d, f))
    try:
        times = ort_compare.run_kiln(opts.build, rec["kiln"]["path"], paths, shapes, 1, opts.warmup, opts.runs,
                                     None, output_prefix=prefix)
    except RuntimeError as e:
        return {"error": str(e)}
    return {"ms_1t": statistics.median(times), "vs_ref": ort_compare.max_rel_err(prefix, reference)}


# ---------------------------------------------------------------------------------------------
# Refusals


def probe_shapes(model):
    """The manifest's rejected shapes, and each dim one step past its max and below its min."""
    probes = [{"shapes": r["input_shapes"], "reason": r["reason"]} for r in model["rejects"]]
    texts = {p["shapes"] for p in probes}
    mid = zoo.example_point(model)
    for k, d in model["dims"].items():
        if "sum_of" in d:
            continue
        step = d.get("step", 1)
        for v, why in ((d["max"] + step, f"{k} = {d['max'] + step}, past its bound {d['max']}"),
                       (d["min"] - step, f"{k} = {d['min'] - step}, below its minimum {d['min']}")):
            if v < 1:
                continue
            p = {**mid, k: v}
            for kk, dd in model["dims"].items():
                if "sum_of" in dd:
                    p[kk] = sum(p[x] for x in dd["sum_of"])
            text = ort_compare.shape_text(ort_compare.input_shapes(model, p))
            if text not in texts:
                texts.add(text)
                probes.append({"shapes": text, "reason": why})
    # A static axis changed at the smallest shape: within the element count the bound allows.
    low = dict(zoo.points(model)[0][1])
    for i, inp in enumerate(model["inputs"]):
        static = [k for k, a in enumerate(inp["dims"]) if not isinstance(a, str)]
        if static:
            shapes = ort_compare.input_shapes(model, low)
            k = static[-1]
            shapes[i][k] += 1
            text = ort_compare.shape_text(shapes)
            if text not in texts:
                texts.add(text)
                probes.append({"shapes": text, "reason": f"input '{inp['name']}' axis {k} is static "
                                                        f"{shapes[i][k] - 1}"})
            break
    return probes


def parse_shapes(text):
    return [[int(v) for v in s.split("x")] if s else [] for s in text.split(",")]


def probe_inputs(model, text):
    """Ones of each input's dtype at the probe's shapes (numpy, torch)."""
    import numpy as np
    import torch

    arrays = [np.ones(s, dtype=np.dtype(i["dtype"])) for s, i in zip(parse_shapes(text), model["inputs"])]
    return arrays, [torch.from_numpy(a.copy()) for a in arrays]


def et_probe_main(argv):
    """Child process: runs each probe on a .pte, one JSON line per probe (so a crash mid-way
    still reports the probes before it); outputs of accepted probes go to OUT_DIR/probe<i>-<j>.npy."""
    import numpy as np

    pte, spec, out_dir = argv[0], json.loads(argv[1]), argv[2]
    model = {"inputs": [{"dtype": t} for t in spec["dtypes"]]}
    method = EtMethod(pte, 1)
    for i, probe in enumerate(spec["probes"]):
        _, tensors = probe_inputs(model, probe["shapes"])
        outs, error = et_run(method, tensors)
        for j, o in enumerate(outs or []):
            np.save(os.path.join(out_dir, f"probe{i}-{j}.npy"), o)
        res = {"shapes": probe["shapes"], "accepted": error is None, "message": error,
               "out_shapes": [list(o.shape) for o in outs] if outs else None}
        print(json.dumps(res), flush=True)


def eager_check(module, model, text, out_dir, index):
    """An accepted probe's outputs against eager torch on the same inputs (ones)."""
    import numpy as np
    import torch

    _, tensors = probe_inputs(model, text)
    try:
        with torch.no_grad():
            ref = module(*tensors)
    except Exception as e:
        return {"eager_error": first_lines(e, 3)}
    ref = flat_outputs(ref)
    got = [np.load(os.path.join(out_dir, f"probe{index}-{j}.npy")) for j in range(len(ref))
           if os.path.exists(os.path.join(out_dir, f"probe{index}-{j}.npy"))]
    return {"vs_eager": rel_err(got, ref), "eager_shapes": [list(o.shape) for o in ref]}


def refusals(model, rec, opts, module=None, pte_path=None, kiln_path=None, probes=None):
    import kiln

    probes = probes if probes is not None else probe_shapes(model)
    pte_path = pte_path or (rec["et"].get("path") if rec["et"].get("ok") else None)
    kiln_path = kiln_path or (rec["kiln"].get("path") if rec["kiln"].get("ok") else None)
    out = [dict(p) for p in probes]
    if pte_path:
        spec = {"probes": probes, "dtypes": [i["dtype"] for i in model["inputs"]]}
        out_dir = tempfile.mkdtemp(prefix="kiln-cmp-probe-")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "et-probe", pte_path, json.dumps(spec), out_dir],
                           capture_output=True, text=True, timeout=600)
        got = {}
        for line in r.stdout.splitlines():
            try:
                j = json.loads(line)
                got[j["shapes"]] = j
            except ValueError:
                pass
        for p in out:
            j = got.get(p["shapes"])
            if j is None:
                tail = "\n".join(ln for ln in r.stderr.splitlines() if "cpuinfo" not in ln
                                 and "torchao" not in ln and "Warning" not in ln)[-1500:]
                p["et"] = {"accepted": False, "message": f"process ended (exit {r.returncode}): {tail}"}
                break
            p["et"] = {"accepted": j["accepted"], "message": j["message"], "out_shapes": j["out_shapes"]}
            if j["accepted"] and module is not None:  # is what it computed the model's answer?
                p["et"].update(eager_check(module, model, p["shapes"], out_dir, out.index(p)))
    if kiln_path:
        method = kiln.load(kiln_path).method("forward")
        for p in out:
            try:
                method.check(parse_shapes(p["shapes"]))
                p["kiln"] = {"accepted": True, "message": None}
            except Exception as e:
                p["kiln"] = {"accepted": False, "message": f"{type(e).__name__}: {first_lines(e)}"}
            r = subprocess.run([os.path.join(opts.build, "kiln_runner"), f"--model_path={kiln_path}",
                                f"--input_shapes={p['shapes']}", "--print_output=none"],
                               capture_output=True, text=True)
            lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip() and not ln.startswith("Input ")]
            p["kiln_runner"] = {"exit": r.returncode, "message": "\n".join(lines[-4:])}
    return out


# ---------------------------------------------------------------------------------------------
# Workers


def model_main(name, opts):
    import torch

    torch.set_num_threads(1)
    model = zoo.get(name)
    work = os.path.join(opts.work, name)
    os.makedirs(work, exist_ok=True)
    log(f"{name}: export")
    module, rec = export_both(model, work)
    rec = {"name": name, "source": model["source"], "dims": model["dims"], **rec}
    log(f"{name}: torch.export {'ok' if rec['torch_export'].get('ok') else 'REFUSED'}, "
        f"ExecuTorch {rec['et'].get('backend')} {'ok' if rec['et'].get('ok') else 'REFUSED'}, "
        f"Kiln {'ok' if rec['kiln'].get('ok') else 'REFUSED'}")
    if rec["kiln"].get("ok"):
        import kiln

        m = kiln.load(rec["kiln"]["path"]).method("forward")
        rec["kiln"].update({"arena_bytes": m.arena_bytes, "coverage": m.coverage,
                            "contract_dims": [[d.name, d.min, d.max, d.step] for d in m.dims],
                            "guards": m.guards})
    if rec.get("onnx", {}).get("ok"):
        rec["points"] = run_points(model, module, rec, opts, work)
    rec["refusals"] = refusals(model, rec, opts, module)
    with open(os.path.join(work, "result.json"), "w") as f:
        json.dump(rec, f, indent=1, default=str)


def classic_main(opts):
    """mobilenet_v2 exported static at 224 both ways, fed 1x3x256x256."""
    import torch

    torch.set_num_threads(1)
    model = zoo.get("mobilenet_v2")
    work = os.path.join(opts.work, "classic")
    os.makedirs(work, exist_ok=True)
    module = model["module"]()
    _, example = torch_inputs(model, [[1, 3, 224, 224]])
    ep = torch.export.export(module, example)
    pte = os.path.join(work, "mobilenet_v2_static224.pte")
    et = et_lower(ep, pte)
    onnx_bytes, how, _ = onnx_from(ep, module, model, example, ["pixels"])
    onnx_path = os.path.join(work, "mobilenet_v2_static224.onnx")
    with open(onnx_path, "wb") as f:
        f.write(onnx_bytes)
    kpath = os.path.join(work, "mobilenet_v2_static224.kiln")
    kiln_export(onnx_bytes, kpath, model, static=True)
    probes = [{"shapes": "1x3x256x256", "reason": "exported static at 1x3x224x224"}]
    rec = {"et": et, "kiln_bytes": os.path.getsize(kpath), "onnx_exporter": how,
           "probe": refusals(model, {"et": {}, "kiln": {}}, opts, module, pte, kpath, probes)[0]}
    r = subprocess.run([os.path.join(opts.build, "kiln"), "check", kpath, "--input_shapes=1x3x256x256", "--explain",
                        f"--model={onnx_path}"], capture_output=True, text=True)
    rec["kiln_check_explain"] = {"exit": r.returncode, "output": (r.stdout + r.stderr).strip()}
    with open(os.path.join(work, "result.json"), "w") as f:
        json.dump(rec, f, indent=1, default=str)


def versions():
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("torch", "executorch", "torchvision", "onnxruntime", "onnx", "onnxscript", "numpy"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "?"
    return out


def driver_main(opts, argv):
    names = opts.models.split(",") if opts.models else zoo.zoo_names() + zoo.torchvision_names()
    os.makedirs(opts.work, exist_ok=True)
    common = ["--work", opts.work, "--build", opts.build, "--threads", ",".join(map(str, opts.threads)),
              "--runs", str(opts.runs), "--warmup", str(opts.warmup)]
    load_start = " ".join(f"{x:.1f}" for x in os.getloadavg())
    jobs = [("classic", ["classic"])] if not opts.no_classic else []
    jobs += [(n, ["model", n]) for n in names]
    for name, args in jobs:
        log(f"== {name}")
        path = os.path.join(opts.work, name, "result.json")
        if os.path.exists(path) and opts.resume:
            continue
        os.makedirs(os.path.join(opts.work, name), exist_ok=True)
        with open(os.path.join(opts.work, name, "log.txt"), "w") as logf:
            try:
                r = subprocess.run([sys.executable, os.path.abspath(__file__), *args, *common], stdout=logf,
                                   stderr=subprocess.STDOUT, timeout=opts.timeout)
                code = r.returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        if code != 0:
            log(f"   {name}: worker failed ({code}); see {os.path.join(opts.work, name, 'log.txt')}")
            with open(os.path.join(opts.work, name, "log.txt")) as f:
                tail = f.read()[-2000:]
            with open(path, "w") as f:
                json.dump({"name": name, "worker_error": f"exit {code}: {tail}"}, f)
    shown, skip = [], False  # the command as typed: run.sh adds --build (the snapshot, shown below)
    for a in argv:
        if skip:
            skip = False
        elif a == "--build":
            skip = True
        elif not a.startswith("--build="):
            shown.append(a)
    merged = {"command": "bash bench/compare/run.sh " + " ".join(shown), "date": datetime.datetime.now(
        datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": ort_compare.cpu_model(),
        "kiln_commit": ort_compare.git_commit(), "versions": versions(), "threads": opts.threads, "runs": opts.runs,
        "warmup": opts.warmup, "models": [], "classic": None, "load_start": load_start,
        "load_end": " ".join(f"{x:.1f}" for x in os.getloadavg())}
    snap = os.path.join(opts.build, "SNAPSHOT")
    if os.path.exists(snap):
        with open(snap) as f:
            text = f.read().splitlines()
        merged["kiln_snapshot"] = "; ".join(
            [ln for ln in text if ln.startswith("source:")]
            + ["md5 " + ", ".join(ln.split()[1].split("/")[-1] + " " + ln.split()[0][:8] for ln in text
                                  if len(ln.split()) == 2 and len(ln.split()[0]) == 32)])
    for name, _ in jobs:
        with open(os.path.join(opts.work, name, "result.json")) as f:
            r = json.load(f)
        if name == "classic":
            merged["classic"] = r
        else:
            merged["models"].append(r)
    out_json = os.path.splitext(opts.out)[0] + ".json"
    with open(out_json, "w") as f:
        json.dump(merged, f, indent=1, default=str)
        f.write("\n")
    import report

    report.write(merged, opts.out)
    log(f"wrote {opts.out} and {out_json}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", nargs="?", default="all", help="all (default), model NAME, classic, et-probe (internal)")
    ap.add_argument("rest", nargs="*")
    ap.add_argument("--models", help="comma-separated (default: the zoo and the torchvision sweep)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--build", default=os.environ.get("KILN_BUILD", os.path.join(ROOT, "build")))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "compare"))
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per model worker")
    ap.add_argument("--resume", action="store_true", help="keep per-model results already in --work")
    ap.add_argument("--no-classic", action="store_true")
    if len(sys.argv) > 1 and sys.argv[1] == "et-probe":
        return et_probe_main(sys.argv[2:])
    opts = ap.parse_args()
    opts.threads = [int(t) for t in str(opts.threads).split(",")]
    opts.build = os.path.abspath(opts.build)
    opts.work = os.path.abspath(opts.work)
    import warnings

    warnings.filterwarnings("ignore")
    if opts.cmd == "model":
        return model_main(opts.rest[0], opts)
    if opts.cmd == "classic":
        return classic_main(opts)
    return driver_main(opts, sys.argv[1:])


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
