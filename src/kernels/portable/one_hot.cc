// OneHot: output has indices' shape with an axis of size `depth` inserted at `axis` (attr,
// default -1 = last; negative counts from the end of the output's rank); along it, the
// element at each index is values[1] (on) and every other is values[0] (off). indices are
// f32, i64 or i32 (f32 cast to int64, i.e. truncated, as the ONNX spec says; ONNX Runtime
// instead matches only integral floats); negative indices count from the end (index +
// depth); an index outside [-depth, depth - 1] gives an all-off row. depth (a 1-element f32,
// i64 or i32, f32 truncated) sets the output size, so export must know it: a constant or
// computed from input shapes. values (2 elements, any dtype) gives the output dtype.
#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Whether a shape holds exactly one element (a scalar or [1]).
bool one_element(const core::ExprPool& p, const std::vector<ExprId>& shape) {
  for (ExprId d : shape)
    if (!p.is_const_value(d, 1)) return false;
  return true;
}

/// An f32 depth as ONNX casts it to int64; false when not finite or too large to be a size.
bool float_depth(float v, int64_t* out) {
  if (!(std::fabs(v) < 9e18f)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

/// The depth input at run time, truncated to an integer; false when unreadable.
bool read_depth(const TensorView& t, int64_t* out) {
  if (t.numel() != 1) return false;
  switch (t.dtype) {
    case DType::kF32: return float_depth(t.as<float>()[0], out);
    case DType::kI64: *out = t.as<int64_t>()[0]; return true;
    case DType::kI32: *out = t.as<int32_t>()[0]; return true;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return false;
  }
  return false;
}

/// Index as an integer in [0, depth), or -1 for an all-off row.
template <typename I>
int64_t hot_of(I v, int64_t depth) {
  if constexpr (std::is_floating_point_v<I>) {
    // Cast to int64 first (truncation toward 0), as the spec says; NaN and inf are off.
    if (!(v > -static_cast<double>(depth) - 1 && v < static_cast<double>(depth))) return -1;
    const auto i = static_cast<int64_t>(v);
    return i < -depth || i >= depth ? -1 : i < 0 ? i + depth : i;
  } else {
    const auto i = static_cast<int64_t>(v);
    return i < -depth || i >= depth ? -1 : i < 0 ? i + depth : i;
  }
}

/// Fills y ([outer, depth, inner]) with off, then sets on at each index.
template <typename E, typename I>
void one_hot_typed(const I* idx, const void* values, void* out, int64_t outer, int64_t depth, int64_t inner) {
  const E off = static_cast<const E*>(values)[0], on = static_cast<const E*>(values)[1];
  E* y = static_cast<E*>(out);
  const int64_t total = outer * depth * inner;
  for (int64_t e = 0; e < total; ++e) y[e] = off;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t h = hot_of(idx[o * inner + i], depth);
      if (h >= 0) y[(o * depth + h) * inner + i] = on;
    }
}

template <typename I>
KernelStatus one_hot_index(const RunCtx& c, int64_t outer, int64_t depth, int64_t inner) {
  const I* idx = c.in(0).as<I>();
  const void* values = c.in(2).data;
  void* y = c.out(0).data;
  switch (dtype_size(c.out(0).dtype)) {
    case 1: one_hot_typed<uint8_t>(idx, values, y, outer, depth, inner); break;
    case 4: one_hot_typed<uint32_t>(idx, values, y, outer, depth, inner); break;
    case 8: one_hot_typed<uint64_t>(idx, values, y, outer, depth, inner); break;
    default: return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kOk;
}

}  // namespace

Status one_hot_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(3, 3));
  core::ExprPool& p = c.pool;
  const SymTensor& idx = c.in(0);
  const SymTensor& depth_in = c.in(1);
  const SymTensor& values = c.in(2);
  if (idx.dtype == DType::kBool) return c.error("indices input #0 has dtype bool, expected f32, i64 or i32");
  if (depth_in.dtype == DType::kBool) return c.error("depth input #1 has dtype bool, expected f32, i64 or i32");
  if (!one_element(p, depth_in.shape))
    return c.error("depth " + p.shape_to_string(depth_in.shape) + " must hold one element");
  if (values.shape.size() != 1 || !p.is_const_value(values.shape[0], 2))
    return c.error("values " + p.shape_to_string(values.shape) + " must be [2] ([off, on])");
  const int64_t out_rank = c.rank(0) + 1;
  if (out_rank > kMaxRank)
    return c.error("output rank " + std::to_string(out_rank) + " is above the limit " + std::to_string(kMaxRank));
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", -1), out_rank));

  // depth sets the output size: a constant (f32 truncated) or an integer known from shapes.
  ExprId depth = core::kNoExpr;
  std::vector<float> f;
  std::vector<ExprId> v;
  if (c.const_floats(1, &f) && f.size() == 1) {
    int64_t d;
    if (!float_depth(f[0], &d)) return c.error("depth " + std::to_string(f[0]) + " is not a usable size");
    depth = p.constant(d);
  } else if (small_values(c, 1, &v) && v.size() == 1) {
    depth = v[0];
  } else {
    return c.error("depth input #1 sets the output size, so it must be a constant or computed from input shapes");
  }
  if (p.is_const(depth) && p.const_value(depth) < 1)
    return c.error("depth " + std::to_string(p.const_value(depth)) + " must be at least 1");
  if (p.is_const(depth) && p.const_value(depth) > kMaxSizeAttr)
    return c.error("depth " + std::to_string(p.const_value(depth)) + " is above the limit " +
                   std::to_string(kMaxSizeAttr));
  KILN_TRY(c.require_ge(depth, p.constant(1), "for depth " + p.to_string(depth) + " to be a size"));

  std::vector<ExprId> out = idx.shape;
  out.insert(out.begin() + axis, depth);
  c.out(0).dtype = values.dtype;
  c.out(0).shape = std::move(out);
  return ok_status();
}

KernelStatus one_hot_run(const RunCtx& c) {
  const TensorView& idx = c.in(0);
  const TensorView& y = c.out(0);
  if (c.num_inputs != 3 || c.in(2).numel() != 2 || c.in(2).dtype != y.dtype || y.rank != idx.rank + 1)
    return KernelStatus::kInvalidValue;
  int64_t axis = c.attrs.get_int("axis", -1);
  if (axis < 0) axis += y.rank;
  if (axis < 0 || axis >= y.rank) return KernelStatus::kInvalidValue;
  int64_t depth;
  if (!read_depth(c.in(1), &depth) || depth != y.dims[axis]) return KernelStatus::kInvalidValue;  // bind fixed it
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < idx.rank; ++k) {
    if (idx.dims[k] != y.dims[k < axis ? k : k + 1]) return KernelStatus::kInvalidValue;
    (k < axis ? outer : inner) *= idx.dims[k];
  }
  switch (idx.dtype) {
    case DType::kF32: return one_hot_index<float>(c, outer, depth, inner);
    case DType::kI64: return one_hot_index<int64_t>(c, outer, depth, inner);
    case DType::kI32: return one_hot_index<int32_t>(c, outer, depth, inner);
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: break;
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace kiln::kernels
