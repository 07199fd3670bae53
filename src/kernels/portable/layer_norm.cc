// LayerNormalization (opset 17): X is normalized over the axes [axis, rank) (axis default
// -1), Y = (X - mean) / sqrt(var + epsilon) * Scale + B. Scale and the optional B broadcast
// onto the normalized shape X.shape[axis:]. Optional outputs Mean and InvStdDev have shape
// X.shape[:axis] followed by ones. Statistics are accumulated in double.
#include "kernels/kernel.h"
#include "kernels/portable/moments.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Checks that `v` (input #i) broadcasts onto the normalized shape `norm` (trailing-aligned).
Status check_affine(ShapeCtx& c, size_t i, const std::vector<ExprId>& norm, const std::vector<ExprId>& x) {
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& v = c.in(i).shape;
  std::string what = std::string(i == 1 ? "Scale " : "B ") + p.shape_to_string(v);
  std::string why = "(" + what + " must broadcast onto the normalized shape " + p.shape_to_string(norm) + " of X " +
                    p.shape_to_string(x) + ")";
  if (v.size() > norm.size())
    return c.error(what + " has more axes than the normalized shape " + p.shape_to_string(norm) + " of X " +
                   p.shape_to_string(x));
  for (size_t k = 0; k < v.size(); ++k) {
    ExprId d = norm[norm.size() - v.size() + k];
    if (!p.is_const_value(v[k], 1)) KILN_TRY(c.require_eq(v[k], d, why));
  }
  return ok_status();
}

/// Offset of element j of the normalized block (dims `block`, `rank` of them) in `t`, a
/// tensor broadcast onto that block with its dims aligned to the trailing ones.
int64_t block_offset(const TensorView& t, const int64_t* block, int rank, int64_t j) {
  int64_t off = 0, stride = 1;
  for (int k = rank - 1, tk = t.rank - 1; k >= 0 && tk >= 0; --k, --tk) {
    const int64_t coord = j % block[k];
    j /= block[k];
    if (t.dims[tk] != 1) off += coord * stride;
    stride *= t.dims[tk];
  }
  return off;
}

}  // namespace

Status layer_norm_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 3));
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) KILN_TRY(c.expect_dtype(i, DType::kF32));
  if (c.outputs.empty() || c.outputs.size() > 3)
    return c.error("asks for " + std::to_string(c.outputs.size()) + " outputs; expected 1 to 3 (Y, Mean, InvStdDev)");
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  if (x.empty()) return c.error("input X must have rank >= 1, got a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", -1), c.rank(0)));
  std::vector<ExprId> norm(x.begin() + axis, x.end());
  KILN_TRY(check_affine(c, 1, norm, x));
  if (c.has_input(2)) KILN_TRY(check_affine(c, 2, norm, x));
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = x;
  std::vector<ExprId> stats(x.begin(), x.begin() + axis);
  stats.resize(x.size(), p.constant(1));
  for (size_t i = 1; i < c.outputs.size(); ++i) {
    c.out(i).dtype = DType::kF32;
    c.out(i).shape = stats;
  }
  return ok_status();
}

KernelStatus layer_norm_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  int64_t axis = c.attrs.get_int("axis", -1);
  if (axis < 0) axis += xv.rank;
  if (axis < 0 || axis >= xv.rank) return KernelStatus::kInvalidValue;
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < axis; ++k) outer *= xv.dims[k];
  for (int k = static_cast<int>(axis); k < xv.rank; ++k) inner *= xv.dims[k];
  const int64_t* block = xv.dims + axis;
  const int block_rank = xv.rank - static_cast<int>(axis);
  const TensorView& sv = c.in(1);
  const TensorView* bv = c.has_input(2) ? &c.in(2) : nullptr;
  const bool scale_full = sv.numel() == inner, bias_full = !bv || bv->numel() == inner;
  const float* x = xv.as<float>();
  const float* scale = sv.as<float>();
  const float* bias = bv ? bv->as<float>() : nullptr;
  float* y = c.out(0).as<float>();
  float* mean_out = c.num_outputs > 1 && c.outputs[1] ? c.out(1).as<float>() : nullptr;
  float* inv_out = c.num_outputs > 2 && c.outputs[2] ? c.out(2).as<float>() : nullptr;
  const double eps = c.attrs.get_float("epsilon", 1e-5f);
  for (int64_t o = 0; o < outer; ++o) {
    const float* xr = x + o * inner;
    float* yr = y + o * inner;
    const RowMoments mo = row_moments(xr, inner, eps);
    if (mean_out) mean_out[o] = static_cast<float>(mo.mean);
    if (inv_out) inv_out[o] = static_cast<float>(mo.inv_std);
    const float m = static_cast<float>(mo.mean), s = static_cast<float>(mo.inv_std);
    if (scale_full && bias_full) {
      for (int64_t j = 0; j < inner; ++j) yr[j] = (xr[j] - m) * s * scale[j] + (bias ? bias[j] : 0.f);
      continue;
    }
    for (int64_t j = 0; j < inner; ++j) {
      const float g = scale[block_offset(sv, block, block_rank, j)];
      const float b = bias ? bias[block_offset(*bv, block, block_rank, j)] : 0.f;
      yr[j] = (xr[j] - m) * s * g + b;
    }
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
