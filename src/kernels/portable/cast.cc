// Cast: converts between f32, i64, i32 and bool. Attribute `to` is an ONNX TensorProto
// dtype code. f32 -> integer truncates toward zero (NaN -> 0, out of range saturates);
// anything -> bool is x != 0.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/kernel.h"

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

/// Largest integer input whose values are carried to the output for shape folding.
constexpr int64_t kMaxFoldedValues = 64;

/// Carries the values of a small integer input known at export (a folded Shape result or a
/// constant) to an integer output, so shape arithmetic after a Cast still folds.
void fold_int_values(ShapeCtx& c, DType to) {
  if (to != DType::kI64 && to != DType::kI32) return;
  if (c.in(0).sym_values.empty()) {
    int64_t n = 1;
    for (ExprId d : c.in(0).shape) {
      if (!c.pool.is_const(d)) return;
      n *= c.pool.const_value(d);
    }
    if (n > kMaxFoldedValues) return;
  }
  std::vector<ExprId> values;
  if (!c.int_values(0, &values)) return;
  if (to == DType::kI32)  // constants wrap as the kernel would; symbolic sizes fit in i32
    for (ExprId& v : values)
      if (c.pool.is_const(v)) v = c.pool.constant(static_cast<int32_t>(c.pool.const_value(v)));
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
  if (c.in(0).dtype == DType::kI64 || c.in(0).dtype == DType::kI32) fold_int_values(c, to);
  return ok_status();
}

/// Converts to the output view's dtype (which the shape function derived from `to`).
KernelStatus cast_run(const RunCtx& c) {
  switch (c.in(0).dtype) {
    case DType::kF32: return cast_from<float>(c);
    case DType::kI64: return cast_from<int64_t>(c);
    case DType::kI32: return cast_from<int32_t>(c);
    case DType::kBool: return cast_from<bool>(c);
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace kiln::kernels
