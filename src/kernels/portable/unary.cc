// Pointwise unary ops: Relu, Clip, Sigmoid, Tanh, Exp, Log, Sqrt, Neg, Abs, Erf, HardSigmoid,
// HardSwish, LeakyRelu, Reciprocal, Floor, Ceil, Round, Sin, Cos, Tan, Atan, Sinh, Cosh, Asin,
// Acos, Asinh, Acosh, Atanh, Elu, Selu, Softplus, Softsign, Sign, ThresholdedRelu, Mish, Gelu
// (ONNX opset 20; also what export's fusion makes of the Erf and Tanh chains torch writes for
// GELU). Relu, Clip, Neg, Abs and Sign also take i64 and i32; the rest f32 only. Output shape
// and dtype = input's; one flat loop over the actual numel.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "kernels/simd/vmath.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Output = input (shape and dtype). `ints_ok` also admits i64 and i32 besides f32.
Status same_as_input(ShapeCtx& c, bool ints_ok) {
  DType t = c.in(0).dtype;
  if (!ints_ok) {
    KILN_TRY(c.expect_dtype(0, DType::kF32));
  } else if (t == DType::kBool) {
    return c.error("input #0 has dtype bool, expected f32, i64 or i32");
  }
  c.out(0).dtype = t;
  c.out(0).shape = c.in(0).shape;
  return ok_status();
}

Status float_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  return same_as_input(c, false);
}

Status signed_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  return same_as_input(c, true);
}

/// y[i] = f(x[i]) over the input's actual element count.
template <typename T, typename F>
KernelStatus map(const RunCtx& c, F f) {
  const T* x = c.in(0).as<T>();
  T* y = c.out(0).as<T>();
  int64_t n = c.in(0).numel();
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(f(x[i]));
  return KernelStatus::kOk;
}

/// map() dispatched over f32, i64 and i32; `f` is a generic lambda.
template <typename F>
KernelStatus map_signed(const RunCtx& c, F f) {
  switch (c.in(0).dtype) {
    case DType::kF32: return map<float>(c, f);
    case DType::kI64: return map<int64_t>(c, f);
    case DType::kI32: return map<int32_t>(c, f);
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: break;
  }
  return KernelStatus::kInvalidValue;
}

/// -x; integers wrap (two's complement) instead of overflowing.
template <typename T>
T negate(T x) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(x));
  } else {
    return -x;
  }
}

float sigmoid(float x) {
  // Never evaluates exp of a large positive number, so neither branch overflows.
  if (x >= 0.f) return 1.f / (1.f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.f + e);
}

/// log(1 + exp(x)) without overflow: for x > 0 it is x + log(1 + exp(-x)).
float softplus(float x) {
  return x > 0.f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}


/// Nearest integer, halves to even (ONNX Round), whatever the FPU rounding mode.
float round_half_even(float x) {
  float r = std::round(x);  // halves away from zero
  if (std::fabs(x - std::trunc(x)) == 0.5f) r = 2.f * std::round(x * 0.5f);
  return r;
}

template <typename T>
KernelStatus clip_typed(const RunCtx& c) {
  // Bounds: inputs #1/#2 (opset >= 11), else attributes min/max (opset < 11), else none.
  T lo, hi;
  if constexpr (std::is_floating_point_v<T>) {
    lo = -std::numeric_limits<T>::infinity();
    hi = std::numeric_limits<T>::infinity();
  } else {
    lo = std::numeric_limits<T>::lowest();
    hi = std::numeric_limits<T>::max();
  }
  if (c.attrs.has("min")) lo = static_cast<T>(c.attrs.get_float("min", 0.f));
  if (c.attrs.has("max")) hi = static_cast<T>(c.attrs.get_float("max", 0.f));
  if (c.has_input(1)) lo = c.in(1).as<T>()[0];
  if (c.has_input(2)) hi = c.in(2).as<T>()[0];
  return map<T>(c, [lo, hi](T x) { return clamp_keep_nan(x, lo, hi); });
}

}  // namespace

Status relu_shape(ShapeCtx& c) { return signed_shape(c); }
Status sigmoid_shape(ShapeCtx& c) { return float_shape(c); }
Status tanh_shape(ShapeCtx& c) { return float_shape(c); }
Status exp_shape(ShapeCtx& c) { return float_shape(c); }
Status log_shape(ShapeCtx& c) { return float_shape(c); }
Status sqrt_shape(ShapeCtx& c) { return float_shape(c); }
Status neg_shape(ShapeCtx& c) {
  KILN_TRY(signed_shape(c));
  const DType t = c.in(0).dtype;
  fold_broadcast(c, 1, [&](const std::vector<ExprId>& v) {
    return fold_int_op(c.pool, IntOp::kSub, t, c.pool.constant(0), v[0]);
  });
  return ok_status();
}
Status abs_shape(ShapeCtx& c) { return signed_shape(c); }
Status erf_shape(ShapeCtx& c) { return float_shape(c); }
Status hard_sigmoid_shape(ShapeCtx& c) { return float_shape(c); }
Status hard_swish_shape(ShapeCtx& c) { return float_shape(c); }
Status leaky_relu_shape(ShapeCtx& c) { return float_shape(c); }
Status reciprocal_shape(ShapeCtx& c) { return float_shape(c); }
/// Floor, Ceil, Round: carried f32 values are integers already, so they pass unchanged.
Status integer_rounding_shape(ShapeCtx& c) {
  KILN_TRY(float_shape(c));
  fold_broadcast(c, 1, [](const std::vector<ExprId>& v) { return v[0]; });
  return ok_status();
}

Status floor_shape(ShapeCtx& c) { return integer_rounding_shape(c); }
Status ceil_shape(ShapeCtx& c) { return integer_rounding_shape(c); }
Status round_shape(ShapeCtx& c) { return integer_rounding_shape(c); }
Status sin_shape(ShapeCtx& c) { return float_shape(c); }
Status cos_shape(ShapeCtx& c) { return float_shape(c); }
Status tan_shape(ShapeCtx& c) { return float_shape(c); }
Status atan_shape(ShapeCtx& c) { return float_shape(c); }
Status sinh_shape(ShapeCtx& c) { return float_shape(c); }
Status cosh_shape(ShapeCtx& c) { return float_shape(c); }
Status asin_shape(ShapeCtx& c) { return float_shape(c); }
Status acos_shape(ShapeCtx& c) { return float_shape(c); }
Status asinh_shape(ShapeCtx& c) { return float_shape(c); }
Status acosh_shape(ShapeCtx& c) { return float_shape(c); }
Status atanh_shape(ShapeCtx& c) { return float_shape(c); }
Status elu_shape(ShapeCtx& c) { return float_shape(c); }
Status selu_shape(ShapeCtx& c) { return float_shape(c); }
Status softplus_shape(ShapeCtx& c) { return float_shape(c); }
Status softsign_shape(ShapeCtx& c) { return float_shape(c); }
Status sign_shape(ShapeCtx& c) { return signed_shape(c); }
Status thresholded_relu_shape(ShapeCtx& c) { return float_shape(c); }
Status mish_shape(ShapeCtx& c) { return float_shape(c); }
Status gelu_shape(ShapeCtx& c) {
  KILN_TRY(float_shape(c));
  const char* a = c.attrs.get_str("approximate", "none");
  if (std::string(a) != "none" && std::string(a) != "tanh")
    return c.error(std::string("approximate '") + a + "' must be 'none' or 'tanh'");
  return ok_status();
}

Status clip_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 3));
  KILN_TRY(same_as_input(c, true));
  for (size_t i = 1; i < 3; ++i) {
    if (!c.has_input(i)) continue;
    const char* which = i == 1 ? "min" : "max";
    if (c.in(i).dtype != c.in(0).dtype)
      return c.error(std::string(which) + " (input #" + std::to_string(i) + ") has dtype " +
                     dtype_name(c.in(i).dtype) + ", expected " + dtype_name(c.in(0).dtype) + " like input #0");
    for (ExprId d : c.in(i).shape)
      if (!c.pool.is_const_value(d, 1))
        return c.error(std::string(which) + " (input #" + std::to_string(i) + ") must be a scalar, got shape " +
                       c.pool.shape_to_string(c.in(i).shape));
  }
  return ok_status();
}

KernelStatus relu_run(const RunCtx& c) {
  return map_signed(c, [](auto x) { return x < 0 ? decltype(x)(0) : x; });  // NaN passes through
}
KernelStatus clip_run(const RunCtx& c) {
  switch (c.in(0).dtype) {
    case DType::kF32: return clip_typed<float>(c);
    case DType::kI64: return clip_typed<int64_t>(c);
    case DType::kI32: return clip_typed<int32_t>(c);
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: break;
  }
  return KernelStatus::kInvalidValue;
}
/// y = f(x) by one of vmath's array functions (error bounds in kernels/simd/vmath.h), in
/// chunks of 16K elements over the pool.
KernelStatus map_simd(const RunCtx& c, void (*f)(const float*, float*, size_t)) {
  const float* x = c.in(0).as<float>();
  float* y = c.out(0).as<float>();
  parallel_for(c, static_cast<size_t>(c.in(0).numel()), 16384, [&](size_t b, size_t e) { f(x + b, y + b, e - b); });
  return KernelStatus::kOk;
}

// Sigmoid stays on libm: its values far below 0 (exp(x) / (1 + exp(x)), down to denormals)
// need relative accuracy that vmath's absolute bound does not give.
KernelStatus sigmoid_run(const RunCtx& c) { return map<float>(c, sigmoid); }
KernelStatus tanh_run(const RunCtx& c) { return map_simd(c, simd::tanh); }
KernelStatus exp_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::exp(x); }); }
KernelStatus log_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::log(x); }); }
KernelStatus sqrt_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::sqrt(x); }); }
KernelStatus erf_run(const RunCtx& c) { return map_simd(c, simd::erf); }
KernelStatus neg_run(const RunCtx& c) {
  return map_signed(c, [](auto x) { return negate(x); });
}
KernelStatus abs_run(const RunCtx& c) {
  return map_signed(c, [](auto x) { return x < 0 ? negate(x) : x; });
}
KernelStatus hard_sigmoid_run(const RunCtx& c) {
  float alpha = c.attrs.get_float("alpha", 0.2f), beta = c.attrs.get_float("beta", 0.5f);
  return map<float>(c, [=](float x) { return clamp_keep_nan(alpha * x + beta, 0.f, 1.f); });
}
KernelStatus hard_swish_run(const RunCtx& c) {
  // x * HardSigmoid(x) with alpha = 1/6, beta = 1/2.
  return map<float>(c, [](float x) { return x * clamp_keep_nan(x * (1.f / 6.f) + 0.5f, 0.f, 1.f); });
}
KernelStatus leaky_relu_run(const RunCtx& c) {
  float alpha = c.attrs.get_float("alpha", 0.01f);
  return map<float>(c, [=](float x) { return x < 0.f ? alpha * x : x; });
}
KernelStatus reciprocal_run(const RunCtx& c) { return map<float>(c, [](float x) { return 1.f / x; }); }
KernelStatus floor_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::floor(x); }); }
KernelStatus ceil_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::ceil(x); }); }
KernelStatus round_run(const RunCtx& c) { return map<float>(c, round_half_even); }
KernelStatus sin_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::sin(x); }); }
KernelStatus cos_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::cos(x); }); }
KernelStatus tan_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::tan(x); }); }
KernelStatus atan_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::atan(x); }); }
// The hyperbolic functions and the inverses, on libm's float overloads: asin and acos are NaN
// outside [-1, 1], acosh below 1, atanh outside [-1, 1] (+-inf at +-1); sinh and cosh
// overflow to +-inf beyond |x| ~ 89.4.
KernelStatus sinh_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::sinh(x); }); }
KernelStatus cosh_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::cosh(x); }); }
KernelStatus asin_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::asin(x); }); }
KernelStatus acos_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::acos(x); }); }
KernelStatus asinh_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::asinh(x); }); }
KernelStatus acosh_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::acosh(x); }); }
KernelStatus atanh_run(const RunCtx& c) { return map<float>(c, [](float x) { return std::atanh(x); }); }
KernelStatus elu_run(const RunCtx& c) {
  // alpha * (exp(x) - 1) for x < 0; expm1 keeps the precision near 0.
  float alpha = c.attrs.get_float("alpha", 1.f);
  return map<float>(c, [=](float x) { return x < 0.f ? alpha * std::expm1(x) : x; });
}
KernelStatus selu_run(const RunCtx& c) {
  // gamma * x for x > 0, else gamma * alpha * (exp(x) - 1); the defaults are ONNX's (exact floats).
  float alpha = c.attrs.get_float("alpha", 1.67326319217681884765625f);
  float gamma = c.attrs.get_float("gamma", 1.05070102214813232421875f);
  return map<float>(c, [=](float x) { return x > 0.f ? gamma * x : gamma * (alpha * std::expm1(x)); });
}
KernelStatus softplus_run(const RunCtx& c) { return map<float>(c, softplus); }
KernelStatus softsign_run(const RunCtx& c) {
  return map<float>(c, [](float x) { return x / (1.f + std::fabs(x)); });
}
KernelStatus sign_run(const RunCtx& c) {
  // -1, 0 (for -0 too) or 1; NaN passes through, as in numpy's sign and ONNX Runtime.
  return map_signed(c, [](auto x) {
    using T = decltype(x);
    return x > T(0) ? T(1) : x < T(0) ? T(-1) : x == T(0) ? T(0) : x;
  });
}
KernelStatus thresholded_relu_run(const RunCtx& c) {
  float alpha = c.attrs.get_float("alpha", 1.f);
  return map<float>(c, [=](float x) { return x > alpha ? x : 0.f; });
}
KernelStatus gelu_run(const RunCtx& c) {
  // none: x/2 (1 + erf(x / sqrt 2)); tanh: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in double.
  if (c.attrs.str_equals("approximate", "tanh"))
    return map<float>(c, [](float x) {
      const double v = x;
      return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    });
  return map<float>(c, [](float x) { return 0.5 * double(x) * (1.0 + std::erf(double(x) * 0.7071067811865476)); });
}
KernelStatus mish_run(const RunCtx& c) {
  return map<float>(c, [](float x) { return x * std::tanh(softplus(x)); });
}

}  // namespace kiln::kernels
