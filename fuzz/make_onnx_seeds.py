#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_onnx: small ONNX models (a few KB each) that reach the
importer's main paths with the dims the fuzz target declares (batch, seq, time, H, W):
convolution and pooling at dynamic H/W, the fusion patterns (attention, LayerNorm, GELU),
a GRU over time, shape arithmetic (Shape/Gather/Concat/Reshape), and Slice/Pad/Resize.

    python3 fuzz/make_onnx_seeds.py fuzz/corpus/onnx      # needs `pip install onnx==1.17.0`
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)


def w(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def f32(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def model(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-fuzz-seeds")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def vi(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def cnn():
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["c1"], ["r1"]),
        n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        n("Conv", ["p1", "w2"], ["c2"], kernel_shape=[3, 3], group=4, pads=[1, 1, 1, 1]),
        n("GlobalAveragePool", ["c2"], ["g"]),
        n("Flatten", ["g"], ["f"]),
        n("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    return model("cnn", nodes, [vi("x", ["batch", 3, "H", "W"])], [vi("y", ["batch", 5])],
                 [w("w1", 8, 3, 3, 3), w("b1", 8), w("w2", 8, 2, 3, 3), w("wf", 5, 8), w("bf", 5)])


def attention():
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q"]),
        n("MatMul", ["x", "wk"], ["k"]),
        n("MatMul", ["x", "wv"], ["v"]),
        n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["s"]),
        n("Div", ["s", "scale"], ["ss"]),
        n("Add", ["ss", "mask"], ["sm"]),
        n("Softmax", ["sm"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["y"]),
    ]
    return model("attention", nodes, [vi("x", ["batch", "seq", 16]), vi("mask", ["batch", 1, "seq"])],
                 [vi("y", ["batch", "seq", 16])],
                 [w("wq", 16, 16), w("wk", 16, 16), w("wv", 16, 16), f32("scale", 4.0)])


def layer_norm_gelu():
    n = helper.make_node
    nodes = [
        n("ReduceMean", ["x"], ["mu"], axes=[-1]),
        n("Sub", ["x", "mu"], ["d"]),
        n("Pow", ["d", "two"], ["d2"]),
        n("ReduceMean", ["d2"], ["var"], axes=[-1]),
        n("Add", ["var", "eps"], ["ve"]),
        n("Sqrt", ["ve"], ["sd"]),
        n("Div", ["d", "sd"], ["nrm"]),
        n("Mul", ["nrm", "gamma"], ["sc"]),
        n("Add", ["sc", "beta"], ["ln"]),
        n("Div", ["ln", "sqrt2"], ["h"]),
        n("Erf", ["h"], ["e"]),
        n("Add", ["e", "one"], ["e1"]),
        n("Mul", ["ln", "e1"], ["m"]),
        n("Mul", ["m", "half"], ["y"]),
    ]
    return model("layer_norm_gelu", nodes, [vi("x", ["batch", "seq", 8])], [vi("y", ["batch", "seq", 8])],
                 [f32("two", 2.0), f32("eps", 1e-5), w("gamma", 8), w("beta", 8), f32("sqrt2", 1.4142135),
                  f32("one", 1.0), f32("half", 0.5)])


def gru():
    n = helper.make_node
    nodes = [n("GRU", ["x", "W", "R", "B"], ["ys", "yh"], hidden_size=6, direction="bidirectional",
               linear_before_reset=1)]
    return model("gru", nodes, [vi("x", ["time", "batch", 4])],
                 [vi("ys", ["time", 2, "batch", 6]), vi("yh", [2, "batch", 6])],
                 [w("W", 2, 18, 4), w("R", 2, 18, 6), w("B", 2, 36)])


def shape_math():
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["s"]),
        n("Gather", ["s", "i0"], ["b"], axis=0),
        n("Gather", ["s", "i1"], ["t"], axis=0),
        n("Mul", ["t", "two"], ["t2"]),
        n("Concat", ["b", "t2", "m1"], ["shape"], axis=0),
        n("Reshape", ["x", "shape"], ["r"]),
        n("Transpose", ["r"], ["y"], perm=[0, 2, 1]),
    ]
    return model("shape_math", nodes, [vi("x", ["batch", "seq", 4])], [vi("y", ["batch", 2, None])],
                 [i64("i0", [0]), i64("i1", [1]), i64("two", [2]), i64("m1", [-1])])


def slice_pad_resize():
    n = helper.make_node
    nodes = [
        n("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
        n("Pad", ["s", "pads", "zero"], ["p"], mode="reflect"),
        n("Resize", ["p", "", "scales"], ["y"], mode="nearest"),
    ]
    return model("slice_pad_resize", nodes, [vi("x", [1, 2, "H", "W"])], [vi("y", [1, 2, None, None])],
                 [i64("st", [1, 0]), i64("en", [-1, 2**62]), i64("ax", [2, 3]), i64("sp", [1, 2]),
                  i64("pads", [0, 0, 1, 1, 0, 0, 1, 1]), f32("zero", 0.0),
                  numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales")])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "onnx")
    os.makedirs(out, exist_ok=True)
    for make in (cnn, attention, layer_norm_gelu, gru, shape_math, slice_pad_resize):
        m = make()
        path = os.path.join(out, make.__name__ + ".onnx")
        onnx.save(m, path)
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
