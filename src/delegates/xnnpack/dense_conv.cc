#include "delegates/xnnpack/dense_conv.h"
#include "delegates/xnnpack/dense_direct.h"
#include "delegates/xnnpack/dense_kernels.h"

#include <pthreadpool.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "delegates/xnnpack/support.h"
#include "kernels/simd/isa.h"
#include "kernels/thread_pool.h"
#include "kernels/simd/vmath.h"

namespace kiln::delegates::xnnpack {

namespace {

using namespace dense_kernels;  // NOLINT: the microkernels, their tables and tile sizes

constexpr size_t kMaxTaps = 64;  // larger kernels keep XNNPACK
constexpr size_t kTilesPerTask = 8;
constexpr size_t kWeightBudget = size_t{512} << 10;  // weight bytes a task's chunk keeps in L2

// The table (kernels/simd/isa.h), best first; the last runs anywhere. `direct`: the
// one-input-channel path, where the row has one.
struct Impl {
  const char* name;
  bool (*available)();
  const Microkernel (*kernels)[kMr + 1];
  const PairKernel (*pairs)[kMr + 1];  // two blocks per call, where the row has them
  const Microkernel (*half)[kMr + 1];  // nc <= 8: one 8-float vector per row, where the row has it
  // a layer's last block of 8 channels or fewer with the block before it (kOneAndHalfRows rows),
  // where the row has no pairs
  const PairKernel* one_and_half;
  Microkernel wide;                    // one block of kWideRows rows (two full tiles), where the row has it
  // two blocks of kWideRows evenly spaced rows (pair12_strided512), where the row has it
  void (*pair12)(size_t, size_t, const float*, size_t, size_t, const float*, size_t, const float*, float*, size_t,
                 size_t, float, float);
  void (*direct)(void*, size_t);
  void (*direct_few[5])(void*, size_t);  // 2-4 input channels (RGB stems), where the row has them
  size_t direct_few_max_out;             // ... of at most this many output channels
  DirectTask (*narrow)(size_t c, size_t m);  // narrow 1x1 layers (dense_direct.h), where the row has them
};
const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx512", simd::cpu_has_avx512f, kAvx512Kernels, kAvx512Pairs, kAvx2Half, nullptr, kAvx512Wide, pair12_strided512, direct_row_c1,
     {nullptr, nullptr, direct_row512_c2, direct_row512_c3, direct_row512_c4}, kNr, narrow_task512},
    {"avx2", simd::cpu_has_avx2, kAvx2Kernels, nullptr, kAvx2Half, kAvx2OneAndHalf, nullptr, nullptr, direct_row_c1,
     {nullptr, nullptr, direct_row256_c2, direct_row256_c3, direct_row256_c4}, 4 * kNr, narrow_task256},
#endif
#if defined(__aarch64__)
    {"neon", [] { return true; }, kNeonKernels, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, {}, 0, nullptr},
#endif
    {"plain", [] { return true; }, kPlainKernels, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, {}, 0, nullptr}};

const Impl& chosen() {
  static const Impl* impl = simd::pick_isa(kImpls);
  return *impl;
}

// The row for a layer of `pixels` output pixels: below one tile (a matrix-vector product, each
// weight used once) the AVX-512 row's weight stream ran slower than the AVX2 row's (regnet's
// 1x1 convolutions on 1x1 maps and its classifier at 1x3x32x32: 1.5-1.8x the AVX2 time).
const Impl& chosen_for(size_t pixels) {
  const Impl& best = chosen();
  if (pixels >= kMr || best.pairs == nullptr) return best;
  static const Impl* narrow = simd::find_isa(kImpls, "avx2");
  return narrow && narrow->available() ? *narrow : best;
}

struct Job {
  const DenseConvWeights* w;
  const DenseConvGeometry* g;
  const float* x;
  float* y;
  size_t pixels, tiles;
  size_t blocks_per_chunk;
  bool chunks_outer;
  size_t tiles_per_task = kTilesPerTask;  // a task's pixel group: at most kTilesPerTask tiles  // tasks run chunk by chunk (each chunk's weights stay in L2 across the pixels)
};

// The output pixel a tile starts at; run_task steps it from tile to tile (no division per tile).
struct TilePos {
  size_t n, oh, ow;
};

inline TilePos tile_pos(const DenseConvGeometry& g, size_t tile) {
  const size_t p0 = tile * kMr, plane = g.out_h * g.out_w;
  return {p0 / plane, p0 % plane / g.out_w, p0 % g.out_w};
}

inline void next_tile(const DenseConvGeometry& g, TilePos* p) {
  for (p->ow += kMr; p->ow >= g.out_w;) {
    p->ow -= g.out_w;
    if (++p->oh == g.out_h) p->oh = 0, ++p->n;
  }
}

// How a tile's input is read (run_task): a "row" tile (every pixel's window inside the input,
// taps along kw contiguous) passes one pointer per pixel, its first kernel row, and the
// microkernel steps kernel_h rows of kernel_w * c floats from it; a "patch" tile (a small
// window, taps * c <= kPatchFloats, at an edge) copies each pixel's window, zeros for padding,
// into one run of taps * c floats; any other tile passes one pointer per tap.
enum class TileKind : uint8_t { kRow, kPatch, kTaps };

// A window this small is copied at the edges: a 3-channel stem's 7x7 window is 49 taps of 3
// floats each through the tap path (a pointer and a short loop per tap), one run of 147 here.
constexpr size_t kPatchFloats = 160;

// One pixel's window (input origin ih0, iw0 of image n), zeros for padding: kernel row kh's
// kernel_w * c floats at out + kh * out_row (kernel_w * c: one run of taps * c floats).
inline void copy_window(const Job& j, size_t n, int64_t ih0, int64_t iw0, float* out, size_t out_row) {
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t c = w.in_channels;
  const int64_t in_h = static_cast<int64_t>(g.in_h), in_w = static_cast<int64_t>(g.in_w);
  for (size_t kh = 0; kh < w.kernel_h; ++kh, out += out_row) {
    const int64_t ih = ih0 + static_cast<int64_t>(kh * g.dilation_h);
    if (ih < 0 || ih >= in_h) {
      std::fill(out, out + w.kernel_w * c, 0.f);
      continue;
    }
    const float* row = j.x + (n * g.in_h + static_cast<size_t>(ih)) * g.in_w * g.in_stride;
    for (size_t kw = 0; kw < w.kernel_w; ++kw) {
      const int64_t iw = iw0 + static_cast<int64_t>(kw * g.dilation_w);
      float* dst = out + kw * c;
      if (iw < 0 || iw >= in_w) {
        std::fill(dst, dst + c, 0.f);
      } else if (g.dilation_w == 1 && g.in_stride == c) {  // the rest of the row's taps, inside, in one run
        const size_t run = std::min<size_t>(w.kernel_w - kw, static_cast<size_t>(in_w - iw));
        std::copy(row + static_cast<size_t>(iw) * c, row + (static_cast<size_t>(iw) + run) * c, dst);
        kw += run - 1;
      } else {
        std::copy(row + static_cast<size_t>(iw) * g.in_stride, row + static_cast<size_t>(iw) * g.in_stride + c, dst);
      }
    }
  }
}

// Where a task copies the windows of a row tile's edge pixels: each window's kernel rows
// row_step apart, as they lie in the input, so the microkernel reads them as it reads the
// input. Windows sit side by side in groups of row_step / (kernel_w * c); a group spans
// kernel_h * row_step floats. resnet_small's 16-channel 3x3 layers on 32x32 maps: a third of
// their 6-pixel tiles hold a pixel of column 0 or 31, and copying every pixel of those tiles
// into one run (a patch tile) cost them 17% against a pre-padded input.
constexpr size_t kEdgeFloats = 4096;
struct EdgeSlots {
  float* base = nullptr;
  size_t width = 0, per_group = 0, group_floats = 0, capacity = 0, used = 0;
};

inline EdgeSlots edge_slots(const Job& j, float* base) {
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  EdgeSlots e;
  if (g.dilation_w != 1 || g.in_stride != w.in_channels) return e;
  const size_t row_step = g.dilation_h * g.in_w * g.in_stride;
  e.base = base;
  e.width = w.kernel_w * w.in_channels;
  e.per_group = row_step / e.width;
  e.group_floats = w.kernel_h * row_step;
  e.capacity = e.per_group * (kEdgeFloats / e.group_floats);
  return e;
}

inline float* edge_slot(const EdgeSlots& e, size_t i) {
  return e.base + i / e.per_group * e.group_floats + i % e.per_group * e.width;
}

// A tap tile: one pointer per tap and pixel (the zero row for padding), then the taps that
// read only padding for every pixel dropped.
inline void gather_taps(const Job& j, size_t mr, const size_t* pn, const size_t* poh, const size_t* pow_,
                        const float** at, size_t* n_active, uint16_t* ids) {
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t taps = w.kernel_h * w.kernel_w;
  const int64_t in_h = static_cast<int64_t>(g.in_h), in_w = static_cast<int64_t>(g.in_w);
  for (size_t r = 0; r < mr; ++r) {
    const int64_t ih0 = static_cast<int64_t>(poh[r] * g.stride_h) - g.pad_top;
    const int64_t iw0 = static_cast<int64_t>(pow_[r] * g.stride_w) - g.pad_left;
    for (size_t kh = 0; kh < w.kernel_h; ++kh) {
      const int64_t ih = ih0 + static_cast<int64_t>(kh * g.dilation_h);
      const bool row_inside = ih >= 0 && ih < in_h;
      const float* row = j.x + (pn[r] * g.in_h + static_cast<size_t>(row_inside ? ih : 0)) * g.in_w * g.in_stride;
      for (size_t kw = 0; kw < w.kernel_w; ++kw) {
        const int64_t iw = iw0 + static_cast<int64_t>(kw * g.dilation_w);
        const bool inside = row_inside && iw >= 0 && iw < in_w;
        at[(kh * w.kernel_w + kw) * mr + r] = inside ? row + static_cast<size_t>(iw) * g.in_stride : w.zero.data();
      }
    }
  }
  // Taps that read only padding for every pixel of the tile add nothing: drop them (ASPP's
  // dilated 3x3 on a small map reads its centre tap alone).
  for (size_t t = 0; t < taps; ++t) {
    bool any = false;
    for (size_t r = 0; r < mr; ++r) any = any || at[t * mr + r] != w.zero.data();
    if (!any) continue;
    for (size_t r = 0; r < mr; ++r) at[*n_active * mr + r] = at[t * mr + r];
    ids[(*n_active)++] = static_cast<uint16_t>(t);
  }
}

// The input pointers of one tile of mr output pixels starting at `pos`, and its kind. A tap
// tile drops the taps that read only padding for every pixel (their indices in `ids`, their
// count in *n_active); a patch tile's windows go to `patch` (kMr * kPatchFloats floats); a row
// tile's edge windows to `edges`.
inline TileKind gather_tile(const Job& j, TilePos pos, size_t mr, const float** at, size_t* n_active, uint16_t* ids,
                            float* patch, EdgeSlots* edges) {
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t taps = w.kernel_h * w.kernel_w, c = w.in_channels;
  const int64_t in_h = static_cast<int64_t>(g.in_h), in_w = static_cast<int64_t>(g.in_w);
  const int64_t span_h = static_cast<int64_t>((w.kernel_h - 1) * g.dilation_h);
  const int64_t span_w = static_cast<int64_t>((w.kernel_w - 1) * g.dilation_w);
  bool rows = g.dilation_w == 1 && g.in_stride == c;
  if (rows && pos.ow + mr <= g.out_w) {  // one output row: its first and last windows bound the rest
    const int64_t ih0 = static_cast<int64_t>(pos.oh * g.stride_h) - g.pad_top;
    const int64_t iw0 = static_cast<int64_t>(pos.ow * g.stride_w) - g.pad_left;
    if (ih0 >= 0 && ih0 + span_h < in_h && iw0 >= 0 &&
        iw0 + static_cast<int64_t>((mr - 1) * g.stride_w) + span_w < in_w) {
      const float* first = j.x + ((pos.n * g.in_h + static_cast<size_t>(ih0)) * g.in_w + static_cast<size_t>(iw0)) * c;
      for (size_t r = 0; r < mr; ++r) at[r] = first + r * g.stride_w * c;
      *n_active = 0;
      return TileKind::kRow;
    }
  }
  size_t n = pos.n, oh = pos.oh, ow = pos.ow;
  size_t pn[kMr], poh[kMr], pow_[kMr], n_edge = 0;
  bool inside[kMr];
  for (size_t r = 0; r < mr; ++r) {
    pn[r] = n, poh[r] = oh, pow_[r] = ow;
    const int64_t ih0 = static_cast<int64_t>(oh * g.stride_h) - g.pad_top;
    const int64_t iw0 = static_cast<int64_t>(ow * g.stride_w) - g.pad_left;
    inside[r] = ih0 >= 0 && ih0 + span_h < in_h && iw0 >= 0 && iw0 + span_w < in_w;
    n_edge += !inside[r];
    if (++ow == g.out_w) {
      ow = 0;
      if (++oh == g.out_h) oh = 0, ++n;
    }
  }
  *n_active = 0;
  // Every tap inside (kernel rows are contiguous runs of kernel_w * c floats), or a small window
  // whose edge pixels fit the task's edge slots: a row tile.
  // Not a grouped layer's (channels in_stride apart): its small copies per tap cost more than the
  // tap tile's pointers (regnet_x_400mf's 16-channel groups, 3x3 at 2x128x128: 0.61 -> 0.49 ms
  // on the stride-2 layer, 0.25 -> 0.20 on the stride-1 ones).
  const bool small = taps > 1 && taps * c <= kPatchFloats && g.in_stride == c;
  if (rows && (n_edge == 0 || (small && edges->used + n_edge <= edges->capacity))) {
    for (size_t r = 0; r < mr; ++r) {
      const int64_t ih0 = static_cast<int64_t>(poh[r] * g.stride_h) - g.pad_top;
      const int64_t iw0 = static_cast<int64_t>(pow_[r] * g.stride_w) - g.pad_left;
      if (inside[r]) {
        at[r] = j.x + ((pn[r] * g.in_h + static_cast<size_t>(ih0)) * g.in_w + static_cast<size_t>(iw0)) * c;
        continue;
      }
      float* slot = edge_slot(*edges, edges->used++);
      copy_window(j, pn[r], ih0, iw0, slot, g.dilation_h * g.in_w * c);
      at[r] = slot;
    }
    return TileKind::kRow;
  }
  if (small) {
    for (size_t r = 0; r < mr; ++r) {
      at[r] = patch + r * kPatchFloats;
      copy_window(j, pn[r], static_cast<int64_t>(poh[r] * g.stride_h) - g.pad_top,
                  static_cast<int64_t>(pow_[r] * g.stride_w) - g.pad_left, patch + r * kPatchFloats, w.kernel_w * c);
    }
    return TileKind::kPatch;
  }
  gather_taps(j, mr, pn, poh, pow_, at, n_active, ids);
  return TileKind::kTaps;
}

// A 1x1 layer with many input channels and few output channels reads its input once, from
// memory, row by row of six pixels: the hardware prefetchers do not keep up (p144_32 at
// 4x80x80: 53 GFLOP/s against 102 with the input in cache). The next tile's rows are fetched
// while this one computes.
inline void prefetch_tile(const float* const* at, size_t mr, size_t c) {
  for (size_t r = 0; r < mr; ++r)
    for (size_t k = 0; k < c; k += 64 / sizeof(float)) __builtin_prefetch(at[r] + k);
}

// A task's tiles as gathered once (run_task) and read by each of its chunk's blocks: tile
// first + t has kind kinds[t], its input pointers a[t] (per row, or per tap and row) and, a tap
// tile, active[t] taps of indices ids[t].
struct TaskTiles {
  size_t first, last;
  const float* a[kTilesPerTask][kMaxTaps * kMr];
  TileKind kinds[kTilesPerTask];
  size_t active[kTilesPerTask];
  uint16_t ids[kTilesPerTask][kMaxTaps];
};

// A 1x1 layer's first block fetches the rows of the tile `ahead` tiles after `tile`.
inline void prefetch_ahead(const Job& j, const TaskTiles& t, size_t tile, size_t ahead) {
  if (ahead && tile + ahead < t.last)
    prefetch_tile(t.a[tile + ahead - t.first], std::min(kMr, j.pixels - (tile + ahead) * kMr), j.w->in_channels);
}

// The last two blocks of a task's chunk (16 < nc <= 24 channels from `panel`'s block) on
// the one-and-half kernel: the row and patch tiles' pixels in groups of kOneAndHalfRows
// (across tiles of the same kind), a tap tile through the block's and the half block's own
// kernels. `ahead`: tiles to prefetch ahead (a 1x1 layer's first blocks), or 0.
void run_one_and_half(const Job& j, const Impl& impl, const TaskTiles& t, size_t mb, size_t ahead) {
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t taps = w.kernel_h * w.kernel_w, c = w.in_channels, ys = out_stride(w, *j.g);
  const size_t block_floats = taps * c * kNr, row_step = g.dilation_h * g.in_w * g.in_stride;
  const size_t y0 = mb * kNr, nc = w.out_channels - y0;
  const float* panel = w.panels.data() + mb * block_floats;
  const float* bias = w.bias.data() + y0;
  const float* pa[kOneAndHalfRows];
  float* py[kOneAndHalfRows];
  size_t pending = 0;
  TileKind pending_kind = TileKind::kRow;
  const auto flush = [&] {
    if (pending == 0) return;
    const bool row = pending_kind == TileKind::kRow;
    impl.one_and_half[pending](row ? w.kernel_h : 1, nullptr, row ? w.kernel_w * c : taps * c, pa, row ? row_step : 0,
                               panel, kNr, block_floats, bias, py, nc, g.out_min, g.out_max);
    pending = 0;
  };
  for (size_t tile = t.first; tile < t.last; ++tile) {
    const size_t i = tile - t.first, p0 = tile * kMr, mr = std::min(kMr, j.pixels - p0);
    prefetch_ahead(j, t, tile, ahead);
    const TileKind kind = t.kinds[i];
    if (kind == TileKind::kTaps) {  // pointers laid out per tap for this tile's mr rows
      float* y[kMr];
      for (size_t r = 0; r < mr; ++r) y[r] = j.y + (p0 + r) * ys + y0;
      impl.kernels[0][mr](t.active[i], t.ids[i], c, t.a[i], 0, panel, kNr, bias, y, kNr, g.out_min, g.out_max);
      for (size_t r = 0; r < mr; ++r) y[r] += kNr;
      (impl.half ? impl.half : impl.kernels)[0][mr](t.active[i], t.ids[i], c, t.a[i], 0, panel + block_floats, kNr,
                                                    bias + kNr, y, nc - kNr, g.out_min, g.out_max);
      continue;
    }
    if (kind != pending_kind) flush();
    pending_kind = kind;
    for (size_t r = 0; r < mr; ++r) {
      pa[pending] = t.a[i][r];
      py[pending] = j.y + (p0 + r) * ys + y0;
      if (++pending == kOneAndHalfRows) flush();
    }
  }
  flush();
}

// Whether row tile i's twelve rows (its own and the next tile's) are evenly spaced, `lda`
// floats apart: a 1x1 layer's plain matrix, or one output row of a wider window.
bool even_rows(const TaskTiles& t, size_t i, ptrdiff_t* lda) {
  const float* const* a0 = t.a[i];
  const float* const* a1 = t.a[i + 1];
  *lda = a0[1] - a0[0];
  bool even = *lda > 0;
  for (size_t r = 2; r < kMr && even; ++r) even = a0[r] - a0[0] == static_cast<ptrdiff_t>(r) * *lda;
  for (size_t r = 0; r < kMr && even; ++r) even = a1[r] - a0[0] == static_cast<ptrdiff_t>(kMr + r) * *lda;
  return even;
}

// Every tile of the task on output-channel block mb (and, `pair`, block mb + 1): nc channels.
// Two tiles go to one call where the row has a kernel for them (the 12-row pair kernel, or
// the wide kernel for one block); `ahead` as in run_one_and_half.
void run_blocks(const Job& j, const Impl& impl, const TaskTiles& t, size_t mb, bool pair, size_t nc, size_t ahead) {
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t taps = w.kernel_h * w.kernel_w, c = w.in_channels, ys = out_stride(w, g);
  const size_t row_step = g.dilation_h * g.in_w * g.in_stride, block_floats = taps * c * kNr;
  const float* panel = w.panels.data() + mb * block_floats;
  const float* bias = w.bias.data() + mb * kNr;
  float* y[kMr];
  for (size_t tile = t.first; tile < t.last; ++tile) {
    const size_t i = tile - t.first, p0 = tile * kMr, mr = std::min(kMr, j.pixels - p0);
    prefetch_ahead(j, t, tile, ahead);
    const TileKind kind = t.kinds[i];
    const bool two = tile + 1 < t.last && p0 + kWideRows <= j.pixels && t.kinds[i + 1] == kind;
    ptrdiff_t lda = 0;
    if (pair && nc > kNr && impl.pair12 && kind == TileKind::kRow && two && even_rows(t, i, &lda)) {
      impl.pair12(w.kernel_h, w.kernel_w * c, t.a[i][0], static_cast<size_t>(lda), row_step, panel, block_floats, bias,
                  j.y + p0 * ys + mb * kNr, ys, nc, g.out_min, g.out_max);
      prefetch_ahead(j, t, ++tile, ahead);
      continue;
    }
    if (!pair && nc > kNr / 2 && impl.wide && kind != TileKind::kTaps && two) {
      // Two tiles of the same kind in one call: their row (or patch) pointers side by side.
      const float* a2[kWideRows];
      float* y2[kWideRows];
      for (size_t r = 0; r < kMr; ++r) a2[r] = t.a[i][r], a2[kMr + r] = t.a[i + 1][r];
      for (size_t r = 0; r < kWideRows; ++r) y2[r] = j.y + (p0 + r) * ys + mb * kNr;
      const bool row = kind == TileKind::kRow;
      impl.wide(row ? w.kernel_h : 1, nullptr, row ? w.kernel_w * c : taps * c, a2, row ? row_step : 0, panel, kNr,
                bias, y2, nc, g.out_min, g.out_max);
      prefetch_ahead(j, t, ++tile, ahead);
      continue;
    }
    for (size_t r = 0; r < mr; ++r) y[r] = j.y + (p0 + r) * ys + mb * kNr;
    const bool row = kind == TileKind::kRow;
    const size_t n_taps = row ? w.kernel_h : kind == TileKind::kPatch ? 1 : t.active[i];
    const size_t n_c = row ? w.kernel_w * c : kind == TileKind::kPatch ? taps * c : c;
    const uint16_t* tap_ids = kind == TileKind::kTaps ? t.ids[i] : nullptr;
    if (pair)
      impl.pairs[0][mr](n_taps, tap_ids, n_c, t.a[i], row ? row_step : 0, panel, block_floats, kNr, bias, y, nc,
                        g.out_min, g.out_max);
    else
      (nc <= kNr / 2 && impl.half ? impl.half : impl.kernels)[0][mr](n_taps, tap_ids, n_c, t.a[i], row ? row_step : 0,
                                                                    panel, kNr, bias, y, nc, g.out_min, g.out_max);
  }
}

// One task: kTilesPerTask tiles of kMr output pixels and one chunk of output-channel
// blocks. The input pointers of each tile and tap are computed once and reused by the
// chunk's blocks; each block's weight panel is reused by all the task's tiles.
void run_task(void* ctx, size_t i, size_t k) {
  const Job& j = *static_cast<const Job*>(ctx);
  const size_t group = j.chunks_outer ? k : i, chunk = j.chunks_outer ? i : k;
  const DenseConvWeights& w = *j.w;
  const DenseConvGeometry& g = *j.g;
  const size_t taps = w.kernel_h * w.kernel_w, m = w.out_channels;
  TaskTiles t;
  t.first = group * j.tiles_per_task;
  t.last = std::min(j.tiles, t.first + j.tiles_per_task);
  alignas(64) float patches[kTilesPerTask][kMr * kPatchFloats];
  alignas(64) float edge_floats[kEdgeFloats];
  EdgeSlots edges = edge_slots(j, edge_floats);
  TilePos pos = tile_pos(g, t.first);
  for (size_t tile = t.first; tile < t.last; ++tile, next_tile(g, &pos)) {
    const size_t i = tile - t.first;
    t.kinds[i] = gather_tile(j, pos, std::min(kMr, j.pixels - tile * kMr), t.a[i], &t.active[i], t.ids[i], patches[i],
                             &edges);
  }
  constexpr size_t kAhead = 2;  // tiles (1 and 3 measured slower on p144_24 and p144_32)
  if (taps == 1)
    for (size_t tile = t.first; tile < std::min(t.last, t.first + kAhead); ++tile)
      prefetch_tile(t.a[tile - t.first], std::min(kMr, j.pixels - tile * kMr), w.in_channels);
  const size_t blocks = (m + kNr - 1) / kNr, first_block = chunk * j.blocks_per_chunk;
  const Impl& impl = chosen_for(j.pixels);
  const size_t last_block = std::min(blocks, (chunk + 1) * j.blocks_per_chunk);
  for (size_t mb = first_block, step; mb < last_block; mb += step) {
    const bool pair = impl.pairs && mb + 1 < last_block;  // two blocks per call where the row has them
    // A last block of 8 channels or fewer (layers of 24, 40, 72, 88, ...) with the block before
    // it, where the row has no pairs: its own tiles would hold 6 accumulators, too few for the
    // FMA latency (mobilenet_v2's 144 -> 24 layer: that half block took 0.72 of the full
    // block's time).
    const bool one_and_half = !pair && impl.one_and_half && mb + 2 == last_block && last_block == blocks &&
                              m - mb * kNr <= kNr + kNr / 2;
    step = pair || one_and_half ? 2 : 1;
    const size_t ahead = taps == 1 && mb == first_block ? kAhead : 0;
    if (one_and_half)
      run_one_and_half(j, impl, t, mb, ahead);
    else
      run_blocks(j, impl, t, mb, pair, std::min(step * kNr, m - mb * kNr), ahead);
  }
  if (!g.gate) return;
  // The gate over the task's output, still in cache: its pixels, its chunk's channels.
  const size_t c0 = chunk * j.blocks_per_chunk * kNr, c1 = std::min(m, (chunk + 1) * j.blocks_per_chunk * kNr);
  const size_t p0 = t.first * kMr, p1 = std::min(j.pixels, t.last * kMr);
  gate_row(*g.gate, j.y + p0 * out_stride(w, g) + c0, p1 - p0, c1 - c0, out_stride(w, g));
}

// A grouped convolution's task: group i / pixel_groups, its pixel group i % pixel_groups, all
// of its output channels. The group's input channels are in_stride apart from x + group * C/G,
// its outputs out_stride apart from y + group * M/G.
struct GroupedJob {
  Job base;
  const DenseConvWeights* w;
  size_t pixel_groups;
};

void run_grouped_task(void* ctx, size_t i) {
  const GroupedJob& gj = *static_cast<const GroupedJob*>(ctx);
  const size_t group = i / gj.pixel_groups;
  Job j = gj.base;
  j.w = &gj.w[group];
  j.x += group * j.w->in_channels;
  j.y += group * j.w->out_channels;
  run_task(&j, i % gj.pixel_groups, 0);
}

}  // namespace

bool dense_conv_available() { return chosen().direct != nullptr; }

void grouped_dense_conv(const DenseConvWeights* w, size_t groups, const DenseConvGeometry& g, const float* x, float* y,
                        pthreadpool_t pool) {
  GroupedJob gj{Job{w, &g, x, y, g.batch * g.out_h * g.out_w, 0, 0, false}, w, 0};
  if (gj.base.pixels == 0 || groups == 0 || w->out_channels == 0) return;
  gj.base.tiles = (gj.base.pixels + kMr - 1) / kMr;
  gj.base.blocks_per_chunk = (w->out_channels + kNr - 1) / kNr;  // a task takes all of its group's channels
  // Enough tasks for every thread: smaller pixel groups where the groups are few.
  const size_t want = 4 * (pool ? pthreadpool_get_threads_count(pool) : 1);
  while (groups * ((gj.base.tiles + gj.base.tiles_per_task - 1) / gj.base.tiles_per_task) < want && gj.base.tiles_per_task > 1)
    --gj.base.tiles_per_task;
  gj.pixel_groups = (gj.base.tiles + gj.base.tiles_per_task - 1) / gj.base.tiles_per_task;
  pthreadpool_parallelize_1d(pool, run_grouped_task, &gj, groups * gj.pixel_groups, 0);
}

void pack_dense_conv(const float* w, const float* bias, size_t m, size_t c, size_t kh, size_t kw, bool transposed_fc,
                     DenseConvWeights* out) {
  const size_t taps = kh * kw, blocks = (m + kNr - 1) / kNr;
  out->out_channels = m;
  out->in_channels = c;
  out->kernel_h = kh;
  out->kernel_w = kw;
  out->panels.assign(blocks * taps * c * kNr, 0.f);
  out->bias.assign(blocks * kNr, 0.f);
  out->zero.assign(c, 0.f);
  for (size_t o = 0; o < m; ++o) {
    const size_t mb = o / kNr, j = o % kNr;
    if (bias) out->bias[o] = bias[o];
    for (size_t t = 0; t < taps; ++t)
      for (size_t k = 0; k < c; ++k)
        out->panels[((mb * taps + t) * c + k) * kNr + j] = transposed_fc ? w[k * m + o] : w[(o * c + k) * taps + t];
  }
}

void dense_conv(const DenseConvWeights& w, const DenseConvGeometry& g, const float* x, float* y, pthreadpool_t pool) {
  Job j{&w, &g, x, y, g.batch * g.out_h * g.out_w, 0, 0, false};
  if (j.pixels == 0 || w.out_channels == 0) return;
  const size_t taps = w.kernel_h * w.kernel_w;
  if (chosen().direct && w.in_channels == kDirectMaxChannels && taps > 1 && taps <= kDirectMaxTaps) {
    DirectJob d{&w, &g, x, y};
    pthreadpool_parallelize_1d(pool, chosen().direct, &d, g.batch * g.out_h, 0);
    return;
  }
  // 2-4 input channels: the direct rows, for as many output channels as the row takes. On the
  // AVX-512 row one block: with two or more the GEMM's pair kernel was as fast or faster in the
  // networks (efficientnet's 3->32 stem with its SiLU: 2.71 -> 2.87 ms direct; squeezenet's
  // 3->64: 3.26 -> 3.56). On the AVX2 row (no pair kernel, AMD Zen 3) up to four: at 2x224x224
  // the 3->16, 3->24, 3->32 and 3->64 stride-2 stems took 0.80, 0.93, 0.65 and 0.70 of the GEMM's time.
  if (w.in_channels < 5 && w.out_channels <= chosen().direct_few_max_out && taps > 1 && taps <= kDirectMaxTaps &&
      g.in_stride == w.in_channels && chosen().direct_few[w.in_channels]) {
    DirectJob d{&w, &g, x, y};
    pthreadpool_parallelize_1d(pool, chosen().direct_few[w.in_channels], &d, g.batch * g.out_h, 0);
    return;
  }
  // Past 32 outputs (groups of 32 per pixel group) the narrow rows only where the output is
  // contiguous: into a Concat's slice (squeezenet's 16 -> 64 and 32 -> 128 expand1x1 layers,
  // every second 256 or 512 bytes of the output row) they ran 1.1-1.3x the tiles' time in the
  // model (AMD Zen 3), though not in dense_conv alone; not understood yet.
  const bool narrow_fits = w.out_channels <= kNarrowMaxOut256 || out_stride(w, g) == w.out_channels;
  const DirectTask narrow = taps == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 && g.pad_left == 0 &&
                                    g.in_h == g.out_h && g.in_w == g.out_w && chosen().narrow && narrow_fits
                                ? chosen().narrow(w.in_channels, w.out_channels)
                                : nullptr;
  if (narrow) {
    DirectJob d{&w, &g, x, y};
    // Tasks enough for every thread: fewer pixels per task, in multiples of 24 (every pixel
    // group's size divides it), where the layer has few (mobilenet_v2's 64 -> 384 on 2x14x14 at
    // 2 threads: two tasks of 256 and 136 pixels ran 1.2x the tiles' time).
    const size_t want = 4 * (pool ? pthreadpool_get_threads_count(pool) : 1);
    if (want > 4 && (j.pixels + d.rows - 1) / d.rows < want)
      d.rows = std::max<size_t>(24, ((j.pixels + want - 1) / want + 23) / 24 * 24);
    pthreadpool_parallelize_1d(pool, narrow, &d, (j.pixels + d.rows - 1) / d.rows, 0);
    return;
  }
  j.tiles = (j.pixels + kMr - 1) / kMr;
  // Enough tasks for every thread: split the channel blocks when there are few pixel groups.
  size_t groups = (j.tiles + kTilesPerTask - 1) / kTilesPerTask;
  const size_t blocks = (w.out_channels + kNr - 1) / kNr;
  const size_t want = 4 * (pool ? pthreadpool_get_threads_count(pool) : 1);
  size_t chunks = std::min(blocks, std::max<size_t>(1, (want + groups - 1) / groups));
  // Weights larger than half of L2 (resnet's 512-channel 3x3: 9.4 MB) would stream from
  // memory once per pixel group: split them into chunks that stay in L2 and run all pixel
  // groups of a chunk before the next (the input is then what is re-read, from cache).
  const size_t block_bytes = w.kernel_h * w.kernel_w * w.in_channels * kNr * sizeof(float);
  if (groups > 1 && blocks * block_bytes > kWeightBudget) {
    chunks = std::max(chunks, (blocks * block_bytes + kWeightBudget - 1) / kWeightBudget);
    j.chunks_outer = true;
  }
  j.blocks_per_chunk = (blocks + chunks - 1) / chunks;
  if (j.blocks_per_chunk == 1 && blocks > 1 && !j.chunks_outer && chosen_for(j.pixels).pairs) {
    // Chunks of one block would run on the one-block kernel, bound by its broadcasts (half the
    // pair kernel's FLOPs per load): keep pairs, and make the pixel groups smaller instead, by
    // two tiles (the 12-row pair kernel's), until there are tasks enough (mnasnet's 576 -> 96
    // projections on 2x4x4 pixels at 2 threads: 6 one-block tasks, no faster than 1 thread).
    j.blocks_per_chunk = 2;
    const size_t pairs = (blocks + 1) / 2;
    while (groups * pairs < want && j.tiles_per_task > 2) {
      j.tiles_per_task -= 2;
      groups = (j.tiles + j.tiles_per_task - 1) / j.tiles_per_task;
    }
  }
  chunks = (blocks + j.blocks_per_chunk - 1) / j.blocks_per_chunk;
  if (j.chunks_outer)  // both threads on one weight chunk at a time: it is read from memory once
    pthreadpool_parallelize_2d(pool, run_task, &j, chunks, groups, kernels::kSharedSplitFlag);
  else
    pthreadpool_parallelize_2d(pool, run_task, &j, groups, chunks, 0);
}

// A window longer than the tap table (mel_frontend's 400-tap DFT, C = 1) runs when every tile is
// a row tile: kh pointers per pixel, each kernel row one run of kw * c floats.
bool dense_conv_fits(size_t kh, size_t kw, bool rows_only) { return kh * kw <= kMaxTaps || (rows_only && kh <= kMaxTaps); }

static_assert(kDenseTileRows == kMr && kDenseBlock == kNr);

void dense_gemm_rows(size_t rows, size_t k, const float* const* a, const float* panel, const float* bias,
                     float* const* y, size_t nc) {
  chosen().kernels[0][rows](1, nullptr, k, a, 0, panel, kNr, bias, y, nc, -INFINITY, INFINITY);
}

bool dense_gemm_has_pairs() { return chosen().pairs != nullptr; }

void dense_gemm_rows_pair(size_t rows, size_t k, const float* const* a, const float* panel, size_t panel_stride,
                          const float* bias, float* const* y, size_t nc) {
  chosen().pairs[0][rows](1, nullptr, k, a, 0, panel, panel_stride, kNr, bias, y, nc, -INFINITY, INFINITY);
}

bool dense_gemm_has_pair12() { return chosen().pair12 != nullptr; }

void dense_gemm_rows_pair12(size_t k, const float* a, size_t lda, const float* panel, size_t panel_stride,
                            const float* bias, float* y, size_t ldy, size_t nc) {
  chosen().pair12(1, k, a, lda, 0, panel, panel_stride, bias, y, ldy, nc, -INFINITY, INFINITY);
}

MatMulGeometry matmul_geometry(const int64_t* a_dims, int a_rank, const int64_t* b_dims, int b_rank) {
  MatMulGeometry g;
  g.m = static_cast<size_t>(a_dims[a_rank - 2]);
  g.k = static_cast<size_t>(a_dims[a_rank - 1]);
  g.n = static_cast<size_t>(b_dims[b_rank - 1]);
  const int ab = a_rank - 2, bb = b_rank - 2;
  g.batch_rank = std::max(ab, bb);
  size_t as = g.m * g.k, bs = g.k * g.n;
  g.batches = 1;
  for (int k = g.batch_rank - 1; k >= 0; --k) {
    const int ak = k - (g.batch_rank - ab), bk = k - (g.batch_rank - bb);
    const size_t ad = ak >= 0 ? static_cast<size_t>(a_dims[ak]) : 1, bd = bk >= 0 ? static_cast<size_t>(b_dims[bk]) : 1;
    g.size[k] = std::max(ad, bd);
    g.a_stride[k] = ad == 1 ? 0 : as;
    g.b_stride[k] = bd == 1 ? 0 : bs;
    as *= ad;
    bs *= bd;
    g.batches *= g.size[k];
  }
  return g;
}

namespace {

struct MatMulJob {
  const MatMulGeometry* g;
  const float *a, *b;
  float* y;
  size_t tiles;
};

// Batch t, kTilesPerTask tiles of kMr rows, every block of 16 columns.
void matmul_task(void* ctx, size_t t, size_t group) {
  alignas(64) static const float kZero[2 * kNr] = {};
  const MatMulJob& j = *static_cast<const MatMulJob*>(ctx);
  const MatMulGeometry& g = *j.g;
  size_t a_off = 0, b_off = 0, rest = t;
  for (int k = g.batch_rank - 1; k >= 0; --k) {
    const size_t i = rest % g.size[k];
    rest /= g.size[k];
    a_off += i * g.a_stride[k];
    b_off += i * g.b_stride[k];
  }
  const float* a = j.a + a_off;
  const float* b = j.b + b_off;
  float* y = j.y + t * g.m * g.n;
  const float* rows[kMr];
  float* out[kMr];
  const Impl& impl = chosen();
  for (size_t j0 = 0, step; j0 < g.n; j0 += step) {
    const bool pair = impl.pairs && g.n - j0 > kNr;  // 17 to 32 columns: one two-block call
    step = pair ? 2 * kNr : kNr;
    const size_t nc = std::min(step, g.n - j0);
    for (size_t tile = group * kTilesPerTask; tile < std::min(j.tiles, (group + 1) * kTilesPerTask); ++tile) {
      const size_t r0 = tile * kMr, mr = std::min(kMr, g.m - r0);
      for (size_t r = 0; r < mr; ++r) rows[r] = a + (r0 + r) * g.k, out[r] = y + (r0 + r) * g.n + j0;
      if (pair)
        impl.pairs[nc < step][mr](1, nullptr, g.k, rows, 0, b + j0, kNr, g.n, kZero, out, nc, -INFINITY, INFINITY);
      else if (nc <= kNr / 2 && impl.half)
        impl.half[nc < kNr / 2][mr](1, nullptr, g.k, rows, 0, b + j0, g.n, kZero, out, nc, -INFINITY, INFINITY);
      else
        impl.kernels[nc < kNr][mr](1, nullptr, g.k, rows, 0, b + j0, g.n, kZero, out, nc, -INFINITY, INFINITY);
    }
  }
}

}  // namespace

void batch_matmul(const MatMulGeometry& g, const float* a, const float* b, float* y, pthreadpool_t pool) {
  if (g.m == 0 || g.n == 0 || g.batches == 0) return;
  MatMulJob j{&g, a, b, y, (g.m + kMr - 1) / kMr};
  pthreadpool_parallelize_2d(pool, matmul_task, &j, g.batches, (j.tiles + kTilesPerTask - 1) / kTilesPerTask, 0);
}

}  // namespace kiln::delegates::xnnpack
