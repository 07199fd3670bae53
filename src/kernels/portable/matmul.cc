// MatMul with numpy semantics: a 1-D first operand is a row [1, K], a 1-D second operand a
// column [K, 1], and the added axis is removed from the result; leading (batch) axes broadcast.
#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

Status matmul_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  KILN_TRY(c.expect_dtype(1, DType::kF32));
  core::ExprPool& p = c.pool;
  std::vector<ExprId> a = c.in(0).shape, b = c.in(1).shape;
  for (size_t i = 0; i < 2; ++i)
    if (c.rank(i) < 1)
      return c.error("input #" + std::to_string(i) + " is a scalar; matmul operands need rank >= 1");
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), p.constant(1));
  if (b_vec) b.push_back(p.constant(1));
  KILN_TRY(c.require_eq(a.back(), b[b.size() - 2],
                        "(inner dimensions to multiply " + p.shape_to_string(c.in(0).shape) + " by " +
                            p.shape_to_string(c.in(1).shape) + ")"));
  KILN_ASSIGN_OR_RETURN(std::vector<ExprId> out, c.broadcast(std::vector<ExprId>(a.begin(), a.end() - 2),
                                                             std::vector<ExprId>(b.begin(), b.end() - 2)));
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::move(out);
  return ok_status();
}

KernelStatus matmul_run(const RunCtx& c) {
  const TensorView& av = c.in(0);
  const TensorView& bv = c.in(1);
  TensorView& yv = c.out(0);
  // Matrix sizes with 1-D operands promoted; batch axes are what precedes them.
  int64_t m = av.rank == 1 ? 1 : av.dims[av.rank - 2];
  int64_t k_len = av.dims[av.rank - 1];
  int64_t n = bv.rank == 1 ? 1 : bv.dims[bv.rank - 1];
  int a_batch = av.rank > 2 ? av.rank - 2 : 0, b_batch = bv.rank > 2 ? bv.rank - 2 : 0;
  int batch_rank = a_batch > b_batch ? a_batch : b_batch;
  // Per batch axis (aligned to the right): output size and operand strides (0 = broadcast).
  int64_t size[kMaxRank] = {}, a_stride[kMaxRank] = {}, b_stride[kMaxRank] = {};
  int64_t as = m * k_len, bs = k_len * n, batches = 1;
  for (int k = batch_rank - 1; k >= 0; --k) {
    int ak = k - (batch_rank - a_batch), bk = k - (batch_rank - b_batch);
    int64_t ad = ak >= 0 ? av.dims[ak] : 1, bd = bk >= 0 ? bv.dims[bk] : 1;
    size[k] = ad > bd ? ad : bd;
    a_stride[k] = ad == 1 ? 0 : as;
    b_stride[k] = bd == 1 ? 0 : bs;
    as *= ad;
    bs *= bd;
    batches *= size[k];
  }
  const float* a = av.as<float>();
  const float* b = bv.as<float>();
  float* y = yv.as<float>();
  for (int64_t t = 0; t < batches; ++t) {
    int64_t a_off = 0, b_off = 0;
    for (int64_t k = batch_rank - 1, rest = t; k >= 0; --k) {
      int64_t i = rest % size[k];
      rest /= size[k];
      a_off += i * a_stride[k];
      b_off += i * b_stride[k];
    }
    const float* ap = a + a_off;
    const float* bp = b + b_off;
    float* yp = y + t * m * n;
    // i-k-j: the inner loop streams one row of B into one row of the output.
    for (int64_t i = 0; i < m; ++i) {
      float* yr = yp + i * n;
      for (int64_t j = 0; j < n; ++j) yr[j] = 0.f;
      for (int64_t k = 0; k < k_len; ++k) {
        float aik = ap[i * k_len + k];
        const float* br = bp + k * n;
        for (int64_t j = 0; j < n; ++j) yr[j] += aik * br[j];
      }
    }
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
