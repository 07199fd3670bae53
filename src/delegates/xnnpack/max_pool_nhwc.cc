#include "delegates/xnnpack/max_pool_nhwc.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <pthreadpool.h>

#include <algorithm>

#include "kernels/kernel.h"
#include "kernels/simd/isa.h"

namespace kiln::delegates::xnnpack {

namespace {

struct Job {
  const MaxPoolGeometry* g;
  const float* x;
  float* y;
};

// The input rows the next output row reads first (its lowest taps), fetched while this row
// computes: squeezenet's 3x3/2 pool over 4x159x159x64 read its input at a third of the memory
// bandwidth without it.
void prefetch_next(const Job& j, size_t n, size_t oh) {
  const MaxPoolGeometry& g = *j.g;
  if (oh + 1 >= g.out_h) return;
  const int64_t top = static_cast<int64_t>((oh + 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h) - g.pad_top;
  const int64_t from = std::max<int64_t>(0, top - static_cast<int64_t>(g.stride_h) + 1);
  for (int64_t ih = from; ih <= std::min<int64_t>(top, static_cast<int64_t>(g.in_h) - 1); ++ih) {
    const float* r = j.x + (n * g.in_h + static_cast<size_t>(ih)) * g.in_w * g.channels;
    for (size_t k = 0; k < g.in_w * g.channels; k += 64 / sizeof(float)) __builtin_prefetch(r + k);
  }
}

// Calls fn(pointer) for each tap of output pixel (oh, ow) inside the input (padding never wins).
template <typename Fn>
void for_each_tap(const Job& j, size_t n, size_t oh, size_t ow, Fn fn) {
  const MaxPoolGeometry& g = *j.g;
  for (size_t kh = 0; kh < g.kernel_h; ++kh) {
    const int64_t ih = static_cast<int64_t>(oh * g.stride_h + kh * g.dilation_h) - g.pad_top;
    if (ih < 0 || ih >= static_cast<int64_t>(g.in_h)) continue;
    for (size_t kw = 0; kw < g.kernel_w; ++kw) {
      const int64_t iw = static_cast<int64_t>(ow * g.stride_w + kw * g.dilation_w) - g.pad_left;
      if (iw < 0 || iw >= static_cast<int64_t>(g.in_w)) continue;
      fn(j.x + ((n * g.in_h + static_cast<size_t>(ih)) * g.in_w + static_cast<size_t>(iw)) * g.channels);
    }
  }
}

// The taps of output pixel (oh, ow) inside the input: their pointers.
size_t window(const Job& j, size_t n, size_t oh, size_t ow, const float** taps) {
  size_t count = 0;
  for_each_tap(j, n, oh, ow, [&](const float* in) { taps[count++] = in; });
  return count;
}

constexpr size_t kMaxTaps = 256;  // the vector row's tap table; larger windows take the plain row

// The channels [from, c) of one output pixel: NaN wins, then the clamp (which keeps NaN).
void pixel_tail(const float* const* taps, size_t count, size_t from, size_t c, float lo, float hi, float* out) {
  for (size_t k = from; k < c; ++k) {
    float m = -INFINITY;
    for (size_t t = 0; t < count; ++t) m = taps[t][k] > m || taps[t][k] != taps[t][k] ? taps[t][k] : m;
    out[k] = kernels::clamp_keep_nan(m, lo, hi);
  }
}

// Any window, tap by tap over the output pixel's channels.
void row_plain(const Job& j, size_t row) {
  const MaxPoolGeometry& g = *j.g;
  const size_t n = row / g.out_h, oh = row % g.out_h, c = g.channels;
  for (size_t ow = 0; ow < g.out_w; ++ow) {
    float* out = j.y + (row * g.out_w + ow) * c;
    std::fill(out, out + c, -INFINITY);
    for_each_tap(j, n, oh, ow, [&](const float* in) {
      for (size_t k = 0; k < c; ++k) out[k] = in[k] > out[k] || in[k] != in[k] ? in[k] : out[k];  // NaN wins
    });
    for (size_t k = 0; k < c; ++k) out[k] = kernels::clamp_keep_nan(out[k], g.out_min, g.out_max);
  }
}

#if defined(__x86_64__)
// Eight channels at a time in a register; a NaN among a lane's taps is remembered apart
// (maxps keeps its second operand when either is NaN) and wins at the end.
__attribute__((target("avx2"))) void row_avx2(const Job& j, size_t row) {
  const MaxPoolGeometry& g = *j.g;
  const size_t n = row / g.out_h, oh = row % g.out_h, c = g.channels;
  prefetch_next(j, n, oh);
  const float* taps[kMaxTaps];
  const __m256 lo = _mm256_set1_ps(g.out_min), hi = _mm256_set1_ps(g.out_max), nan = _mm256_set1_ps(NAN);
  for (size_t ow = 0; ow < g.out_w; ++ow) {
    const size_t count = window(j, n, oh, ow, taps);
    float* out = j.y + (row * g.out_w + ow) * c;
    size_t k = 0;
    for (; k + 8 <= c; k += 8) {
      __m256 m = _mm256_set1_ps(-INFINITY), bad = _mm256_setzero_ps();
      for (size_t t = 0; t < count; ++t) {
        const __m256 v = _mm256_loadu_ps(taps[t] + k);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        m = _mm256_max_ps(v, m);
      }
      m = _mm256_blendv_ps(m, nan, bad);
      _mm256_storeu_ps(out + k, _mm256_min_ps(hi, _mm256_max_ps(lo, m)));  // NaN is the second operand: kept
    }
    pixel_tail(taps, count, k, c, g.out_min, g.out_max, out);
  }
}
#endif

struct Impl {
  const char* name;
  bool (*available)();
  void (*row)(const Job&, size_t);
};
const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx2", simd::cpu_has_avx2, row_avx2},
#endif
    {"plain", [] { return true; }, row_plain}};

// Output row `row` (n * OH + oh).
void pool_row(void* ctx, size_t row) {
  static const Impl* impl = simd::pick_isa(kImpls);
  const Job& j = *static_cast<const Job*>(ctx);
  if (j.g->kernel_h * j.g->kernel_w > kMaxTaps) return row_plain(j, row);  // a window past the tap table
  impl->row(j, row);
}

}  // namespace

void max_pool_nhwc(const MaxPoolGeometry& g, const float* x, float* y, pthreadpool_t pool) {
  Job j{&g, x, y};
  pthreadpool_parallelize_1d(pool, pool_row, &j, g.batch * g.out_h, 0);
}

}  // namespace kiln::delegates::xnnpack
