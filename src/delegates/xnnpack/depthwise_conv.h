#pragma once
// Kiln's own depthwise NHWC convolution (group = input channels = output channels) for the
// delegate, any kernel size: XNNPACK 2022 has depthwise microkernels only for a few window
// sizes (others fall back to a grouped GEMM: ConvNeXt's 7x7 took 2.4 ms for 20x20x96), and
// XNNPACK keeps the window sizes it has microkernels for (2x2, 3x3, 5x5; 21-25 GFLOP/s here).
// Groups of four output pixels whose windows lie inside the row share each weight vector
// (8 accumulators: 4 pixels x even and odd taps); edge pixels go in quads too, with a pointer
// per tap and pixel (zeros for the padding), or, in rows of fewer than four pixels, one at a
// time with a pointer per tap inside the input, four channel blocks at a time. 3x3 and 5x5
// windows take unrolled kernels (depthwise_unrolled.inc): runs of interior quads a channel block
// at a time with the block's weights loaded once, and edge quads with the padded taps left out.
// AVX-512 (16-channel blocks) or AVX2+FMA (8), chosen at run time (dense_conv_available()).

#include <cstddef>
#include <vector>

#include "delegates/xnnpack/dense_conv.h"

namespace kiln::delegates::xnnpack {

/// Weights [channel block][tap][lanes] and bias, packed at create; lanes = 16 for the AVX-512
/// row, else 8.
struct DepthwiseWeights {
  size_t channels = 0, padded = 0, kernel_h = 1, kernel_w = 1, lanes = 8;
  std::vector<float> w;
  std::vector<float> bias;
};

/// The channel block of the row in use: 16 with AVX-512, else 8.
size_t depthwise_lanes();

/// True when a kh x kw window fits the kernel's tap table.
bool depthwise_fits(size_t kh, size_t kw);

/// Packs ONNX weights [C, 1, KH, KW] and an optional bias [C].
void pack_depthwise(const float* w, const float* bias, size_t c, size_t kh, size_t kw, DepthwiseWeights* out);

/// y = clamp(depthwise(x) + bias), then the gate if any, a row at a time; geometry as for
/// dense_conv (in_stride = channels).
/// Never allocates; threads over output rows.
void depthwise_conv(const DepthwiseWeights& w, const DenseConvGeometry& g, const float* x, float* y, pthreadpool_t pool);

/// A depthwise layer (dw, dg) and the 1x1 stride-1 convolution that reads only its output (pw,
/// pg: pg's input dims are dg's output dims) in one pass: a few output rows at a time, the
/// depthwise rows into a worker's `scratch` (depthwise_pointwise_scratch_floats each, `slots`
/// workers at most), then the pointwise layer over those pixels from there into y (pg's
/// out_stride, clamp and gate apply). The depthwise output never goes to memory: it is as large
/// as the expansion it follows (MobileNetV2's 144 channels at 2x56x56: 3.6 MB written and read
/// back otherwise). Same results as the two layers one after the other. Never allocates.
void depthwise_pointwise(const DepthwiseWeights& dw, const DenseConvGeometry& dg, const DenseConvWeights& pw,
                         const DenseConvGeometry& pg, const float* x, float* y, float* scratch, size_t slots,
                         pthreadpool_t pool);
/// The floats of one worker's scratch for depthwise_pointwise at this geometry.
size_t depthwise_pointwise_scratch_floats(const DepthwiseWeights& w, const DenseConvGeometry& g);
/// Whether the pass pays at this geometry: the depthwise output would not stay in cache.
bool depthwise_pointwise_pays(const DepthwiseWeights& w, const DenseConvGeometry& g);

}  // namespace kiln::delegates::xnnpack
