#!/usr/bin/python3
"""Export torchvision models with dynamic batch, height and width and check Kiln against
ONNX Runtime at shapes inside the contract (a development aid; nothing here runs in CI).

For each model: torch.onnx.export (opset 13, random weights, traced at 1x3x96x96) with
dynamic N, H, W; `kiln export --dim N=1..2 --dim H=32..128 --dim W=32..128`; then for each
test shape, `kiln_runner` (delegated and --delegate=none) on a seeded input against ONNX
Runtime on the same file
(zoo/reference/run_ort.py). Error: max |kiln - ORT| / max |ORT|.

    /usr/bin/python3 zoo/torchvision_sweep.py [--models resnet18,swin_t] [--build build]

Runs under Debian's /usr/bin/python3 for torch; run_ort.py runs under a second interpreter
with onnxruntime (zoo/reference/requirements.txt): --ort-python, else $KILN_ORT_PYTHON, else
the first python3 on PATH (pyenv's).

Note: torch bakes Python branches on sizes into the graph at the traced shape (Swin skips
its window shift when a stage is no wider than the window), so below some size the ONNX
graph, and so ONNX Runtime and Kiln, may differ from the eager torch model. The reference
here is the graph.
"""

import argparse
import os
import subprocess
import sys
import warnings

import numpy as np
import torch
import torchvision

from ort_reference import ort_outputs, ort_python  # noqa: E402

ZOO = os.path.dirname(os.path.abspath(__file__))
DEFAULT = ("squeezenet1_1,shufflenet_v2_x0_5,mobilenet_v3_small,resnet18,efficientnet_b0,mnasnet0_5,"
           "regnet_x_400mf,googlenet,convnext_tiny,densenet121,swin_t,"
           "seg_lraspp_mobilenet_v3_large,seg_deeplabv3_mobilenet_v3_large")
SHAPES = [(1, 3, 96, 96), (2, 3, 64, 80), (1, 3, 33, 47), (1, 3, 32, 32), (1, 3, 128, 100)]


def make(name):
    models = torchvision.models
    if name.startswith("seg_"):
        return getattr(models.segmentation, name[4:])(weights=None, weights_backbone=None, num_classes=5,
                                                      aux_loss=False)
    kwargs = dict(aux_logits=False, init_weights=True) if name == "googlenet" else {}
    return getattr(models, name)(weights=None, **kwargs)


def check(name, build, ort_py, out):
    torch.manual_seed(0)
    model = make(name).eval()
    onnx_path, kiln_path = os.path.join(out, name + ".onnx"), os.path.join(out, name + ".kiln")
    with torch.no_grad():
        torch.onnx.export(model, torch.randn(1, 3, 96, 96), onnx_path, opset_version=13, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}})
    r = subprocess.run([os.path.join(build, "kiln"), "export", onnx_path, "-o", kiln_path, "--dim", "N=1..2",
                        "--dim", "H=32..128", "--dim", "W=32..128"], capture_output=True, text=True)
    if r.returncode:
        return False, "kiln export failed: " + (r.stdout + r.stderr).strip()[:600]
    summary = [line.strip() for line in r.stdout.splitlines() if "ONNX nodes" in line or "guards" in line]
    results, ok = [], True
    for shape in SHAPES:
        x_path = os.path.join(out, name + "_x.npy")
        np.save(x_path, np.random.default_rng(1).standard_normal(shape).astype(np.float32))
        text = "x".join(map(str, shape))
        ref = ort_outputs(ort_py, onnx_path, [x_path])[0]
        errs = []
        for delegate in ("xnnpack", "none"):  # the delegated and the portable path of one file
            r = subprocess.run([os.path.join(build, "kiln_runner"), f"--model_path={kiln_path}", f"--inputs={x_path}",
                                f"--input_shapes={text}", f"--output_file={os.path.join(out, name)}_y",
                                "--output_format=npy", "--print_output=none", f"--delegate={delegate}"],
                               capture_output=True, text=True)
            if r.returncode or "delegate unavailable" in r.stdout + r.stderr:
                ok = False
                errs.append(f"{delegate}: kiln_runner failed: {(r.stdout + r.stderr).strip()[:300]}")
                continue
            got = np.load(os.path.join(out, name) + "_y-0.npy")
            if got.shape != ref.shape:
                ok = False
                errs.append(f"{delegate}: shape {got.shape}, ONNX Runtime {ref.shape}")
                continue
            err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
            ok = ok and err < 1e-4
            errs.append(f"{err:.1e}")
        results.append(f"{text}: " + "/".join(errs))
    return ok, "; ".join(summary) + " | " + ", ".join(results)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--build", default=os.path.join(ZOO, "..", "build"))
    ap.add_argument("--out", default="/tmp/kiln-torchvision-sweep")
    ap.add_argument("--ort-python", help="python with onnxruntime for reference/run_ort.py "
                    "(default: $KILN_ORT_PYTHON, else python3 on PATH)")
    opts = ap.parse_args()
    ort_py = ort_python(opts.ort_python)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    os.makedirs(opts.out, exist_ok=True)
    failures = 0
    for name in opts.models.split(","):
        ok, text = check(name, opts.build, ort_py, opts.out)
        failures += not ok
        print(f"{name:34s} {'ok  ' if ok else 'FAIL'} {text}", flush=True)
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
