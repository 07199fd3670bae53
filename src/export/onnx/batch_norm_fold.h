#pragma once
// Folds inference-mode BatchNormalization into the Conv, ConvTranspose or Gemm that feeds
// it, when that producer's weights are initializers and the BN is its only reader.

#include "kiln/status.h"
#include "onnx/onnx_pb.h"

namespace kiln::exporter {

/// Rewrites `graph` in place; returns how many BatchNormalization nodes disappeared.
Result<size_t> fold_batch_norms(onnx::GraphProto* graph);

}  // namespace kiln::exporter
