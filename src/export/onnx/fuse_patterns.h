#pragma once
// Export-time fusion of the op chains torch writes for LayerNorm and GELU into one
// LayerNormalization or Gelu instruction each. Matching is on the ONNX graph, by op type,
// data flow, constant values and use counts only (every intermediate value is read by the
// chain alone), so it holds for every symbolic shape; what only shapes can tell (the
// normalized axis has as many elements as Scale; the scalar constants broadcast into x
// without adding axes) the importer checks on the symbolic shapes before it takes a
// candidate, and imports the chain node by node otherwise.
//
//   LayerNormalization (axis -1):  m = ReduceMean(x, [-1]); d = x - m; v = ReduceMean(d^2, [-1]);
//                                  y = d / Sqrt(v + eps) * Scale [+ B]
//   Gelu (approximate none):       x * 0.5 * (Erf(x / sqrt 2 | x * 1/sqrt 2) + 1)
//   Gelu (approximate tanh):       x * 0.5 * (Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)) + 1)
//   FusedAttention:                Softmax(post_ops(MatMul(Q, K^T) [* s | / s]), last axis) x V, the
//                                  post ops up to four Adds of a bias and Wheres with a scalar fill
//                                  (masked_fill), in the graph's order; a Transpose making K^T from
//                                  K (last two axes swapped) is read through when K^T has no other
//                                  reader, so K is not copied (a KV cache is concatenated once).
// The Gelu tails are matched in either order ((x * 0.5) * (..+1) or (x * (..+1)) * 0.5), x^3
// as x * (x * x) or Pow(x, 3), and d^2 as Pow(d, 2) or d * d.

#include <string>
#include <vector>

#include "core/attr_store.h"
#include "onnx/onnx_pb.h"

namespace kiln::exporter {

struct FusionCandidate {
  std::string op;                   ///< "LayerNormalization", "Gelu" or "FusedAttention"
  std::vector<int> nodes;           ///< graph node indices it replaces, ascending
  std::vector<std::string> inputs;  ///< the fused op's inputs (x; Scale, B; Q, K, V, post tensors)
  core::AttrStore attrs;            ///< the fused op's attributes
  std::string out;                  ///< the chain's output value
  // What the importer checks on symbolic shapes before taking the candidate:
  int64_t channels = 0;             ///< LayerNormalization: elements of Scale (and B)
  int const_rank = 0;               ///< Gelu: the highest rank among its scalar constants
  int64_t softmax_axis = -1;        ///< FusedAttention: the Softmax's axis (-1 or rank - 1)
};

/// A near-miss: a pattern's anchor (LayerNorm's Div by a Sqrt, Gelu's Erf or Tanh, an
/// attention's Softmax read by a MatMul) whose match stopped, with where and why.
struct FusionMiss {
  std::string op;   ///< the fused op it would have been
  int anchor = -1;  ///< graph node index the match started from
  int stop = -1;    ///< graph node index where it stopped
  std::string why;
};

/// Candidates in `graph` (main graph only), disjoint, in the order of their first node.
/// `opset`: the model's (Softmax before 13 flattens to 2-D: the last axis only when axis = -1).
/// `misses`, when given, receives the near-misses.
std::vector<FusionCandidate> find_fusions(const onnx::GraphProto& graph, int64_t opset,
                                          std::vector<FusionMiss>* misses = nullptr);

}  // namespace kiln::exporter
