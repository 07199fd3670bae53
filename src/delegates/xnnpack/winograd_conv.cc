#include "delegates/xnnpack/winograd_conv.h"

#include <pthreadpool.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "delegates/xnnpack/dense_conv.h"
#include "delegates/xnnpack/support.h"
#include "kernels/kernel.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/vmath.h"

namespace kiln::delegates::xnnpack {

namespace {

constexpr size_t kBlock = kDenseBlock;     // output channels per block (one panel column set)
constexpr size_t kRows = kDenseTileRows;   // tiles per microkernel call
constexpr size_t kMaxTiles = 48;           // tiles per task
constexpr size_t kInputBudget = 96 << 10;  // floats of transformed input per worker (384 KiB, in L2)
// Fewer channels than this (in or out) run direct: with 16 input channels each of the 16 GEMMs
// sums over 16 products only, and the transforms weigh as much as the multiplies they save.
// Intel AVX-512 (two blocks per call): squeezenet's 16 -> 64 at 4x79x79 took 4.3 ms as Winograd
// against 3.3 direct, resnet_small's 16 -> 16 at 8x32x32 0.64 against 0.44. AMD Zen 3 (AVX2, one
// block per call): whole models 0.935 (squeezenet 4x320) and 0.952 (resnet_small 8x64) of
// Winograd's time with those layers direct. From 32 channels Winograd stays ahead (2.9 vs 3.1 ms
// at 32 -> 128).
constexpr size_t kMinChannels = 32;
// Below this many tiles the direct kernel runs (winograd_pays): one layer with its weights in
// cache won at 4 tiles, but in resnet18 at 1x3x64x64 (4 tiles at 512 channels, weights from
// memory) Winograd took 1.2x the direct time; from 16 tiles (7x7 at 512) it took 0.76x.
constexpr size_t kMinTiles = 16;
// F(4x4, 3x3) against F(2x2) (one layer, interleaved runs, Zen 3 at 1 thread; bench notes in
// issue25_profile.md): 0.47-0.84 of F(2x2)'s time where its weights (36/9 of the direct ones) are
// few for its tiles. Each task streams all of them for its few tiles (6 at 384+ channels): it
// won with 4-9 tiles at up to 2.4 MB (64 -> 64 at 8x8 0.52, 128 -> 32 at 2x8x8 0.57, 128 ->
// 128 at 10x10 0.72) and 16 at 9.4 MB (256 -> 256 at 14x14 0.84), lost with 4 at 9.4-11 MB
// (1.15-1.17) and 16 at 19-21 MB (384 -> 384, 256 -> 512 at 14x14: 1.28-1.30). So F(4x4) where
// its tiles number at least 4 and one per 600 KB of its weights.
constexpr size_t kMinTiles4 = 4;
constexpr double kF4BytesPerTile = 600e3;

// Tiles per task: as many as the budget holds (`positions` transformed values per tile and
// channel), a multiple of the microkernel's rows.
size_t tiles_per_task(size_t c, size_t positions) {
  const size_t t = kInputBudget / (positions * c) / kRows * kRows;
  return std::min(kMaxTiles, std::max(kRows, t));
}

// Eight channels at once where the compiler has vectors (GCC vector extension: one ymm in the
// AVX2 clone, two xmm otherwise); the channel tail goes one at a time with the same code.
// Every function taking or returning one is inlined into its ISA's worker, so the ABI note
// GCC gives for 32-byte vectors without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float F8 __attribute__((vector_size(32)));
typedef float F16 __attribute__((vector_size(64)));  // one zmm in the AVX-512 clone

template <typename V>
__attribute__((always_inline)) inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V>
__attribute__((always_inline)) inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof(V));
}

// V = B^T d B for channels [ch, ch + lanes), d the 16 pixels of the tile's 4x4 window (row
// major), written to v[xi * stride + ch]. B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
template <typename V>
__attribute__((always_inline)) inline void transform_input(const float* const* d, size_t ch, float* v, size_t stride) {
  V t[16];
  for (int k = 0; k < 4; ++k) {
    const V d0 = load<V>(d[k] + ch), d1 = load<V>(d[4 + k] + ch), d2 = load<V>(d[8 + k] + ch),
            d3 = load<V>(d[12 + k] + ch);
    t[k] = d0 - d2, t[4 + k] = d1 + d2, t[8 + k] = d2 - d1, t[12 + k] = d1 - d3;
  }
  for (int i = 0; i < 4; ++i) {
    const V t0 = t[4 * i], t1 = t[4 * i + 1], t2 = t[4 * i + 2], t3 = t[4 * i + 3];
    store(v + (4 * i + 0) * stride + ch, t0 - t2);
    store(v + (4 * i + 1) * stride + ch, t1 + t2);
    store(v + (4 * i + 2) * stride + ch, t2 - t1);
    store(v + (4 * i + 3) * stride + ch, t1 - t3);
  }
}

// F(4x4, 3x3): V = B^T d B for a 6x6 window, B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
// 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1] (Lavin and Gray's points 0, +-1, +-2).
template <typename V>
__attribute__((always_inline)) inline void bt6(const V d0, const V d1, const V d2, const V d3, const V d4, const V d5,
                                               V r[6]) {
  const V four = V{} + 4.f, five = V{} + 5.f, two = V{} + 2.f;
  r[0] = four * d0 - five * d2 + d4;
  r[1] = (d3 + d4) - four * (d1 + d2);
  r[2] = (d4 - d3) + four * (d1 - d2);
  r[3] = (d4 - d2) + two * (d3 - d1);
  r[4] = (d4 - d2) - two * (d3 - d1);
  r[5] = four * d1 - five * d3 + d5;
}

template <typename V>
__attribute__((always_inline)) inline void transform_input6(const float* const* d, size_t ch, float* v, size_t stride) {
  V t[36];  // t[i][k]: B^T applied down column k
  for (int k = 0; k < 6; ++k) {
    V r[6];
    bt6<V>(load<V>(d[k] + ch), load<V>(d[6 + k] + ch), load<V>(d[12 + k] + ch), load<V>(d[18 + k] + ch),
           load<V>(d[24 + k] + ch), load<V>(d[30 + k] + ch), r);
    for (int i = 0; i < 6; ++i) t[6 * i + k] = r[i];
  }
  for (int i = 0; i < 6; ++i) {
    V r[6];
    bt6<V>(t[6 * i], t[6 * i + 1], t[6 * i + 2], t[6 * i + 3], t[6 * i + 4], t[6 * i + 5], r);
    for (int k = 0; k < 6; ++k) store(v + (6 * i + k) * stride + ch, r[k]);
  }
}

// F(4x4, 3x3): the 16 outputs of A^T M A, A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0;
// 0 1 -1 8 -8 1].
template <typename V>
__attribute__((always_inline)) inline void at6(const V m0, const V m1, const V m2, const V m3, const V m4, const V m5,
                                               V o[4]) {
  const V a = m1 + m2, b = m1 - m2, c = m3 + m4, e = m3 - m4;
  o[0] = m0 + a + c;
  o[1] = b + (V{} + 2.f) * e;
  o[2] = a + (V{} + 4.f) * c;
  o[3] = b + (V{} + 8.f) * e + m5;
}

template <typename V>
__attribute__((always_inline)) inline void transform_output6(const float* ms, size_t stride, size_t lane, V out[16]) {
  V s[24];  // s[i][k]: A^T applied down column k
  for (int k = 0; k < 6; ++k) {
    V o[4];
    at6<V>(load<V>(ms + k * stride + lane), load<V>(ms + (6 + k) * stride + lane), load<V>(ms + (12 + k) * stride + lane),
           load<V>(ms + (18 + k) * stride + lane), load<V>(ms + (24 + k) * stride + lane),
           load<V>(ms + (30 + k) * stride + lane), o);
    for (int i = 0; i < 4; ++i) s[6 * i + k] = o[i];
  }
  for (int i = 0; i < 4; ++i) at6<V>(s[6 * i], s[6 * i + 1], s[6 * i + 2], s[6 * i + 3], s[6 * i + 4], s[6 * i + 5], out + 4 * i);
}

// The four outputs (0,0), (0,1), (1,0), (1,1) of A^T M A for the lanes of V from `lane`,
// m[xi] at ms + xi * stride. A^T = [1 1 1 0; 0 1 -1 -1].
template <typename V>
__attribute__((always_inline)) inline void transform_output(const float* ms, size_t stride, size_t lane, V out[4]) {
  V m[16];
  for (int xi = 0; xi < 16; ++xi) m[xi] = load<V>(ms + xi * stride + lane);
  V s0[4], s1[4];
  for (int k = 0; k < 4; ++k) s0[k] = m[k] + m[4 + k] + m[8 + k], s1[k] = m[4 + k] - m[8 + k] - m[12 + k];
  out[0] = s0[0] + s0[1] + s0[2];
  out[1] = s0[1] - s0[2] - s0[3];
  out[2] = s1[0] + s1[1] + s1[2];
  out[3] = s1[1] - s1[2] - s1[3];
}

struct Job {
  const WinogradWeights* w;
  const DenseConvGeometry* g;
  const float* x;
  float* y;
  float* scratch;
  size_t per_slot;
  size_t tiles_h, tiles_w, tiles, per_task, chunks, blocks_per_chunk, tasks;
  size_t tile = 2, positions = 16;  // outputs per tile side (2 or 4), (tile + 2)^2
  std::atomic<size_t> next{0};
};

struct TileAt {
  size_t n, th, tw;
};

inline void next_tile(const Job& j, TileAt* t) {
  if (++t->tw == j.tiles_w) {
    t->tw = 0;
    if (++t->th == j.tiles_h) t->th = 0, ++t->n;
  }
}

// One output of the tile at channel o, summed directly from the original weights: the tiles
// whose transformed outputs are not finite (the direct sum's classes, NaN or +-Inf, exactly).
float direct_output(const Job& j, size_t n, size_t oh, size_t ow, size_t o) {
  const WinogradWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t c = w.in_channels;
  float s = w.bias[o];
  for (size_t kh = 0; kh < 3; ++kh) {
    const int64_t ih = static_cast<int64_t>(oh + kh) - g.pad_top;
    if (ih < 0 || ih >= static_cast<int64_t>(g.in_h)) continue;
    for (size_t kw = 0; kw < 3; ++kw) {
      const int64_t iw = static_cast<int64_t>(ow + kw) - g.pad_left;
      if (iw < 0 || iw >= static_cast<int64_t>(g.in_w)) continue;
      const float* px = j.x + ((n * g.in_h + static_cast<size_t>(ih)) * g.in_w + static_cast<size_t>(iw)) * g.in_stride;
      const float* wk = w.original + o * c * 9 + kh * 3 + kw;
      for (size_t ch = 0; ch < c; ++ch) s += px[ch] * wk[ch * 9];
    }
  }
  return s;
}

// A task's tiles: per_task of them from `first` (nt in all), the scratch's v [P][tt][c] their
// transformed inputs, ms [P][tt][ldm] one or two blocks' products (P: the window's positions).
struct TaskTiles {
  TileAt first;
  size_t nt, tt;
  float* v;
  float* ms;
};

// V = B^T d B of every tile of the task (T outputs a side: a (T + 2)^2 window), V's lanes of
// channels at a time.
template <typename V, size_t T>
__attribute__((always_inline)) inline void transform_tiles(const Job& j, const TaskTiles& k) {
  constexpr int kSide = static_cast<int>(T) + 2;
  constexpr size_t kLanes = sizeof(V) / sizeof(float);
  const DenseConvGeometry& g = *j.g;
  const size_t c = j.w->in_channels;
  const int64_t in_h = static_cast<int64_t>(g.in_h), in_w = static_cast<int64_t>(g.in_w);
  TileAt at = k.first;
  for (size_t t = 0; t < k.nt; ++t, next_tile(j, &at)) {
    const float* d[kSide * kSide];
    const int64_t ih0 = static_cast<int64_t>(T * at.th) - g.pad_top, iw0 = static_cast<int64_t>(T * at.tw) - g.pad_left;
    for (int i = 0; i < kSide; ++i)
      for (int q = 0; q < kSide; ++q) {
        const int64_t ih = ih0 + i, iw = iw0 + q;
        const bool inside = ih >= 0 && ih < in_h && iw >= 0 && iw < in_w;
        d[kSide * i + q] = inside ? j.x + ((at.n * g.in_h + static_cast<size_t>(ih)) * g.in_w + static_cast<size_t>(iw)) *
                                          g.in_stride
                              : j.w->zero.data();
      }
    size_t ch = 0;
    float* v = k.v + t * c;
    const size_t stride = k.tt * c;
    if constexpr (T == 2) {
      for (; ch + kLanes <= c; ch += kLanes) transform_input<V>(d, ch, v, stride);
      for (; ch + 8 <= c; ch += 8) transform_input<F8>(d, ch, v, stride);
      for (; ch < c; ++ch) transform_input<float>(d, ch, v, stride);
    } else {
      for (; ch + kLanes <= c; ch += kLanes) transform_input6<V>(d, ch, v, stride);
      for (; ch + 8 <= c; ch += 8) transform_input6<F8>(d, ch, v, stride);
      for (; ch < c; ++ch) transform_input6<float>(d, ch, v, stride);
    }
  }
}

// M = U V for the P positions and blocks [mb, mb + step) (step 2: one pair call per row group).
inline void multiply_blocks(const Job& j, const TaskTiles& k, size_t mb, size_t step, size_t ldm) {
  alignas(64) static const float kZero[2 * kBlock] = {};
  const size_t c = j.w->in_channels, tt = k.tt, np = j.positions;
  for (size_t xi = 0; xi < np; ++xi) {
    const float* panel = j.w->panels.data() + (mb * np + xi) * c * kBlock;
    const float* a[kRows];
    float* out[kRows];
    size_t r0 = 0;
    if (step == 2 && dense_gemm_has_pair12())  // twelve tiles per call (their rows c apart)
      for (; r0 + 2 * kRows <= k.nt; r0 += 2 * kRows)
        dense_gemm_rows_pair12(c, k.v + (xi * tt + r0) * c, c, panel, np * c * kBlock, kZero,
                               k.ms + (xi * tt + r0) * ldm, ldm, ldm);
    for (; r0 < k.nt; r0 += kRows) {
      const size_t mr = std::min(kRows, k.nt - r0);
      for (size_t r = 0; r < mr; ++r) a[r] = k.v + (xi * tt + r0 + r) * c, out[r] = k.ms + (xi * tt + r0 + r) * ldm;
      if (step == 2)
        dense_gemm_rows_pair(mr, c, a, panel, np * c * kBlock, kZero, out, ldm);
      else
        dense_gemm_rows(mr, c, a, panel, kZero, out, kBlock);
    }
  }
}

// Y = A^T M A + bias, clamped, for blocks [mb, mb + step) of every tile; a tile whose outputs are
// not all finite is summed again directly (the direct sum's classes, NaN or +-Inf, exactly).
template <typename V, size_t T>
__attribute__((always_inline)) inline void output_tiles(const Job& j, const TaskTiles& k, size_t mb, size_t step,
                                                         size_t ldm) {
  constexpr size_t kOut = T * T;
  constexpr size_t kLanes = sizeof(V) / sizeof(float);
  const DenseConvGeometry& g = *j.g;
  const size_t m = j.w->out_channels, nc = std::min(step * kBlock, m - mb * kBlock);
  const size_t ys = g.out_stride ? g.out_stride : m;
  const V lo = V{} + g.out_min, hi = V{} + g.out_max;
  const float* bias = j.w->bias.data() + mb * kBlock;
  TileAt at = k.first;
  for (size_t t = 0; t < k.nt; ++t, next_tile(j, &at)) {
    alignas(64) float res[kOut][2 * kBlock];
    V probe = V{};
    for (size_t lane = 0; lane < step * kBlock; lane += kLanes) {
      V o[kOut];
      if constexpr (T == 2)
        transform_output(k.ms + t * ldm, k.tt * ldm, lane, o);
      else
        transform_output6(k.ms + t * ldm, k.tt * ldm, lane, o);
      const V b = load<V>(bias + lane);
      for (size_t q = 0; q < kOut; ++q) {
        o[q] += b;
        probe += o[q] * 0.f;  // NaN where an output is NaN or +-Inf
        o[q] = o[q] < lo ? lo : o[q];  // comparisons with NaN are false: NaN stays
        o[q] = o[q] > hi ? hi : o[q];
        store(res[q] + lane, o[q]);
      }
    }
    bool finite = true;
    for (size_t l = 0; l < kLanes; ++l) finite = finite && probe[l] == 0.f;
    for (size_t q = 0; q < kOut; ++q) {
      const size_t oh = T * at.th + q / T, ow = T * at.tw + q % T;
      if (oh >= g.out_h || ow >= g.out_w) continue;
      float* yp = j.y + ((at.n * g.out_h + oh) * g.out_w + ow) * ys + mb * kBlock;
      if (finite) {
        std::memcpy(yp, res[q], nc * sizeof(float));
        continue;
      }
      for (size_t o = 0; o < nc; ++o)
        yp[o] = kernels::clamp_keep_nan(direct_output(j, at.n, oh, ow, mb * kBlock + o), g.out_min, g.out_max);
    }
  }
}

// One task: per_task tiles (their inputs transformed once) and a chunk of channel blocks, two
// blocks per GEMM call where the row has them (AVX-512: one block is bound by its loads), then
// the gate over the chunk's outputs, still in cache. V is the transforms' vector: F16 in the
// AVX-512 worker, F8 otherwise.
template <typename V, size_t T>
__attribute__((always_inline)) inline void run_task(const Job& j, size_t task, float* scratch) {
  const DenseConvGeometry& g = *j.g;
  const size_t c = j.w->in_channels, m = j.w->out_channels, tt = j.per_task;
  const size_t group = task / j.chunks, chunk = task % j.chunks, t0 = group * tt, plane = j.tiles_h * j.tiles_w;
  const TaskTiles k{{t0 / plane, t0 % plane / j.tiles_w, t0 % j.tiles_w}, std::min(j.tiles, t0 + tt) - t0, tt, scratch,
                    scratch + j.positions * tt * c};
  transform_tiles<V, T>(j, k);
  const size_t per_call = dense_gemm_has_pairs() ? 2 : 1, ldm = per_call * kBlock;
  const size_t blocks = (m + kBlock - 1) / kBlock;
  const size_t b0 = chunk * j.blocks_per_chunk, b1 = std::min(blocks, b0 + j.blocks_per_chunk);
  for (size_t mb = b0, step; mb < b1; mb += step) {
    step = std::min(per_call, b1 - mb);
    multiply_blocks(j, k, mb, step, ldm);
    output_tiles<V, T>(j, k, mb, step, ldm);
  }
  if (!g.gate) return;
  const size_t c0 = b0 * kBlock, c1 = std::min(m, b1 * kBlock), ys = g.out_stride ? g.out_stride : m;
  TileAt at = k.first;
  for (size_t t = 0; t < k.nt; ++t, next_tile(j, &at))
    for (size_t oh = T * at.th; oh < std::min(g.out_h, T * at.th + T); ++oh)
      for (size_t ow = T * at.tw; ow < std::min(g.out_w, T * at.tw + T); ++ow) {
        float* yp = j.y + ((at.n * g.out_h + oh) * g.out_w + ow) * ys + c0;
        simd::gate(yp, yp, c1 - c0, g.gate->hard, g.gate->alpha, g.gate->beta);
      }
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx2,fma"))) void worker_avx512(void* ctx, size_t slot) {
  Job& j = *static_cast<Job*>(ctx);
  for (size_t t; (t = j.next.fetch_add(1, std::memory_order_relaxed)) < j.tasks;)
    j.tile == 2 ? run_task<F16, 2>(j, t, j.scratch + slot * j.per_slot)
                : run_task<F16, 4>(j, t, j.scratch + slot * j.per_slot);
}

__attribute__((target("avx2,fma"))) void worker_avx2(void* ctx, size_t slot) {
  Job& j = *static_cast<Job*>(ctx);
  for (size_t t; (t = j.next.fetch_add(1, std::memory_order_relaxed)) < j.tasks;)
    j.tile == 2 ? run_task<F8, 2>(j, t, j.scratch + slot * j.per_slot)
                : run_task<F8, 4>(j, t, j.scratch + slot * j.per_slot);
}
#endif

void worker_plain(void* ctx, size_t slot) {
  Job& j = *static_cast<Job*>(ctx);
  for (size_t t; (t = j.next.fetch_add(1, std::memory_order_relaxed)) < j.tasks;)
    j.tile == 2 ? run_task<F8, 2>(j, t, j.scratch + slot * j.per_slot)
                : run_task<F8, 4>(j, t, j.scratch + slot * j.per_slot);
}

struct Impl {
  const char* name;
  bool (*available)();
  void (*worker)(void*, size_t);  // runs tasks until none is left, in scratch slot `slot`
};
const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx512", simd::cpu_has_avx512f, worker_avx512},
    {"avx2", simd::cpu_has_avx2, worker_avx2},
#endif
    {"plain", [] { return true; }, worker_plain}};

}  // namespace

bool winograd_fits(size_t kh, size_t kw, size_t stride_h, size_t stride_w, size_t dilation_h, size_t dilation_w,
                   size_t groups, size_t in_channels, size_t out_channels) {
  return kh == 3 && kw == 3 && stride_h == 1 && stride_w == 1 && dilation_h == 1 && dilation_w == 1 && groups == 1 &&
         in_channels >= kMinChannels && out_channels >= kMinChannels;
}

void pack_winograd(const float* w, const float* bias, size_t m, size_t c, size_t tile, WinogradWeights* out) {
  // U = G g G^T per position, in double. F(2x2): G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1];
  // F(4x4): G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1].
  static const double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static const double kG4[6][3] = {{0.25, 0, 0},
                                   {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                   {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                   {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                   {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                   {0, 0, 1}};
  const size_t side = tile + 2, np = side * side, blocks = (m + kBlock - 1) / kBlock;
  const double(*kg)[3] = tile == 4 ? kG4 : kG2;
  out->tile = tile == 4 ? 4 : 2;
  out->out_channels = m;
  out->in_channels = c;
  out->panels.assign(blocks * np * c * kBlock, 0.f);
  out->bias.assign(blocks * kBlock, 0.f);
  out->zero.assign(c, 0.f);
  out->original = w;
  for (size_t o = 0; o < m; ++o) {
    if (bias) out->bias[o] = bias[o];
    const size_t mb = o / kBlock, lane = o % kBlock;
    for (size_t ch = 0; ch < c; ++ch) {
      const float* g = w + (o * c + ch) * 9;
      double gg[6][3];  // G g
      for (size_t i = 0; i < side; ++i)
        for (int k = 0; k < 3; ++k) gg[i][k] = kg[i][0] * g[k] + kg[i][1] * g[3 + k] + kg[i][2] * g[6 + k];
      for (size_t i = 0; i < side; ++i)
        for (size_t k = 0; k < side; ++k) {
          const double u = gg[i][0] * kg[k][0] + gg[i][1] * kg[k][1] + gg[i][2] * kg[k][2];
          out->panels[((mb * np + side * i + k) * c + ch) * kBlock + lane] = static_cast<float>(u);
        }
    }
  }
}

size_t winograd_scratch_floats(const WinogradWeights& w) {
  const size_t np = (w.tile + 2) * (w.tile + 2);
  return np * tiles_per_task(w.in_channels, np) * (w.in_channels + 2 * kBlock);
}

bool winograd_pays(const DenseConvGeometry& g, size_t tile) {
  return g.batch * ((g.out_h + tile - 1) / tile) * ((g.out_w + tile - 1) / tile) >= (tile == 4 ? kMinTiles4 : kMinTiles);
}

size_t winograd_tile(const DenseConvGeometry& g, size_t c, size_t m) {
  const size_t tiles4 = g.batch * ((g.out_h + 3) / 4) * ((g.out_w + 3) / 4);
  const double f4_bytes = 36.0 * static_cast<double>(c) * static_cast<double>(m) * sizeof(float);
  return tiles4 >= kMinTiles4 && static_cast<double>(tiles4) * kF4BytesPerTile >= f4_bytes ? 4 : 2;
}

void winograd_conv(const WinogradWeights& w, const DenseConvGeometry& g, const float* x, float* y, float* scratch,
                   size_t slots, pthreadpool_t pool) {
  static const Impl* impl = simd::pick_isa(kImpls);
  const size_t tile = w.tile;
  Job j{&w, &g, x, y, scratch, winograd_scratch_floats(w), (g.out_h + tile - 1) / tile, (g.out_w + tile - 1) / tile,
        0, 0, 0, 0, 0};
  j.tile = tile, j.positions = (tile + 2) * (tile + 2);
  j.tiles = g.batch * j.tiles_h * j.tiles_w;
  if (j.tiles == 0 || w.out_channels == 0) return;
  const size_t threads = pool ? pthreadpool_get_threads_count(pool) : 1;
  j.per_task = tiles_per_task(w.in_channels, j.positions);
  // Enough tasks for every thread: split the tiles first (down to one microkernel's rows per
  // task), then the channel blocks. Each task transforms its tiles' input, so every chunk of a
  // tile group transforms it again: resnet_small's last 3x3 (32 tiles, 128 channels) was
  // split into 8 chunks of one group and took as long on 2 threads as on 1.
  if (threads > 1) {
    const size_t share = (j.tiles + 4 * threads - 1) / (4 * threads);
    j.per_task = std::min(j.per_task, std::max(kRows, (share + kRows - 1) / kRows * kRows));
  }
  const size_t groups = (j.tiles + j.per_task - 1) / j.per_task, blocks = (w.out_channels + kBlock - 1) / kBlock;
  const size_t chunks =
      threads == 1 || groups >= 2 * threads ? 1 : std::min(blocks, (2 * threads + groups - 1) / groups);
  j.blocks_per_chunk = (blocks + chunks - 1) / chunks;
  j.chunks = (blocks + j.blocks_per_chunk - 1) / j.blocks_per_chunk;
  j.tasks = groups * j.chunks;
  const size_t workers = std::max<size_t>(1, std::min({slots, threads, j.tasks}));
  if (workers == 1) {
    impl->worker(&j, 0);
    return;
  }
  pthreadpool_parallelize_1d(pool, impl->worker, &j, workers, 0);
}

}  // namespace kiln::delegates::xnnpack
