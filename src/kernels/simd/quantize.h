#pragma once
// Vectorized quantization of f32 arrays, the same results as the scalar definition on every
// CPU (AVX2 when present, else scalar): y = saturate(round_half_even(x / scale) + zp), with
// x / scale a correctly rounded f32 division (as ONNX Runtime's MLAS divides, not a multiply
// by 1/scale, which would move some values across a rounding boundary).

#include <cstddef>
#include <cstdint>

namespace kiln::simd {

/// The smallest and largest of x[0, n) (n > 0); false (nothing set) when one is NaN or infinite.
bool finite_min_max(const float* x, size_t n, float* lo, float* hi);

/// y[i] = saturate(round_half_even(x[i] / scale) + zp) into [lo, hi] (a subset of the type's
/// range); x must be finite.
void quantize_u8(const float* x, size_t n, float scale, int32_t zp, int32_t lo, int32_t hi, uint8_t* y);
void quantize_i8(const float* x, size_t n, float scale, int32_t zp, int32_t lo, int32_t hi, int8_t* y);

/// Requantization of int32 accumulators (quant.h): y[i] = saturate(round_half_even(
/// float(acc[i] + bias) * ratio) + zp) into [lo, hi], the same bits on every path.
void requantize_u8(const int32_t* acc, size_t n, int32_t bias, float ratio, int32_t zp, int32_t lo, int32_t hi, uint8_t* y);
void requantize_i8(const int32_t* acc, size_t n, int32_t bias, float ratio, int32_t zp, int32_t lo, int32_t hi, int8_t* y);

/// y[i] = float(x[i] - zp) * scale (DequantizeLinear), the same result on every path.
void dequantize_u8(const uint8_t* x, size_t n, float scale, int32_t zp, float* y);
void dequantize_i8(const int8_t* x, size_t n, float scale, int32_t zp, float* y);

/// out[i] = x[i] - zp as int16 (8-bit x: the result fits), for packing integer GEMM operands.
void widen_u8(const uint8_t* x, size_t n, int32_t zp, int16_t* out);
void widen_i8(const int8_t* x, size_t n, int32_t zp, int16_t* out);

/// out[2j + t] = row_t[j] (t = 0, 1) for j in [0, n) in blocks: the pair layout of
/// int8_gemm.h's packed B for one k pair, `block_stride` int16 between column blocks of 16.
void interleave_pairs(const int16_t* row0, const int16_t* row1, size_t n, int16_t* out, size_t block_stride);

}  // namespace kiln::simd
