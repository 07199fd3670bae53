// Range: start, start + delta, ... stopping before limit; start, limit and delta are
// scalars of one dtype (f32, i64 or i32) and element i is start + i * delta. The size,
// max(ceil((limit - start) / delta), 0), must be known at export: start and limit may be
// symbolic (e.g. a folded Shape element, also one cast to f32) when delta is a constant;
// otherwise f32 operands must be constants.
#include <cmath>
#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Element count for integer operands (delta != 0), without overflow.
int64_t int_count(int64_t start, int64_t limit, int64_t delta) {
  const __int128 diff = static_cast<__int128>(limit) - start;
  const __int128 n = delta > 0 ? (diff + delta - 1) / delta : (-diff - delta - 1) / -static_cast<__int128>(delta);
  return diff == 0 || (diff > 0) != (delta > 0) ? 0 : static_cast<int64_t>(n);
}

/// Element count for f32 operands as ONNX Runtime computes it; -1 when not finite.
int64_t float_count(float start, float limit, float delta) {
  const double q = std::ceil(static_cast<double>(limit - start) / delta);
  if (!std::isfinite(q) || q > 9e18) return -1;
  return q > 0 ? static_cast<int64_t>(q) : 0;
}

Status float_range(ShapeCtx& c) {
  std::vector<float> v[3];
  for (int i = 0; i < 3; ++i)
    if (!c.const_floats(i, &v[i]) || v[i].size() != 1)
      return c.error("Range size depends on run-time data: f32 start, limit and delta must be constants");
  if (v[2][0] == 0) return c.error("delta is 0");
  const int64_t n = float_count(v[0][0], v[1][0], v[2][0]);
  if (n < 0) return c.error("the number of elements is not finite");
  c.out(0).shape = {c.pool.constant(n)};
  return ok_status();
}

Status int_range(ShapeCtx& c) {
  core::ExprPool& p = c.pool;
  std::vector<ExprId> v[3];
  for (int i = 0; i < 3; ++i)
    if (!small_values(c, i, &v[i]) || v[i].size() != 1)
      return c.error("Range size depends on run-time data: start and limit must be constants or computed from "
                     "input shapes, and delta a constant");
  const ExprId start = v[0][0], limit = v[1][0];
  if (!p.is_const(v[2][0]))
    return c.error("Range size depends on run-time data: delta " + p.to_string(v[2][0]) + " must be a constant");
  const int64_t delta = p.const_value(v[2][0]);
  if (delta == 0) return c.error("delta is 0");
  ExprId n;
  if (p.is_const(start) && p.is_const(limit)) {
    n = p.constant(int_count(p.const_value(start), p.const_value(limit), delta));
  } else {
    ExprId diff = fold_int_op(p, IntOp::kSub, DType::kI64, delta > 0 ? limit : start, delta > 0 ? start : limit);
    if (diff == core::kNoExpr) return c.error("Range size depends on run-time data: start or limit is out of range");
    n = p.max(p.ceildiv(diff, p.constant(delta > 0 ? delta : -delta)), p.constant(0));
  }
  c.out(0).shape = {n};
  if (!p.is_const(n) || p.const_value(n) > kMaxSymValues) return ok_status();
  std::vector<ExprId> values;
  for (int64_t i = 0; i < p.const_value(n); ++i) {
    const auto step = static_cast<int64_t>(static_cast<uint64_t>(i) * static_cast<uint64_t>(delta));  // wraps
    values.push_back(fold_int_op(p, IntOp::kAdd, c.in(0).dtype, start, p.constant(step)));
  }
  for (ExprId e : values)
    if (e == core::kNoExpr) return ok_status();
  c.out(0).sym_values = std::move(values);
  return ok_status();
}

template <typename T>
KernelStatus range_typed(const RunCtx& c) {
  const T start = c.in(0).as<T>()[0], limit = c.in(1).as<T>()[0], delta = c.in(2).as<T>()[0];
  if (delta == 0) return KernelStatus::kInvalidValue;
  int64_t n;
  if constexpr (std::is_floating_point_v<T>) {
    n = float_count(start, limit, delta);
  } else {
    n = int_count(start, limit, delta);
  }
  TensorView& y = c.out(0);
  if (y.rank != 1 || y.dims[0] != n) return KernelStatus::kInvalidValue;  // bind fixed the size
  T* out = y.as<T>();
  if constexpr (std::is_floating_point_v<T>) {
    for (int64_t i = 0; i < n; ++i) out[i] = start + static_cast<T>(i) * delta;
  } else {  // wraps, as export folds it
    using U = std::make_unsigned_t<T>;
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(static_cast<U>(start) + static_cast<U>(i) * static_cast<U>(delta));
  }
  return KernelStatus::kOk;
}

}  // namespace

Status range_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(3, 3));
  const DType t = c.in(0).dtype;
  const char* names[3] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    if (c.in(i).dtype != t)
      return c.error(std::string(names[i]) + " has dtype " + dtype_name(c.in(i).dtype) + " but start has " +
                     dtype_name(t) + "; all three must share one dtype");
    if (c.rank(i) > 1 || (c.rank(i) == 1 && !c.pool.is_const_value(c.in(i).shape[0], 1)))
      return c.error(std::string(names[i]) + " must be a scalar, got shape " + c.pool.shape_to_string(c.in(i).shape));
  }
  if (t == DType::kBool) return c.error("does not accept bool operands");
  c.out(0).dtype = t;
  // f32 operands: constants follow ONNX Runtime's float count; values carried from shape
  // arithmetic (integers f32 holds exactly) fold as integers do.
  std::vector<float> probe;
  const bool float_consts = c.const_floats(0, &probe) && c.const_floats(1, &probe) && c.const_floats(2, &probe);
  return t == DType::kF32 && float_consts ? float_range(c) : int_range(c);
}

KernelStatus range_run(const RunCtx& c) {
  for (uint32_t i = 0; i < 3; ++i)
    if (!c.has_input(i) || c.in(i).numel() != 1 || c.in(i).dtype != c.out(0).dtype) return KernelStatus::kInvalidValue;
  switch (c.out(0).dtype) {
    case DType::kF32: return range_typed<float>(c);
    case DType::kI64: return range_typed<int64_t>(c);
    case DType::kI32: return range_typed<int32_t>(c);
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: break;
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace kiln::kernels
