"""kiln.quantize (the optional extra: ONNX Runtime's quantizer) on the zoo's ResNet: static
QDQ calibrated across the contract, and dynamic; the .kiln against the float model and
against ONNX Runtime on the same quantized ONNX, at the minimum and the bound."""

import json
import os
import warnings

import numpy as np
import pytest

import kiln

ort = pytest.importorskip("onnxruntime", reason="kiln[quantize] (onnxruntime) is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(HERE, "..", "..", "zoo")


def _resnet():
    with open(os.path.join(ZOO, "manifest.json"), encoding="utf-8") as f:
        m = next(x for x in json.load(f)["models"] if x["name"] == "resnet_small")
    return os.path.join(ZOO, m["onnx"])


def _batch(n, seed):
    return np.random.default_rng(seed).standard_normal((n, 3, 64, 64)).astype(np.float32)


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_quantize_writes_a_kiln_that_keeps_the_contract_and_the_answers(tmp_path, mode):
    src = _resnet()
    out = tmp_path / "resnet_int8.kiln"
    calib = [{"pixels": _batch(n, n)} for n in (1, 4, 8)] if mode == "static" else None
    # Dynamic with uint8 weights: ONNX Runtime's ConvInteger/MatMulInteger on AVX2 saturate u8 x s8
    # pair sums, so with int8 weights its reference is not the model's arithmetic.
    summary = kiln.quantize(src, out, dims={"batch": (1, 8)}, calibration=calib, mode=mode,
                            weight_type="int8" if mode == "static" else "uint8")
    assert ("QLinearConv" in summary) if mode == "static" else ("ConvInteger" in summary or "MatMulInteger" in summary)
    qonnx = str(out)[: -len(".kiln")] + (".qdq.onnx" if mode == "static" else ".dyn.onnx")
    fwd = kiln.load(out).methods["forward"]
    assert [d.name for d in fwd.inputs[0].shape if not isinstance(d, int)] == ["batch"]
    float_sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the model's own arithmetic
    q_sess = ort.InferenceSession(qonnx, so, providers=["CPUExecutionProvider"])
    for n in (1, 8):
        x = _batch(n, 100 + n)
        got = np.asarray(fwd(x))
        want_f = float_sess.run(None, {"pixels": x})[0]
        want_q = q_sess.run(None, {"pixels": x})[0]
        spread = float(np.abs(want_f).max())
        assert np.abs(got - want_q).max() <= 0.05 * spread, (n, np.abs(got - want_q).max(), spread)
        assert np.abs(got - want_f).max() <= 0.1 * spread, (n, np.abs(got - want_f).max(), spread)


def test_calibration_at_one_shape_warns(tmp_path):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        kiln.quantize(_resnet(), tmp_path / "q.kiln", dims={"batch": (1, 8)}, calibration=[_batch(2, 0)])
    assert any("calibration covers batch = [2] only" in str(x.message) for x in w), [str(x.message) for x in w]


def test_static_without_calibration_is_refused(tmp_path):
    with pytest.raises(ValueError, match="needs calibration samples"):
        kiln.quantize(_resnet(), tmp_path / "q.kiln", dims={"batch": (1, 8)})
