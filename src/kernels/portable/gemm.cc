// Gemm: Y = alpha * op(A) * op(B) + beta * C, op() transposing when transA / transB is 1;
// A and B are 2-D, the optional C broadcasts one way to [M, N].
#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

Status gemm_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 3));
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) KILN_TRY(c.expect_dtype(i, DType::kF32));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& a = c.in(0).shape;
  const std::vector<ExprId>& b = c.in(1).shape;
  for (size_t i = 0; i < 2; ++i)
    if (c.rank(i) != 2)
      return c.error("input #" + std::to_string(i) + " " + p.shape_to_string(c.in(i).shape) + " must have rank 2");
  int64_t trans_a = c.attrs.get_int("transA", 0), trans_b = c.attrs.get_int("transB", 0);
  ExprId m = a[trans_a ? 1 : 0], ka = a[trans_a ? 0 : 1];
  ExprId kb = b[trans_b ? 1 : 0], n = b[trans_b ? 0 : 1];
  KILN_TRY(c.require_eq(ka, kb, "(inner dimensions of A " + p.shape_to_string(a) + " transA=" +
                                    std::to_string(trans_a) + " and B " + p.shape_to_string(b) +
                                    " transB=" + std::to_string(trans_b) + ")"));
  std::vector<ExprId> out = {m, n};
  if (c.has_input(2)) {
    const std::vector<ExprId>& cs = c.in(2).shape;
    if (cs.size() > 2) return c.error("C " + p.shape_to_string(cs) + " must have rank 0, 1 or 2");
    std::string why = "(C " + p.shape_to_string(cs) + " must broadcast to " + p.shape_to_string(out) + ")";
    for (size_t k = 0; k < cs.size(); ++k) {
      ExprId target = out[2 - cs.size() + k];
      if (!p.is_const_value(cs[k], 1)) KILN_TRY(c.require_eq(cs[k], target, why));
    }
  }
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::move(out);
  return ok_status();
}

namespace {
struct GemmPrep {
  bool trans_a, trans_b;
  float alpha, beta;
};
}  // namespace

void gemm_prepare(const PrepareCtx& c, OpData* d) {
  d->as<GemmPrep>() = GemmPrep{c.attrs.get_int("transA", 0) != 0, c.attrs.get_int("transB", 0) != 0,
                               c.attrs.get_float("alpha", 1.f), c.attrs.get_float("beta", 1.f)};
}

KernelStatus gemm_run(const RunCtx& c) {
  const TensorView& av = c.in(0);
  const TensorView& bv = c.in(1);
  const GemmPrep& prep = c.op_data->as<GemmPrep>();
  const bool trans_a = prep.trans_a, trans_b = prep.trans_b;
  const float alpha = prep.alpha, beta = prep.beta;
  int64_t m = av.dims[trans_a ? 1 : 0], k_len = av.dims[trans_a ? 0 : 1];
  int64_t n = bv.dims[trans_b ? 0 : 1];
  const float* a = av.as<float>();
  const float* b = bv.as<float>();
  float* y = c.out(0).as<float>();
  // C's strides over the output rows and columns; 0 where it broadcasts.
  const float* cp = nullptr;
  int64_t c_row = 0, c_col = 0;
  if (c.has_input(2) && beta != 0.f) {  // beta = 0 ignores C, even its NaNs
    const TensorView& cv = c.in(2);
    cp = cv.as<float>();
    if (cv.rank >= 1 && cv.dims[cv.rank - 1] != 1) c_col = 1;
    if (cv.rank == 2 && cv.dims[0] != 1) c_row = cv.dims[1];
  }
  // A[i,k] and B[k,j] under the transposes.
  int64_t a_i = trans_a ? 1 : k_len, a_k = trans_a ? m : 1;
  for (int64_t i = 0; i < m; ++i) {
    float* yr = y + i * n;
    for (int64_t j = 0; j < n; ++j) yr[j] = cp ? beta * cp[i * c_row + j * c_col] : 0.f;
    if (!trans_b) {  // i-k-j: stream rows of B
      for (int64_t k = 0; k < k_len; ++k) {
        float aik = alpha * a[i * a_i + k * a_k];
        const float* br = b + k * n;
        for (int64_t j = 0; j < n; ++j) yr[j] += aik * br[j];
      }
    } else {  // B is [N, K]: each output is a dot product of two contiguous rows
      for (int64_t j = 0; j < n; ++j) {
        const float* br = b + j * k_len;
        float sum = 0.f;
        for (int64_t k = 0; k < k_len; ++k) sum += a[i * a_i + k * a_k] * br[k];
        yr[j] += alpha * sum;
      }
    }
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
