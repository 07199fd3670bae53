// Add, Sub, Mul, Div, Pow, Max, Min: two operands of one dtype, numpy broadcasting.
#include <algorithm>
#include <cmath>

#include "kernels/kernel.h"
#include "kernels/portable/broadcast.h"

namespace kiln::kernels {

namespace {

Status binary_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  if (c.in(0).dtype != c.in(1).dtype)
    return c.error(std::string("operands have different dtypes ") + dtype_name(c.in(0).dtype) + " and " +
                   dtype_name(c.in(1).dtype));
  KILN_ASSIGN_OR_RETURN(std::vector<ExprId> shape, c.broadcast(c.in(0).shape, c.in(1).shape));
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = std::move(shape);
  return ok_status();
}

enum class BinOp { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin };

template <BinOp op, typename T>
inline T apply(T a, T b) {
  if constexpr (op == BinOp::kAdd) return a + b;
  if constexpr (op == BinOp::kSub) return a - b;
  if constexpr (op == BinOp::kMul) return a * b;
  if constexpr (op == BinOp::kDiv) return a / b;
  if constexpr (op == BinOp::kMax) return std::max(a, b);
  if constexpr (op == BinOp::kMin) return std::min(a, b);
  if constexpr (op == BinOp::kPow) {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(a, b);
    } else {
      if (b < 0) return a == 1 ? 1 : 0;
      T r = 1;
      for (T e = b, x = a; e > 0; e >>= 1, x *= x)
        if (e & 1) r *= x;
      return r;
    }
  }
  return T{};
}

template <BinOp op, typename T>
KernelStatus run_typed(const RunCtx& c) {
  const T* a = c.in(0).as<T>();
  const T* b = c.in(1).as<T>();
  T* y = c.out(0).as<T>();
  if constexpr (op == BinOp::kDiv && std::is_integral_v<T>) {
    int64_t nb = c.in(1).numel();
    for (int64_t i = 0; i < nb; ++i)
      if (b[i] == 0) return KernelStatus::kInvalidValue;
  }
  int64_t n = c.out(0).numel();
  if (c.in(0).numel() == n && c.in(1).numel() == n) {  // same shape: one flat loop
    for (int64_t i = 0; i < n; ++i) y[i] = apply<op>(a[i], b[i]);
    return KernelStatus::kOk;
  }
  BroadcastIter it;
  it.init(c.out(0), c.inputs, 2);
  it.for_each_row([&](int64_t o, int64_t oa, int64_t ob, int64_t, int64_t count, int64_t sa, int64_t sb, int64_t) {
    for (int64_t i = 0; i < count; ++i) y[o + i] = apply<op>(a[oa + i * sa], b[ob + i * sb]);
  });
  return KernelStatus::kOk;
}

template <BinOp op>
KernelStatus binary_run(const RunCtx& c) {
  switch (c.in(0).dtype) {
    case DType::kF32: return run_typed<op, float>(c);
    case DType::kI64: return run_typed<op, int64_t>(c);
    case DType::kI32: return run_typed<op, int32_t>(c);
    case DType::kBool: return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kInvalidValue;
}

Status numeric_shape(ShapeCtx& c) {
  KILN_TRY(binary_shape(c));
  if (c.in(0).dtype == DType::kBool) return c.error("does not accept bool operands");
  return ok_status();
}

}  // namespace

Status add_shape(ShapeCtx& c) { return numeric_shape(c); }
Status sub_shape(ShapeCtx& c) { return numeric_shape(c); }
Status mul_shape(ShapeCtx& c) { return numeric_shape(c); }
Status div_shape(ShapeCtx& c) { return numeric_shape(c); }
Status pow_shape(ShapeCtx& c) { return numeric_shape(c); }
Status max_shape(ShapeCtx& c) { return numeric_shape(c); }
Status min_shape(ShapeCtx& c) { return numeric_shape(c); }

KernelStatus add_run(const RunCtx& c) { return binary_run<BinOp::kAdd>(c); }
KernelStatus sub_run(const RunCtx& c) { return binary_run<BinOp::kSub>(c); }
KernelStatus mul_run(const RunCtx& c) { return binary_run<BinOp::kMul>(c); }
KernelStatus div_run(const RunCtx& c) { return binary_run<BinOp::kDiv>(c); }
KernelStatus pow_run(const RunCtx& c) { return binary_run<BinOp::kPow>(c); }
KernelStatus max_run(const RunCtx& c) { return binary_run<BinOp::kMax>(c); }
KernelStatus min_run(const RunCtx& c) { return binary_run<BinOp::kMin>(c); }

}  // namespace kiln::kernels
