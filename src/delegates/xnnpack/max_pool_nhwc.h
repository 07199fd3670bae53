#pragma once
// Max pooling over channels-last activations for the windows XNNPACK's operator refuses
// (ceil_mode = 1, 1x1 windows, strides larger than the window): each output pixel is the
// channel-wise max over its window's taps inside the input (padding never wins).

#include <cmath>
#include <cstddef>
#include <cstdint>

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::delegates::xnnpack {

struct MaxPoolGeometry {
  size_t batch = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0, channels = 0;
  size_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  float out_min = -INFINITY, out_max = INFINITY;
};

/// x [N, H, W, C] -> y [N, OH, OW, C]. Never allocates; threads over output rows.
void max_pool_nhwc(const MaxPoolGeometry& g, const float* x, float* y, pthreadpool_t pool);

}  // namespace kiln::delegates::xnnpack
