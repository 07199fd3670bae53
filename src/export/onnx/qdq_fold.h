#pragma once
// QDQ folding: the chains a static quantizer writes around Conv and MatMul,
//   DequantizeLinear(x) , DequantizeLinear(W) [, DequantizeLinear(B)] -> Conv -> [Relu | Clip]
//   -> QuantizeLinear,
// become one QLinearConv (QLinearMatMul for a MatMul), which runs in integers: int8 in, int8
// out, an int32 accumulator, one requantization. A Relu or Clip between becomes the
// instruction's clamp in output quanta (internal attributes clamp_min/clamp_max), exactly:
// quantizing is monotone, so it commutes with clamping. A float bias is quantized with the
// scale x_scale * w_scale, as quantizers do. Chains that do not fit (an activation quantized
// per channel, a scale that is not an initializer, an output read elsewhere) stay as they are:
// float between an explicit dequantize and quantize.

#include "kiln/status.h"
#include "onnx/onnx_pb.h"

namespace kiln::exporter {

/// Rewrites `graph` in place; returns how many nodes disappeared (the Conv/MatMul's
/// QuantizeLinear, a Relu or Clip between, and the DequantizeLinears nothing else reads).
Result<size_t> fold_qdq(onnx::GraphProto* graph, size_t* folded_ops);

/// After folding: the uint8 activations that only integer ops with int8 weights (and
/// DequantizeLinear) read become int8 with their zero points minus 128 ((x - zp) is unchanged,
/// so every result is the same), which XNNPACK's int8 convolution (qc8) takes; ONNX Runtime's
/// quantizer writes uint8 activations with int8 weights, a mix XNNPACK has no operator for.
/// Returns how many values changed.
Result<size_t> retype_u8_activations(onnx::GraphProto* graph);

/// Dynamic quantization's MatMuls and dense convolutions, as ONNX Runtime's dynamic quantizer
/// writes them,
///   DynamicQuantizeLinear(x) -> MatMulInteger|ConvInteger(x_q, W, x_zp, W_zp) -> Cast(float)
///   -> Mul(., Mul(x_scale, W_scale)) [-> Add(., bias or Reshape(bias))],
/// with W, W_zp, W_scale and bias initializers, become one PackedMatMulIntegerToFloat or
/// PackedConvIntegerToFloat (kernels/portable/packed_integer_to_float.cc) whose W is packed here for the
/// quantized GEMM microkernel: the same f32 roundings, one pass instead of four. Returns how
/// many were folded; *removed counts the nodes that disappeared.
Result<size_t> fold_dynamic_matmuls(onnx::GraphProto* graph, size_t* removed);

}  // namespace kiln::exporter
