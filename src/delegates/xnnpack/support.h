#pragma once
// What the XNNPACK delegate takes, decided from an instruction's op, attributes and operands
// (dtypes, symbolic shapes, which operands are constants). Export calls it to partition;
// the runtime calls it again at create on the verified program to get the parameters it
// passes to xnn_create_*, so the two sides cannot disagree. No XNNPACK types here.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/symexpr.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::delegates::xnnpack {

/// One operand as the support check sees it.
struct Operand {
  bool present = true;
  DType dtype = DType::kF32;
  std::vector<core::ExprId> shape;
  const void* const_data = nullptr;  ///< contents when the operand is a constant
};

enum class OpKind : uint8_t {
  kConv,            ///< Conv 2-D (1-D as H = 1), grouped and depthwise
  kConvTranspose,   ///< ConvTranspose 2-D (1-D as H = 1), grouped
  kFullyConnected,  ///< Gemm / MatMul with a constant 2-D right operand
  kMaxPool,
  kAveragePool,
  kGlobalAveragePool,
  kBinary,   ///< Add Sub Mul Div Max Min, numpy broadcasting
  kUnary,    ///< pointwise activations and math
  kSoftmax,  ///< over the last axis, or over channels of a 4-D tensor (channels-last)
  kConcat,   ///< along channels of a 4-D tensor (channels-last)
  kBatchNorm,  ///< inference BatchNormalization: a per-channel affine map (Kiln's kernel)
  kResize,     ///< Resize of H and W, channels-last (the portable kernel's maths)
  kBatchMatMul,  ///< MatMul with a computed (or batched) right operand: Kiln's kernel, B read in place
  kLayerNorm,    ///< LayerNormalization over the last axis with constant Scale/B: Kiln's kernel
  kAttention,    ///< FusedAttention (export's fusion): Kiln's online-softmax kernel
  kPRelu,        ///< PRelu with a constant slope: one value, or per channel (axis 1) or last axis
  kQConv,        ///< QLinearConv: int8 activations and weights (qc8) or uint8 both (qu8)
  kChannelShuffle,  ///< ChannelShuffle (export's): a channel permutation per pixel (channels-last)
  kSlice,           ///< Slice of a static channel range of a 4-D tensor (channels-last)
};

/// Which layout the op computes in: channels-last (activations of rank >= 3 as NHWC twins),
/// plain row-major (as the portable kernels), or either (pointwise ops follow their inputs).
enum class Layout : uint8_t { kNhwc, kPlain, kEither };

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kMax, kMin };
/// kPortable: a pointwise op XNNPACK lacks, run by its portable kernel on the region's
/// buffers (pointwise ops do not care about layout), so it does not split a region.
/// kErf, kTanh, kGelu: Kiln's vectorized kernels (pointwise.h). kSquare: Pow(x, 2).
enum class UnaryOp : uint8_t { kClamp, kSigmoid, kHardSwish, kLeakyRelu, kElu, kAbs, kNeg, kFloor, kCeil, kSqrt, kRound,
                               kSquare, kErf, kTanh, kGelu, kPortable };

/// Everything xnn_create_* needs, decoded once from attributes and constant shapes.
struct OpPlan {
  OpKind kind = OpKind::kUnary;
  Layout layout = Layout::kEither;
  // Conv and pools: NHWC geometry (1-D ops have kernel_h = stride_h = dilation_h = 1).
  uint32_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  uint32_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  uint32_t groups = 1;
  bool same_upper = false;     ///< auto_pad SAME_UPPER: XNNPACK's TensorFlow SAME padding
  size_t group_in = 0, group_out = 0;  ///< conv channels per group
  uint32_t adjust_h = 0, adjust_w = 0;  ///< ConvTranspose output_padding
  size_t channels = 0;         ///< pools, softmax, PRelu, Slice: channels; fully connected: input channels
  size_t out_channels = 0;     ///< fully connected, Slice: output channels
  size_t first_channel = 0;    ///< Slice: the input channel output channel 0 reads
  bool transpose_weights = false;  ///< fully connected: weights stored [K, N]
  BinaryOp binary = BinaryOp::kAdd;
  UnaryOp unary = UnaryOp::kClamp;
  float alpha = 0.f;           ///< LeakyRelu/Elu alpha; BatchNorm/LayerNorm epsilon
  bool gelu_tanh = false;      ///< Gelu approximate = tanh
  float out_min = -INFINITY, out_max = INFINITY;  ///< clamp range (Relu, Clip, fused activations)
  double flops_per_output = 1;  ///< multiply-adds count 2
  /// Run by Kiln's own kernel instead of an XNNPACK operator (max pooling XNNPACK refuses:
  /// ceil_mode, 1x1 windows, strides past the window; portable pointwise ops).
  bool own_kernel = false;
};

/// Decides whether the delegate takes instruction `op`. Returns the plan, or an error whose
/// message is the reason it declines ("attribute 'ceil_mode' = 1 is not supported").
/// `exprs` is the method's expression table (constants are ExprOp::kConst nodes).
Result<OpPlan> plan_op(const std::string& op, core::Attrs attrs, const std::vector<Operand>& ins,
                       const std::vector<std::vector<core::ExprId>>& out_shapes, const core::ExprNode* exprs);

/// If `op` is an activation that can be folded into the output clamp of the op before it
/// (Relu, Clip with constant bounds), its [min, max]; otherwise an error.
Result<std::pair<float, float>> fusable_activation(const std::string& op, core::Attrs attrs,
                                                   const std::vector<Operand>& ins);

/// y = x * act(x) with act a Sigmoid (Swish/SiLU) or a HardSigmoid (hard swish).
struct Gate {
  bool hard = false;
  float alpha = 0.f, beta = 0.f;  ///< HardSigmoid's
};
/// If a Mul of x and `source_op`(x) can fold into that activation as one gate kernel, the
/// gate; otherwise an error. The caller checks that the Mul reads exactly x and act(x).
Result<Gate> fusable_gate(const std::string& source_op, core::Attrs source_attrs, const std::string& fused_op);

/// If an Add reading a fully connected layer's output `y` (operand `y_operand`, 0 or 1) and a
/// constant f32 vector of its out_channels (shape [N] or [1, ..., N], no longer than the
/// output's rank `out_rank`) can fold into that layer's bias, the vector; otherwise an error.
Result<const float*> fusable_bias(const OpPlan& fc, const std::string& op, const std::vector<Operand>& ins, int y_operand,
                                  size_t out_rank, const core::ExprNode* exprs);

/// True when the op kind takes a fused output clamp.
bool takes_clamp(OpKind k);

}  // namespace kiln::delegates::xnnpack
