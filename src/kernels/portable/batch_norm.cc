// BatchNormalization, inference mode: X [N, C, ...] and per-channel scale, B, mean, var
// (each [C]); Y = (X - mean) / sqrt(var + epsilon) * scale + B. Training mode (and the
// running-statistics outputs it produces) is refused.
#include <cmath>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

Status batch_norm_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(5, 5));
  for (size_t i = 0; i < 5; ++i) KILN_TRY(c.expect_dtype(i, DType::kF32));
  if (c.attrs.get_int("training_mode", 0) != 0)
    return c.error("training_mode = " + std::to_string(c.attrs.get_int("training_mode", 0)) +
                   " is not supported; export the model in inference mode (training_mode = 0)");
  if (c.outputs.size() != 1)
    return c.error("asks for " + std::to_string(c.outputs.size()) +
                   " outputs; only Y is produced in inference mode (the running statistics exist only in training)");
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  if (x.size() < 2) return c.error("input X " + p.shape_to_string(x) + " must have rank >= 2 (N, C, ...)");
  const char* names[] = {"", "scale", "B", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) {
    const std::vector<ExprId>& v = c.in(i).shape;
    std::string what = std::string(names[i]) + " " + p.shape_to_string(v);
    if (v.size() != 1) return c.error(what + " must have rank 1");
    if (i > 1 && v[0] == c.in(1).shape[0]) continue;  // already checked (one guard, not several)
    KILN_TRY(c.require_eq(v[0], x[1], "(length of " + what + " must equal the channels of X " +
                                          p.shape_to_string(x) + ")"));
  }
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = x;
  return ok_status();
}

KernelStatus batch_norm_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  int64_t n_batch = xv.dims[0], channels = xv.dims[1], plane = 1;
  for (int k = 2; k < xv.rank; ++k) plane *= xv.dims[k];
  const float* x = xv.as<float>();
  const float* scale = c.in(1).as<float>();
  const float* bias = c.in(2).as<float>();
  const float* mean = c.in(3).as<float>();
  const float* var = c.in(4).as<float>();
  float* y = c.out(0).as<float>();
  const float eps = c.attrs.get_float("epsilon", 1e-5f);
  for (int64_t ch = 0; ch < channels; ++ch) {
    // Fold into y = a*x + b per channel.
    const float a = scale[ch] / std::sqrt(var[ch] + eps);
    const float b = bias[ch] - mean[ch] * a;
    for (int64_t n = 0; n < n_batch; ++n) {
      const int64_t base = (n * channels + ch) * plane;
      for (int64_t i = 0; i < plane; ++i) y[base + i] = a * x[base + i] + b;
    }
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
