// Max, Min, Sum, Mean: one or more operands of one dtype, numpy broadcasting across all of
// them (ONNX opset 8+). Mean is f32 only, as ONNX defines it for floats. Small integer
// tensors known at export (sym_values) fold through Max, Min and Sum.
#include <algorithm>
#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/broadcast.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

enum class VarOp { kMax, kMin, kSum, kMean };

Status variadic_shape(ShapeCtx& c, VarOp op) {
  if (c.num_inputs() == 0) return c.error("expects at least 1 input, got 0");
  const DType t = c.in(0).dtype;
  std::vector<ExprId> shape = c.in(0).shape;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) return c.error("input #" + std::to_string(i) + " is required but missing");
    if (c.in(i).dtype != t)
      return c.error("input #" + std::to_string(i) + " has dtype " + dtype_name(c.in(i).dtype) + " but input #0 has " +
                     dtype_name(t) + "; all inputs must share one dtype");
  }
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(shape, c.broadcast(shape, c.in(i).shape));
  }
  if (t == DType::kBool) return c.error("does not accept bool operands");
  if (op == VarOp::kMean && t != DType::kF32)
    return c.error(std::string("accepts only f32 operands (ONNX defines Mean for floats), got ") + dtype_name(t));
  c.out(0).dtype = t;
  c.out(0).shape = std::move(shape);
  if (op == VarOp::kMean) return ok_status();
  const IntOp iop = op == VarOp::kMax ? IntOp::kMax : op == VarOp::kMin ? IntOp::kMin : IntOp::kAdd;
  fold_broadcast(c, c.num_inputs(), [&](const std::vector<ExprId>& v) {
    ExprId acc = v[0];
    for (size_t k = 1; k < v.size(); ++k) acc = fold_int_op(c.pool, iop, t, acc, v[k]);
    return acc;
  });
  return ok_status();
}

template <VarOp op, typename T>
inline T combine(T a, T b) {
  if constexpr (op == VarOp::kMax || op == VarOp::kMin) {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return a != a ? a : b;  // NaN wins (torch.maximum/minimum), in either position
    }
    return op == VarOp::kMax ? std::max(a, b) : std::min(a, b);
  }
  if constexpr (std::is_integral_v<T>) {  // Sum wraps, as export folds it
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  }
  return a + b;  // Sum, Mean
}

/// y = f(a) or y = f(y, a) over the output's actual shape; `a` broadcasts.
template <typename T, typename Fn>
void sweep(const TensorView& y, const TensorView& a, Fn f) {
  const T* pa = a.as<T>();
  const int64_t n = y.numel();
  if (a.numel() == n) {
    for (int64_t i = 0; i < n; ++i) f(i, pa[i]);
    return;
  }
  const TensorView* ops[1] = {&a};
  BroadcastIter it;
  it.init(y, ops, 1);
  it.for_each_row([&](int64_t o, int64_t oa, int64_t, int64_t, int64_t count, int64_t sa, int64_t, int64_t) {
    for (int64_t i = 0; i < count; ++i) f(o + i, pa[oa + i * sa]);
  });
}

template <VarOp op, typename T>
KernelStatus run_typed(const RunCtx& c) {
  const TensorView& y = c.out(0);
  T* py = c.out(0).as<T>();
  // Copy operand 0 (broadcast), then fold every other operand into the output in place.
  sweep<T>(y, c.in(0), [&](int64_t i, T a) { py[i] = a; });
  for (uint32_t k = 1; k < c.num_inputs; ++k)
    sweep<T>(y, c.in(k), [&](int64_t i, T a) { py[i] = combine<op>(py[i], a); });
  if constexpr (op == VarOp::kMean) {
    const int64_t n = y.numel();
    const T count = static_cast<T>(c.num_inputs);
    for (int64_t i = 0; i < n; ++i) py[i] /= count;
  }
  return KernelStatus::kOk;
}

template <VarOp op>
KernelStatus variadic_run(const RunCtx& c) {
  if (c.num_inputs == 0) return KernelStatus::kInvalidValue;
  for (uint32_t k = 0; k < c.num_inputs; ++k)
    if (!c.has_input(k) || c.in(k).dtype != c.out(0).dtype || c.in(k).rank > c.out(0).rank)
      return KernelStatus::kInvalidValue;
  switch (c.out(0).dtype) {
    case DType::kF32: return run_typed<op, float>(c);
    case DType::kI64:
      if constexpr (op != VarOp::kMean) return run_typed<op, int64_t>(c);
      break;
    case DType::kI32:
      if constexpr (op != VarOp::kMean) return run_typed<op, int32_t>(c);
      break;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: break;
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace

Status max_shape(ShapeCtx& c) { return variadic_shape(c, VarOp::kMax); }
Status min_shape(ShapeCtx& c) { return variadic_shape(c, VarOp::kMin); }
Status sum_shape(ShapeCtx& c) { return variadic_shape(c, VarOp::kSum); }
Status mean_shape(ShapeCtx& c) { return variadic_shape(c, VarOp::kMean); }

KernelStatus max_run(const RunCtx& c) { return variadic_run<VarOp::kMax>(c); }
KernelStatus min_run(const RunCtx& c) { return variadic_run<VarOp::kMin>(c); }
KernelStatus sum_run(const RunCtx& c) { return variadic_run<VarOp::kSum>(c); }
KernelStatus mean_run(const RunCtx& c) { return variadic_run<VarOp::kMean>(c); }

}  // namespace kiln::kernels
