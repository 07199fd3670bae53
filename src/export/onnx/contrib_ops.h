#pragma once
// ONNX Runtime's contrib ops (domain com.microsoft) that Kiln imports by rewriting them into
// standard ONNX before import.
//
// DynamicQuantizeLSTM (ONNX Runtime's dynamic quantizer writes it for LSTM): int8/uint8 W
// [dirs, input, 4*hidden] and R [dirs, hidden, 4*hidden] with a scale and zero point per
// direction or per gate column. Its weights are dequantized at export into a standard LSTM's
// f32 W [dirs, 4*hidden, input] and R; the recurrence then runs in f32, where ONNX Runtime
// also quantizes the activations at each step: outputs agree within that quantization noise,
// not bit for bit, and the file holds f32 weights for the LSTM.
//
// QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool
// (channels_last = 0) and QLinearConcat (the QOperator form of ONNX Runtime's static
// quantizer): each becomes DequantizeLinear -> the float op -> QuantizeLinear, the semantics
// ONNX Runtime defines them by (it rounds inside its own integer kernels, so an output may be
// one quantum away).

#include "kiln/status.h"
#include "onnx/onnx_pb.h"

namespace kiln::exporter {

/// Rewrites the contrib ops above in place; returns how many nodes it rewrote. A contrib op
/// whose weights are not initializers stays (and is reported unsupported).
Result<size_t> rewrite_contrib_ops(onnx::GraphProto* graph);

}  // namespace kiln::exporter
