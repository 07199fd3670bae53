// Cast: converts between f32, i64, i32 and bool. Attribute `to` is an ONNX TensorProto
// dtype code. f32 -> integer truncates toward zero (NaN -> 0, out of range saturates);
// anything -> bool is x != 0.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Maps an ONNX TensorProto dtype code to a Kiln dtype; false if unsupported.
bool dtype_from_onnx(int64_t code, DType* out) {
  switch (code) {
    case 1: *out = DType::kF32; return true;
    case 6: *out = DType::kI32; return true;
    case 7: *out = DType::kI64; return true;
    case 9: *out = DType::kBool; return true;
    default: return false;
  }
}

/// Carries the input's known values (a folded Shape result, a constant, carried f32
/// integers) through the cast while they stay exact, so shape arithmetic after a Cast still
/// folds: to i64 always, to i32 wrapping constants as the kernel does, to f32 within
/// +-2^24, to bool for constants.
void fold_cast_values(ShapeCtx& c, DType to) {
  std::vector<ExprId> values;
  if (!small_values(c, 0, &values)) return;
  core::ExprPool& p = c.pool;
  for (ExprId& v : values) {
    switch (to) {
      case DType::kI64: break;
      case DType::kI32:  // symbolic sizes fit in i32
        if (p.is_const(v)) v = p.constant(static_cast<int32_t>(p.const_value(v)));
        break;
      case DType::kF32:
        if (!exact_in_f32(p, v)) return;
        break;
      case DType::kBool:
        if (!p.is_const(v)) return;
        v = p.constant(p.const_value(v) != 0);
        break;
      case DType::kI8:
      case DType::kU8: return;  // no cast makes them (dtype_from_onnx)
    }
  }
  c.out(0).sym_values = std::move(values);
}

// Element types as stored; bool is one byte, read as "non-zero".
template <typename T> using Store = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <typename D, typename S>
Store<D> convert(Store<S> x) {
  if constexpr (std::is_same_v<D, bool>) {
    return x != 0 ? 1 : 0;
  } else if constexpr (std::is_same_v<S, bool>) {
    return static_cast<D>(x != 0 ? 1 : 0);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    // static_cast is undefined for NaN and out-of-range values; define them.
    if (std::isnan(x)) return 0;
    if (x <= static_cast<S>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
    if (x >= static_cast<S>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(x);
  } else {
    return static_cast<D>(x);  // i64 -> i32 wraps (modulo 2^32)
  }
}

template <typename S, typename D>
KernelStatus cast_typed(const RunCtx& c) {
  const Store<S>* x = c.in(0).as<Store<S>>();
  Store<D>* y = c.out(0).as<Store<D>>();
  int64_t n = c.in(0).numel();
  for (int64_t i = 0; i < n; ++i) y[i] = convert<D, S>(x[i]);
  return KernelStatus::kOk;
}

template <typename S>
KernelStatus cast_from(const RunCtx& c) {
  switch (c.out(0).dtype) {
    case DType::kF32: return cast_typed<S, float>(c);
    case DType::kI64: return cast_typed<S, int64_t>(c);
    case DType::kI32: return cast_typed<S, int32_t>(c);
    case DType::kBool: return cast_typed<S, bool>(c);
    case DType::kI8:
    case DType::kU8: break;  // no cast makes them (dtype_from_onnx)
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace

Status cast_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  if (!c.attrs.has("to")) return c.error("missing required attribute 'to'");
  int64_t code = c.attrs.get_int("to", -1);
  DType to;
  if (!dtype_from_onnx(code, &to))
    return c.error("attribute 'to' = " + std::to_string(code) +
                   " is not a supported dtype code; supported: 1 (float), 6 (int32), 7 (int64), 9 (bool)");
  c.out(0).dtype = to;
  c.out(0).shape = c.in(0).shape;
  fold_cast_values(c, to);
  return ok_status();
}

/// Converts to the output view's dtype (which the shape function derived from `to`).
KernelStatus cast_run(const RunCtx& c) {
  switch (c.in(0).dtype) {
    case DType::kF32: return cast_from<float>(c);
    case DType::kI64: return cast_from<int64_t>(c);
    case DType::kI32: return cast_from<int32_t>(c);
    case DType::kBool: return cast_from<bool>(c);
    case DType::kI8: return cast_from<int8_t>(c);
    case DType::kU8: return cast_from<uint8_t>(c);
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace kiln::kernels
