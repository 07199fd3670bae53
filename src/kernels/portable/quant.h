#pragma once
// What the quantized kernels share: reading scales and zero points, the checks of their
// shape functions, and requantization, the one rounding every int8 path reproduces.
//
// Requantization, as ONNX Runtime's MLAS and XNNPACK's fp32 requantization do it: the int32
// accumulator times the f32 scale ratio (x_scale * w_scale / y_scale, computed in that
// order in f32), clamped to [qmin - zp, qmax - zp], rounded half to even, plus the zero
// point. An integer path that keeps this rounding gives the same bytes as the portable one.

#include <cmath>
#include <limits>
#include <string>

#include "kernels/kernel.h"

namespace kiln::kernels {

/// Element k of an i8, u8 or i32 tensor as an int32.
inline int32_t int_at(const TensorView& t, int64_t k) {
  if (t.dtype == DType::kI8) return t.as<int8_t>()[k];
  if (t.dtype == DType::kU8) return t.as<uint8_t>()[k];
  return t.as<int32_t>()[k];
}

/// Zero point input #i of `c` at element k (0 when the input is omitted; element 0 when it
/// holds one value).
inline int32_t zero_point_at(const RunCtx& c, uint32_t i, int64_t k = 0) {
  if (!c.has_input(i)) return 0;
  const TensorView& z = c.in(i);
  return int_at(z, z.numel() == 1 ? 0 : k);
}

/// Scale input #i at element k (element 0 when it holds one value).
inline float scale_at(const RunCtx& c, uint32_t i, int64_t k = 0) {
  const TensorView& s = c.in(i);
  return s.as<float>()[s.numel() == 1 ? 0 : k];
}

/// The range of a quantized dtype: [-128, 127] for i8, [0, 255] for u8.
inline int32_t qmin(DType t) { return t == DType::kI8 ? -128 : 0; }
inline int32_t qmax(DType t) { return t == DType::kI8 ? 127 : 255; }

/// A value already divided by the output scale, rounded half to even, plus zero point zp,
/// saturated to [lo, hi] (the dtype's range, or narrower for a fused Relu).
inline int32_t round_to_quantum(float v, int32_t zp, int32_t lo, int32_t hi) {
  const float fl = static_cast<float>(lo - zp), fh = static_cast<float>(hi - zp);
  v = v < fl ? fl : v > fh ? fh : v;
  return static_cast<int32_t>(std::nearbyint(v)) + zp;
}

/// Requantizes an int32 accumulator with scale ratio `ratio` (see the file comment).
inline int32_t requantize(int32_t acc, float ratio, int32_t zp, int32_t lo, int32_t hi) {
  return round_to_quantum(static_cast<float>(acc) * ratio, zp, lo, hi);
}

/// Writes v (already saturated) into element k of an i8 or u8 output.
inline void store_q(TensorView& y, int64_t k, int32_t v) {
  if (y.dtype == DType::kI8)
    y.as<int8_t>()[k] = static_cast<int8_t>(v);
  else
    y.as<uint8_t>()[k] = static_cast<uint8_t>(v);
}

/// Shape-function checks of a quantized operand: input #x is i8 or u8 (or `also_i32`), its
/// scale #s f32 and its zero point #z (optional) of x's dtype; scale and zero point hold one
/// value, or, with `per_axis_len` set, one per entry of that 1-D length. Constant scales
/// must be finite and positive.
Status check_quantized_operand(ShapeCtx& c, size_t x, size_t s, size_t z, ExprId per_axis_len = core::kNoExpr);

/// The zero point's dtype decides a quantized output's: input #z must be i8 or u8.
Result<DType> quantized_output_dtype(ShapeCtx& c, size_t z);

}  // namespace kiln::kernels
