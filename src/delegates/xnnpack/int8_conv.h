#pragma once
// Kiln's own int8 NHWC convolution and fully connected layer for the delegate (QLinearConv
// with groups = 1): weights packed once at create into panels of 16 output channels, each
// tile of output pixels gathered once into rows of 8-bit activations, then the quantized
// GEMM microkernel (kernels/simd/qgemm.h: AVX-512 VNNI, AVX2 or plain C++, chosen at run
// time). Any mix of int8/uint8 activations, weights and outputs, weight zero points and
// scales per channel; the same bytes as the portable QLinearConv.
//
// Why not XNNPACK's: the 2022 snapshot we link has no VNNI kernels, and its qc8 convolution
// ran slower than Kiln's own f32 kernels (bench/results/int8_bench.md); its qu8 path takes one
// weight scale only, so ONNX Runtime's default uint8 per-channel models did not delegate.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "delegates/xnnpack/dense_conv.h"

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::delegates::xnnpack {

/// What the packer reads: ONNX QLinearConv weights [M, C, KH, KW] (or, with `transposed_fc`, a
/// [C, M] matrix and KH = KW = 1) and the quantization around them.
struct Int8ConvSpec {
  const uint8_t* w = nullptr;  ///< bytes of int8 or uint8 weights
  bool w_signed = true, x_signed = true;
  const int32_t* bias = nullptr;  ///< [M] or null
  const int32_t* w_zero = nullptr;  ///< [M] (a per-tensor zero point repeated)
  const float* w_scale = nullptr;   ///< [M] (likewise)
  float x_scale = 1.f, y_scale = 1.f;
  int32_t x_zero = 0, y_zero = 0, lo = -128, hi = 127;  ///< lo/hi: the output clamp
  size_t m = 0, c = 0, kh = 1, kw = 1;
  bool transposed_fc = false;
};

/// True when the kernel takes C input channels and a kh x kw window (K = C*kh*kw bounded:
/// a tile's activations live on the stack).
bool int8_conv_fits(size_t c, size_t kh, size_t kw);

/// Packed weights and the per-channel epilogue (qgemm.h), padded to whole panels.
struct Int8ConvWeights {
  size_t out_channels = 0, in_channels = 0, kernel_h = 1, kernel_w = 1, k = 0, kp = 0;
  bool a_unsigned = true;  ///< activations are the microkernel's u8 operand
  uint8_t a_xor = 0;       ///< 0x80 where an activation's top bit is flipped to fit that operand
  bool x_signed = true;
  std::vector<uint8_t> panels;
  std::vector<int32_t> bias, w_zero;  ///< w_zero empty when every weight zero point is 0
  std::vector<float> ratio;
  std::vector<uint8_t> zero;  ///< in_channels bytes of x's zero point: what a padded tap reads
  int32_t y_zero = 0, lo = -128, hi = 127;
};

void pack_int8_conv(const Int8ConvSpec& s, Int8ConvWeights* out);

/// y = requantize(conv(x, w) + bias), x [N, H, W, C] and y [N, OH, OW, M] of 8-bit values.
/// Never allocates; threads over output tiles and channel panels.
void int8_conv(const Int8ConvWeights& w, const DenseConvGeometry& g, const uint8_t* x, uint8_t* y, pthreadpool_t pool);

/// Depthwise (one input and one output channel per group): weights minus their zero points
/// as int16, [channel blocks of 16][taps][16]; the bias with x's zero point folded in.
struct Int8DepthwiseWeights {
  size_t channels = 0, kernel_h = 1, kernel_w = 1;
  bool x_signed = true;
  std::vector<int16_t> w;
  std::vector<int32_t> bias;
  std::vector<float> ratio;
  std::vector<uint8_t> zero;  ///< channels bytes of x's zero point: what a padded tap reads
  int32_t y_zero = 0, lo = -128, hi = 127;
};

/// True when the kernel takes a kh x kw depthwise window.
bool int8_depthwise_fits(size_t kh, size_t kw);

/// Packs ONNX [C, 1, KH, KW] weights (s.m = C channels, s.c = 1).
void pack_int8_depthwise(const Int8ConvSpec& s, Int8DepthwiseWeights* out);

/// The depthwise convolution, x [N, H, W, C] and y [N, OH, OW, C]. Never allocates; threads
/// over output rows.
void int8_depthwise(const Int8DepthwiseWeights& w, const DenseConvGeometry& g, const uint8_t* x, uint8_t* y,
                    pthreadpool_t pool);

}  // namespace kiln::delegates::xnnpack
