#pragma once
// Elementwise f32 arithmetic over 2-D blocks (and sums of rows), with NaN kept: the XNNPACK delegate's Add, Sub,
// Mul, Div, Max, Min and Clamp (XNNPACK 2022 clamps its binary and clamp operators with x86
// max/min, which return the second operand when the first is NaN: a NaN Add gave -Inf, a NaN
// Relu gave 0, a plausible answer). Same results as the portable kernels, bit for bit:
// - the clamp keeps NaN (kernels::clamp_keep_nan's order: x < lo ? lo : x, then > hi);
// - Max and Min of a NaN and anything are NaN, in either position (torch.maximum/minimum, the
//   portable Max/Min).
// One ISA table (isa.h): AVX-512, AVX2, then plain C++ (which arm64 compiles with NEON); the
// loops are the same source, vectorized by the compiler for each row's target.
// Never allocates.

#include <cstddef>
#include <cstdint>

namespace kiln::simd {

enum class BinaryKind : uint8_t { kAdd, kSub, kMul, kDiv, kMax, kMin };

/// A block of `rows` rows of `cols` outputs: y[r * ldy + i] = clamp(a[r * lda + i * sa] op
/// b[r * ldb + i * sb], lo, hi), with sa and sb each 1 or 0 (0: the operand's value repeats
/// along the row; lda or ldb 0: its row repeats). lo = -inf and hi = +inf clamp nothing. y may
/// be a or b (in place), never a shifted view of them.
void binary_rows(BinaryKind op, const float* a, size_t lda, size_t sa, const float* b, size_t ldb, size_t sb,
                 float* y, size_t ldy, size_t rows, size_t cols, float lo, float hi);

/// y[i] = clamp(x[i], lo, hi) for i < n, NaN kept (Relu, Relu6, Clip).
void clamp(const float* x, float* y, size_t n, float lo, float hi);

/// acc[k] += x[r * ld + k] for r = 0, 1, ... rows - 1 in order, k < cols (a global average
/// pooling's channel sums over channels-last pixels).
void accumulate_rows(const float* x, size_t ld, size_t rows, size_t cols, float* acc);

/// The row the functions above run: "avx512", "avx2" or "plain".
const char* vbinary_isa();

}  // namespace kiln::simd
