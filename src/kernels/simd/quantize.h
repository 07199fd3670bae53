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

}  // namespace kiln::simd
