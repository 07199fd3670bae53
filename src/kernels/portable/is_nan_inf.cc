// IsNaN and IsInf: f32 input, bool output of the same shape. IsInf's attributes
// detect_negative and detect_positive (default 1) choose which infinities count.
#include <cmath>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

Status float_to_bool_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  c.out(0).dtype = DType::kBool;
  c.out(0).shape = c.in(0).shape;
  return ok_status();
}

/// y[i] = test(x[i]) as 0/1 over the input's actual element count.
template <typename F>
KernelStatus classify(const RunCtx& c, F test) {
  if (c.in(0).dtype != DType::kF32 || c.out(0).dtype != DType::kBool) return KernelStatus::kInvalidValue;
  const float* x = c.in(0).as<float>();
  auto* y = c.out(0).as<uint8_t>();
  int64_t n = c.in(0).numel();
  for (int64_t i = 0; i < n; ++i) y[i] = test(x[i]) ? 1 : 0;
  return KernelStatus::kOk;
}

}  // namespace

Status is_nan_shape(ShapeCtx& c) { return float_to_bool_shape(c); }
Status is_inf_shape(ShapeCtx& c) { return float_to_bool_shape(c); }

KernelStatus is_nan_run(const RunCtx& c) {
  return classify(c, [](float x) { return std::isnan(x); });
}

KernelStatus is_inf_run(const RunCtx& c) {
  const bool neg = c.attrs.get_int("detect_negative", 1) != 0;
  const bool pos = c.attrs.get_int("detect_positive", 1) != 0;
  return classify(c, [=](float x) { return std::isinf(x) && (x < 0.f ? neg : pos); });
}

}  // namespace kiln::kernels
