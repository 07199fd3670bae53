#include "delegates/xnnpack/pool_nhwc.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <pthreadpool.h>

#include <algorithm>

#include "kernels/kernel.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/vbinary.h"

namespace kiln::delegates::xnnpack {

namespace {

struct Job {
  const PoolGeometry* g;
  const float* x;
  float* y;
};

// The input rows the next output row reads first (its lowest taps), fetched while this row
// computes: squeezenet's 3x3/2 pool over 4x159x159x64 read its input at a third of the memory
// bandwidth without it.
void prefetch_next(const Job& j, size_t n, size_t oh) {
  const PoolGeometry& g = *j.g;
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
  const PoolGeometry& g = *j.g;
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
  const PoolGeometry& g = *j.g;
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
// NV x 8 channels of one output pixel in registers; a NaN among a lane's taps is remembered
// apart (maxps keeps its second operand when either is NaN) and wins at the end. NV = 4 keeps
// four max chains in flight: one chain per 8 channels waited on maxps's latency tap by tap
// (resnet_small's 3x3/2 pool at 8x32x32x64: 2x ONNX Runtime's time).
template <size_t NV>
__attribute__((target("avx2"))) inline void pixel_vectors(const float* const* taps, size_t count, size_t k, __m256 lo,
                                                          __m256 hi, float* out) {
  __m256 m[NV], bad[NV];
  for (size_t v = 0; v < NV; ++v) m[v] = _mm256_set1_ps(-INFINITY), bad[v] = _mm256_setzero_ps();
  size_t t = 0;
  for (; t + 1 < count; t += 2)  // one unordered compare finds a NaN in either of two taps
    for (size_t v = 0; v < NV; ++v) {
      const __m256 x = _mm256_loadu_ps(taps[t] + k + 8 * v), y = _mm256_loadu_ps(taps[t + 1] + k + 8 * v);
      bad[v] = _mm256_or_ps(bad[v], _mm256_cmp_ps(x, y, _CMP_UNORD_Q));
      m[v] = _mm256_max_ps(y, _mm256_max_ps(x, m[v]));
    }
  if (t < count)
    for (size_t v = 0; v < NV; ++v) {
      const __m256 x = _mm256_loadu_ps(taps[t] + k + 8 * v);
      bad[v] = _mm256_or_ps(bad[v], _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
      m[v] = _mm256_max_ps(x, m[v]);
    }
  for (size_t v = 0; v < NV; ++v) {
    const __m256 r = _mm256_blendv_ps(m[v], _mm256_set1_ps(NAN), bad[v]);
    _mm256_storeu_ps(out + k + 8 * v, _mm256_min_ps(hi, _mm256_max_ps(lo, r)));  // NaN is the second operand: kept
  }
}

__attribute__((target("avx2"))) void row_avx2(const Job& j, size_t row) {
  const PoolGeometry& g = *j.g;
  const size_t n = row / g.out_h, oh = row % g.out_h, c = g.channels;
  prefetch_next(j, n, oh);
  // The taps of this row inside the input along h: offsets from the window's first column.
  // A pixel whose window lies inside along w adds its column to them (no per-tap tests).
  size_t offs[kMaxTaps], n_offs = 0;
  for (size_t kh = 0; kh < g.kernel_h; ++kh) {
    const int64_t ih = static_cast<int64_t>(oh * g.stride_h + kh * g.dilation_h) - g.pad_top;
    if (ih < 0 || ih >= static_cast<int64_t>(g.in_h)) continue;
    for (size_t kw = 0; kw < g.kernel_w; ++kw)
      offs[n_offs++] = ((n * g.in_h + static_cast<size_t>(ih)) * g.in_w + kw * g.dilation_w) * c;
  }
  const int64_t span_w = static_cast<int64_t>((g.kernel_w - 1) * g.dilation_w);
  const float* taps[kMaxTaps];
  const __m256 lo = _mm256_set1_ps(g.out_min), hi = _mm256_set1_ps(g.out_max);
  for (size_t ow = 0; ow < g.out_w; ++ow) {
    const int64_t iw0 = static_cast<int64_t>(ow * g.stride_w) - g.pad_left;
    size_t count = n_offs;
    if (iw0 >= 0 && iw0 + span_w < static_cast<int64_t>(g.in_w)) {
      const float* base = j.x + static_cast<size_t>(iw0) * c;
      for (size_t t = 0; t < n_offs; ++t) taps[t] = base + offs[t];
    } else {
      count = window(j, n, oh, ow, taps);
    }
    float* out = j.y + (row * g.out_w + ow) * c;
    size_t k = 0;
    for (; k + 32 <= c; k += 32) pixel_vectors<4>(taps, count, k, lo, hi, out);
    for (; k + 16 <= c; k += 16) pixel_vectors<2>(taps, count, k, lo, hi, out);
    for (; k + 8 <= c; k += 8) pixel_vectors<1>(taps, count, k, lo, hi, out);
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

// One output row of an average pooling: per pixel the taps summed in window order, then divided.
void average_row(void* ctx, size_t row) {
  const Job& j = *static_cast<const Job*>(ctx);
  const PoolGeometry& g = *j.g;
  const size_t n = row / g.out_h, oh = row % g.out_h, c = g.channels;
  for (size_t ow = 0; ow < g.out_w; ++ow) {
    float* out = j.y + (row * g.out_w + ow) * c;
    std::fill(out, out + c, 0.f);
    size_t count = 0;
    for_each_tap(j, n, oh, ow, [&](const float* in) {
      for (size_t k = 0; k < c; ++k) out[k] += in[k];
      ++count;
    });
    const float div = static_cast<float>(std::max<size_t>(count, 1));
    for (size_t k = 0; k < c; ++k) out[k] = kernels::clamp_keep_nan(out[k] / div, g.out_min, g.out_max);
  }
}

struct GlobalJob {
  const float* x;
  float* y;
  size_t pixels, c, block, blocks;  // each image's channels in `blocks` tasks of `block`
  float lo, hi;
};
constexpr size_t kSumChunk = 1024;  // channels summed per pass (the sums live on the stack)

void global_block(void* ctx, size_t t) {
  const GlobalJob& j = *static_cast<const GlobalJob*>(ctx);
  const size_t n = t / j.blocks, k_end = std::min(j.c, (t % j.blocks + 1) * j.block);
  const float div = static_cast<float>(j.pixels);
  for (size_t k0 = t % j.blocks * j.block; k0 < k_end; k0 += kSumChunk) {
    const size_t kc = std::min(kSumChunk, k_end - k0);
    float acc[kSumChunk];
    std::fill(acc, acc + kc, 0.f);
    simd::accumulate_rows(j.x + n * j.pixels * j.c + k0, j.c, j.pixels, kc, acc);
    float* y = j.y + n * j.c + k0;
    for (size_t k = 0; k < kc; ++k) y[k] = kernels::clamp_keep_nan(acc[k] / div, j.lo, j.hi);
  }
}

}  // namespace

void average_pool_nhwc(const PoolGeometry& g, const float* x, float* y, pthreadpool_t pool) {
  Job j{&g, x, y};
  pthreadpool_parallelize_1d(pool, average_row, &j, g.batch * g.out_h, 0);
}

void global_average_pool_nwc(const float* x, float* y, size_t n, size_t pixels, size_t c, float lo, float hi,
                             pthreadpool_t pool) {
  // Whole rows per task (contiguous reads) when there are images enough for the threads, else
  // each image's channels in up to four parts of whole cache lines (16 floats).
  const size_t parts = std::min<size_t>((4 + n - 1) / n, (c + 15) / 16);
  const size_t block = (c + parts - 1) / parts;
  const size_t aligned = parts > 1 ? (block + 15) / 16 * 16 : block;
  GlobalJob j{x, y, pixels, c, aligned, (c + aligned - 1) / aligned, lo, hi};
  pthreadpool_parallelize_1d(pool, global_block, &j, n * j.blocks, 0);
}

void max_pool_nhwc(const PoolGeometry& g, const float* x, float* y, pthreadpool_t pool) {
  Job j{&g, x, y};
  pthreadpool_parallelize_1d(pool, pool_row, &j, g.batch * g.out_h, 0);
}

}  // namespace kiln::delegates::xnnpack
