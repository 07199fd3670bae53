"""The quantized zoo: the zoo's models quantized by ONNX Runtime's own quantizer, as users
quantize them, with ONNX Runtime's outputs on the same quantized ONNX as the reference.

    python3 zoo/quantized/make_quantized.py [NAME...]   (pyenv python3: onnxruntime 1.31.1)

Writes zoo/quantized/models/<name>.onnx, zoo/quantized/cases/<name>/<case>/output_<k>.npy and
zoo/quantized/manifest.json (the model zoo's schema: tests/e2e/zoo_test.cc runs it). Inputs
are the float zoo's case inputs (zoo/cases/...), which span each contract: minimum, far below
and the bound.

- Static (QDQ, per-channel weights): calibrated on the float zoo's case inputs, so the
  activation ranges come from every shape of the contract, not one example shape.
- Dynamic (DynamicQuantizeLinear + MatMulInteger/ConvInteger): weights only.
- Weights: u8 ("_u8") or i8 ("_s8"). ONNX Runtime's AVX2 u8 x s8 kernels (vpmaddubsw)
  saturate int16 pair sums, so on a machine without VNNI its outputs for i8 weights are not
  the model's arithmetic. For i8 weights the reference is therefore ONNX Runtime with graph
  optimizations off (the QDQ model's float op between Q and DQ, where that kernel never runs),
  and Kiln, which folds each chain into integers, sits within a few output quanta of it. For
  u8 weights it is ONNX Runtime's integer path (QLinearConv, MatMulInteger), which Kiln's
  requantization reproduces.
"""

import json
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.dirname(HERE)

# name: (float zoo model, "static" or "dynamic", weight type, tolerance |kiln - ort| / (1 + |ort|)).
# Dynamic quantization rounds activations at run time: a float difference of one ulp upstream
# (another ISA's LayerNorm or GELU: plain C++, arm64) can move one DynamicQuantizeLinear value by
# one quantum, which moved bert_tiny's output by 1.1e-3 (KILN_MAX_ISA=plain against AVX-512).
MODELS = {
    "mobilenet_v2_qdq_u8": ("mobilenet_v2", "static", QuantType.QUInt8, 2e-2),
    "mobilenet_v2_qdq_s8": ("mobilenet_v2", "static", QuantType.QInt8, 6e-2),
    "resnet_small_qdq_s8": ("resnet_small", "static", QuantType.QInt8, 6e-2),
    "bert_tiny_dyn_u8": ("bert_tiny", "dynamic", QuantType.QUInt8, 3e-3),
    "gpt_kv_step_dyn_u8": ("gpt_kv_step", "dynamic", QuantType.QUInt8, 1e-3),
    "gru_seq_dyn_u8": ("gru_seq", "dynamic", QuantType.QUInt8, 1e-3),
    "conformer_tiny_dyn_u8": ("conformer_tiny", "dynamic", QuantType.QUInt8, 3e-2),
}


class Calibration(CalibrationDataReader):
    def __init__(self, names, cases):
        self.it = iter([{n: np.load(os.path.join(ZOO, p)) for n, p in zip(names, c["inputs"])} for c in cases])

    def get_next(self):
        return next(self.it, None)


def quantize(name, base, kind, wtype):
    src = os.path.join(ZOO, base["onnx"])
    dst = os.path.join(HERE, "models", name + ".onnx")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    pre = dst + ".pre.onnx"
    quant_pre_process(src, pre, skip_symbolic_shape=True)
    if kind == "static":
        names = [i.name for i in onnx.load(src).graph.input]
        quantize_static(pre, dst, Calibration(names, base["cases"]), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=wtype)
    else:
        quantize_dynamic(pre, dst, weight_type=wtype)
    os.remove(pre)
    return dst


def build(name, base, kind, wtype, tol):
    dst = quantize(name, base, kind, wtype)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if wtype == QuantType.QInt8:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(dst, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    case_root = os.path.join(HERE, "cases", name)
    shutil.rmtree(case_root, ignore_errors=True)
    cases = []
    for c in base["cases"]:
        ins = [np.load(os.path.join(ZOO, p)) for p in c["inputs"]]
        outs = sess.run(None, dict(zip(names, ins)))
        d = os.path.join(case_root, c["name"])
        os.makedirs(d, exist_ok=True)
        paths = []
        for k, o in enumerate(outs):
            np.save(os.path.join(d, f"output_{k}.npy"), o)
            paths.append(os.path.relpath(os.path.join(d, f"output_{k}.npy"), ZOO))
        float_err = max(float(np.abs(o - np.load(os.path.join(ZOO, f))).max()) for o, f in zip(outs, c["outputs"]))
        cases.append({**c, "outputs": paths, "float_outputs": c["outputs"], "ort_vs_float_max_abs": float_err})
    counts = {}
    for n in onnx.load(dst).graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return {"name": name, "onnx": os.path.relpath(dst, ZOO), "float_model": base["name"], "kind": kind,
            "weights": "u8" if wtype == QuantType.QUInt8 else "s8",
            "reference": "onnxruntime " + ("graph optimizations off" if wtype == QuantType.QInt8 else "default optimizations"),
            "export_args": base["export_args"], "cases": cases, "tolerance": tol, "ops": counts}


def main():
    only = set(sys.argv[1:])
    with open(os.path.join(ZOO, "manifest.json"), encoding="utf-8") as f:
        zoo = {m["name"]: m for m in json.load(f)["models"]}
    path = os.path.join(HERE, "manifest.json")
    previous = {}
    if only and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = {m["name"]: m for m in json.load(f)["models"]}
    models = []
    for name, (base, kind, wtype, tol) in MODELS.items():
        if only and name not in only:
            if name in previous:
                models.append(previous[name])
            continue
        models.append(build(name, zoo[base], kind, wtype, tol))
        print(f"{name}: {len(models[-1]['cases'])} cases")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"generator": "zoo/quantized/make_quantized.py", "onnxruntime": ort.__version__, "models": models}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
