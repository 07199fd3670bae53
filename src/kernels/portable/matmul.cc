// MatMul with numpy semantics: a 1-D first operand is a row [1, K], a 1-D second operand a
// column [K, 1], and the added axis is removed from the result; leading (batch) axes broadcast.
#include "kernels/portable/matmul.h"
#include "core/status.h"

namespace kiln::kernels {

Status matmul_operands_shape(ShapeCtx& c, size_t ai, size_t bi, std::vector<ExprId>* out) {
  core::ExprPool& p = c.pool;
  std::vector<ExprId> a = c.in(ai).shape, b = c.in(bi).shape;
  for (size_t i : {ai, bi})
    if (c.rank(i) < 1)
      return c.error("input #" + std::to_string(i) + " is a scalar; matmul operands need rank >= 1");
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), p.constant(1));
  if (b_vec) b.push_back(p.constant(1));
  KILN_TRY(c.require_eq(a.back(), b[b.size() - 2],
                        "(inner dimensions to multiply " + p.shape_to_string(c.in(ai).shape) + " by " +
                            p.shape_to_string(c.in(bi).shape) + ")"));
  KILN_ASSIGN_OR_RETURN(*out, c.broadcast(std::vector<ExprId>(a.begin(), a.end() - 2),
                                          std::vector<ExprId>(b.begin(), b.end() - 2)));
  if (!a_vec) out->push_back(a[a.size() - 2]);
  if (!b_vec) out->push_back(b.back());
  return ok_status();
}

Status matmul_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  KILN_TRY(c.expect_dtype(1, DType::kF32));
  std::vector<ExprId> out;
  KILN_TRY(matmul_operands_shape(c, 0, 1, &out));
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::move(out);
  return ok_status();
}

MatmulBatch::MatmulBatch(const TensorView& av, const TensorView& bv) {
  m = av.rank == 1 ? 1 : av.dims[av.rank - 2];
  k = av.dims[av.rank - 1];
  n = bv.rank == 1 ? 1 : bv.dims[bv.rank - 1];
  const int a_batch = av.rank > 2 ? av.rank - 2 : 0, b_batch = bv.rank > 2 ? bv.rank - 2 : 0;
  rank = a_batch > b_batch ? a_batch : b_batch;
  int64_t as = m * k, bs = k * n;
  for (int d = rank - 1; d >= 0; --d) {
    const int ad_ = d - (rank - a_batch), bd_ = d - (rank - b_batch);
    const int64_t ad = ad_ >= 0 ? av.dims[ad_] : 1, bd = bd_ >= 0 ? bv.dims[bd_] : 1;
    size[d] = ad > bd ? ad : bd;
    a_stride[d] = ad == 1 ? 0 : as;
    b_stride[d] = bd == 1 ? 0 : bs;
    as *= ad;
    bs *= bd;
    batches *= size[d];
  }
}

void MatmulBatch::offsets(int64_t t, int64_t* a_off, int64_t* b_off) const {
  *a_off = *b_off = 0;
  for (int64_t d = rank - 1, rest = t; d >= 0; --d) {
    const int64_t i = rest % size[d];
    rest /= size[d];
    *a_off += i * a_stride[d];
    *b_off += i * b_stride[d];
  }
}

KernelStatus matmul_run(const RunCtx& c) {
  const MatmulBatch mb(c.in(0), c.in(1));
  const int64_t m = mb.m, k_len = mb.k, n = mb.n;
  const float* a = c.in(0).as<float>();
  const float* b = c.in(1).as<float>();
  float* y = c.out(0).as<float>();
  for (int64_t t = 0; t < mb.batches; ++t) {
    int64_t a_off, b_off;
    mb.offsets(t, &a_off, &b_off);
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
