#include "delegates/xnnpack/depthwise_conv.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <pthreadpool.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "delegates/xnnpack/support.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/vmath.h"

namespace kiln::delegates::xnnpack {

namespace {

constexpr size_t kLanes = 8;
constexpr size_t kMaxTaps = 64;
constexpr size_t kPrefetchPixels = 8;
constexpr size_t kWideChannels = 64;
// Input bytes a run of quads may span (its kernel rows) before it is cut in chunks, each chunk
// taking every channel block in turn while its rows stay in L1: long chunks where the layer's
// input is in cache (mnasnet's 16-48 channels at 32x32-64x64, batch 2: 10-15% faster than 4 KB
// chunks), short ones where it streams from memory on the AVX-512 row (efficientnet_b0's 32
// channels at 4x160x160 on Intel: 24 KB chunks took 1.23x the time of 4 KB ones, a quad at a time
// 1.05x). The AVX2 row prefetches instead (quads_avx2).
constexpr size_t kRunBytesCached = 24 * 1024, kRunBytesStreamed = 4 * 1024;
constexpr size_t kCachedInputBytes = 1 << 20;

// Depthwise then pointwise through a worker's scratch (depthwise_pointwise): tasks of about
// kFusedPixels pixels (96 left the pointwise GEMM's per-call work too short: MobileNetV2's
// 144-channel 2x56x56 pair 0.98 of the two layers, 384 0.64-0.75), at most kFusedScratchBytes of
// depthwise output (it stays in L2 for the pointwise pass), where the depthwise output is at
// least kFusedMinBytes (its 384-channel 2x14x14 pairs, 0.6 MB, ran 1.06x the two layers: that
// output stays in cache between them anyway).
constexpr size_t kFusedPixels = 384, kFusedScratchBytes = 192 << 10, kFusedMinBytes = 1 << 20;

// Which of an edge quad's taps read inside the input: kw_of[t] is tap t's kernel column, and bit p
// of cols[kw] is set when pixel p's column kw is inside. The quad kernels load the others with an
// all-zero mask (no memory is touched: masked loads suppress faults) or, in plain C++, skip them.
struct EdgeCols {
  const uint8_t* kw_of;
  uint8_t cols[kMaxTaps];
};

// Edge quads whose padded columns follow a SAME window's pattern (kernel column kw of pixel k
// over the padding where k + kw < P at the row's start, k + kw > 3 + P at its end, P = (KW - 1)
// / 2): those taps are left out at compile time. Any other edge quad takes a mask per column and
// pixel (kEdgeMasks).
enum EdgeSide : int { kEdgeMasks = 0, kEdgeLeft = 1, kEdgeRight = 2 };

template <int kSide, size_t KW>
constexpr bool edge_tap_inside(size_t t, size_t k) {
  const size_t kw = t % KW, P = (KW - 1) / 2;
  return kSide == kEdgeMasks || (kSide == kEdgeLeft ? k + kw >= P : k + kw <= 3 + P);
}

// Calls f(T, KW) (as integral constants) when n_taps taps of a kw-column kernel have an unrolled
// kernel: 3x3 and 5x5 windows, all their rows inside or some (the image's top and bottom rows).
template <typename F>
bool with_unrolled(size_t kw, size_t n_taps, F&& f) {
  using std::integral_constant;
  if (kw == 3) {
    switch (n_taps) {
      case 3: return f(integral_constant<size_t, 3>{}, integral_constant<size_t, 3>{}), true;
      case 6: return f(integral_constant<size_t, 6>{}, integral_constant<size_t, 3>{}), true;
      case 9: return f(integral_constant<size_t, 9>{}, integral_constant<size_t, 3>{}), true;
      default: return false;
    }
  }
  if (kw == 5) {
    switch (n_taps) {
      case 5: return f(integral_constant<size_t, 5>{}, integral_constant<size_t, 5>{}), true;
      case 10: return f(integral_constant<size_t, 10>{}, integral_constant<size_t, 5>{}), true;
      case 15: return f(integral_constant<size_t, 15>{}, integral_constant<size_t, 5>{}), true;
      case 20: return f(integral_constant<size_t, 20>{}, integral_constant<size_t, 5>{}), true;
      case 25: return f(integral_constant<size_t, 25>{}, integral_constant<size_t, 5>{}), true;
      default: return false;
    }
  }
  return false;
}

struct Job {
  const DepthwiseWeights* w;
  const DenseConvGeometry* g;
  const float* x;
  float* y;               // output row first_row's first pixel
  size_t first_row = 0;
};

// One output pixel, every channel: taps[t] points at the pixel's t-th tap inside the input (C
// values) with the weights of tap ids[t] (taps over padding are left out, as the quad path and
// the dense kernels leave them out), weights [channel block of 8][tap][8], y the pixel's C
// outputs.
using PixelFn = void (*)(const float* const* taps, const uint8_t* ids, size_t n_taps, size_t c,
                         const DepthwiseWeights& w, float* y, float lo, float hi);

void pixel_plain(const float* const* taps, const uint8_t* ids, size_t n_taps, size_t c, const DepthwiseWeights& w,
                 float* y, float lo, float hi) {
  const size_t all = w.kernel_h * w.kernel_w, lanes = w.lanes;
  for (size_t ch = 0; ch < c; ++ch) {
    const float* wb = w.w.data() + ch / lanes * lanes * all + ch % lanes;
    float a0 = w.bias[ch], a1 = 0.f;  // even and odd taps, as the vector code sums them
    size_t t = 0;
    for (; t + 1 < n_taps; t += 2)
      a0 += taps[t][ch] * wb[ids[t] * lanes], a1 += taps[t + 1][ch] * wb[ids[t + 1] * lanes];
    if (t < n_taps) a0 += taps[t][ch] * wb[ids[t] * lanes];
    const float v = a0 + a1;
    y[ch] = std::isnan(v) ? v : std::min(hi, std::max(lo, v));
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) __m256i tail_mask(size_t n) {
  alignas(32) static const int32_t bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + kLanes - n));
}

// One output pixel's channels cb .. cb + 8 NB: taps read through `taps`, weights [taps][8]
// per block (blocks `stride` floats apart), two accumulators per block (even, odd taps).
// NB = 4 keeps 8 FMA chains in flight: an edge pixel's one chain per block waited on the
// FMA's latency (5x5 depthwise on 8x8 maps, all edge: 21 GFLOP/s). Full blocks use plain
// loads and stores (masked ones are slow on AMD); the last partial block is masked (NB = 1).
template <size_t NB, bool kMasked>
__attribute__((target("avx2,fma"))) inline void pixel_block(const float* const* taps, const uint8_t* ids,
                                                            size_t n_taps, size_t cb, const float* wb, size_t stride,
                                                            const float* bias, float* y, __m256 lo, __m256 hi,
                                                            __m256i mask) {
  __m256 a[NB], e[NB];
  for (size_t b = 0; b < NB; ++b) a[b] = _mm256_loadu_ps(bias + b * kLanes), e[b] = _mm256_setzero_ps();
#define KILN_DW_LOAD(p) (kMasked ? _mm256_maskload_ps((p), mask) : _mm256_loadu_ps(p))
  size_t t = 0;
  for (; t + 1 < n_taps; t += 2) {
    const float* p = taps[t] + cb;
    const float* q = taps[t + 1] + cb;
    const float* wp = wb + ids[t] * kLanes;
    const float* wq = wb + ids[t + 1] * kLanes;
    for (size_t b = 0; b < NB; ++b) {
      a[b] = _mm256_fmadd_ps(KILN_DW_LOAD(p + b * kLanes), _mm256_loadu_ps(wp + b * stride), a[b]);
      e[b] = _mm256_fmadd_ps(KILN_DW_LOAD(q + b * kLanes), _mm256_loadu_ps(wq + b * stride), e[b]);
    }
  }
  if (t < n_taps) {
    const float* p = taps[t] + cb;
    const float* wp = wb + ids[t] * kLanes;
    for (size_t b = 0; b < NB; ++b)
      a[b] = _mm256_fmadd_ps(KILN_DW_LOAD(p + b * kLanes), _mm256_loadu_ps(wp + b * stride), a[b]);
  }
#undef KILN_DW_LOAD
  for (size_t b = 0; b < NB; ++b) {
    const __m256 v = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(a[b], e[b])));  // NaN stays NaN (second operand)
    if constexpr (kMasked) _mm256_maskstore_ps(y + cb + b * kLanes, mask, v);
    else _mm256_storeu_ps(y + cb + b * kLanes, v);
  }
}

__attribute__((target("avx2,fma"))) void pixel_avx2(const float* const* taps, const uint8_t* ids, size_t n_taps,
                                                   size_t c, const DepthwiseWeights& w, float* y, float lo_s,
                                                   float hi_s) {
  const __m256 lo = _mm256_set1_ps(lo_s), hi = _mm256_set1_ps(hi_s);
  const __m256i mask = tail_mask(c % kLanes ? c % kLanes : kLanes);
  const size_t full = c / kLanes * kLanes, stride = w.kernel_h * w.kernel_w * kLanes;
  size_t cb = 0;
  for (; cb + 4 * kLanes <= full; cb += 4 * kLanes)
    pixel_block<4, false>(taps, ids, n_taps, cb, w.w.data() + cb / kLanes * stride, stride, w.bias.data() + cb, y, lo,
                          hi, mask);
  for (; cb < full; cb += kLanes)
    pixel_block<1, false>(taps, ids, n_taps, cb, w.w.data() + cb / kLanes * stride, stride, w.bias.data() + cb, y, lo,
                          hi, mask);
  if (full < c)
    pixel_block<1, true>(taps, ids, n_taps, full, w.w.data() + full / kLanes * stride, stride, w.bias.data() + full, y,
                         lo, hi, mask);
}

// Four output pixels side by side (the window of each inside the input along the row): tap t
// of pixel p reads base + offs[t] + p * step, with the weights of tap ids[t] (taps whose
// input row is outside are left out). 8 accumulators (4 pixels x even and odd taps) keep
// both FMA pipes busy, and each weight vector is loaded once for the four pixels: XNNPACK
// 2022's unipass kernels and the one-pixel path above hold one pixel's chain of 9 or 25
// dependent FMAs (latency bound: 21-25 GFLOP/s).
template <bool kMasked, bool kEdge>
__attribute__((target("avx2,fma"))) inline void quad_block(const float* base, const size_t* offs, const EdgeCols* edge,
                                                           const uint8_t* ids, size_t n_taps, size_t step, size_t cb,
                                                           const float* wb, const float* bias, float* y, size_t c,
                                                           __m256 lo, __m256 hi, __m256i mask) {
  const __m256i all = kMasked ? mask : _mm256_set1_epi32(-1);
#define KILN_DW_AT(t, k) (base + offs[t] + cb + (k) * step)
#define KILN_DW_LOAD_AT(t, k)                                                                                           \
  (kEdge ? _mm256_maskload_ps(KILN_DW_AT(t, k),                                                                       \
                              _mm256_and_si256(all, _mm256_set1_epi32(-((edge->cols[edge->kw_of[t]] >> (k)) & 1)))) \
   : kMasked ? _mm256_maskload_ps(KILN_DW_AT(t, k), mask)                                                              \
             : _mm256_loadu_ps(KILN_DW_AT(t, k)))
#define KILN_DW_LOAD(p) (p)
  __m256 a0 = _mm256_loadu_ps(bias), a1 = a0, a2 = a0, a3 = a0;
  __m256 e0 = _mm256_setzero_ps(), e1 = e0, e2 = e0, e3 = e0;
  size_t t = 0;
  for (; t + 1 < n_taps; t += 2) {
    const __m256 w0 = _mm256_loadu_ps(wb + ids[t] * kLanes), w1 = _mm256_loadu_ps(wb + ids[t + 1] * kLanes);
    a0 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t, 0), w0, a0);
    a1 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t, 1), w0, a1);
    a2 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t, 2), w0, a2);
    a3 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t, 3), w0, a3);
    e0 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t + 1, 0), w1, e0);
    e1 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t + 1, 1), w1, e1);
    e2 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t + 1, 2), w1, e2);
    e3 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t + 1, 3), w1, e3);
  }
  if (t < n_taps) {
    const __m256 w0 = _mm256_loadu_ps(wb + ids[t] * kLanes);
    a0 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t, 0), w0, a0);
    a1 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t, 1), w0, a1);
    a2 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t, 2), w0, a2);
    a3 = _mm256_fmadd_ps(KILN_DW_LOAD_AT(t, 3), w0, a3);
  }
#undef KILN_DW_LOAD_AT
#undef KILN_DW_AT
#undef KILN_DW_LOAD
  const __m256 v[4] = {_mm256_add_ps(a0, e0), _mm256_add_ps(a1, e1), _mm256_add_ps(a2, e2), _mm256_add_ps(a3, e3)};
  for (size_t p = 0; p < 4; ++p) {
    const __m256 o = _mm256_min_ps(hi, _mm256_max_ps(lo, v[p]));  // NaN stays NaN (second operand)
    if constexpr (kMasked) _mm256_maskstore_ps(y + p * c + cb, mask, o);
    else _mm256_storeu_ps(y + p * c + cb, o);
  }
}

namespace avx2 {
#define KILN_DW_TARGET __attribute__((target("avx2,fma")))
using V = __m256;
using M = __m256i;
constexpr size_t kL = kLanes;
KILN_DW_TARGET inline V v_load(const float* p) { return _mm256_loadu_ps(p); }
KILN_DW_TARGET inline V v_loadm(M m, const float* p) { return _mm256_maskload_ps(p, m); }
KILN_DW_TARGET inline void v_store(float* p, V v) { _mm256_storeu_ps(p, v); }
KILN_DW_TARGET inline void v_storem(float* p, M m, V v) { _mm256_maskstore_ps(p, m, v); }
KILN_DW_TARGET inline V v_fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
KILN_DW_TARGET inline V v_set1(float s) { return _mm256_set1_ps(s); }
KILN_DW_TARGET inline V v_zero() { return _mm256_setzero_ps(); }
KILN_DW_TARGET inline V v_add(V a, V b) { return _mm256_add_ps(a, b); }
KILN_DW_TARGET inline V v_clamp(V v, V lo, V hi) { return _mm256_min_ps(hi, _mm256_max_ps(lo, v)); }
KILN_DW_TARGET inline M m_tail(size_t n) { return tail_mask(n); }
KILN_DW_TARGET inline M m_none() { return _mm256_setzero_si256(); }
#include "delegates/xnnpack/depthwise_unrolled.inc"
#undef KILN_DW_TARGET
}  // namespace avx2

__attribute__((target("avx2,fma"))) void quad_avx2(const float* base, const size_t* offs, const EdgeCols* edge,
                                                  const uint8_t* ids, size_t n_taps, size_t step, size_t c,
                                                  const DepthwiseWeights& w, float* y, float lo_s, float hi_s) {
  const __m256 lo = _mm256_set1_ps(lo_s), hi = _mm256_set1_ps(hi_s);
  const __m256i mask = tail_mask(c % kLanes ? c % kLanes : kLanes);
  const size_t full = c / kLanes * kLanes, taps = w.kernel_h * w.kernel_w;
  if (edge && avx2::edge_unrolled(base, offs, *edge, ids, n_taps, step, c, w, y, lo_s, hi_s)) return;
  if (edge) {
    for (size_t cb = 0; cb < full; cb += kLanes)
      quad_block<false, true>(base, offs, edge, ids, n_taps, step, cb, w.w.data() + cb * taps, w.bias.data() + cb, y,
                              c, lo, hi, mask);
    if (full < c)
      quad_block<true, true>(base, offs, edge, ids, n_taps, step, full, w.w.data() + full * taps,
                             w.bias.data() + full, y, c, lo, hi, mask);
    return;
  }
  // The last input row's pixels two quads ahead (prefetch never faults): the order in which
  // four pixels' channel blocks are read is not one the hardware prefetcher follows
  // (4x80x80x144, 3x3 from memory: 3.97 -> 3.07 ms).
  if (n_taps > 0)
    for (size_t b = 0; b < 4 * step * sizeof(float); b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(base + offs[n_taps - 1] + kPrefetchPixels * step) + b, _MM_HINT_T0);
  for (size_t cb = 0; cb < full; cb += kLanes)
    quad_block<false, false>(base, offs, edge, ids, n_taps, step, cb, w.w.data() + cb * taps, w.bias.data() + cb, y, c,
                             lo, hi, mask);
  if (full < c)
    quad_block<true, false>(base, offs, edge, ids, n_taps, step, full, w.w.data() + full * taps, w.bias.data() + full,
                            y, c, lo, hi, mask);
}

// Runs of interior quads: the unrolled kernels for 3x3 and 5x5 windows, else a quad at a time.
__attribute__((target("avx2,fma"))) void quads_avx2(const float* base, const size_t* offs, const uint8_t* ids,
                                                   size_t n_taps, size_t step, size_t c, const DepthwiseWeights& w,
                                                   float* y, float lo, float hi, size_t count, bool streamed) {
  // Long chunks from memory too, the next pixels prefetched (2x56x56x48 and 2x112x112x32: 0.87
  // and 0.83x the time of 4 KB chunks; 12 KB and 48 KB chunks no faster).
  if (avx2::quads_unrolled(base, offs, ids, n_taps, step, c, w, y, lo, hi, count, kRunBytesCached, streamed))
    return;
  for (size_t q = 0; q < count; ++q)
    quad_avx2(base + q * 4 * step, offs, nullptr, ids, n_taps, step, c, w, y + q * 4 * c, lo, hi);
}

// The AVX-512 row: the same two kernels on 16-channel blocks (weights packed [block of 16]
// [tap][16]); the last partial block is a masked load and store (k-masks, no penalty). GCC 12
// warns inside its own AVX-512 headers (_mm512_undefined_ps), as in dense_conv.cc.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define KILN_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))
constexpr size_t kLanes512 = 16;

KILN_AVX512 inline __mmask16 mask512(size_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

namespace avx512 {
#define KILN_DW_TARGET KILN_AVX512
using V = __m512;
using M = __mmask16;
constexpr size_t kL = kLanes512;
KILN_DW_TARGET inline V v_load(const float* p) { return _mm512_loadu_ps(p); }
KILN_DW_TARGET inline V v_loadm(M m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
KILN_DW_TARGET inline void v_store(float* p, V v) { _mm512_storeu_ps(p, v); }
KILN_DW_TARGET inline void v_storem(float* p, M m, V v) { _mm512_mask_storeu_ps(p, m, v); }
KILN_DW_TARGET inline V v_fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
KILN_DW_TARGET inline V v_set1(float s) { return _mm512_set1_ps(s); }
KILN_DW_TARGET inline V v_zero() { return _mm512_setzero_ps(); }
KILN_DW_TARGET inline V v_add(V a, V b) { return _mm512_add_ps(a, b); }
KILN_DW_TARGET inline V v_clamp(V v, V lo, V hi) { return _mm512_min_ps(hi, _mm512_max_ps(lo, v)); }
KILN_DW_TARGET inline M m_tail(size_t n) { return static_cast<M>((1u << n) - 1u); }
KILN_DW_TARGET inline M m_none() { return 0; }
#include "delegates/xnnpack/depthwise_unrolled.inc"
#undef KILN_DW_TARGET
}  // namespace avx512

template <size_t NB, bool kMasked>
KILN_AVX512 inline void pixel_block512(const float* const* taps, const uint8_t* ids, size_t n_taps, size_t cb,
                                       const float* wb, size_t stride, const float* bias, float* y, __m512 lo,
                                       __m512 hi, __mmask16 mask) {
  __m512 a[NB], e[NB];
  for (size_t b = 0; b < NB; ++b) a[b] = _mm512_loadu_ps(bias + b * kLanes512), e[b] = _mm512_setzero_ps();
#define KILN_DW_LOAD(p) (kMasked ? _mm512_maskz_loadu_ps(mask, (p)) : _mm512_loadu_ps(p))
  size_t t = 0;
  for (; t + 1 < n_taps; t += 2) {
    const float* p = taps[t] + cb;
    const float* q = taps[t + 1] + cb;
    const float* wp = wb + ids[t] * kLanes512;
    const float* wq = wb + ids[t + 1] * kLanes512;
    for (size_t b = 0; b < NB; ++b) {
      a[b] = _mm512_fmadd_ps(KILN_DW_LOAD(p + b * kLanes512), _mm512_loadu_ps(wp + b * stride), a[b]);
      e[b] = _mm512_fmadd_ps(KILN_DW_LOAD(q + b * kLanes512), _mm512_loadu_ps(wq + b * stride), e[b]);
    }
  }
  if (t < n_taps) {
    const float* p = taps[t] + cb;
    const float* wp = wb + ids[t] * kLanes512;
    for (size_t b = 0; b < NB; ++b)
      a[b] = _mm512_fmadd_ps(KILN_DW_LOAD(p + b * kLanes512), _mm512_loadu_ps(wp + b * stride), a[b]);
  }
#undef KILN_DW_LOAD
  for (size_t b = 0; b < NB; ++b) {
    const __m512 v = _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_add_ps(a[b], e[b])));  // NaN stays NaN (second operand)
    if constexpr (kMasked) _mm512_mask_storeu_ps(y + cb + b * kLanes512, mask, v);
    else _mm512_storeu_ps(y + cb + b * kLanes512, v);
  }
}

KILN_AVX512 void pixel_avx512(const float* const* taps, const uint8_t* ids, size_t n_taps, size_t c,
                              const DepthwiseWeights& w, float* y, float lo_s, float hi_s) {
  const __m512 lo = _mm512_set1_ps(lo_s), hi = _mm512_set1_ps(hi_s);
  const __mmask16 mask = mask512(c % kLanes512);
  const size_t full = c / kLanes512 * kLanes512, stride = w.kernel_h * w.kernel_w * kLanes512;
  size_t cb = 0;
  for (; cb + 2 * kLanes512 <= full; cb += 2 * kLanes512)
    pixel_block512<2, false>(taps, ids, n_taps, cb, w.w.data() + cb / kLanes512 * stride, stride, w.bias.data() + cb,
                             y, lo, hi, mask);
  for (; cb < full; cb += kLanes512)
    pixel_block512<1, false>(taps, ids, n_taps, cb, w.w.data() + cb / kLanes512 * stride, stride, w.bias.data() + cb,
                             y, lo, hi, mask);
  if (full < c)
    pixel_block512<1, true>(taps, ids, n_taps, full, w.w.data() + full / kLanes512 * stride, stride,
                            w.bias.data() + full, y, lo, hi, mask);
}

template <bool kMasked, bool kEdge>
KILN_AVX512 inline void quad_block512(const float* base, const size_t* offs, const EdgeCols* edge, const uint8_t* ids,
                                      size_t n_taps, size_t step, size_t cb, const float* wb, const float* bias,
                                      float* y, size_t c, __m512 lo, __m512 hi, __mmask16 mask) {
  const unsigned all = kMasked ? mask : 0xFFFFu;
#define KILN_DW_AT(t, k) (base + offs[t] + cb + (k) * step)
#define KILN_DW_LOAD_AT(t, k)                                                                                 \
  (kEdge ? _mm512_maskz_loadu_ps(static_cast<__mmask16>(all & -((edge->cols[edge->kw_of[t]] >> (k)) & 1u)), \
                                 KILN_DW_AT(t, k))                                                           \
   : kMasked ? _mm512_maskz_loadu_ps(mask, KILN_DW_AT(t, k))                                                 \
             : _mm512_loadu_ps(KILN_DW_AT(t, k)))
#define KILN_DW_LOAD(p) (p)
  __m512 a0 = _mm512_loadu_ps(bias), a1 = a0, a2 = a0, a3 = a0;
  __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0;
  size_t t = 0;
  for (; t + 1 < n_taps; t += 2) {
    const __m512 w0 = _mm512_loadu_ps(wb + ids[t] * kLanes512), w1 = _mm512_loadu_ps(wb + ids[t + 1] * kLanes512);
    a0 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t, 0), w0, a0);
    a1 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t, 1), w0, a1);
    a2 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t, 2), w0, a2);
    a3 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t, 3), w0, a3);
    e0 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t + 1, 0), w1, e0);
    e1 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t + 1, 1), w1, e1);
    e2 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t + 1, 2), w1, e2);
    e3 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t + 1, 3), w1, e3);
  }
  if (t < n_taps) {
    const __m512 w0 = _mm512_loadu_ps(wb + ids[t] * kLanes512);
    a0 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t, 0), w0, a0);
    a1 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t, 1), w0, a1);
    a2 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t, 2), w0, a2);
    a3 = _mm512_fmadd_ps(KILN_DW_LOAD_AT(t, 3), w0, a3);
  }
#undef KILN_DW_LOAD_AT
#undef KILN_DW_AT
#undef KILN_DW_LOAD
  const __m512 v[4] = {_mm512_add_ps(a0, e0), _mm512_add_ps(a1, e1), _mm512_add_ps(a2, e2), _mm512_add_ps(a3, e3)};
  for (size_t p = 0; p < 4; ++p) {
    const __m512 o = _mm512_min_ps(hi, _mm512_max_ps(lo, v[p]));  // NaN stays NaN (second operand)
    if constexpr (kMasked) _mm512_mask_storeu_ps(y + p * c + cb, mask, o);
    else _mm512_storeu_ps(y + p * c + cb, o);
  }
}

// Runs of interior quads: the unrolled kernels for 3x3 and 5x5 windows, else a quad at a time.
KILN_AVX512 void quad_avx512(const float* base, const size_t* offs, const EdgeCols* edge, const uint8_t* ids,
                             size_t n_taps, size_t step, size_t c, const DepthwiseWeights& w, float* y, float lo_s,
                             float hi_s);
KILN_AVX512 void quads_avx512(const float* base, const size_t* offs, const uint8_t* ids, size_t n_taps, size_t step,
                              size_t c, const DepthwiseWeights& w, float* y, float lo, float hi, size_t count,
                              bool streamed) {
  // No prefetch: on the Intel host, the unrolled kernels ran 20-45% faster from memory without
  // (see row()).
  if (avx512::quads_unrolled(base, offs, ids, n_taps, step, c, w, y, lo, hi, count,
                             streamed ? kRunBytesStreamed : kRunBytesCached, false))
    return;
  for (size_t q = 0; q < count; ++q)
    quad_avx512(base + q * 4 * step, offs, nullptr, ids, n_taps, step, c, w, y + q * 4 * c, lo, hi);
}

KILN_AVX512 void quad_avx512(const float* base, const size_t* offs, const EdgeCols* edge, const uint8_t* ids,
                             size_t n_taps, size_t step, size_t c, const DepthwiseWeights& w, float* y, float lo_s,
                             float hi_s) {
  const __m512 lo = _mm512_set1_ps(lo_s), hi = _mm512_set1_ps(hi_s);
  const __mmask16 mask = mask512(c % kLanes512);
  const size_t full = c / kLanes512 * kLanes512, taps = w.kernel_h * w.kernel_w;
  if (edge && avx512::edge_unrolled(base, offs, *edge, ids, n_taps, step, c, w, y, lo_s, hi_s)) return;  // 3x3, 5x5
  if (edge) {
    for (size_t cb = 0; cb < full; cb += kLanes512)
      quad_block512<false, true>(base, offs, edge, ids, n_taps, step, cb, w.w.data() + cb * taps, w.bias.data() + cb,
                                 y, c, lo, hi, mask);
    if (full < c)
      quad_block512<true, true>(base, offs, edge, ids, n_taps, step, full, w.w.data() + full * taps,
                                w.bias.data() + full, y, c, lo, hi, mask);
    return;
  }
  if (n_taps > 0)  // as quad_avx2
    for (size_t b = 0; b < 4 * step * sizeof(float); b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(base + offs[n_taps - 1] + kPrefetchPixels * step) + b, _MM_HINT_T0);
  for (size_t cb = 0; cb < full; cb += kLanes512)
    quad_block512<false, false>(base, offs, edge, ids, n_taps, step, cb, w.w.data() + cb * taps, w.bias.data() + cb, y,
                                c, lo, hi, mask);
  if (full < c)
    quad_block512<true, false>(base, offs, edge, ids, n_taps, step, full, w.w.data() + full * taps,
                               w.bias.data() + full, y, c, lo, hi, mask);
}
#undef KILN_AVX512
#pragma GCC diagnostic pop
#endif  // __x86_64__

// The same four pixels in plain C++, summed in the same order.
void quad_plain(const float* base, const size_t* offs, const EdgeCols* edge, const uint8_t* ids, size_t n_taps,
                size_t step, size_t c, const DepthwiseWeights& w, float* y, float lo, float hi) {
  const size_t taps = w.kernel_h * w.kernel_w, lanes = w.lanes;
  for (size_t p = 0; p < 4; ++p)
    for (size_t ch = 0; ch < c; ++ch) {
      const float* wb = w.w.data() + ch / lanes * lanes * taps + ch % lanes;
      auto x = [&](size_t t) {
        return edge && !(edge->cols[edge->kw_of[t]] >> p & 1) ? 0.f : base[offs[t] + p * step + ch];
      };
      float a0 = w.bias[ch], a1 = 0.f;
      size_t t = 0;
      for (; t + 1 < n_taps; t += 2) a0 += x(t) * wb[ids[t] * lanes], a1 += x(t + 1) * wb[ids[t + 1] * lanes];
      if (t < n_taps) a0 += x(t) * wb[ids[t] * lanes];
      const float v = a0 + a1;
      y[p * c + ch] = std::isnan(v) ? v : std::min(hi, std::max(lo, v));
    }
}

// Tap t of pixel p reads base + offs[t] + p * step; with `edge`, only where it is inside (zero
// elsewhere: base may then point before the row).
using QuadFn = void (*)(const float* base, const size_t* offs, const EdgeCols* edge, const uint8_t* ids,
                        size_t n_taps, size_t step, size_t c, const DepthwiseWeights& w, float* y, float lo, float hi);

// `count` interior quads from base and y (4 * count pixels), in one call; `streamed` when the
// layer's input does not stay in cache (kCachedInputBytes).
using QuadsFn = void (*)(const float* base, const size_t* offs, const uint8_t* ids, size_t n_taps, size_t step,
                         size_t c, const DepthwiseWeights& w, float* y, float lo, float hi, size_t count,
                         bool streamed);

// The table (kernels/simd/isa.h): best first, the last runs anywhere.
struct Impl {
  const char* name;
  bool (*available)();
  PixelFn pixel;
  QuadFn quad;
  QuadsFn quads;  // runs of interior quads in one call, where the row has it (else a quad per call)
  size_t lanes;   // the channel block the weights are packed in
  bool prefetch_rows;  // fetch the next output row's input rows ahead (see row())
};
const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx512", simd::cpu_has_avx512f, pixel_avx512, quad_avx512, quads_avx512, kLanes512, false},
    {"avx2", simd::cpu_has_avx2, pixel_avx2, quad_avx2, quads_avx2, kLanes, true},
#endif
    {"plain", [] { return true; }, pixel_plain, quad_plain, nullptr, kLanes, true}};

const Impl& chosen() {
  static const Impl* impl = simd::pick_isa(kImpls);
  return *impl;
}

// One pixel at the edges: a pointer per tap inside the input.
void edge_pixel(const Impl& impl, const Job& j, size_t n, size_t oh, size_t ow, float* y) {
  const DepthwiseWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const int64_t in_h = static_cast<int64_t>(g.in_h), in_w = static_cast<int64_t>(g.in_w);
  const float* taps[kMaxTaps];
  uint8_t ids[kMaxTaps];
  size_t n_taps = 0;
  for (size_t kh = 0; kh < w.kernel_h; ++kh) {
    const int64_t ih = static_cast<int64_t>(oh * g.stride_h + kh * g.dilation_h) - g.pad_top;
    if (ih < 0 || ih >= in_h) continue;
    for (size_t kw = 0; kw < w.kernel_w; ++kw) {
      const int64_t iw = static_cast<int64_t>(ow * g.stride_w + kw * g.dilation_w) - g.pad_left;
      if (iw < 0 || iw >= in_w) continue;
      taps[n_taps] = j.x + ((n * g.in_h + static_cast<size_t>(ih)) * g.in_w + static_cast<size_t>(iw)) * w.channels;
      ids[n_taps++] = static_cast<uint8_t>(kh * w.kernel_w + kw);
    }
  }
  impl.pixel(taps, ids, n_taps, w.channels, w, y, g.out_min, g.out_max);
}

// One output row (n, oh) of every channel: groups of four pixels whose windows lie inside the
// row take the quad kernel (taps of rows outside the input left out), the rest one by one.
void row(void* ctx, size_t index) {
  const Impl* impl = &chosen();
  const Job& j = *static_cast<const Job*>(ctx);
  const DepthwiseWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t c = w.channels, n = index / g.out_h, oh = index % g.out_h;
  const int64_t in_h = static_cast<int64_t>(g.in_h), in_w = static_cast<int64_t>(g.in_w);
  const int64_t span_w = static_cast<int64_t>((w.kernel_w - 1) * g.dilation_w), sw = static_cast<int64_t>(g.stride_w);
  // The taps inside for this row: offsets from the input pixel (n, 0, iw0), their weights' index.
  size_t offs[kMaxTaps];
  uint8_t ids[kMaxTaps], kw_of[kMaxTaps];
  size_t n_taps = 0;
  for (size_t kh = 0; kh < w.kernel_h; ++kh) {
    const int64_t ih = static_cast<int64_t>(oh * g.stride_h + kh * g.dilation_h) - g.pad_top;
    if (ih < 0 || ih >= in_h) continue;
    for (size_t kw = 0; kw < w.kernel_w; ++kw) {
      offs[n_taps] = (static_cast<size_t>(ih) * g.in_w + kw * g.dilation_w) * c;
      kw_of[n_taps] = static_cast<uint8_t>(kw);
      ids[n_taps++] = static_cast<uint8_t>(kh * w.kernel_w + kw);
    }
  }
  float* out = j.y + (index - j.first_row) * g.out_w * c;
  const float* image = j.x + n * g.in_h * g.in_w * c;
  // The input rows the next output row reads first (the lowest taps' rows move down by the
  // stride), fetched while this row computes: from memory, the row loop waits on them
  // otherwise (80x80x144 3x3 at batch 4, on AMD). Not on the AVX-512 row: on the Intel host
  // the burst of prefetches stalled the row when they missed (line fill buffers full): the
  // unrolled kernels ran 20-45% faster from memory without it, and without their quads'
  // prefetches (2x80x80x144: 0.81 -> 0.60 ms).
  if (impl->prefetch_rows && oh + 1 < g.out_h) {
    const int64_t top = static_cast<int64_t>((oh + 1) * g.stride_h + (w.kernel_h - 1) * g.dilation_h) - g.pad_top;
    for (int64_t ih = std::max<int64_t>(0, top - static_cast<int64_t>(g.stride_h) + 1); ih <= std::min(top, in_h - 1); ++ih) {
      const float* r = image + static_cast<size_t>(ih) * g.in_w * c;
      for (size_t k = 0; k < g.in_w * c; k += 64 / sizeof(float)) __builtin_prefetch(r + k);
    }
  }
  const bool edge_quads = g.out_w >= 4;
  const bool streamed = g.batch * g.in_h * g.in_w * c * sizeof(float) > kCachedInputBytes;
  // The row's last pixels, fewer than four, at many channels: one at a time (the blocks' chains
  // overlap); a quad ending at the row's end computed some pixels twice (7x7 outputs: 8 of 7).
  EdgeCols edge{kw_of, {}};
  for (size_t ow = 0; ow < g.out_w;) {
    const int64_t iw0 = static_cast<int64_t>(ow) * sw - g.pad_left;
    if (ow + 4 <= g.out_w && iw0 >= 0 && iw0 + 3 * sw + span_w < in_w) {
      // The run of interior quads from ow: the last starts where its fourth window still fits.
      const size_t q_last = std::min(g.out_w - 4, static_cast<size_t>((in_w - 1 - span_w + g.pad_left) / sw) - 3);
      const size_t count = impl->quads ? (q_last - ow) / 4 + 1 : 1;
      const float* x0 = image + static_cast<size_t>(iw0) * c;
      if (impl->quads)
        impl->quads(x0, offs, ids, n_taps, g.stride_w * c, c, w, out + ow * c, g.out_min, g.out_max, count, streamed);
      else
        impl->quad(x0, offs, nullptr, ids, n_taps, g.stride_w * c, c, w, out + ow * c, g.out_min, g.out_max);
      ow += 4 * count;
    } else if (edge_quads && (c < kWideChannels || ow + 4 <= g.out_w)) {
      // Four pixels at an edge (the last four of the row at its end: some computed twice,
      // alike), the taps over the padding loaded under an all-zero mask: one at a time, an edge
      // pixel was a chain of dependent FMAs (mnasnet's 16-48-channel rows of 8-64 pixels).
      const size_t q = std::min(ow, g.out_w - 4);
      const int64_t q0 = static_cast<int64_t>(q) * sw - g.pad_left;
      for (size_t kw = 0; kw < w.kernel_w; ++kw) {
        uint8_t bits = 0;
        for (size_t p = 0; p < 4; ++p) {
          const int64_t iw = q0 + static_cast<int64_t>(p) * sw + static_cast<int64_t>(kw * g.dilation_w);
          bits = static_cast<uint8_t>(bits | (iw >= 0 && iw < in_w ? 1u << p : 0u));
        }
        edge.cols[kw] = bits;
      }
      // base: pixel q's window origin, before the row where it reaches into the left padding
      impl->quad(image + q0 * static_cast<int64_t>(c), offs, &edge, ids, n_taps, g.stride_w * c, c, w, out + q * c,
                 g.out_min, g.out_max);
      ow = q + 4;
    } else {
      edge_pixel(*impl, j, n, oh, ow, out + ow * c);
      ++ow;
    }
  }
  if (g.gate) simd::gate(out, out, g.out_w * c, g.gate->hard, g.gate->alpha, g.gate->beta);  // the row, in cache
}

// Depthwise then pointwise (depthwise_pointwise): tasks of `rows` output rows; a worker (slot)
// takes the next task, computes its depthwise rows into its scratch, then the pointwise layer
// over those pixels from there.
struct FusedJob {
  Job dw;
  const DenseConvWeights* pw;
  const DenseConvGeometry* pg;
  float* y;
  float* scratch;
  size_t scratch_floats, rows, tasks;
  std::atomic<size_t> next{0};
};

void fused_worker(void* ctx, size_t slot) {
  FusedJob& f = *static_cast<FusedJob*>(ctx);
  const DenseConvGeometry& g = *f.dw.g;
  const size_t total = g.batch * g.out_h, ys = f.pg->out_stride ? f.pg->out_stride : f.pw->out_channels;
  Job j = f.dw;
  j.y = f.scratch + slot * f.scratch_floats;
  DenseConvGeometry pg = *f.pg;
  pg.batch = pg.in_h = pg.out_h = 1;
  pg.in_stride = f.dw.w->channels;
  for (size_t t; (t = f.next.fetch_add(1, std::memory_order_relaxed)) < f.tasks;) {
    const size_t r0 = t * f.rows, r1 = std::min(total, r0 + f.rows);
    j.first_row = r0;
    for (size_t r = r0; r < r1; ++r) row(&j, r);
    pg.in_w = pg.out_w = (r1 - r0) * g.out_w;
    dense_conv(*f.pw, pg, j.y, f.y + r0 * g.out_w * ys, nullptr);
  }
}

}  // namespace

size_t depthwise_lanes() { return chosen().lanes; }

bool depthwise_fits(size_t kh, size_t kw) { return kh * kw <= kMaxTaps; }

void pack_depthwise(const float* w, const float* bias, size_t c, size_t kh, size_t kw, DepthwiseWeights* out) {
  const size_t taps = kh * kw, lanes = chosen().lanes;
  out->channels = c;
  out->lanes = lanes;
  out->padded = (c + lanes - 1) / lanes * lanes;
  out->kernel_h = kh;
  out->kernel_w = kw;
  out->w.assign(out->padded * taps, 0.f);  // [channel block][tap][lanes]
  out->bias.assign(out->padded, 0.f);
  for (size_t ch = 0; ch < c; ++ch) {
    if (bias) out->bias[ch] = bias[ch];
    for (size_t t = 0; t < taps; ++t) out->w[(ch / lanes * taps + t) * lanes + ch % lanes] = w[ch * taps + t];
  }
}

void depthwise_conv(const DepthwiseWeights& w, const DenseConvGeometry& g, const float* x, float* y, pthreadpool_t pool) {
  Job j{&w, &g, x, y};
  if (w.channels == 0) return;
  pthreadpool_parallelize_1d(pool, row, &j, g.batch * g.out_h, 0);
}

bool depthwise_pointwise_pays(const DepthwiseWeights& w, const DenseConvGeometry& g) {
  return g.batch * g.out_h * g.out_w * w.channels * sizeof(float) >= kFusedMinBytes;
}

static size_t depthwise_pointwise_rows(const DepthwiseWeights& w, const DenseConvGeometry& g) {
  const size_t row_bytes = std::max<size_t>(1, g.out_w * w.channels * sizeof(float));
  const size_t want = (kFusedPixels + g.out_w - 1) / std::max<size_t>(1, g.out_w);
  return std::max<size_t>(1, std::min(want, kFusedScratchBytes / row_bytes));
}

// At most one row past kFusedScratchBytes; the same or more at the bound than below it, so that
// the scratch sized at the bound serves every bind.
size_t depthwise_pointwise_scratch_floats(const DepthwiseWeights& w, const DenseConvGeometry& g) {
  return std::max(kFusedScratchBytes / sizeof(float), g.out_w * w.channels);
}

void depthwise_pointwise(const DepthwiseWeights& dw, const DenseConvGeometry& dg, const DenseConvWeights& pw,
                         const DenseConvGeometry& pg, const float* x, float* y, float* scratch, size_t slots,
                         pthreadpool_t pool) {
  if (dw.channels == 0 || pw.out_channels == 0) return;
  FusedJob f{{&dw, &dg, x, nullptr}, &pw, &pg, y, scratch, depthwise_pointwise_scratch_floats(dw, dg),
             depthwise_pointwise_rows(dw, dg), 0};
  f.tasks = (dg.batch * dg.out_h + f.rows - 1) / f.rows;
  const size_t threads = pool ? pthreadpool_get_threads_count(pool) : 1;
  const size_t workers = std::max<size_t>(1, std::min({slots, threads, f.tasks}));
  if (workers == 1) {
    fused_worker(&f, 0);
    return;
  }
  pthreadpool_parallelize_1d(pool, fused_worker, &f, workers, 0);
}

}  // namespace kiln::delegates::xnnpack
