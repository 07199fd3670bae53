// QuantizeLinear and DequantizeLinear (ONNX opset 10, 13 and later), the reference for every
// faster int8 path.
//
// QuantizeLinear(x f32, scale f32, zero_point i8/u8?): y = saturate(round(x / scale) + zp),
// rounding half to even, saturating to [-128, 127] (i8) or [0, 255] (u8); y takes the zero
// point's dtype (u8 when it is absent). x / scale is computed in f32 (as ONNX Runtime does).
// A NaN or infinite x fails the run: an int8 value cannot carry it, and a saturated or zero
// value would be a plausible answer (the non-finite rule).
// DequantizeLinear(x i8/u8/i32, scale f32, zero_point?): y = (x - zp) * scale in f32 (an i32 x
// has no zero point).
// scale (and zero_point, of the same shape) is one value (per tensor) or a 1-D tensor of x's
// size on `axis` (attr, default 1; per channel). Blocked quantization (opset 21 block_size)
// is not supported.
#include <cmath>
#include <limits>
#include <string>

#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/quant.h"
#include "kernels/simd/quantize.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// The scale's layout: per tensor (channels 1) or per channel along `axis`.
struct QuantAxis {
  int64_t axis = 0, channels = 1, inner = 1;  // x as [outer, channels, inner]
};

bool quant_axis(const RunCtx& c, const TensorView& x, QuantAxis* q) {
  const TensorView& s = c.in(1);
  if (s.numel() == 1 && s.rank <= 1) return true;
  if (s.rank != 1 || x.rank == 0) return false;
  int64_t axis = c.attrs.get_int("axis", 1);
  if (axis < 0) axis += x.rank;
  if (axis < 0 || axis >= x.rank || s.dims[0] != x.dims[axis]) return false;
  q->axis = axis;
  q->channels = x.dims[axis];
  for (int a = static_cast<int>(axis) + 1; a < x.rank; ++a) q->inner *= x.dims[a];
  return !c.has_input(2) || c.in(2).numel() == q->channels;
}

template <typename T>
KernelStatus quantize_typed(const RunCtx& c, const QuantAxis& q) {
  const TensorView& x = c.in(0);
  const float* xs = x.as<float>();
  const float* scale = c.in(1).as<float>();
  T* y = c.out(0).as<T>();
  const int32_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  const int64_t n = x.numel();
  float mn, mx;
  if (n > 0 && !simd::finite_min_max(xs, static_cast<size_t>(n), &mn, &mx)) return KernelStatus::kInvalidValue;
  // Runs of `inner` values share a channel (the whole tensor per tensor).
  const int64_t run = q.channels == 1 ? n : q.inner;
  for (int64_t i = 0; i < n; i += run) {
    const int64_t ch = q.channels == 1 ? 0 : i / q.inner % q.channels;
    if constexpr (std::is_same_v<T, uint8_t>)
      simd::quantize_u8(xs + i, static_cast<size_t>(run), scale[ch], zero_point_at(c, 2, ch), lo, hi, y + i);
    else
      simd::quantize_i8(xs + i, static_cast<size_t>(run), scale[ch], zero_point_at(c, 2, ch), lo, hi, y + i);
  }
  return KernelStatus::kOk;
}

template <typename T>
void dequantize_typed(const RunCtx& c, const QuantAxis& q) {
  const TensorView& x = c.in(0);
  const T* xs = x.as<T>();
  const float* scale = c.in(1).as<float>();
  float* y = c.out(0).as<float>();
  const int64_t n = x.numel();
  const int64_t run = q.channels == 1 ? n : q.inner;  // values sharing a channel
  for (int64_t i = 0; i < n; i += run) {
    const int64_t ch = q.channels == 1 ? 0 : i / q.inner % q.channels;
    if constexpr (std::is_same_v<T, uint8_t>)
      simd::dequantize_u8(xs + i, static_cast<size_t>(run), scale[ch], zero_point_at(c, 2, ch), y + i);
    else if constexpr (std::is_same_v<T, int8_t>)
      simd::dequantize_i8(xs + i, static_cast<size_t>(run), scale[ch], zero_point_at(c, 2, ch), y + i);
    else
      for (int64_t k = i; k < i + run; ++k) y[k] = static_cast<float>(static_cast<int32_t>(xs[k]) - zero_point_at(c, 2, ch)) * scale[ch];
  }
}

// The operands both ops share: scale f32, one value or 1-D of x's size on `axis`; a zero point
// of the scale's shape. Sets *per_axis.
Status quant_operands(ShapeCtx& c, const char* what) {
  KILN_TRY(c.expect_inputs(2, 3));
  core::ExprPool& p = c.pool;
  if (c.attrs.get_int("block_size", 0) != 0) return c.error("blocked quantization (block_size) is not supported");
  KILN_TRY(c.expect_dtype(1, DType::kF32));
  const std::vector<ExprId>& x = c.in(0).shape;
  const std::vector<ExprId>& s = c.in(1).shape;
  const bool one = s.empty() || (s.size() == 1 && p.is_const_value(s[0], 1));
  if (!one) {
    if (s.size() != 1) return c.error(std::string(what) + " scale " + p.shape_to_string(s) + " must be one value or 1-D");
    KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", 1), c.rank(0)));
    KILN_TRY(c.require_eq(s[0], x[static_cast<size_t>(axis)],
                          "(per-channel scale " + p.shape_to_string(s) + " along axis " + std::to_string(axis) + " of " +
                              p.shape_to_string(x) + ")"));
  }
  if (c.has_input(2)) {
    const std::vector<ExprId>& z = c.in(2).shape;
    if (z.size() != s.size()) return c.error("zero_point " + p.shape_to_string(z) + " must have the scale's shape " + p.shape_to_string(s));
    for (size_t k = 0; k < z.size(); ++k) KILN_TRY(c.require_eq(z[k], s[k], "(zero_point and scale)"));
  }
  return ok_status();
}

}  // namespace

Status quantize_linear_shape(ShapeCtx& c) {
  KILN_TRY(quant_operands(c, "QuantizeLinear"));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  const DType out = c.has_input(2) ? c.in(2).dtype : DType::kU8;
  if (out != DType::kI8 && out != DType::kU8)
    return c.error(std::string("zero_point has dtype ") + dtype_name(out) + ", expected i8 or u8");
  c.out(0).dtype = out;
  c.out(0).shape = c.in(0).shape;
  return ok_status();
}

KernelStatus quantize_linear_run(const RunCtx& c) {
  QuantAxis q;
  const TensorView& x = c.in(0);
  if (x.dtype != DType::kF32 || !quant_axis(c, x, &q) || c.out(0).numel() != x.numel()) return KernelStatus::kInvalidValue;
  if (c.out(0).dtype == DType::kI8) return quantize_typed<int8_t>(c, q);
  if (c.out(0).dtype == DType::kU8) return quantize_typed<uint8_t>(c, q);
  return KernelStatus::kInvalidValue;
}

Status dequantize_linear_shape(ShapeCtx& c) {
  KILN_TRY(quant_operands(c, "DequantizeLinear"));
  const DType t = c.in(0).dtype;
  if (t != DType::kI8 && t != DType::kU8 && t != DType::kI32)
    return c.error(std::string("input #0 has dtype ") + dtype_name(t) + ", expected i8, u8 or i32");
  if (c.has_input(2) && c.in(2).dtype != t)
    return c.error(std::string("zero_point has dtype ") + dtype_name(c.in(2).dtype) + ", x " + dtype_name(t));
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = c.in(0).shape;
  return ok_status();
}

KernelStatus dequantize_linear_run(const RunCtx& c) {
  QuantAxis q;
  const TensorView& x = c.in(0);
  if (!quant_axis(c, x, &q) || c.out(0).numel() != x.numel()) return KernelStatus::kInvalidValue;
  switch (x.dtype) {
    case DType::kI8: dequantize_typed<int8_t>(c, q); break;
    case DType::kU8: dequantize_typed<uint8_t>(c, q); break;
    case DType::kI32: dequantize_typed<int32_t>(c, q); break;
    default: return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
