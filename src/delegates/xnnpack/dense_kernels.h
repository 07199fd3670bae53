#pragma once
// The dense convolution's GEMM microkernels (dense_conv.cc tiles the layer and calls them through
// its ISA table): a tile of up to kMr output pixels times a block of kNr output channels, summed
// over taps and input channels, then bias, clamp and store. One table per ISA row: plain C++,
// AVX2+FMA (full, half and block-and-a-half blocks), AVX-512 (single, wide and pair blocks, the
// 12-row strided pair) and NEON.

#include <cstddef>
#include <cstdint>

namespace kiln::delegates::xnnpack::dense_kernels {

constexpr size_t kNr = 16;             // output channels per block (two 8-float vectors)
constexpr size_t kMr = 6;              // output pixels per microkernel call
constexpr size_t kWideRows = 2 * kMr;  // two tiles per call (the single-block wide kernel)
constexpr size_t kOneAndHalfRows = 4;  // rows of the block-and-a-half kernel (24 channels), where the row has it

// (taps, tap ids or null, c, a, a_step, panel, ldb, bias, y, nc, lo, hi): tap t of row r reads
// c floats at a[t * MR + r], or, with a_step != 0 (a "row" tile: one pointer per row), at
// a[r] + t * a_step.
using Microkernel = void (*)(size_t, const uint16_t*, size_t, const float* const*, size_t, const float*, size_t,
                             const float*, float* const*, size_t, float, float);

// Two blocks at once (AVX-512: 32 output channels in two zmm per row): the same contract, with
// the second block's weights `panel_stride` floats after the first's, `bias` 32 floats, and
// nc <= 32 channels stored.
using PairKernel = void (*)(size_t, const uint16_t*, size_t, const float* const*, size_t, const float*, size_t, size_t,
                            const float*, float* const*, size_t, float, float);

// [masked B][rows] tables; [rows] for the block and a half.
extern const Microkernel kPlainKernels[2][kMr + 1];
#if defined(__x86_64__)
extern const Microkernel kAvx2Kernels[2][kMr + 1];
extern const Microkernel kAvx2Half[2][kMr + 1];  // nc <= 8: the block's first 8 channels
extern const PairKernel kAvx2OneAndHalf[kOneAndHalfRows + 1];
extern const Microkernel kAvx512Kernels[2][kMr + 1];
extern const Microkernel kAvx512Wide;  // one block of kWideRows rows
extern const PairKernel kAvx512Pairs[2][kMr + 1];
// Two full tiles of two blocks whose rows are evenly spaced: row r reads a + r * lda (+ t *
// a_step for kernel row t), writes y + r * ldy.
void pair12_strided512(size_t taps, size_t c, const float* a, size_t lda, size_t a_step, const float* panel,
                       size_t panel_stride, const float* bias, float* y, size_t ldy, size_t nc, float lo, float hi);
#endif
#if defined(__aarch64__)
extern const Microkernel kNeonKernels[2][kMr + 1];
#endif

}  // namespace kiln::delegates::xnnpack::dense_kernels
