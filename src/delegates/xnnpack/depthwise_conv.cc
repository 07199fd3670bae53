#include "delegates/xnnpack/depthwise_conv.h"

#include <immintrin.h>
#include <pthreadpool.h>

#include <algorithm>

namespace kiln::delegates::xnnpack {

namespace {

constexpr size_t kLanes = 8;
constexpr size_t kMaxTaps = 64;

struct Job {
  const DepthwiseWeights* w;
  const DenseConvGeometry* g;
  const float* x;
  float* y;
};

__attribute__((target("avx2,fma"))) __m256i tail_mask(size_t n) {
  alignas(32) static const int32_t bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + kLanes - n));
}

// One output pixel's 8 channels from `cb`: taps read through `taps` (a zero row for taps
// outside the input), weights [taps][8] for this block, two accumulators (even, odd taps)
// so the FMA chain is not latency bound. Full blocks use plain loads and stores (masked
// ones are slow on AMD); the last partial block is masked.
template <bool kMasked>
__attribute__((target("avx2,fma"))) inline void pixel_block(const float* const* taps, size_t n_taps, size_t cb,
                                                            const float* wb, const float* bias, float* y, __m256 lo,
                                                            __m256 hi, __m256i mask) {
  __m256 a0 = _mm256_loadu_ps(bias), a1 = _mm256_setzero_ps();
  size_t t = 0;
  for (; t + 1 < n_taps; t += 2) {
    if constexpr (kMasked) {
      a0 = _mm256_fmadd_ps(_mm256_maskload_ps(taps[t] + cb, mask), _mm256_loadu_ps(wb + t * kLanes), a0);
      a1 = _mm256_fmadd_ps(_mm256_maskload_ps(taps[t + 1] + cb, mask), _mm256_loadu_ps(wb + (t + 1) * kLanes), a1);
    } else {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(taps[t] + cb), _mm256_loadu_ps(wb + t * kLanes), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(taps[t + 1] + cb), _mm256_loadu_ps(wb + (t + 1) * kLanes), a1);
    }
  }
  if (t < n_taps) {
    const __m256 xv = kMasked ? _mm256_maskload_ps(taps[t] + cb, mask) : _mm256_loadu_ps(taps[t] + cb);
    a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(wb + t * kLanes), a0);
  }
  const __m256 v = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(a0, a1)));  // NaN stays NaN (second operand)
  if constexpr (kMasked) _mm256_maskstore_ps(y + cb, mask, v);
  else _mm256_storeu_ps(y + cb, v);
}

// One output row (n, oh) of every channel, pixel by pixel.
__attribute__((target("avx2,fma"))) void row(void* ctx, size_t index) {
  const Job& j = *static_cast<const Job*>(ctx);
  const DepthwiseWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t c = w.channels, n = index / g.out_h, oh = index % g.out_h, n_taps = w.kernel_h * w.kernel_w;
  const int64_t in_h = static_cast<int64_t>(g.in_h), in_w = static_cast<int64_t>(g.in_w);
  const __m256 lo = _mm256_set1_ps(g.out_min), hi = _mm256_set1_ps(g.out_max);
  const __m256i mask = tail_mask(c % kLanes ? c % kLanes : kLanes);
  const size_t full = c / kLanes * kLanes;
  const float* taps[kMaxTaps];
  for (size_t ow = 0; ow < g.out_w; ++ow) {
    for (size_t kh = 0; kh < w.kernel_h; ++kh) {
      const int64_t ih = static_cast<int64_t>(oh * g.stride_h + kh * g.dilation_h) - g.pad_top;
      for (size_t kw = 0; kw < w.kernel_w; ++kw) {
        const int64_t iw = static_cast<int64_t>(ow * g.stride_w + kw * g.dilation_w) - g.pad_left;
        const bool inside = ih >= 0 && ih < in_h && iw >= 0 && iw < in_w;
        taps[kh * w.kernel_w + kw] =
            inside ? j.x + ((n * g.in_h + static_cast<size_t>(ih)) * g.in_w + static_cast<size_t>(iw)) * c
                   : w.zero.data();
      }
    }
    float* y = j.y + (index * g.out_w + ow) * c;
    for (size_t cb = 0; cb < full; cb += kLanes)
      pixel_block<false>(taps, n_taps, cb, w.w.data() + cb * n_taps, w.bias.data() + cb, y, lo, hi, mask);
    if (full < c)
      pixel_block<true>(taps, n_taps, full, w.w.data() + full * n_taps, w.bias.data() + full, y, lo, hi, mask);
  }
}

}  // namespace

bool depthwise_fits(size_t kh, size_t kw) { return kh * kw <= kMaxTaps; }

void pack_depthwise(const float* w, const float* bias, size_t c, size_t kh, size_t kw, DepthwiseWeights* out) {
  const size_t taps = kh * kw;
  out->channels = c;
  out->padded = (c + kLanes - 1) / kLanes * kLanes;
  out->kernel_h = kh;
  out->kernel_w = kw;
  out->w.assign(out->padded * taps, 0.f);  // [channel block][tap][8]
  out->bias.assign(out->padded, 0.f);
  out->zero.assign(out->padded, 0.f);
  for (size_t ch = 0; ch < c; ++ch) {
    if (bias) out->bias[ch] = bias[ch];
    for (size_t t = 0; t < taps; ++t) out->w[(ch / kLanes * taps + t) * kLanes + ch % kLanes] = w[ch * taps + t];
  }
}

void depthwise_conv(const DepthwiseWeights& w, const DenseConvGeometry& g, const float* x, float* y, pthreadpool_t pool) {
  Job j{&w, &g, x, y};
  if (w.channels == 0) return;
  pthreadpool_parallelize_1d(pool, row, &j, g.batch * g.out_h, 0);
}

}  // namespace kiln::delegates::xnnpack
