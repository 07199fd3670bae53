#include "delegates/xnnpack/max_pool_nhwc.h"

#include <pthreadpool.h>

#include <algorithm>

#include "kernels/kernel.h"

namespace kiln::delegates::xnnpack {

namespace {

struct Job {
  const MaxPoolGeometry* g;
  const float* x;
  float* y;
};

// Output row `row` (n * OH + oh).
void pool_row(void* ctx, size_t row) {
  const Job& j = *static_cast<const Job*>(ctx);
  const MaxPoolGeometry& g = *j.g;
  const size_t n = row / g.out_h, oh = row % g.out_h, c = g.channels;
  for (size_t ow = 0; ow < g.out_w; ++ow) {
    float* out = j.y + (row * g.out_w + ow) * c;
    std::fill(out, out + c, -INFINITY);
    for (size_t kh = 0; kh < g.kernel_h; ++kh) {
      const int64_t ih = static_cast<int64_t>(oh * g.stride_h + kh * g.dilation_h) - g.pad_top;
      if (ih < 0 || ih >= static_cast<int64_t>(g.in_h)) continue;
      for (size_t kw = 0; kw < g.kernel_w; ++kw) {
        const int64_t iw = static_cast<int64_t>(ow * g.stride_w + kw * g.dilation_w) - g.pad_left;
        if (iw < 0 || iw >= static_cast<int64_t>(g.in_w)) continue;
        const float* in = j.x + ((n * g.in_h + static_cast<size_t>(ih)) * g.in_w + static_cast<size_t>(iw)) * c;
        for (size_t k = 0; k < c; ++k) out[k] = in[k] > out[k] || in[k] != in[k] ? in[k] : out[k];  // NaN wins
      }
    }
    for (size_t k = 0; k < c; ++k) out[k] = kernels::clamp_keep_nan(out[k], g.out_min, g.out_max);
  }
}

}  // namespace

void max_pool_nhwc(const MaxPoolGeometry& g, const float* x, float* y, pthreadpool_t pool) {
  Job j{&g, x, y};
  pthreadpool_parallelize_1d(pool, pool_row, &j, g.batch * g.out_h, 0);
}

}  // namespace kiln::delegates::xnnpack
