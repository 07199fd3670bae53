"""The models the comparison runs, built from the zoo's and the torchvision sweep's own code.

Zoo models come from zoo/make_zoo.py (`build_specs`, `make_model`: the same classes, seeds and
BatchNorm calibration as the committed ONNX files, built here with torch 2.x); their contract
from zoo/manifest.json (`dims`, `input_dims`, `input_generators`, `rejects`), read as
bench/ort_compare.py reads it. Torchvision models come from zoo/torchvision_sweep.py's `make`
(torch.manual_seed(0)) with the sweep's contract N=1..2, H,W=32..128.

A model here is ort_compare's dict (name, dims, inputs, bench_points) plus `module` (a function
returning the eval-mode torch module) and `rejects` (shapes the contract must refuse).
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZOO = os.path.join(ROOT, "zoo")
for p in (ZOO, os.path.join(ROOT, "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

import ort_compare  # noqa: E402  (shapes, inputs and kiln_runner helpers shared with the ORT benchmark)

TORCHVISION_REJECTS = [{"input_shapes": "1x3x129x96", "reason": "H above its bound 128"},
                       {"input_shapes": "3x3x64x64", "reason": "N above its bound 2"},
                       {"input_shapes": "1x3x31x64", "reason": "H below its minimum 32"}]


def torchvision_shim():
    """torchvision 0.28.0 on PyPI is a CUDA build: its C++ ops (_C.so, libcudart) do not load
    with the CPU torch, and its __init__ then registers fake kernels for two ops that do not
    exist. Declaring those two schemas lets the pure-Python models import; no op of theirs is
    used by the classification and segmentation models."""
    import torch

    if getattr(torchvision_shim, "done", False):
        return
    try:
        torch.ops.torchvision.nms  # the real extension loaded: nothing to do
    except (AttributeError, RuntimeError):
        lib = torch.library.Library("torchvision", "DEF")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        torchvision_shim.lib = lib  # keep the registration alive
    torchvision_shim.done = True


# Dims a user writes after reading a torch.export refusal that states a guard but suggests no
# fix (applied after torch's own suggestions; the report says "by hand").
TORCH_HINTS = {
    "mobilenet_v2": {"H": ((33, 224), "torch's guard (1 + ((H - 1) // 32)) != 1, i.e. H >= 33, "
                                      "as it suggested for W")},
    "swin_tiny": {"batch": (None, "torch cannot make a Dim of batch in [1, 2]: it treats dynamic sizes as >= 2")},
}
# The sweep's models meet the same guard at H, W = 32 (the last feature map is 1x1).
TORCHVISION_HINTS = {d: ((33, 128), f"torch's guard (1 + (({d} - 1) // 32)) != 1, i.e. {d} >= 33") for d in ("H", "W")}
# Where torch.export makes batch static 2, shapes at batch 2 below the bound, so both run there too.
EXTRA_POINTS = {"mobilenet_v2": [("mid b2", {"batch": 2, "H": 128, "W": 128}), ("low b2", {"batch": 2, "H": 56, "W": 56})]}
TORCHVISION_EXTRA = [("mid N2", {"N": 2, "H": 80, "W": 80}), ("low N2", {"N": 2, "H": 44, "W": 44})]


def zoo_model(name):
    import make_zoo

    base = {m["name"]: m for m in ort_compare.zoo_models()}[name]
    specs = make_zoo.build_specs()
    index = [s["name"] for s in specs].index(name)
    spec = specs[index]
    with open(os.path.join(ZOO, "manifest.json")) as f:
        import json
        manifest = {m["name"]: m for m in json.load(f)["models"]}[name]

    def module():
        torchvision_shim()
        return make_zoo.make_model(index, spec)

    return {**base, "module": module, "example": [list(e) for e in spec["example"]], "rejects": manifest.get("rejects", []),
            "torch_hints": TORCH_HINTS.get(name, {}), "extra_points": EXTRA_POINTS.get(name, []),
            "notes": manifest.get("notes", ""), "outputs": manifest["outputs"]}


def torchvision_model(name):
    def module():
        torchvision_shim()
        import torch
        import torchvision_sweep

        torch.manual_seed(0)
        return torchvision_sweep.make(name).eval()

    return {"name": name, "source": "torchvision", "dims": ort_compare.TORCHVISION_DIMS,
            "inputs": ort_compare.TORCHVISION_INPUTS, "bench_points": None, "module": module,
            "example": [[1, 3, 96, 96]],  # the sweep traces at 1x3x96x96
            "torch_hints": TORCHVISION_HINTS, "extra_points": TORCHVISION_EXTRA,
            "rejects": TORCHVISION_REJECTS, "outputs": ["y"], "notes": ""}


def zoo_names():
    return [m["name"] for m in ort_compare.zoo_models()]


def torchvision_names():
    from export_torchvision import sweep_default_models

    return [n for n in sweep_default_models().split(",") if n]


def get(name):
    if name in zoo_names():
        return zoo_model(name)
    if name in torchvision_names():
        return torchvision_model(name)
    raise KeyError(f"unknown model {name!r}: zoo {zoo_names()}, torchvision {torchvision_names()}")


def points(model):
    """[(label, {dim: value})]: every dim at its minimum, far below the bound (an eighth of the
    way up, on the step grid), in the middle, at the bound (or the manifest's bench_points), the
    shape torch.export traced at, and the model's extra points."""
    dims = model["dims"]
    base = ort_compare.dim_points(dims, model.get("bench_points"))
    traced = ("traced", example_point(model))  # the shape torch.export traced at: a static program runs it too
    if model.get("bench_points"):
        return base + ([traced] if all(traced[1] != q for _, q in base) else [])

    def low(d):
        step = d.get("step", 1)
        return d["min"] + ((d["max"] - d["min"]) // 8 // step) * step

    far = {k: low(d) for k, d in dims.items() if "sum_of" not in d}
    for k, d in dims.items():
        if "sum_of" in d:
            far[k] = sum(far[p] for p in d["sum_of"])
    out = []
    for label, p in base:
        out.append((label, p))
        if label == "min" and all(far != q for _, q in base):
            out.append(("low", far))
    if all(traced[1] != q for _, q in out):
        out.append(traced)
    return out + [(label, dict(p)) for label, p in model.get("extra_points", []) if all(p != q for _, q in out)]


def example_point(model):
    """The point torch.export traces at: the model's own example (make_zoo's, which satisfies the
    model's own constraints, e.g. view_guard's length % 4 == 0; the sweep's 1x3x96x96), with
    every dynamic dim at least 2 (torch specializes sizes 0 and 1)."""
    point = {}
    for inp, shape in zip(model["inputs"], model["example"]):
        for a, v in zip(inp["dims"], shape):
            if isinstance(a, str) and a not in point:
                point[a] = v
    for k, d in model["dims"].items():
        if "sum_of" not in d and point[k] < 2 <= d["max"]:
            point[k] = max(2, d["min"])
    for k, d in model["dims"].items():
        if "sum_of" in d:
            point[k] = sum(point[p] for p in d["sum_of"])
    return point
