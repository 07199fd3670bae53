// The dense convolution's direct rows (dense_direct.h).
#include "delegates/xnnpack/dense_direct.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln::delegates::xnnpack {

#define KILN_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

namespace {

#if defined(__x86_64__)
// The direct rows: 1-4 input channels and one block of 16 outputs at a time, each output row
// computed directly, every tap's input an FMA's broadcast operand. Through the GEMM, a stem's K
// of 27 left each 6-pixel tile's gathering, its edge windows' copies and its call as costly as
// its FMAs (resnet_small's 3->16 3x3 at 8x64x64: 72 -> 111 GFLOP/s on Intel AVX-512; on AMD Zen 3
// AVX2 mobilenet_v3's 3->16 stride-2 stem at 2x224x224 ran at 38 GFLOP/s through the GEMM).
// One driver (direct_row_driver) for both ISA rows; each row's pixel kernel (Px256, Px512) holds
// NP pixels' accumulators in registers: kWide pixels where the whole group's windows lie inside
// the row, four at the edges.
//
// Pixel kernels: NP output pixels of block b; rows[kh] points at kernel row kh's first window
// column of the first pixel (null: the row is over the padding), kernel columns dx floats
// apart, pixels px floats apart; the outputs from out, ys floats apart. max/min return their
// second operand when either is NaN: NaN stays NaN through the clamp.
struct Px256 {
  static constexpr size_t kWide = 6;  // 12 accumulators, 2 weight vectors and a broadcast: 15 ymm
  // kHalf: the block's first 8 channels only (its last block when nc <= 8: shufflenet's 3->24
  // stem took 1.1x the GEMM's time computing 32 channels for 24).
  template <size_t NP, size_t C, bool kHalf>
  __attribute__((target("avx2,fma"))) static inline void pixels(const DirectJob& j, const float* const* rows, size_t dx,
                                                                 size_t px, size_t b, float* out) {
    const DenseConvWeights& w = *j.w;
    const DenseConvGeometry& g = *j.g;
    const size_t m = w.out_channels, k = w.kernel_h * w.kernel_w * C, ys = out_stride(w, g);
    const float* panel = w.panels.data() + b * k * kDenseBlock;
    const float* bias = w.bias.data() + b * kDenseBlock;
    __m256 acc0[NP], acc1[NP];
    for (size_t p = 0; p < NP; ++p) acc0[p] = _mm256_loadu_ps(bias), acc1[p] = kHalf ? acc0[p] : _mm256_loadu_ps(bias + 8);
    for (size_t kh = 0; kh < w.kernel_h; ++kh) {
      if (!rows[kh]) continue;
      for (size_t kw = 0; kw < w.kernel_w; ++kw) {
        const float* xp = rows[kh] + kw * dx;
        const float* wp = panel + (kh * w.kernel_w + kw) * C * kDenseBlock;
        for (size_t ci = 0; ci < C; ++ci) {
          const __m256 w0 = _mm256_loadu_ps(wp + ci * kDenseBlock);
          const __m256 w1 = kHalf ? w0 : _mm256_loadu_ps(wp + ci * kDenseBlock + 8);
          for (size_t p = 0; p < NP; ++p) {
            const __m256 v = _mm256_broadcast_ss(xp + p * px + ci);
            acc0[p] = _mm256_fmadd_ps(v, w0, acc0[p]);
            if (!kHalf) acc1[p] = _mm256_fmadd_ps(v, w1, acc1[p]);
          }
        }
      }
    }
    const __m256 lo = _mm256_set1_ps(g.out_min), hi = _mm256_set1_ps(g.out_max);
    const size_t nc = std::min(kDenseBlock, m - b * kDenseBlock);
    for (size_t p = 0; p < NP; ++p) {
      float* yp = out + p * ys + b * kDenseBlock;
      const __m256 r0 = _mm256_min_ps(hi, _mm256_max_ps(lo, acc0[p])), r1 = _mm256_min_ps(hi, _mm256_max_ps(lo, acc1[p]));
      if (nc == kDenseBlock) {
        _mm256_storeu_ps(yp, r0);
        _mm256_storeu_ps(yp + 8, r1);
      } else {
        alignas(32) float tmp[kDenseBlock];
        _mm256_store_ps(tmp, r0);
        _mm256_store_ps(tmp + 8, r1);
        std::memcpy(yp, tmp, nc * sizeof(float));
      }
    }
  }
};

// (GCC 12 warns inside its own AVX-512 headers when they are inlined: a false positive.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
struct Px512 {
  static constexpr size_t kWide = 12;  // one zmm accumulator per pixel
  template <size_t NP, size_t C, bool kHalf>  // kHalf: no narrower vector here, the block's 16 lanes as ever
  KILN_AVX512 static inline void pixels(const DirectJob& j, const float* const* rows, size_t dx, size_t px, size_t b,
                                        float* out) {
    const DenseConvWeights& w = *j.w;
    const DenseConvGeometry& g = *j.g;
    const size_t m = w.out_channels, k = w.kernel_h * w.kernel_w * C, ys = out_stride(w, g);
    const float* panel = w.panels.data() + b * k * kDenseBlock;
    __m512 acc[NP];
    for (size_t p = 0; p < NP; ++p) acc[p] = _mm512_loadu_ps(w.bias.data() + b * kDenseBlock);
    for (size_t kh = 0; kh < w.kernel_h; ++kh) {
      if (!rows[kh]) continue;
      for (size_t kw = 0; kw < w.kernel_w; ++kw) {
        const float* xp = rows[kh] + kw * dx;
        const float* wp = panel + (kh * w.kernel_w + kw) * C * kDenseBlock;
        for (size_t ci = 0; ci < C; ++ci) {
          const __m512 wv = _mm512_loadu_ps(wp + ci * kDenseBlock);
          for (size_t p = 0; p < NP; ++p) acc[p] = _mm512_fmadd_ps(_mm512_set1_ps(xp[p * px + ci]), wv, acc[p]);
        }
      }
    }
    const __m512 lo = _mm512_set1_ps(g.out_min), hi = _mm512_set1_ps(g.out_max);
    const size_t nc = std::min(kDenseBlock, m - b * kDenseBlock);
    const __mmask16 mask = nc >= kDenseBlock ? __mmask16(0xFFFF) : __mmask16((1u << nc) - 1);
    for (size_t p = 0; p < NP; ++p)
      _mm512_mask_storeu_ps(out + p * ys + b * kDenseBlock, mask, _mm512_min_ps(hi, _mm512_max_ps(lo, acc[p])));
  }
};

// Floats of the windows of four edge pixels, padding zeroed, copied per kernel row: a 7x7
// stride-2 stem of 4 channels takes 7 x 13 x 4.
constexpr size_t kEdgeWindowFloats = 512;
static_assert(kDirectMaxTaps * 4 <= kEdgeWindowFloats, "one pixel's window of 4 channels fits the copy");

// Kernel row kh's copy of columns first, first + every, ... (cols of them) of input row `in`
// (null: over the padding), zeros outside the row, at dst: where an edge pixel's window reads.
template <size_t C>
inline const float* padded_columns(const float* in, int64_t first, size_t cols, size_t every, int64_t in_w, size_t xs,
                                   float* dst) {
  if (!in) return nullptr;
  for (size_t col = 0; col < cols; ++col) {
    const int64_t iw = first + static_cast<int64_t>(col * every);
    for (size_t ci = 0; ci < C; ++ci) dst[col * C + ci] = iw >= 0 && iw < in_w ? in[static_cast<size_t>(iw) * xs + ci] : 0.f;
  }
  return dst;
}

// Block b of one output row (direct_row_driver): the row's pixels in groups of Px::kWide where
// their windows lie inside the input, then four, then the edges from padded copies.
template <class Px, size_t C, bool kHalf>
__attribute__((always_inline)) inline void direct_block(const DirectJob& j, const float* const* in_rows, size_t b,
                                                        float* out_row, bool quads, size_t cols4, float* window,
                                                        const float** rows) {
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t ys = out_stride(w, g), xs = g.in_stride, kh_n = w.kernel_h;
  const int64_t span = static_cast<int64_t>((w.kernel_w - 1) * g.dilation_w), step = static_cast<int64_t>(g.stride_w);
  const int64_t in_w = static_cast<int64_t>(g.in_w);
  for (size_t ow0 = 0; ow0 < g.out_w;) {
    const int64_t first = static_cast<int64_t>(ow0) * step - g.pad_left;
    const auto inside = [&](size_t np) {
      if (first < 0 || ow0 + np > g.out_w || first + static_cast<int64_t>(np - 1) * step + span >= in_w) return false;
      for (size_t kh = 0; kh < kh_n; ++kh) rows[kh] = in_rows[kh] ? in_rows[kh] + static_cast<size_t>(first) * xs : nullptr;
      return true;
    };
    if (inside(Px::kWide)) {
      Px::template pixels<Px::kWide, C, kHalf>(j, rows, g.dilation_w * xs, g.stride_w * xs, b, out_row + ow0 * ys);
      ow0 += Px::kWide;
    } else if (inside(4)) {
      Px::template pixels<4, C, kHalf>(j, rows, g.dilation_w * xs, g.stride_w * xs, b, out_row + ow0 * ys);
      ow0 += 4;
    } else {
      const size_t q = quads ? std::min(ow0, g.out_w - 4) : ow0, cols = quads ? cols4 : w.kernel_w;
      const int64_t q0 = static_cast<int64_t>(q) * step - g.pad_left;
      for (size_t kh = 0; kh < kh_n; ++kh)
        rows[kh] = padded_columns<C>(in_rows[kh], q0, cols, quads ? 1 : g.dilation_w, in_w, xs, window + kh * cols * C);
      if (quads)
        Px::template pixels<4, C, kHalf>(j, rows, g.dilation_w * C, g.stride_w * C, b, out_row + q * ys);
      else  // kernel_h * kernel_w * C <= kDirectMaxTaps * 4 floats: always fits
        Px::template pixels<1, C, kHalf>(j, rows, C, C, b, out_row + q * ys);
      ow0 = q + (quads ? 4 : 1);
    }
  }
}

// Output row `row` of a DirectJob with Px's pixel kernels; inlined into each ISA's row function
// (direct_row256, direct_row512), whose target lets Px's kernels inline in turn.
template <class Px, size_t C>
__attribute__((always_inline)) inline void direct_row_driver(void* ctx, size_t row) {
  const DirectJob& j = *static_cast<const DirectJob*>(ctx);
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t n = row / g.out_h, oh = row % g.out_h, m = w.out_channels, blocks = (m + kDenseBlock - 1) / kDenseBlock;
  const size_t ys = out_stride(w, g), xs = g.in_stride, kh_n = w.kernel_h;
  float* out_row = j.y + row * g.out_w * ys;
  const size_t span = (w.kernel_w - 1) * g.dilation_w;
  const float* in_rows[kDirectMaxTaps];  // kernel row kh's input row, or null over the padding
  for (size_t kh = 0; kh < kh_n; ++kh) {
    const int64_t ih = static_cast<int64_t>(oh * g.stride_h + kh * g.dilation_h) - g.pad_top;
    in_rows[kh] =
        ih < 0 || ih >= static_cast<int64_t>(g.in_h) ? nullptr : j.x + (n * g.in_h + static_cast<size_t>(ih)) * g.in_w * xs;
  }
  // Edge pixels in groups of four, their windows' columns copied with zeros for the padding
  // (the row's last four where fewer are left, some computed twice, alike): one at a time,
  // each was a chain of 27 dependent FMAs, and a 64-pixel row's four edge pixels cost half as
  // much as its other 60. One at a time (from a copy of its window) where the row is narrower
  // than four pixels or the four windows do not fit the copy.
  const size_t cols4 = 3 * g.stride_w + span + 1;  // one pixel: its kernel_w taps
  const bool quads = g.out_w >= 4 && kh_n * cols4 * C <= kEdgeWindowFloats;
  alignas(64) float window[kEdgeWindowFloats];
  const float* rows[kDirectMaxTaps];
  for (size_t b = 0; b < blocks; ++b) {
    if (m - b * kDenseBlock <= kDenseBlock / 2)
      direct_block<Px, C, true>(j, in_rows, b, out_row, quads, cols4, window, rows);
    else
      direct_block<Px, C, false>(j, in_rows, b, out_row, quads, cols4, window, rows);
  }
  if (g.gate) gate_row(*g.gate, out_row, g.out_w, m, ys);
}

template <size_t C>
__attribute__((target("avx2,fma"))) void direct_row256(void* ctx, size_t row) {
  direct_row_driver<Px256, C>(ctx, row);
}
template <size_t C>
KILN_AVX512 void direct_row512(void* ctx, size_t row) {
  direct_row_driver<Px512, C>(ctx, row);
}
#pragma GCC diagnostic pop
#endif  // __x86_64__

}  // namespace

#if defined(__x86_64__)
namespace {

// Rows r0 .. r1 of a narrow 1x1 layer (dense_direct.h): the C weight rows (8 channels each) in
// registers for the whole run, eight pixels at a time (eight FMA chains), each input value
// broadcast from memory into its FMA.
template <size_t C>
KILN_AVX512 void narrow_rows512(const DirectJob& j, size_t r0, size_t r1) {
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t ys = out_stride(w, g), xs = g.in_stride, nc = w.out_channels;
  const __mmask8 mask = static_cast<__mmask8>((1u << nc) - 1);
  __m256 wk[C];
  for (size_t k = 0; k < C; ++k) wk[k] = _mm256_loadu_ps(w.panels.data() + k * kDenseBlock);
  const __m256 b = _mm256_loadu_ps(w.bias.data()), lo = _mm256_set1_ps(g.out_min), hi = _mm256_set1_ps(g.out_max);
  const float* x = j.x + r0 * xs;
  float* y = j.y + r0 * ys;
  size_t r = r0;
  for (; r + 8 <= r1; r += 8, x += 8 * xs, y += 8 * ys) {
    __m256 a[8];
    for (size_t p = 0; p < 8; ++p) a[p] = b;
    for (size_t k = 0; k < C; ++k)
      for (size_t p = 0; p < 8; ++p) a[p] = _mm256_fmadd_ps(_mm256_set1_ps(x[p * xs + k]), wk[k], a[p]);
    for (size_t p = 0; p < 8; ++p)  // NaN stays NaN (max/min return their second operand)
      _mm256_mask_storeu_ps(y + p * ys, mask, _mm256_min_ps(hi, _mm256_max_ps(lo, a[p])));
  }
  for (; r < r1; ++r, x += xs, y += ys) {
    __m256 a = b;
    for (size_t k = 0; k < C; ++k) a = _mm256_fmadd_ps(_mm256_set1_ps(x[k]), wk[k], a);
    _mm256_mask_storeu_ps(y, mask, _mm256_min_ps(hi, _mm256_max_ps(lo, a)));
  }
  if (g.gate) gate_row(*g.gate, j.y + r0 * ys, r1 - r0, nc, ys);
}

// NV vectors of one pixel's outputs, clamped (NaN stays NaN: max/min return their second
// operand), the last masked to the layer's outputs.
template <size_t NV>
__attribute__((target("avx2,fma"))) inline void store_narrow256(float* y, const __m256* a, __m256 lo, __m256 hi,
                                                                 __m256i last) {
  for (size_t v = 0; v + 1 < NV; ++v) _mm256_storeu_ps(y + 8 * v, _mm256_min_ps(hi, _mm256_max_ps(lo, a[v])));
  _mm256_maskstore_ps(y + 8 * (NV - 1), last, _mm256_min_ps(hi, _mm256_max_ps(lo, a[NV - 1])));
}

// Rows r0 .. r1 of a narrow 1x1 layer on the AVX2 row: NV vectors of 8 outputs per pixel (up to
// 32 outputs), P pixels at a time (P * NV <= 12 accumulators, NV weight vectors and a
// broadcast in the 16 ymm), each input value broadcast, the weights reloaded from L1 per input.
// `groups` column groups of 8 * NV outputs from column col0 (a wider layer: every group of a
// pixel group before the next pixels, the output written row by row), `cols` of each group's
// outputs stored (the last vector masked). Vector v's weights are its block's panel, the
// block's first or second half. C = 0: the layer's input channels, a loop (kNarrowMaxIn < c <=
// kNarrowMaxIn256); otherwise C of them, unrolled.
template <size_t C, size_t NV>
__attribute__((target("avx2,fma"))) void narrow_rows256(const DirectJob& j, size_t r0, size_t r1, size_t col0,
                                                        size_t groups, size_t cols) {
  constexpr size_t P = NV == 1 ? 8 : NV == 2 ? 6 : NV == 3 ? 4 : 3;
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t ys = out_stride(w, g), xs = g.in_stride, c = C ? C : w.in_channels;
  alignas(32) static const int32_t kBits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  const __m256i last = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 8 - (cols - 8 * (NV - 1))));
  const __m256 lo = _mm256_set1_ps(g.out_min), hi = _mm256_set1_ps(g.out_max);
  const auto weights = [&](size_t group, const float** wv) {
    for (size_t v = 0; v < NV; ++v) {
      const size_t col = col0 + group * 8 * NV + 8 * v;
      wv[v] = w.panels.data() + col / kDenseBlock * c * kDenseBlock + col % kDenseBlock;
    }
  };
  const float* x = j.x + r0 * xs;
  float* y = j.y + r0 * ys + col0;
  size_t r = r0;
  for (; r + P <= r1; r += P, x += P * xs, y += P * ys) {
    for (size_t group = 0; group < groups; ++group) {
      const float* wv[NV];
      weights(group, wv);
      const float* bias = w.bias.data() + col0 + group * 8 * NV;
      __m256 a[P][NV];
      for (size_t p = 0; p < P; ++p)
        for (size_t v = 0; v < NV; ++v) a[p][v] = _mm256_loadu_ps(bias + 8 * v);
      for (size_t k = 0; k < c; ++k) {
        __m256 wk[NV];
        for (size_t v = 0; v < NV; ++v) wk[v] = _mm256_loadu_ps(wv[v] + k * kDenseBlock);
        for (size_t p = 0; p < P; ++p) {
          const __m256 xv = _mm256_broadcast_ss(x + p * xs + k);
          for (size_t v = 0; v < NV; ++v) a[p][v] = _mm256_fmadd_ps(xv, wk[v], a[p][v]);
        }
      }
      for (size_t p = 0; p < P; ++p) store_narrow256<NV>(y + group * 8 * NV + p * ys, a[p], lo, hi, last);
    }
  }
  for (; r < r1; ++r, x += xs, y += ys)
    for (size_t group = 0; group < groups; ++group) {
      const float* wv[NV];
      weights(group, wv);
      const float* bias = w.bias.data() + col0 + group * 8 * NV;
      __m256 a[NV];
      for (size_t v = 0; v < NV; ++v) a[v] = _mm256_loadu_ps(bias + 8 * v);
      for (size_t k = 0; k < c; ++k)
        for (size_t v = 0; v < NV; ++v)
          a[v] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k), _mm256_loadu_ps(wv[v] + k * kDenseBlock), a[v]);
      store_narrow256<NV>(y + group * 8 * NV, a, lo, hi, last);
    }
}

// A chunk of a narrow layer's rows: groups of 32 outputs (four vectors, three pixels; past 32
// outputs, an expansion such as mobilenet_v3's 16 -> 72), then the last group of fewer on as
// many vectors as it needs, over the same chunk's rows (in L1).
template <size_t C>
void narrow_task256(void* ctx, size_t chunk) {
  const DirectJob& j = *static_cast<const DirectJob*>(ctx);
  const size_t pixels = j.g->batch * j.g->out_h * j.g->out_w, r0 = chunk * j.rows;
  const size_t r1 = std::min(pixels, r0 + j.rows), m = j.w->out_channels, full = m / 32, rest = m % 32;
  if (full) narrow_rows256<C, 4>(j, r0, r1, 0, full, 32);
  switch ((rest + 7) / 8) {
    case 1: narrow_rows256<C, 1>(j, r0, r1, 32 * full, 1, rest); break;
    case 2: narrow_rows256<C, 2>(j, r0, r1, 32 * full, 1, rest); break;
    case 3: narrow_rows256<C, 3>(j, r0, r1, 32 * full, 1, rest); break;
    case 4: narrow_rows256<C, 4>(j, r0, r1, 32 * full, 1, rest); break;
    default: break;
  }
  if (j.g->gate) gate_row(*j.g->gate, j.y + r0 * out_stride(*j.w, *j.g), r1 - r0, m, out_stride(*j.w, *j.g));
}

template <size_t C>
KILN_AVX512 void narrow_task512(void* ctx, size_t chunk) {
  const DirectJob& j = *static_cast<const DirectJob*>(ctx);
  const size_t pixels = j.g->batch * j.g->out_h * j.g->out_w, r0 = chunk * j.rows;
  narrow_rows512<C>(j, r0, std::min(pixels, r0 + j.rows));
}

}  // namespace

DirectTask narrow_task256(size_t c, size_t m) {
  static constexpr DirectTask kTasks[kNarrowMaxIn + 1] = {
      nullptr,
      narrow_task256<1>,  narrow_task256<2>,  narrow_task256<3>,  narrow_task256<4>,  narrow_task256<5>,
      narrow_task256<6>,  narrow_task256<7>,  narrow_task256<8>,  narrow_task256<9>,  narrow_task256<10>,
      narrow_task256<11>, narrow_task256<12>, narrow_task256<13>, narrow_task256<14>, narrow_task256<15>,
      narrow_task256<16>};
  if (c == 0 || m == 0) return nullptr;
  const bool fits = m <= kNarrowMaxOut256 ? c <= kNarrowMaxIn256
                                          : c <= kNarrowWideMaxIn256 && c * m * sizeof(float) <= kNarrowWideMaxBytes;
  return !fits ? nullptr : c <= kNarrowMaxIn ? kTasks[c] : narrow_task256<0>;
}

DirectTask narrow_task512(size_t c, size_t m) {
  if (m > kNarrowMaxOut) return nullptr;
  static constexpr DirectTask kTasks[kNarrowMaxIn + 1] = {
      nullptr,           narrow_task512<1>,  narrow_task512<2>,  narrow_task512<3>,  narrow_task512<4>,
      narrow_task512<5>, narrow_task512<6>,  narrow_task512<7>,  narrow_task512<8>,  narrow_task512<9>,
      narrow_task512<10>, narrow_task512<11>, narrow_task512<12>, narrow_task512<13>, narrow_task512<14>,
      narrow_task512<15>, narrow_task512<16>};
  return c <= kNarrowMaxIn ? kTasks[c] : nullptr;
}

void direct_row_c1(void* ctx, size_t row) { direct_row256<1>(ctx, row); }
void direct_row256_c2(void* ctx, size_t row) { direct_row256<2>(ctx, row); }
void direct_row256_c3(void* ctx, size_t row) { direct_row256<3>(ctx, row); }
void direct_row256_c4(void* ctx, size_t row) { direct_row256<4>(ctx, row); }
void direct_row512_c2(void* ctx, size_t row) { direct_row512<2>(ctx, row); }
void direct_row512_c3(void* ctx, size_t row) { direct_row512<3>(ctx, row); }
void direct_row512_c4(void* ctx, size_t row) { direct_row512<4>(ctx, row); }
#endif

#undef KILN_AVX512

}  // namespace kiln::delegates::xnnpack
