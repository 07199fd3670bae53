#!/usr/bin/python3
"""Export the torchvision sweep models to ONNX for bench/ort_compare.py.

Run with Debian's /usr/bin/python3 (torch 1.13, torchvision 0.14), as zoo/torchvision_sweep.py
is: the models come from that script's `make` (random weights, torch.manual_seed(0)) and are
exported the way it exports them (opset 13, traced at 1x3x96x96, input `x` with dynamic
N, H, W, output `y`), so the benchmark measures the same graphs the sweep checks.

    /usr/bin/python3 bench/export_torchvision.py [--models resnet18,swin_t] [--out build/bench/onnx] [--force]

Prints one JSON line per model: {"model", "status": "ok" | "cached" | "skipped" | "error",
"path", "reason"}. Without torch every model is reported as skipped (exit 0), so the caller
can show why in its table.
"""

import argparse
import ast
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SWEEP = os.path.join(ROOT, "zoo", "torchvision_sweep.py")


def sweep_default_models():
    """The sweep's DEFAULT model list, read without importing it (importing needs torch)."""
    with open(SWEEP) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DEFAULT" for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError("no DEFAULT in " + SWEEP)


def report(model, status, path="", reason=""):
    print(json.dumps({"model": model, "status": status, "path": path, "reason": reason}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=sweep_default_models())
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "onnx"))
    ap.add_argument("--force", action="store_true", help="re-export files that already exist")
    opts = ap.parse_args()
    names = [n for n in opts.models.split(",") if n]
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        sys.path.insert(0, os.path.dirname(SWEEP))
        import torchvision_sweep as sweep
    except Exception as e:  # torch missing, or the sweep's other imports (numpy) missing
        for n in names:
            report(n, "skipped", reason=f"cannot import torch/torchvision under {sys.executable}: {e}")
        return 0
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    os.makedirs(opts.out, exist_ok=True)
    failures = 0
    for name in names:
        path = os.path.join(opts.out, name + ".onnx")
        if os.path.exists(path) and not opts.force:
            report(name, "cached", path)
            continue
        tmp = path + ".tmp"
        try:
            torch.manual_seed(0)
            model = sweep.make(name).eval()
            with torch.no_grad():  # the same call as torchvision_sweep.check
                torch.onnx.export(model, torch.randn(1, 3, 96, 96), tmp, opset_version=13, input_names=["x"],
                                  output_names=["y"], dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}})
            os.replace(tmp, path)  # a half-written file never looks cached
            report(name, "ok", path)
        except Exception as e:
            failures += 1
            if os.path.exists(tmp):
                os.remove(tmp)
            report(name, "error", reason=f"{type(e).__name__}: {str(e).strip()[:400]}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
