// Add, Sub, Mul, Div, Pow, Mod: two operands of one dtype, numpy broadcasting. Integer Div
// truncates toward zero (ONNX). Mod's remainder has the divisor's sign (fmod=0, integers
// only) or the dividend's (fmod=1, C's % and fmod). Small integer tensors known at export
// (sym_values) fold through Add, Sub, Mul, Div and Mod; Max and Min live in variadic.cc.
#include <cmath>
#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/broadcast.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

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

enum class BinOp { kAdd, kSub, kMul, kDiv, kPow, kMod, kFmod };

template <BinOp op, typename T>
inline T apply(T a, T b) {
  if constexpr (std::is_integral_v<T>) {  // integers wrap (two's complement), as export folds them
    using U = std::make_unsigned_t<T>;
    const U ua = static_cast<U>(a), ub = static_cast<U>(b);
    if constexpr (op == BinOp::kAdd) return static_cast<T>(ua + ub);
    if constexpr (op == BinOp::kSub) return static_cast<T>(ua - ub);
    if constexpr (op == BinOp::kMul) return static_cast<T>(ua * ub);
    if constexpr (op == BinOp::kDiv) return b == -1 ? static_cast<T>(U{0} - ua) : a / b;  // lowest / -1 wraps
    if constexpr (op == BinOp::kMod || op == BinOp::kFmod) {
      T r = b == -1 ? T{0} : a % b;  // lowest % -1 would trap
      if (op == BinOp::kMod && r != 0 && (r < 0) != (b < 0)) r += b;
      return r;
    }
    if constexpr (op == BinOp::kPow) {
      if (b < 0) return a == 1 ? 1 : 0;
      U r = 1, x = ua;
      for (T e = b; e > 0; e >>= 1, x *= x)
        if (e & 1) r *= x;
      return static_cast<T>(r);
    }
  } else {
    if constexpr (op == BinOp::kAdd) return a + b;
    if constexpr (op == BinOp::kSub) return a - b;
    if constexpr (op == BinOp::kMul) return a * b;
    if constexpr (op == BinOp::kDiv) return a / b;
    if constexpr (op == BinOp::kPow) return std::pow(a, b);
    if constexpr (op == BinOp::kMod || op == BinOp::kFmod) return std::fmod(a, b);
  }
  return T{};
}

template <BinOp op, typename T>
KernelStatus run_typed(const RunCtx& c) {
  const T* a = c.in(0).as<T>();
  const T* b = c.in(1).as<T>();
  T* y = c.out(0).as<T>();
  if constexpr ((op == BinOp::kDiv || op == BinOp::kMod || op == BinOp::kFmod) && std::is_integral_v<T>) {
    int64_t nb = c.in(1).numel();
    for (int64_t i = 0; i < nb; ++i)
      if (b[i] == 0) return KernelStatus::kInvalidValue;
  }
  broadcast_binary(c.out(0), c.inputs, a, b, y, [](T u, T v) { return apply<op>(u, v); });
  return KernelStatus::kOk;
}

template <BinOp op>
KernelStatus binary_run(const RunCtx& c) {
  switch (c.in(0).dtype) {
    case DType::kF32: return run_typed<op, float>(c);
    case DType::kI64: return run_typed<op, int64_t>(c);
    case DType::kI32: return run_typed<op, int32_t>(c);
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kInvalidValue;
}

Status numeric_shape(ShapeCtx& c) {
  KILN_TRY(binary_shape(c));
  if (c.in(0).dtype == DType::kBool) return c.error("does not accept bool operands");
  return ok_status();
}

/// numeric_shape, then the element-wise fold of known integer operands.
Status folding_shape(ShapeCtx& c, IntOp op) {
  KILN_TRY(numeric_shape(c));
  const DType t = c.in(0).dtype;
  fold_broadcast(c, 2, [&](const std::vector<ExprId>& v) { return fold_int_op(c.pool, op, t, v[0], v[1]); });
  return ok_status();
}

}  // namespace

Status add_shape(ShapeCtx& c) { return folding_shape(c, IntOp::kAdd); }
Status sub_shape(ShapeCtx& c) { return folding_shape(c, IntOp::kSub); }
Status mul_shape(ShapeCtx& c) { return folding_shape(c, IntOp::kMul); }
Status div_shape(ShapeCtx& c) { return folding_shape(c, IntOp::kDiv); }
Status pow_shape(ShapeCtx& c) { return numeric_shape(c); }
Status mod_shape(ShapeCtx& c) {
  const int64_t fmod = c.attrs.get_int("fmod", 0);
  if (fmod != 0 && fmod != 1) return c.error("attribute 'fmod' is " + std::to_string(fmod) + ", expected 0 or 1");
  KILN_TRY(folding_shape(c, fmod ? IntOp::kFmod : IntOp::kMod));
  if (c.in(0).dtype == DType::kF32 && !fmod) return c.error("f32 operands need fmod=1 (ONNX defines fmod=0 for integers only)");
  return ok_status();
}

KernelStatus add_run(const RunCtx& c) { return binary_run<BinOp::kAdd>(c); }
KernelStatus sub_run(const RunCtx& c) { return binary_run<BinOp::kSub>(c); }
KernelStatus mul_run(const RunCtx& c) { return binary_run<BinOp::kMul>(c); }
KernelStatus div_run(const RunCtx& c) { return binary_run<BinOp::kDiv>(c); }
KernelStatus pow_run(const RunCtx& c) { return binary_run<BinOp::kPow>(c); }
KernelStatus mod_run(const RunCtx& c) {
  if (c.attrs.get_int("fmod", 0)) return binary_run<BinOp::kFmod>(c);
  if (c.in(0).dtype == DType::kF32) return KernelStatus::kInvalidValue;
  return binary_run<BinOp::kMod>(c);
}

}  // namespace kiln::kernels
