#include "delegates/xnnpack/int8_conv.h"

#include <pthreadpool.h>

#include <algorithm>
#include <cstring>

#include "kernels/simd/qgemm.h"

namespace kiln::delegates::xnnpack {

namespace {

using simd::kQgemmMr;
using simd::kQgemmNr;

constexpr size_t kMaxK = 8192;     // padded K of one pixel's row (a tile: kQgemmMr rows on the stack)
constexpr size_t kMaxTaps = 64;
constexpr size_t kTilesPerTask = 4;

struct Job {
  const Int8ConvWeights* w;
  const DenseConvGeometry* g;
  const uint8_t* x;
  uint8_t* y;
  size_t pixels, tiles, blocks_per_chunk;
};

// Copies n activations into a row of A, flipping each top bit when the packing asks for it,
// and returns their sum (as x's dtype reads them; only used with weight zero points).
inline int32_t copy_run(const uint8_t* src, size_t n, uint8_t flip, bool x_signed, bool want_sum, uint8_t* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(src[i] ^ flip);
  if (!want_sum) return 0;
  int32_t s = 0;
  if (x_signed)
    for (size_t i = 0; i < n; ++i) s += static_cast<int8_t>(src[i]);
  else
    for (size_t i = 0; i < n; ++i) s += src[i];
  return s;
}

// Gathers the rows of one tile of mr output pixels starting at pixel p0: each row is the
// pixel's window, taps in (kh, kw) order, C channels each; a tap outside the input reads x's
// zero point. Row padding past K is 0 (its weights are 0).
void gather_rows(const Job& j, size_t p0, size_t mr, uint8_t* a, int32_t* rowsum) {
  const Int8ConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t c = w.in_channels, plane = g.out_h * g.out_w;
  const bool want_sum = !w.w_zero.empty();
  const int64_t in_h = static_cast<int64_t>(g.in_h), in_w = static_cast<int64_t>(g.in_w);
  size_t n = p0 / plane, oh = p0 % plane / g.out_w, ow = p0 % g.out_w;
  for (size_t r = 0; r < mr; ++r) {
    uint8_t* row = a + r * w.kp;
    int32_t sum = 0;
    const int64_t ih0 = static_cast<int64_t>(oh * g.stride_h) - g.pad_top;
    const int64_t iw0 = static_cast<int64_t>(ow * g.stride_w) - g.pad_left;
    const bool runs = g.dilation_w == 1 && g.in_stride == c && iw0 >= 0 &&
                      iw0 + static_cast<int64_t>(w.kernel_w) <= in_w;  // each kernel row one run
    for (size_t kh = 0; kh < w.kernel_h; ++kh) {
      const int64_t ih = ih0 + static_cast<int64_t>(kh * g.dilation_h);
      const bool row_inside = ih >= 0 && ih < in_h;
      const uint8_t* in_row = j.x + (n * g.in_h + static_cast<size_t>(row_inside ? ih : 0)) * g.in_w * g.in_stride;
      uint8_t* dst = row + kh * w.kernel_w * c;
      if (row_inside && runs) {
        sum += copy_run(in_row + static_cast<size_t>(iw0) * c, w.kernel_w * c, w.a_xor, w.x_signed, want_sum, dst);
        continue;
      }
      for (size_t kw = 0; kw < w.kernel_w; ++kw) {
        const int64_t iw = iw0 + static_cast<int64_t>(kw * g.dilation_w);
        const bool inside = row_inside && iw >= 0 && iw < in_w;
        const uint8_t* src = inside ? in_row + static_cast<size_t>(iw) * g.in_stride : w.zero.data();
        sum += copy_run(src, c, w.a_xor, w.x_signed, want_sum, dst + kw * c);
      }
    }
    std::memset(row + w.k, 0, w.kp - w.k);
    rowsum[r] = sum;
    if (++ow == g.out_w) {
      ow = 0;
      if (++oh == g.out_h) oh = 0, ++n;
    }
  }
}

// One task: kTilesPerTask tiles of kQgemmMr output pixels and one chunk of channel panels.
void run_task(void* ctx, size_t group, size_t chunk) {
  const Job& j = *static_cast<const Job*>(ctx);
  const Int8ConvWeights& w = *j.w;
  const size_t m = w.out_channels, blocks = (m + kQgemmNr - 1) / kQgemmNr;
  const size_t b0 = chunk * j.blocks_per_chunk, b1 = std::min(blocks, b0 + j.blocks_per_chunk);
  alignas(64) uint8_t a[kQgemmMr * kMaxK];
  int32_t rowsum[kQgemmMr];
  for (size_t tile = group * kTilesPerTask; tile < std::min(j.tiles, (group + 1) * kTilesPerTask); ++tile) {
    const size_t p0 = tile * kQgemmMr, mr = std::min(kQgemmMr, j.pixels - p0);
    gather_rows(j, p0, mr, a, rowsum);
    for (size_t mb = b0; mb < b1; ++mb) {
      simd::QgemmEpilogue e;
      e.bias = w.bias.data() + mb * kQgemmNr;
      e.wz = w.w_zero.empty() ? nullptr : w.w_zero.data() + mb * kQgemmNr;
      e.ratio = w.ratio.data() + mb * kQgemmNr;
      e.zp = w.y_zero, e.lo = w.lo, e.hi = w.hi;
      simd::qgemm(mr, w.kp, a, w.kp, rowsum, w.panels.data() + mb * simd::qgemm_panel_bytes(w.kp), e,
                  j.y + p0 * m + mb * kQgemmNr, m, std::min(kQgemmNr, m - mb * kQgemmNr), w.a_unsigned);
    }
  }
}

}  // namespace

bool int8_conv_fits(size_t c, size_t kh, size_t kw) {
  return kh * kw <= kMaxTaps && simd::qgemm_k_padded(c * kh * kw) <= kMaxK;
}

// The microkernel reads one operand as u8 and the other as s8 (qgemm.h). Activations are the
// u8 side when the weights are int8 (int8 activations flipped: x + 128), else the s8 side
// (uint8 activations flipped: x - 128). The flip's shift times each channel's weight sum, and
// the zero points' cross terms, are folded into the bias:
//   sum (x - xz)(w - wz) = dot - shift * sum(w) - xz * sum(w) - wz * sum(x) + K * xz * wz,
// where dot is what the microkernel computes and wz * sum(x) is its per-row term.
void pack_int8_conv(const Int8ConvSpec& s, Int8ConvWeights* out) {
  const size_t taps = s.kh * s.kw, k = taps * s.c, kp = simd::qgemm_k_padded(k);
  const size_t blocks = (s.m + kQgemmNr - 1) / kQgemmNr, padded = blocks * kQgemmNr;
  out->out_channels = s.m;
  out->in_channels = s.c;
  out->kernel_h = s.kh;
  out->kernel_w = s.kw;
  out->k = k;
  out->kp = kp;
  out->x_signed = s.x_signed;
  out->a_unsigned = s.w_signed;
  const bool flip = s.x_signed == s.w_signed;  // both int8, or both uint8
  out->a_xor = flip ? 0x80 : 0;
  const int64_t shift = !flip ? 0 : s.x_signed ? 128 : -128;
  out->panels.assign(blocks * simd::qgemm_panel_bytes(kp), 0);
  out->bias.assign(padded, 0);
  out->ratio.assign(padded, 0.f);
  out->w_zero.assign(padded, 0);
  out->zero.assign(s.c, static_cast<uint8_t>(s.x_zero));
  bool any_wz = false;
  for (size_t o = 0; o < s.m; ++o) {
    uint8_t* panel = out->panels.data() + (o / kQgemmNr) * simd::qgemm_panel_bytes(kp);
    int64_t wsum = 0;
    for (size_t t = 0; t < taps; ++t)
      for (size_t ch = 0; ch < s.c; ++ch) {
        const uint8_t v = s.transposed_fc ? s.w[ch * s.m + o] : s.w[(o * s.c + ch) * taps + t];
        panel[simd::qgemm_panel_index(t * s.c + ch, o % kQgemmNr)] = v;
        wsum += s.w_signed ? static_cast<int8_t>(v) : v;
      }
    const int64_t c0 = (s.bias ? s.bias[o] : 0) - (shift + s.x_zero) * wsum +
                       static_cast<int64_t>(k) * s.x_zero * s.w_zero[o];
    out->bias[o] = static_cast<int32_t>(static_cast<uint32_t>(c0));  // int32 arithmetic wraps back
    out->w_zero[o] = s.w_zero[o];
    any_wz = any_wz || s.w_zero[o] != 0;
    out->ratio[o] = s.x_scale * s.w_scale[o] / s.y_scale;
  }
  if (!any_wz) out->w_zero.clear();
  out->y_zero = s.y_zero;
  out->lo = s.lo;
  out->hi = s.hi;
}

void int8_conv(const Int8ConvWeights& w, const DenseConvGeometry& g, const uint8_t* x, uint8_t* y, pthreadpool_t pool) {
  Job j{&w, &g, x, y, g.batch * g.out_h * g.out_w, 0, 0};
  if (j.pixels == 0 || w.out_channels == 0) return;
  j.tiles = (j.pixels + kQgemmMr - 1) / kQgemmMr;
  // Enough tasks for every thread: split the channel panels when there are few pixel groups.
  const size_t groups = (j.tiles + kTilesPerTask - 1) / kTilesPerTask;
  const size_t blocks = (w.out_channels + kQgemmNr - 1) / kQgemmNr;
  const size_t want = 4 * (pool ? pthreadpool_get_threads_count(pool) : 1);
  const size_t chunks = std::min(blocks, std::max<size_t>(1, (want + groups - 1) / groups));
  j.blocks_per_chunk = (blocks + chunks - 1) / chunks;
  pthreadpool_parallelize_2d(pool, run_task, &j, groups, (blocks + j.blocks_per_chunk - 1) / j.blocks_per_chunk, 0);
}

bool int8_depthwise_fits(size_t kh, size_t kw) { return kh * kw <= kMaxTaps; }

// sum over taps of (x - xz)(w - wz) = sum x * (w - wz) - xz * sum (w - wz): a padded tap
// reads xz, so the identity holds for it too.
void pack_int8_depthwise(const Int8ConvSpec& s, Int8DepthwiseWeights* out) {
  const size_t taps = s.kh * s.kw, blocks = (s.m + kQgemmNr - 1) / kQgemmNr, padded = blocks * kQgemmNr;
  out->channels = s.m;
  out->kernel_h = s.kh;
  out->kernel_w = s.kw;
  out->x_signed = s.x_signed;
  out->w.assign(padded * taps, 0);
  out->bias.assign(padded, 0);
  out->ratio.assign(padded, 0.f);
  out->zero.assign(padded, static_cast<uint8_t>(s.x_zero));
  for (size_t ch = 0; ch < s.m; ++ch) {
    int64_t wsum = 0;
    for (size_t t = 0; t < taps; ++t) {
      const uint8_t v = s.w[ch * taps + t];
      const int32_t q = (s.w_signed ? static_cast<int8_t>(v) : v) - s.w_zero[ch];
      out->w[(ch / kQgemmNr) * taps * kQgemmNr + t * kQgemmNr + ch % kQgemmNr] = static_cast<int16_t>(q);
      wsum += q;
    }
    out->bias[ch] = static_cast<int32_t>((s.bias ? s.bias[ch] : 0) - s.x_zero * wsum);
    out->ratio[ch] = s.x_scale * s.w_scale[ch] / s.y_scale;
  }
  out->y_zero = s.y_zero;
  out->lo = s.lo;
  out->hi = s.hi;
}

namespace {

struct DwJob {
  const Int8DepthwiseWeights* w;
  const DenseConvGeometry* g;
  const uint8_t* x;
  uint8_t* y;
};

// The tap pointers of output pixel (n, oh, ow) and their steps to the next pixel along the
// row: x's zero point (step 0) where a tap falls outside.
void dw_taps(const DwJob& j, size_t n, size_t oh, size_t ow, const uint8_t** taps, size_t* step) {
  const Int8DepthwiseWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const int64_t ih0 = static_cast<int64_t>(oh * g.stride_h) - g.pad_top;
  const int64_t iw0 = static_cast<int64_t>(ow * g.stride_w) - g.pad_left;
  for (size_t kh = 0; kh < w.kernel_h; ++kh) {
    const int64_t ih = ih0 + static_cast<int64_t>(kh * g.dilation_h);
    for (size_t kw = 0; kw < w.kernel_w; ++kw) {
      const int64_t iw = iw0 + static_cast<int64_t>(kw * g.dilation_w);
      const bool inside = ih >= 0 && ih < static_cast<int64_t>(g.in_h) && iw >= 0 && iw < static_cast<int64_t>(g.in_w);
      const size_t t = kh * w.kernel_w + kw;
      taps[t] = inside ? j.x + ((n * g.in_h + static_cast<size_t>(ih)) * g.in_w + static_cast<size_t>(iw)) * g.in_stride
                       : w.zero.data();
      step[t] = inside ? g.stride_w * g.in_stride : 0;
    }
  }
}

// One output row: the pixels whose windows lie inside the row horizontally in one call, the
// edge pixels one at a time.
void dw_row(void* ctx, size_t row) {
  const DwJob& j = *static_cast<const DwJob*>(ctx);
  const Int8DepthwiseWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t n = row / g.out_h, oh = row % g.out_h, c = w.channels, ntaps = w.kernel_h * w.kernel_w;
  simd::QgemmEpilogue e;
  e.bias = w.bias.data(), e.ratio = w.ratio.data(), e.zp = w.y_zero, e.lo = w.lo, e.hi = w.hi;
  // Interior: iw0 >= 0 and iw0 + span < in_w.
  const int64_t span = static_cast<int64_t>((w.kernel_w - 1) * g.dilation_w), sw = static_cast<int64_t>(g.stride_w);
  const int64_t first = (g.pad_left + sw - 1) / sw;
  const int64_t last = static_cast<int64_t>(g.in_w) - span - 1 + g.pad_left;  // iw0 <= in_w - span - 1
  const size_t lo = static_cast<size_t>(std::clamp<int64_t>(first, 0, static_cast<int64_t>(g.out_w)));
  const size_t hi = last < 0 ? lo : std::max(lo, static_cast<size_t>(std::min<int64_t>(last / sw + 1, static_cast<int64_t>(g.out_w))));
  const uint8_t* taps[kMaxTaps];
  size_t step[kMaxTaps];
  uint8_t* y = j.y + row * g.out_w * c;
  for (size_t ow = 0; ow < g.out_w;) {
    const size_t npix = ow == lo && hi > lo ? hi - lo : 1;
    dw_taps(j, n, oh, ow, taps, step);
    simd::qdw_row(ntaps, taps, step, npix, w.x_signed, c, w.w.data(), e, y + ow * c);
    ow += npix;
  }
}

}  // namespace

void int8_depthwise(const Int8DepthwiseWeights& w, const DenseConvGeometry& g, const uint8_t* x, uint8_t* y,
                    pthreadpool_t pool) {
  if (g.batch * g.out_h * g.out_w == 0 || w.channels == 0) return;
  DwJob j{&w, &g, x, y};
  pthreadpool_parallelize_1d(pool, dw_row, &j, g.batch * g.out_h, 0);
}

}  // namespace kiln::delegates::xnnpack
