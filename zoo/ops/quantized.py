"""The op zoo's quantized models (imported by make_ops.py): QuantizeLinear/DequantizeLinear,
the QOperator form (QLinearConv, QLinearMatMul, the com.microsoft QLinear* ops), the integer
forms (ConvInteger, MatMulInteger) and dynamic quantization (DynamicQuantizeLinear).

Each runs in ONNX Runtime as written (graph optimizations off), so a QDQ model's reference
is ONNX Runtime's float op between the dequantize and quantize; Kiln folds such a chain into
one integer instruction, which may put a value one quantum away (the entry's tolerance)."""

import numpy as np
from onnx import TensorProto

F, I8, U8, I32 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT32


def _f(*v):
    return np.array(v if len(v) != 1 else v[0], np.float32)


def _q_dq(Op, node):
    # QuantizeLinear and DequantizeLinear: per tensor and per channel, int8 and uint8, opset 10
    # (per tensor only) and 13; values that round half way (to even) and that saturate.
    half = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 126.5, 127.5, 300, -300, 0, 3.25], np.float32)
    ops = [Op(f"quantize_{name}", [node("QuantizeLinear", ["x", "s"] + (["z"] if z is not None else []), ["y"], **attrs)],
              [("x", F, ["N", 3, "L"])], [("y", U8 if z is None or z.dtype == np.uint8 else I8)], {"N": (0, 3), "L": (1, 4)},
              [{"N": 0, "L": 4}, {"N": 1, "L": 4, "values": {"x": half.reshape(1, 3, 4)}}, {"N": 2, "L": 1}, {"N": 3, "L": 4}],
              consts={"s": s_, **({"z": z} if z is not None else {})}, gen_scale={"x": 60.0}, opset=opset,
              notes=f"QuantizeLinear {name}: round half to even, saturate")
           for name, s_, z, attrs, opset in [
               ("i8_tensor", _f(0.5), np.array(3, np.int8), {}, 13),
               ("u8_tensor_opset10", _f(1.0), np.array(128, np.uint8), {}, 10),
               ("u8_no_zero_point", _f(0.25), None, {}, 13),
               ("i8_channel", _f(0.5, 1.0, 2.0), np.array([0, -5, 7], np.int8), {"axis": 1}, 13)]]
    ops += [Op(f"dequantize_{name}", [node("DequantizeLinear", ["x", "s", "z"], ["y"], **attrs)],
               [("x", e, ["N", 3, "L"])], [("y", F)], {"N": (0, 3), "L": (1, 4)},
               [{"N": 0, "L": 2}, {"N": 1, "L": 1}, {"N": 3, "L": 4}],
               consts={"s": s_, "z": z}, opset=13, notes=f"DequantizeLinear {name}")
            for name, e, s_, z, attrs in [
                ("i8_tensor", I8, _f(0.5), np.array(-3, np.int8), {}),
                ("u8_tensor", U8, _f(0.02), np.array(128, np.uint8), {}),
                ("i8_channel", I8, _f(0.5, 1.0, 2.0), np.array([0, -5, 7], np.int8), {"axis": 1})]]
    return ops


def _weights(shape, dtype, seed, bits=8):
    """Random weights. With u8 activations, i8 weights take 7 bits (bits=7), as ONNX Runtime's
    quantizer makes them (reduce_range): its AVX2 u8 x s8 kernel (vpmaddubsw) saturates the
    int16 sum of two products otherwise, and its reference would be wrong, not Kiln's."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if bits == 8 else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return rng.integers(lo, hi + 1, shape).astype(dtype)


def _qlinear_conv(Op, node):
    ops = []
    # u8 activations, i8 per-channel weights and an i32 bias (ONNX Runtime's static quantizer's
    # usual choice), strided and padded.
    ops.append(Op("qlinear_conv_u8_channel",
                  [node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1, 1, 1, 1],
                        strides=[1, 2])],
                  [("x", U8, ["N", 4, "H", "W"])], [("y", U8)], {"N": (0, 2), "H": (1, 7), "W": (1, 9)},
                  [{"N": 0, "H": 3, "W": 4}, {"N": 1, "H": 1, "W": 1}, {"N": 1, "H": 5, "W": 2}, {"N": 2, "H": 7, "W": 9}],
                  consts={"xs": _f(0.02), "xz": np.array(131, np.uint8), "w": _weights((6, 4, 3, 3), np.int8, 1, bits=7),
                          "ws": _f(0.01, 0.02, 0.005, 0.015, 0.03, 0.008), "wz": np.zeros(6, np.int8),
                          "ys": _f(0.1), "yz": np.array(120, np.uint8),
                          "b": np.array([-2000, 0, 1500, 70000, -70000, 3], np.int32)},
                  opset=13, notes="QLinearConv: u8 x, per-channel i8 w, i32 bias, strides (1, 2), pads 1"))
    ops.append(Op("qlinear_conv_i8_group",
                  [node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], group=2, dilations=[2, 2],
                        pads=[2, 1, 2, 1])],
                  [("x", I8, ["N", 4, "H", "W"])], [("y", I8)], {"N": (1, 2), "H": (1, 6), "W": (3, 6)},
                  [{"N": 1, "H": 1, "W": 3}, {"N": 1, "H": 4, "W": 4}, {"N": 2, "H": 6, "W": 6}],
                  consts={"xs": _f(0.05), "xz": np.array(-7, np.int8), "w": _weights((4, 2, 3, 3), np.int8, 2),
                          "ws": _f(0.004), "wz": np.array(0, np.int8), "ys": _f(0.2), "yz": np.array(5, np.int8)},
                  opset=13, notes="QLinearConv: i8 x, per-tensor i8 w, group 2, dilation 2"))
    ops.append(Op("qlinear_conv_1d_u8_weights",
                  [node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], pads=[2, 2])],
                  [("x", U8, ["N", 3, "L"])], [("y", U8)], {"N": (0, 3), "L": (1, 40)},
                  [{"N": 0, "L": 5}, {"N": 1, "L": 1}, {"N": 3, "L": 40}],
                  consts={"xs": _f(0.03), "xz": np.array(128, np.uint8), "w": _weights((5, 3, 5), np.uint8, 3),
                          "ws": _f(0.01), "wz": np.array(140, np.uint8), "ys": _f(0.25), "yz": np.array(100, np.uint8)},
                  opset=10, notes="QLinearConv 1-D: u8 weights with a zero point (opset 10)"))
    ops.append(Op("conv_integer",
                  [node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[0, 1, 0, 1])],
                  [("x", U8, ["N", 2, "H", 5])], [("y", I32)], {"N": (0, 2), "H": (2, 6)},
                  [{"N": 0, "H": 2}, {"N": 1, "H": 2}, {"N": 2, "H": 6}],
                  consts={"w": _weights((3, 2, 2, 3), np.uint8, 4), "xz": np.array(17, np.uint8), "wz": np.array(200, np.uint8)},
                  opset=10, notes="ConvInteger: u8 x and w with zero points, int32 out"))
    return ops


def _matmul(Op, node):
    ops = []
    ops.append(Op("matmul_integer",
                  [node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
                  [("a", U8, ["N", "L", 7])], [("y", I32)], {"N": (0, 3), "L": (1, 9)},
                  [{"N": 0, "L": 3}, {"N": 1, "L": 1}, {"N": 3, "L": 9}],
                  consts={"b": _weights((7, 4), np.int8, 5, bits=7), "az": np.array(128, np.uint8),
                          "bz": np.array([0, 3, -4, 1], np.int8)},
                  opset=10, notes="MatMulInteger: u8 activations, i8 weights with per-column zero points"))
    ops.append(Op("qlinear_matmul",
                  [node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
                  [("a", U8, ["N", "L", 8])], [("y", U8)], {"N": (0, 3), "L": (1, 9)},
                  [{"N": 0, "L": 3}, {"N": 1, "L": 1}, {"N": 3, "L": 9}],
                  consts={"as": _f(0.02), "az": np.array(120, np.uint8), "b": _weights((8, 6), np.int8, 6, bits=7),
                          "bs": _f(0.01), "bz": np.array(0, np.int8), "ys": _f(0.05), "yz": np.array(128, np.uint8)},
                  opset=10, notes="QLinearMatMul: u8 x i8, per tensor"))
    # ONNX Runtime's dynamic quantizer's MatMul: Kiln folds the chain after DynamicQuantizeLinear
    # into PackedMatMulIntegerToFloat (uint8 weights with per-column zero points and a bias, K
    # not a multiple of 4; int8 weights with per-column scales, K a multiple of 4, no bias).
    for name, k, n, b, bz, ws, bias in [
            ("dynamic_matmul_u8", 20, 19, _weights((20, 19), np.uint8, 8), _weights((19,), np.uint8, 9),
             _f(0.02), np.linspace(-1, 1, 19).astype(np.float32)),
            ("dynamic_matmul_i8", 32, 33, _weights((32, 33), np.int8, 10, bits=7), np.array(0, np.int8),
             np.linspace(0.01, 0.03, 33).astype(np.float32), None)]:
        nodes = [node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]), node("Mul", ["xs", "ws"], ["s"]),
                 node("MatMulInteger", ["xq", "b", "xz", "bz"], ["acc"]), node("Cast", ["acc"], ["c"], to=F),
                 node("Mul", ["c", "s"], ["y" if bias is None else "m"])]
        if bias is not None:
            nodes.append(node("Add", ["bias", "m"], ["y"]))
        ops.append(Op(name, nodes, [("x", F, ["N", "L", k])], [("y", F)], {"N": (0, 3), "L": (1, 9)},
                      [{"N": 0, "L": 3}, {"N": 1, "L": 1}, {"N": 2, "L": 5}, {"N": 3, "L": 9}],
                      consts={"b": b, "bz": bz, "ws": ws, **({"bias": bias} if bias is not None else {})},
                      gen_scale={"x": 2.0}, opset=11,
                      notes="DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul [-> Add], folded by Kiln"))
    # The same for a dense convolution (PackedConvIntegerToFloat): 2-D with uint8 weights and a
    # bias reshaped to [M, 1, 1] as ONNX Runtime writes it; 1-D with 7-bit int8 weights, strided.
    I64 = TensorProto.INT64
    for name, x_shape, w, wz, attrs, bias in [
            ("dynamic_conv_u8", ["N", 3, "H", "W"], _weights((6, 3, 3, 3), np.uint8, 11), np.array(131, np.uint8),
             {"pads": [1, 1, 1, 1]}, np.linspace(-0.5, 0.5, 6).astype(np.float32)),
            ("dynamic_conv_1d_i8", ["N", 4, "W"], _weights((8, 4, 5), np.int8, 12, bits=7), np.array(0, np.int8),
             {"pads": [2, 2], "strides": [2]}, None)]:
        nodes = [node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]), node("Mul", ["xs", "ws"], ["s"]),
                 node("ConvInteger", ["xq", "w", "xz", "wz"], ["acc"], **attrs), node("Cast", ["acc"], ["c"], to=F),
                 node("Mul", ["c", "s"], ["y" if bias is None else "m"])]
        consts = {"w": w, "wz": wz, "ws": _f(0.015)}
        if bias is not None:
            nodes += [node("Reshape", ["bias", "bshape"], ["b3"]), node("Add", ["m", "b3"], ["y"])]
            consts.update({"bias": bias, "bshape": np.array([6, 1, 1], np.int64)})
        dims = {"N": (0, 2), "H": (1, 9), "W": (1, 9)} if len(x_shape) == 4 else {"N": (0, 2), "W": (1, 17)}
        cases = ([{"N": 0, "H": 3, "W": 3}, {"N": 1, "H": 1, "W": 1}, {"N": 2, "H": 5, "W": 9}, {"N": 2, "H": 9, "W": 9}]
                 if len(x_shape) == 4 else [{"N": 0, "W": 3}, {"N": 1, "W": 1}, {"N": 2, "W": 17}])
        ops.append(Op(name, nodes, [("x", F, x_shape)], [("y", F)], dims, cases, consts=consts, gen_scale={"x": 2.0},
                      opset=11, notes="DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul [-> Add(Reshape(bias))], folded"))
    ops.append(Op("dynamic_quantize_linear",
                  [node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])],
                  [("x", F, ["N", "L"])], [("y", U8), ("ys", F), ("yz", U8)], {"N": (1, 4), "L": (1, 16)},
                  [{"N": 1, "L": 1}, {"N": 2, "L": 3, "values": {"x": np.zeros((2, 3), np.float32)}},
                   {"N": 1, "L": 4, "values": {"x": _f(-3, -1, -0.5, -2).reshape(1, 4)}},
                   {"N": 1, "L": 4, "values": {"x": _f(0.5, 1, 4, 2).reshape(1, 4)}}, {"N": 4, "L": 16}],
                  gen_scale={"x": 3.0}, opset=11,
                  notes="DynamicQuantizeLinear: random, all zero, all negative, all positive"))
    return ops


def _qdq(Op, node):
    """The QDQ form as static quantizers write it. ONNX Runtime (optimizations off) computes the
    float op between; Kiln folds each chain into an integer instruction, so an output may sit
    one quantum away: the tolerance is one output quantum (relative to 1 + |y|)."""
    dq, q = "DequantizeLinear", "QuantizeLinear"
    ops = [Op("qdq_conv", [node(dq, ["xq", "xs", "xz"], ["x"]), node(dq, ["wq", "ws", "wz"], ["w"], axis=0),
                           node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
                           node(q, ["r", "ys", "yz"], ["yq"]), node(dq, ["yq", "ys", "yz"], ["y"])],
              [("xq", U8, ["N", 2, "H", 5])], [("y", F)], {"N": (0, 2), "H": (1, 6)},
              [{"N": 0, "H": 3}, {"N": 1, "H": 1}, {"N": 2, "H": 6}],
              consts={"xs": _f(0.05), "xz": np.array(120, np.uint8),
                      "wq": (np.arange(36).reshape(2, 2, 3, 3) * 7 % 255 - 127).astype(np.int8),
                      "ws": _f(0.01, 0.02), "wz": np.array([0, 0], np.int8), "ys": _f(0.04), "yz": np.array(0, np.uint8)},
              tolerance=0.04, notes="QDQ: u8 activations, per-channel i8 weights, Conv+Relu between: one QLinearConv")]
    ops.append(Op("qdq_conv_clip_bias",
                  [node(dq, ["xq", "xs", "xz"], ["x"]), node(dq, ["wq", "ws", "wz"], ["w"]),
                   node(dq, ["bq", "bs", "bz"], ["b"]), node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2]),
                   node("Clip", ["c", "lo", "hi"], ["r"]), node(q, ["r", "ys", "yz"], ["yq"]), node(dq, ["yq", "ys", "yz"], ["y"])],
                  [("xq", I8, ["N", 3, "H", "W"])], [("y", F)], {"N": (1, 2), "H": (3, 9), "W": (3, 9)},
                  [{"N": 1, "H": 3, "W": 3}, {"N": 1, "H": 4, "W": 7}, {"N": 2, "H": 9, "W": 9}],
                  consts={"xs": _f(0.05), "xz": np.array(-10, np.int8), "wq": _weights((4, 3, 3, 3), np.int8, 7),
                          "ws": _f(0.02), "wz": np.array(0, np.int8),
                          "bq": np.array([-500, 200, 4000, -90], np.int32), "bs": _f(0.001), "bz": np.array(0, np.int32),
                          "lo": _f(0.0), "hi": _f(6.0), "ys": _f(0.05), "yz": np.array(-128, np.int8)},
                  tolerance=0.05, notes="QDQ: i8, an int32 bias, Conv+Clip(0, 6) (ReLU6) between, stride 2"))
    ops.append(Op("qdq_matmul",
                  [node(dq, ["aq", "as", "az"], ["a"]), node(dq, ["bq", "bs", "bz"], ["b"], axis=1),
                   node("MatMul", ["a", "b"], ["c"]), node(q, ["c", "ys", "yz"], ["yq"]), node(dq, ["yq", "ys", "yz"], ["y"])],
                  [("aq", U8, ["N", "L", 6])], [("y", F)], {"N": (1, 3), "L": (1, 12)},
                  [{"N": 1, "L": 1}, {"N": 2, "L": 5}, {"N": 3, "L": 12}],
                  consts={"as": _f(0.02), "az": np.array(128, np.uint8), "bq": _weights((6, 5), np.int8, 8),
                          "bs": _f(0.01, 0.02, 0.03, 0.01, 0.005), "bz": np.zeros(5, np.int8),
                          "ys": _f(0.08), "yz": np.array(128, np.uint8)},
                  tolerance=0.08, notes="QDQ: MatMul with per-column i8 weights: one QLinearMatMul"))
    ops.append(Op("qdq_add_stays_float",
                  [node(dq, ["aq", "s", "z"], ["a"]), node(dq, ["bq", "s", "z"], ["b"]), node("Add", ["a", "b"], ["c"]),
                   node(q, ["c", "s", "z"], ["yq"])],
                  [("aq", U8, ["N", 4]), ("bq", U8, ["N", 4])], [("yq", U8)], {"N": (0, 5)}, [{"N": 0}, {"N": 1}, {"N": 5}],
                  consts={"s": _f(0.1), "z": np.array(128, np.uint8)},
                  notes="QDQ around an op Kiln has no integer kernel for: float between Q and DQ, exact"))
    return ops


def _contrib(Op, node):
    """ONNX Runtime's contrib ops (com.microsoft) from its quantizers. DynamicQuantizeLSTM: Kiln
    dequantizes the weights at export and runs a float LSTM; ONNX Runtime also quantizes the
    activations at each step, so they agree within that noise (the tolerance)."""
    h, i = 8, 5
    rng = np.random.default_rng(11)
    wq = rng.integers(-64, 64, (2, i, 4 * h)).astype(np.int8)  # 7 bits: ONNX Runtime's AVX2 u8 x s8 saturates otherwise
    rq = rng.integers(-64, 64, (2, h, 4 * h)).astype(np.int8)
    return [Op("dynamic_quantize_lstm",
               [node("DynamicQuantizeLSTM", ["x", "w", "r", "b", "", "", "", "", "ws", "wz", "rs", "rz"], ["y", "yh", "yc"],
                     domain="com.microsoft", direction="bidirectional", hidden_size=h)],
               [("x", F, ["T", "N", i])], [("y", F), ("yh", F), ("yc", F)], {"T": (1, 20), "N": (1, 3)},
               [{"T": 1, "N": 1}, {"T": 7, "N": 2}, {"T": 20, "N": 3}],
               consts={"w": wq, "r": rq, "b": (rng.standard_normal((2, 8 * h)) * 0.1).astype(np.float32),
                       "ws": _f(0.004, 0.005), "wz": np.zeros(2, np.int8),
                       "rs": (rng.random((2, 4 * h)) * 0.004 + 0.002).astype(np.float32), "rz": np.zeros((2, 4 * h), np.int8)},
               opset=14, tolerance=1e-2,
               notes="com.microsoft DynamicQuantizeLSTM (ddddocr's OCR model has one): per-direction W scales, per-column R")] + \
        _qlinear_contrib(Op, node)


def _qlinear_contrib(Op, node):
    """The QOperator form's com.microsoft QLinear* ops; ONNX Runtime rounds inside integer
    kernels, Kiln computes them as DequantizeLinear -> op -> QuantizeLinear: within one quantum."""
    ms = "com.microsoft"
    sz = {"as": _f(0.05), "az": np.array(120, np.uint8), "bs": _f(0.03), "bz": np.array(135, np.uint8),
          "ys": _f(0.07), "yz": np.array(128, np.uint8)}
    ops = [Op(f"qlinear_{op[7:].lower()}",
              [node(op, ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"], domain=ms)],
              [("a", U8, ["N", 3, "L"]), ("b", U8, [3, "L"])], [("y", U8)], {"N": (0, 3), "L": (1, 9)},
              [{"N": 0, "L": 2}, {"N": 1, "L": 1}, {"N": 3, "L": 9}], consts=sz, quanta=1,
              notes=f"com.microsoft {op}, broadcast")
           for op in ("QLinearAdd", "QLinearMul")]
    one = {"xs": _f(0.04), "xz": np.array(100, np.uint8), "ys": _f(1 / 256), "yz": np.array(0, np.uint8)}
    ops += [Op("qlinear_sigmoid", [node("QLinearSigmoid", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=ms)],
               [("x", U8, ["N", 5])], [("y", U8)], {"N": (0, 4)}, [{"N": 0}, {"N": 1}, {"N": 4}], consts=one, quanta=1,
               notes="com.microsoft QLinearSigmoid"),
            Op("qlinear_leaky_relu", [node("QLinearLeakyRelu", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=ms, alpha=0.1)],
               [("x", I8, ["N", 5])], [("y", I8)], {"N": (0, 4)}, [{"N": 0}, {"N": 1}, {"N": 4}],
               consts={"xs": _f(0.04), "xz": np.array(-3, np.int8), "ys": _f(0.03), "yz": np.array(-20, np.int8)}, quanta=1,
               notes="com.microsoft QLinearLeakyRelu, int8"),
            Op("qlinear_global_average_pool",
               [node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=ms, channels_last=0)],
               [("x", U8, ["N", 4, "H", "W"])], [("y", U8)], {"N": (1, 3), "H": (1, 9), "W": (1, 9)},
               [{"N": 1, "H": 1, "W": 1}, {"N": 2, "H": 3, "W": 7}, {"N": 3, "H": 9, "W": 9}],
               consts={"xs": _f(0.04), "xz": np.array(100, np.uint8), "ys": _f(0.02), "yz": np.array(90, np.uint8)}, quanta=1,
               notes="com.microsoft QLinearGlobalAveragePool (channels first)"),
            Op("qlinear_concat",
               [node("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], ["y"], domain=ms, axis=1)],
               [("a", U8, ["N", 2, "L"]), ("b", U8, ["N", 3, "L"])], [("y", U8)], {"N": (0, 3), "L": (1, 6)},
               [{"N": 0, "L": 2}, {"N": 1, "L": 1}, {"N": 3, "L": 6}], consts=sz, quanta=1,
               notes="com.microsoft QLinearConcat: operands of other scales requantized")]
    return ops


def ops(Op, node):
    return _q_dq(Op, node) + _qlinear_conv(Op, node) + _matmul(Op, node) + _qdq(Op, node) + _contrib(Op, node)
