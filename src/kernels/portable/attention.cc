// FusedAttention (Kiln-internal, made by export's fusion of MatMul -> scale -> bias/mask ->
// Softmax -> MatMul; see export/onnx/fuse_patterns.h). Inputs: Q [..., Lq, D], K [..., Lk, D]
// (or K^T [..., D, Lk] when k_transposed = 1), V [..., Lk, Dv], then one tensor per post op.
// Attributes: scale (f32, default 1), k_transposed, post (ints: 1 add a f32 bias, 2 replace
// by fill where a bool condition holds, 3 where it does not), fill (floats, one per post op).
//   Y = Softmax(post_ops((Q K^T) * scale), last axis) V, shape [..., Lq, Dv].
// The batch axes of Q, K and V are equal; each post tensor broadcasts onto the scores
// [..., Lq, Lk] without changing them. One thread here (the delegate splits the rows).
#include <cstring>

#include "kernels/portable/attention.h"
#include "core/status.h"

namespace kiln::kernels {

Status fused_attention_shape(ShapeCtx& c) {
  core::ExprPool& p = c.pool;
  KILN_TRY(c.expect_inputs(3, 3 + simd::kAttentionMaxPost));
  const size_t posts = c.num_inputs() - 3;
  const int64_t* kinds = c.attrs.ints("post");
  if (c.attrs.ints_size("post") != posts || c.attrs.floats_size("fill") != posts)
    return c.error("has " + std::to_string(posts) + " post-op inputs but post/fill attributes for " +
                   std::to_string(c.attrs.ints_size("post")) + "/" + std::to_string(c.attrs.floats_size("fill")));
  for (size_t i = 0; i < 3; ++i) {
    if (!c.has_input(i)) return c.error("input #" + std::to_string(i) + " is required");
    KILN_TRY(c.expect_dtype(i, DType::kF32));
  }
  const std::vector<ExprId>& q = c.in(0).shape;
  const std::vector<ExprId>& k = c.in(1).shape;
  const std::vector<ExprId>& v = c.in(2).shape;
  const size_t r = q.size();
  if (r < 2 || k.size() != r || v.size() != r)
    return c.error("Q " + p.shape_to_string(q) + ", K " + p.shape_to_string(k) + " and V " + p.shape_to_string(v) +
                   " must have one rank of at least 2");
  const bool kt = c.attrs.get_int("k_transposed", 0) != 0;
  const std::string why = "(Q " + p.shape_to_string(q) + ", K" + (kt ? "^T " : " ") + p.shape_to_string(k) + ", V " +
                          p.shape_to_string(v) + ")";
  for (size_t a = 0; a + 2 < r; ++a) {
    KILN_TRY(c.require_eq(q[a], k[a], why));
    KILN_TRY(c.require_eq(q[a], v[a], why));
  }
  const ExprId d = kt ? k[r - 2] : k[r - 1], lk = kt ? k[r - 1] : k[r - 2];
  KILN_TRY(c.require_eq(q[r - 1], d, why));
  KILN_TRY(c.require_eq(lk, v[r - 2], why));
  std::vector<ExprId> scores(q.begin(), q.end() - 1);
  scores.push_back(lk);
  for (size_t i = 0; i < posts; ++i) {
    const int64_t kind = kinds[i];
    if (kind < 1 || kind > 3) return c.error("post op " + std::to_string(kind) + " must be 1 (add), 2 or 3 (fill)");
    if (!c.has_input(3 + i)) return c.error("post-op input #" + std::to_string(3 + i) + " is required");
    const DType want = kind == 1 ? DType::kF32 : DType::kBool;
    KILN_TRY(c.expect_dtype(3 + i, want));
    const std::vector<ExprId>& s = c.in(3 + i).shape;
    const std::string pwhy = "(post-op input " + p.shape_to_string(s) + " must broadcast onto the scores " +
                             p.shape_to_string(scores) + ")";
    if (s.size() > r) return c.error(pwhy);
    for (size_t a = 0; a < s.size(); ++a)
      if (!p.is_const_value(s[a], 1)) KILN_TRY(c.require_eq(s[a], scores[r - s.size() + a], pwhy));
  }
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::vector<ExprId>(q.begin(), q.end() - 1);
  c.out(0).shape.push_back(v[r - 1]);
  return ok_status();
}

bool fused_attention_slices(const RunCtx& c, simd::AttentionSlice* base, int64_t* batches) {
  const TensorView& q = c.in(0);
  const TensorView& k = c.in(1);
  const TensorView& v = c.in(2);
  const int r = q.rank;
  if (r < 2 || k.rank != r || v.rank != r || c.out(0).rank != r) return false;
  base->k_transposed = c.attrs.get_int("k_transposed", 0) != 0;
  base->lq = static_cast<size_t>(q.dims[r - 2]);
  base->d = static_cast<size_t>(q.dims[r - 1]);
  base->lk = static_cast<size_t>(base->k_transposed ? k.dims[r - 1] : k.dims[r - 2]);
  base->dv = static_cast<size_t>(v.dims[r - 1]);
  base->scale = c.attrs.get_float("scale", 1.f);
  base->num_post = static_cast<int>(c.num_inputs) - 3;
  *batches = 1;
  for (int a = 0; a + 2 < r; ++a) *batches *= q.dims[a];
  const int64_t* kinds = c.attrs.ints("post");
  const float* fills = c.attrs.floats("fill");
  for (int i = 0; i < base->num_post; ++i) {
    if (!c.has_input(3 + i) || !kinds || !fills) return false;
    base->post[i].kind = static_cast<simd::AttentionPost::Kind>(kinds[i]);
    base->post[i].fill = fills[i];
  }
  return true;
}

void fused_attention_batch(const RunCtx& c, const simd::AttentionSlice& base, int64_t b, simd::AttentionSlice* s) {
  *s = base;
  const TensorView& q = c.in(0);
  const int r = q.rank;
  const size_t kn = base.lk * base.d;
  s->q = c.in(0).as<float>() + static_cast<size_t>(b) * base.lq * base.d;
  s->k = c.in(1).as<float>() + static_cast<size_t>(b) * kn;
  s->v = c.in(2).as<float>() + static_cast<size_t>(b) * base.lk * base.dv;
  s->out = c.out(0).as<float>() + static_cast<size_t>(b) * base.lq * base.dv;
  // Post tensors: strides over the score axes [..., Lq, Lk] (0 where broadcast).
  for (int i = 0; i < base.num_post; ++i) {
    const TensorView& t = c.in(3 + static_cast<uint32_t>(i));
    ptrdiff_t stride[kMaxRank] = {}, step = 1;
    for (int a = t.rank - 1; a >= 0; --a) {
      const int sa = a + (r - t.rank);
      stride[sa] = t.dims[a] == 1 ? 0 : step;
      step *= t.dims[a];
    }
    ptrdiff_t off = 0;
    int64_t rest = b;
    for (int a = r - 3; a >= 0; --a) {
      off += (rest % q.dims[a]) * stride[a];
      rest /= q.dims[a];
    }
    const size_t elem = t.dtype == DType::kBool ? 1 : 4;
    s->post[i].data = static_cast<const uint8_t*>(t.data) + off * static_cast<ptrdiff_t>(elem);
    s->post[i].row_stride = stride[r - 2];
    s->post[i].col_stride = stride[r - 1];
  }
}

KernelStatus fused_attention_run(const RunCtx& c) {
  simd::AttentionSlice base;
  int64_t batches = 0;
  if (!fused_attention_slices(c, &base, &batches)) return KernelStatus::kInvalidValue;
  simd::AttentionSlice s;
  for (int64_t b = 0; b < batches; ++b) {
    fused_attention_batch(c, base, b, &s);
    simd::attention_rows(s, 0, s.lq);
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
