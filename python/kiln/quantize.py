"""kiln.quantize: a float ONNX model to a quantized .kiln, with ONNX Runtime's quantizer (the
optional extra `pip install kiln[quantize]`; nothing here re-implements what it does).

    kiln.quantize("model.onnx", "model_int8.kiln", dims={"batch": (1, 4), "H": (32, 224), "W": (32, 224)},
                  calibration=[{"pixels": x} for x in samples])

Static (default): QDQ with per-channel int8 weights and uint8 activations, calibrated on
`calibration` (dicts of input name -> array, or arrays for a one-input model). Draw samples
across the contract, at the minimum, middle and bound of every dim: activation ranges seen at
one shape only may not hold at another, and quantize() warns when a dim's samples never reach
its minimum or its bound. Dynamic (`mode="dynamic"`): int8 weights, activations quantized at
run time (no calibration). Writes the QDQ (or dynamic) ONNX model next to `out` (`onnx_out`)
and the .kiln with the same contract; returns export's summary."""

from __future__ import annotations

import os
import warnings
from typing import Iterable, Mapping, Optional, Union

import numpy as np


def _ort_quantization():
    try:
        from onnxruntime import quantization as q  # noqa: PLC0415
        from onnxruntime.quantization.shape_inference import quant_pre_process  # noqa: PLC0415
    except ImportError as e:  # the optional extra is missing
        raise ImportError("kiln.quantize needs ONNX Runtime's quantizer: pip install kiln[quantize]") from e
    return q, quant_pre_process


def _samples(calibration, names):
    for s in calibration:
        if isinstance(s, Mapping):
            yield {k: np.asarray(v) for k, v in s.items()}
        elif len(names) == 1:
            yield {names[0]: np.asarray(s)}
        else:
            raise ValueError(f"a calibration sample must map input names {names} to arrays")


def _check_coverage(model_path, samples, dims):
    """Warns for each dim whose samples never reach its minimum or its bound."""
    import onnx  # noqa: PLC0415

    axes = {}  # dim name -> [(input, axis)]
    for i in onnx.load(model_path, load_external_data=False).graph.input:
        for k, d in enumerate(i.type.tensor_type.shape.dim):
            if d.dim_param:
                axes.setdefault(d.dim_param, []).append((i.name, k))
    for name, bounds in (dims or {}).items():
        lo, hi = (bounds.min, bounds.max) if hasattr(bounds, "min") else (bounds[0], bounds[1])
        seen = {s[inp].shape[k] for s in samples for inp, k in axes.get(name, []) if inp in s}
        if seen and (lo not in seen or hi not in seen):
            warnings.warn(f"calibration covers {name} = {sorted(seen)} only; add samples at {name} = {lo} and {hi} "
                          "(activation ranges seen at one size may not hold at another)", UserWarning, stacklevel=3)


def quantize(model: Union[str, os.PathLike], out: Union[str, os.PathLike], dims=None,
             calibration: Optional[Iterable] = None, *, mode: str = "static", per_channel: bool = True,
             weight_type: str = "int8", onnx_out: Optional[Union[str, os.PathLike]] = None, **export_options) -> str:
    """Quantizes ONNX `model` with ONNX Runtime's quantizer and exports the result to `out`
    with `dims` (and any other kiln.export_onnx option). See the module docstring."""
    from . import export_onnx  # noqa: PLC0415

    q, pre_process = _ort_quantization()
    model, out = os.fspath(model), os.fspath(out)
    onnx_out = os.fspath(onnx_out) if onnx_out else os.path.splitext(out)[0] + (".qdq.onnx" if mode == "static" else ".dyn.onnx")
    if weight_type not in ("int8", "uint8"):
        raise ValueError(f"weight_type {weight_type!r}: 'int8' or 'uint8'")
    wtype = q.QuantType.QInt8 if weight_type == "int8" else q.QuantType.QUInt8
    pre = onnx_out + ".pre.onnx"
    pre_process(model, pre, skip_symbolic_shape=True)
    try:
        if mode == "static":
            if calibration is None:
                raise ValueError("static quantization needs calibration samples (or mode='dynamic')")
            import onnx  # noqa: PLC0415

            names = [i.name for i in onnx.load(model, load_external_data=False).graph.input]
            samples = list(_samples(calibration, names))
            if not samples:
                raise ValueError("calibration holds no samples")
            _check_coverage(model, samples, dims)

            class Reader(q.CalibrationDataReader):
                def __init__(self):
                    self.it = iter(samples)

                def get_next(self):
                    return next(self.it, None)

            q.quantize_static(pre, onnx_out, Reader(), quant_format=q.QuantFormat.QDQ, per_channel=per_channel,
                              activation_type=q.QuantType.QUInt8, weight_type=wtype)
        elif mode == "dynamic":
            q.quantize_dynamic(pre, onnx_out, weight_type=wtype, per_channel=per_channel)
        else:
            raise ValueError(f"mode {mode!r}: 'static' or 'dynamic'")
    finally:
        if os.path.exists(pre):
            os.remove(pre)
    return export_onnx(onnx_out, out, dims=dims, **export_options)
