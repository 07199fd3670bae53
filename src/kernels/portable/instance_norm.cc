// InstanceNormalization: X [N, C, ...] normalized per (n, c) over the remaining axes,
// Y = scale[c] * (X - mean) / sqrt(var + epsilon) + B[c]; scale and B are [C].
#include "kernels/kernel.h"
#include "kernels/portable/moments.h"
#include "core/status.h"

namespace kiln::kernels {

Status instance_norm_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(3, 3));
  for (size_t i = 0; i < 3; ++i) KILN_TRY(c.expect_dtype(i, DType::kF32));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  if (x.size() < 2) return c.error("input " + p.shape_to_string(x) + " must have rank >= 2 (N, C, ...)");
  const char* names[] = {"", "scale", "B"};
  for (size_t i = 1; i < 3; ++i) {
    const std::vector<ExprId>& v = c.in(i).shape;
    std::string what = std::string(names[i]) + " " + p.shape_to_string(v);
    if (v.size() != 1) return c.error(what + " must have rank 1");
    if (i > 1 && v[0] == c.in(1).shape[0]) continue;  // already checked (one guard, not several)
    KILN_TRY(c.require_eq(v[0], x[1], "(length of " + what + " must equal the channels of input " +
                                          p.shape_to_string(x) + ")"));
  }
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = x;
  return ok_status();
}

KernelStatus instance_norm_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  int64_t channels = xv.dims[1], plane = 1;
  for (int k = 2; k < xv.rank; ++k) plane *= xv.dims[k];
  const int64_t instances = xv.dims[0] * channels;
  const float* x = xv.as<float>();
  const float* scale = c.in(1).as<float>();
  const float* bias = c.in(2).as<float>();
  float* y = c.out(0).as<float>();
  const double eps = c.attrs.get_float("epsilon", 1e-5f);
  if (plane == 0) return KernelStatus::kOk;
  for (int64_t inst = 0; inst < instances; ++inst) {
    const float* xp = x + inst * plane;
    float* yp = y + inst * plane;
    const RowMoments mo = row_moments(xp, plane, eps);
    const int64_t ch = inst % channels;
    const float m = static_cast<float>(mo.mean), a = static_cast<float>(scale[ch] * mo.inv_std), b = bias[ch];
    for (int64_t i = 0; i < plane; ++i) yp[i] = (xp[i] - m) * a + b;
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
