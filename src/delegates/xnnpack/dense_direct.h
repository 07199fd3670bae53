#pragma once
// The dense convolution's direct path (dense_conv.cc calls it): layers of one to four input
// channels, each output row computed directly instead of through the GEMM tiles; and the two
// helpers both files use.

#include <cstddef>

#include "delegates/xnnpack/dense_conv.h"
#include "delegates/xnnpack/support.h"
#include "kernels/simd/vmath.h"

namespace kiln::delegates::xnnpack {

// Floats between output pixels: M, or a Concat's total channels when the layer writes its slice.
inline size_t out_stride(const DenseConvWeights& w, const DenseConvGeometry& g) {
  return g.out_stride ? g.out_stride : w.out_channels;
}

// The gate over one output row of `pixels` pixels of `m` channels, `stride` floats apart.
inline void gate_row(const Gate& gt, float* row, size_t pixels, size_t m, size_t stride) {
  if (stride == m) {
    simd::gate(row, row, pixels * m, gt.hard, gt.alpha, gt.beta);
    return;
  }
  for (size_t p = 0; p < pixels; ++p) simd::gate(row + p * stride, row + p * stride, m, gt.hard, gt.alpha, gt.beta);
}

// One input channel (a spectrogram's first layer): a GEMM with K = taps this small is all
// setup (conformer_tiny's 3x3 stride-2 subsampling: 0.051 -> 0.037 ms). Each output row is
// computed directly: per 16-channel block, a group of pixels at once (their accumulators held in
// registers: independent FMA chains), each tap's C inputs broadcast against the packed panel;
// edge pixels in fours from zero-padded copies of their windows. 2-4 channels (RGB stems) take
// the same rows where the ISA row has them (dense_conv.cc: Impl::direct_few).
constexpr size_t kDirectMaxChannels = 1;
// A long one-channel window is a GEMM with a real K again: mel_frontend's 400-tap DFT (stride
// 160, 402 outputs) took 1.14 ms direct against 0.55 in ONNX Runtime.
constexpr size_t kDirectMaxTaps = 49;

using DirectTask = void (*)(void* ctx, size_t index);

// A 1x1 layer of at most 8 outputs and 16 inputs whose pixels are a matrix's evenly spaced rows
// (stride 1, no padding): a GEMM with K and N this small is all tile setup (mnasnet0_5's 16 -> 8
// projection on 2x64x64: 0.056 ms through the tiles, against 0.029 in ONNX Runtime). Its rows
// run in chunks of kNarrowRows pixels with the weights held in registers.
// On the AVX2 row (the weights reloaded from L1 per input, no room to hold them) up to 32
// outputs: mnasnet0_5's 8 -> 24 expansion on 2x64x64 spent as long in the tiles' bookkeeping as
// in their FMAs (AMD Zen 3); and up to 32 inputs (shufflenet_v2_x0_5's 24 -> 24 layers on
// 8x56x56: 0.88 ms through the tiles, against 0.53 in ONNX Runtime). Past 32 outputs, up to 96
// inputs and 256 KB of weights, in groups of 32 outputs: the tiles' calls over so few inputs are
// mostly setup and stores (AMD Zen 3, dense_conv alone: 16 -> 96 on 4x160x160 at 28 GFLOP/s
// through the tiles, 62 here; 24 -> 88 on 4x80x80 46 and 71; 48 -> 144 on 2x56x56 73 and 82);
// past 96 inputs or 256 KB of weights the tiles, which keep a panel in L1 (160 -> 960: 90 and 87).
constexpr size_t kNarrowMaxIn = 16, kNarrowMaxOut = 8, kNarrowMaxIn256 = 32, kNarrowMaxOut256 = 32, kNarrowRows = 256;
constexpr size_t kNarrowWideMaxIn256 = 96, kNarrowWideMaxBytes = size_t{256} << 10;

/// One direct row's job: the layer's weights and geometry, its input and output.
struct DirectJob {
  const DenseConvWeights* w;
  const DenseConvGeometry* g;
  const float* x;
  float* y;
  size_t rows = kNarrowRows;  ///< a narrow layer's pixels per task (a multiple of 24, at most kNarrowRows)
};

#if defined(__x86_64__)
/// Chunk `index` (DirectJob::rows pixels) of a narrow 1x1 layer's DirectJob (ctx) of c input
/// channels and m outputs (AVX-512: m <= kNarrowMaxOut): null for c = 0, c > kNarrowMaxIn or m
/// past the row's limit.
DirectTask narrow_task512(size_t c, size_t m);
/// The same on the AVX2 row: c <= kNarrowMaxIn256 and m <= kNarrowMaxOut256, or m larger, c <=
/// kNarrowWideMaxIn256 and c * m floats within kNarrowWideMaxBytes.
DirectTask narrow_task256(size_t c, size_t m);

/// Output row `row` (n * OH + oh) of a DirectJob (ctx): one input channel (AVX2 and FMA).
void direct_row_c1(void* ctx, size_t row);
/// The same for 2, 3 or 4 input channels (AVX2 and FMA).
void direct_row256_c2(void* ctx, size_t row);
void direct_row256_c3(void* ctx, size_t row);
void direct_row256_c4(void* ctx, size_t row);
/// The same for 2, 3 or 4 input channels and one block of outputs (AVX-512).
void direct_row512_c2(void* ctx, size_t row);
void direct_row512_c3(void* ctx, size_t row);
void direct_row512_c4(void* ctx, size_t row);
#endif

}  // namespace kiln::delegates::xnnpack
