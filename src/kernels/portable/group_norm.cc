// GroupNormalization (opset 18 and 21): X [N, C, ...] with its C channels split into
// num_groups groups of C / num_groups consecutive channels; each (n, group) is normalized over
// its channels and the remaining axes, Y = (X - mean) / sqrt(var + epsilon) * scale + bias
// (population variance; epsilon defaults to 1e-5; stash_type is ignored: the moments are
// computed in double, the output in f32).
//
// The opset changed what scale and bias index: opset 18 gives one value per group
// ([num_groups]), opset 21 one per channel ([C]). A kernel does not see the opset, so the
// length decides, here and at run time alike: scale with num_groups entries is per group, else
// it must have C entries and is per channel. When num_groups == C the two readings coincide.
// (ONNX Runtime refuses a model whose scale does not match its opset; Kiln runs it by length.)
#include <string>

#include "kernels/kernel.h"
#include "kernels/portable/moments.h"
#include "core/status.h"

namespace kiln::kernels {

Status group_norm_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(3, 3));
  for (size_t i = 0; i < 3; ++i) KILN_TRY(c.expect_dtype(i, DType::kF32));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  if (x.size() < 2) return c.error("input " + p.shape_to_string(x) + " must have rank >= 2 (N, C, ...)");
  if (!c.attrs.has("num_groups")) return c.error("needs attribute num_groups");
  const int64_t groups = c.attrs.get_int("num_groups", 0);
  if (groups < 1 || groups > kMaxSizeAttr)
    return c.error("num_groups " + std::to_string(groups) + " must be in [1, 2^20]");
  const std::string input = "input " + p.shape_to_string(x);
  KILN_TRY(c.require_divisible(x[1], groups, "(the channels of " + input + " split into num_groups = " +
                                                 std::to_string(groups) + " groups)"));
  const char* names[] = {"", "scale", "bias"};
  for (size_t i = 1; i < 3; ++i)
    if (c.in(i).shape.size() != 1)
      return c.error(std::string(names[i]) + " " + p.shape_to_string(c.in(i).shape) +
                     " must have rank 1 (num_groups or C entries)");
  const ExprId len = c.in(1).shape[0];
  if (!p.is_const_value(len, groups))
    KILN_TRY(c.require_eq(len, x[1], "(scale " + p.shape_to_string(c.in(1).shape) + " must have num_groups = " +
                                         std::to_string(groups) + " entries (opset 18) or one per channel of " +
                                         input + " (opset 21))"));
  KILN_TRY(c.require_eq(c.in(2).shape[0], len, "(bias " + p.shape_to_string(c.in(2).shape) +
                                                   " must have as many entries as scale " +
                                                   p.shape_to_string(c.in(1).shape) + ")"));
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = x;
  return ok_status();
}

KernelStatus group_norm_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  const int64_t groups = c.attrs.get_int("num_groups", 0);
  const int64_t channels = xv.dims[1], len = c.in(1).numel();
  if (groups < 1 || channels % groups != 0 || c.in(2).numel() != len || (len != groups && len != channels))
    return KernelStatus::kInvalidValue;
  int64_t plane = 1;
  for (int k = 2; k < xv.rank; ++k) plane *= xv.dims[k];
  const int64_t per_group = channels / groups, group_size = per_group * plane;
  if (group_size == 0) return KernelStatus::kOk;  // nothing to normalize (and no mean of nothing)
  const bool by_group = len == groups;
  const float* x = xv.as<float>();
  const float* scale = c.in(1).as<float>();
  const float* bias = c.in(2).as<float>();
  float* y = c.out(0).as<float>();
  const double eps = c.attrs.get_float("epsilon", 1e-5f);
  // A group's channels are consecutive, so (n, g) is one contiguous run of group_size values.
  for (int64_t ng = 0; ng < xv.dims[0] * groups; ++ng) {
    const float* xg = x + ng * group_size;
    float* yg = y + ng * group_size;
    const RowMoments mo = row_moments(xg, group_size, eps);
    const int64_t g = ng % groups;
    const float m = static_cast<float>(mo.mean);
    for (int64_t j = 0; j < per_group; ++j) {
      const int64_t k = by_group ? g : g * per_group + j;
      const float a = static_cast<float>(scale[k] * mo.inv_std), b = bias[k];
      const float* xp = xg + j * plane;
      float* yp = yg + j * plane;
      for (int64_t i = 0; i < plane; ++i) yp[i] = (xp[i] - m) * a + b;
    }
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
