#pragma once
// Pooling over channels-last activations, Kiln's own for every window (XNNPACK 2022's pooling
// operators clamp with x86 max/min: a NaN came out of its max pooling as +Inf and out of its
// average poolings as -Inf). NaN is kept: it wins a max and spreads through a sum, and the
// fused clamp keeps it.
// - max: each output pixel is the channel-wise max over its window's taps inside the input
//   (padding never wins); any window (ceil_mode, 1x1, strides past the window, dilation).
// - average: the mean over the taps inside the input (count_include_pad = 0; the planner
//   declines padding that counts).
// - global average: the mean over all pixels of each image.

#include <cmath>
#include <cstddef>
#include <cstdint>

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::delegates::xnnpack {

struct PoolGeometry {
  size_t batch = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0, channels = 0;
  size_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  float out_min = -INFINITY, out_max = INFINITY;
};

/// x [N, H, W, C] -> y [N, OH, OW, C]. Never allocates; threads over output rows.
void max_pool_nhwc(const PoolGeometry& g, const float* x, float* y, pthreadpool_t pool);

/// x [N, H, W, C] -> y [N, OH, OW, C], each the sum of its taps divided by their count (no
/// dilation). Never allocates; threads over output rows.
void average_pool_nhwc(const PoolGeometry& g, const float* x, float* y, pthreadpool_t pool);

/// x [N, pixels, C] -> y [N, C]: the sum over the pixels in order, divided by their count, then
/// clamped to [lo, hi]. Never allocates; threads over images and blocks of channels.
void global_average_pool_nwc(const float* x, float* y, size_t n, size_t pixels, size_t c, float lo, float hi,
                             pthreadpool_t pool);

}  // namespace kiln::delegates::xnnpack
