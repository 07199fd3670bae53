// ConstantOfShape: a tensor of the shape held by input #0 (1-D i64 or i32; a constant or
// computed from shapes, so its elements may be symbolic) filled with attribute `value`, a
// one-element tensor that arrives as kFloats/kInts (or kFloat/kInt); absent = f32 0. The
// dtype follows the value's kind (floats -> f32, ints -> i64) unless the int attribute
// `dtype` (ONNX code 1, 6, 7 or 9) overrides it.
#include <cmath>
#include <cstring>

#include "kernels/kernel.h"
#include "kernels/portable/int_input.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// The fill value, converted to the output dtype.
struct Fill {
  DType dtype = DType::kF32;
  float f = 0.f;
  int64_t i = 0;
};

/// Reads `value` and `dtype`; returns nullptr or what is wrong (static text).
const char* read_fill(const core::Attrs& a, Fill* out) {
  bool is_float = true;
  double fv = 0;
  int64_t iv = 0;
  if (const core::AttrRef* r = a.find("value")) {
    const bool list = r->kind == core::AttrKind::kFloats || r->kind == core::AttrKind::kInts;
    if (list && r->count != 1) return "attribute 'value' must hold exactly one element";
    switch (r->kind) {
      case core::AttrKind::kFloat: fv = r->f; break;
      case core::AttrKind::kFloats: fv = r->floats[0]; break;
      case core::AttrKind::kInt:
        is_float = false;
        iv = r->i;
        break;
      case core::AttrKind::kInts:
        is_float = false;
        iv = r->ints[0];
        break;
      case core::AttrKind::kString: return "attribute 'value' must be a one-element numeric tensor, got a string";
    }
  }
  out->dtype = is_float ? DType::kF32 : DType::kI64;
  if (a.has("dtype")) {
    switch (a.get_int("dtype", -1)) {
      case 1: out->dtype = DType::kF32; break;
      case 6: out->dtype = DType::kI32; break;
      case 7: out->dtype = DType::kI64; break;
      case 9: out->dtype = DType::kBool; break;
      default: return "attribute 'dtype' must be 1 (float), 6 (int32), 7 (int64) or 9 (bool)";
    }
  }
  switch (out->dtype) {
    case DType::kF32: out->f = is_float ? static_cast<float>(fv) : static_cast<float>(iv); break;
    case DType::kBool: out->i = is_float ? fv != 0 : iv != 0; break;
    case DType::kI64:
    case DType::kI32:
      if (is_float) {  // truncates toward zero, as Cast does
        if (!(std::fabs(fv) < 9.2e18)) return "attribute 'value' does not fit the integer dtype";
        iv = static_cast<int64_t>(fv);
      }
      out->i = out->dtype == DType::kI32 ? static_cast<int32_t>(iv) : iv;
      break;
    case DType::kI8:
    case DType::kU8: return "attribute 'dtype' must be 1 (float), 6 (int32), 7 (int64) or 9 (bool)";
  }
  return nullptr;
}

}  // namespace

Status constant_of_shape_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  core::ExprPool& p = c.pool;
  Fill fill;
  if (const char* why = read_fill(c.attrs, &fill)) return c.error(why);
  if (c.in(0).dtype != DType::kI64 && c.in(0).dtype != DType::kI32)
    return c.error(std::string("shape input #0 has dtype ") + dtype_name(c.in(0).dtype) + ", expected i64");
  if (c.rank(0) != 1) return c.error("shape input #0 must be 1-D, got rank " + std::to_string(c.rank(0)));
  std::vector<ExprId> shape;
  if (!known_ints(c, 0, &shape))
    return c.error("shape input #0 is not known at export; it must be a constant or computed from input shapes");
  if (shape.size() > static_cast<size_t>(kMaxRank))
    return c.error("shape " + p.shape_to_string(shape) + " has rank " + std::to_string(shape.size()) +
                   ", above the limit " + std::to_string(kMaxRank));
  for (size_t k = 0; k < shape.size(); ++k)
    KILN_TRY(c.require_at_least(shape[k], 0, "shape " + p.shape_to_string(shape) + " element " + std::to_string(k)));
  c.out(0).dtype = fill.dtype;
  c.out(0).shape = std::move(shape);
  std::vector<int64_t> dims;
  const bool exact = fill.dtype != DType::kF32 ||
                     (std::fabs(fill.f) <= static_cast<float>(kMaxExactF32) && fill.f == std::trunc(fill.f));
  if (exact && can_carry(c, &dims))
    c.out(0).sym_values.assign(static_cast<size_t>(numel_of(dims)),
                               p.constant(fill.dtype == DType::kF32 ? static_cast<int64_t>(fill.f) : fill.i));
  return ok_status();
}

KernelStatus constant_of_shape_run(const RunCtx& c) {
  Fill fill;
  TensorView& y = c.out(0);
  if (read_fill(c.attrs, &fill) || fill.dtype != y.dtype) return KernelStatus::kInvalidValue;
  const TensorView& s = c.in(0);  // the actual shape must be the one bind computed
  if (s.numel() != y.rank) return KernelStatus::kInvalidValue;
  for (int k = 0; k < y.rank; ++k)
    if ((s.dtype == DType::kI32 ? s.as<int32_t>()[k] : s.as<int64_t>()[k]) != y.dims[k])
      return KernelStatus::kInvalidValue;
  const int64_t n = y.numel();
  switch (y.dtype) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) y.as<float>()[i] = fill.f;
      break;
    case DType::kI64:
      for (int64_t i = 0; i < n; ++i) y.as<int64_t>()[i] = fill.i;
      break;
    case DType::kI32:
      for (int64_t i = 0; i < n; ++i) y.as<int32_t>()[i] = static_cast<int32_t>(fill.i);
      break;
    case DType::kBool:
      if (n > 0) std::memset(y.data, fill.i != 0 ? 1 : 0, static_cast<size_t>(n));
      break;
    case DType::kI8:
    case DType::kU8: return KernelStatus::kInvalidValue;  // the shape function never makes them
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
