// Delegated ops over rows of the last axis (ops.inc: Softmax, LayerNormalization,
// FusedAttention): Kiln's softmax (rows of a length fixed at export, or known only at run time:
// attention over a dynamic sequence), LayerNorm with
// constant Scale and B, and export's fused attention on Kiln's online-softmax kernel.
#include <algorithm>
#include <memory>
#include <vector>

#include "delegates/xnnpack/op.h"
#include "delegates/xnnpack/pointwise.h"
#include "kernels/kernel.h"
#include "kernels/portable/attention.h"
#include "core/status.h"

namespace kiln::delegates::xnnpack {
namespace {

// Rows of the last axis, or of the channels (channels-last): Kiln's kernel, which keeps NaN
// (XNNPACK 2022's softmax gave -Inf for a row holding a NaN or +Inf).
struct RowSoftmax : Op {
  Status run() override {
    const TensorView& x = *ins[0];
    const size_t n = plan.channels ? plan.channels : x.rank ? static_cast<size_t>(x.dims[x.rank - 1]) : 1;
    softmax_rows(x.as<float>(), out->as<float>(), n ? numel(x) / n : 0, n, pool);
    return ok_status();
  }
};

struct LayerNorm : Op {
  Status create(const OpSource& src) override {
    gamma = src.operand_f32(1);
    beta = src.operands.size() > 2 && src.operands[2].present ? src.operand_f32(2) : nullptr;
    return ok_status();
  }
  Status run() override {
    const TensorView& x = *ins[0];
    const size_t n = plan.channels;
    layer_norm_rows(x.as<float>(), out->as<float>(), n ? numel(x) / n : 0, n, gamma, beta, plan.alpha, pool);
    return ok_status();
  }
  const float* gamma = nullptr;  // constant Scale and B (null: none), from the program
  const float* beta = nullptr;
};

// FusedAttention: the portable op's decoding, tasks of up to 16 query rows of one batch slice.
struct Attention : Op {
  Status create(const OpSource& src) override {
    operands.capture(src);
    return ok_status();
  }
  Status run() override {
    const TensorView* in[3 + simd::kAttentionMaxPost] = {};
    const size_t n = std::min<size_t>(operands.views.size(), 3 + simd::kAttentionMaxPost);
    for (size_t k = 0; k < n; ++k) in[k] = operands.views[k];
    TensorView* y = out;
    kernels::RunCtx ctx;
    ctx.inputs = in;
    ctx.num_inputs = static_cast<uint32_t>(n);
    ctx.outputs = &y;
    ctx.num_outputs = 1;
    ctx.attrs = operands.attr_view();
    Job job{&ctx, {}, 0};
    int64_t batches = 0;
    if (!kernels::fused_attention_slices(ctx, &job.base, &batches)) return internal_error(what + ": kernel failed");
    job.row_blocks = (job.base.lq + kRows - 1) / kRows;
    pthreadpool_parallelize_1d(pool, &task, &job, static_cast<size_t>(batches) * job.row_blocks, 0);
    return ok_status();
  }
  static constexpr size_t kRows = 16;
  struct Job {
    const kernels::RunCtx* ctx;
    simd::AttentionSlice base;
    size_t row_blocks;
  };
  static void task(void* p, size_t t) {
    const Job& j = *static_cast<const Job*>(p);
    simd::AttentionSlice s;
    kernels::fused_attention_batch(*j.ctx, j.base, static_cast<int64_t>(t / j.row_blocks), &s);
    const size_t r0 = (t % j.row_blocks) * kRows;
    simd::attention_rows(s, r0, std::min(s.lq, r0 + kRows));
  }
  KernelOperands operands;
};

}  // namespace

Status plan_softmax(const PlanInput& in, OpPlan* p) {
  const size_t rank = in.ins[0].shape.size();
  int64_t axis = in.attrs.get_int("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(rank);
  if (rank == 4 && axis == 1) p->layout = Layout::kNhwc;
  else if (rank >= 1 && axis == static_cast<int64_t>(rank) - 1) p->layout = Layout::kPlain;
  else return decline("softmax over an axis other than the last or the channels");
  p->kind = OpKind::kSoftmax;
  p->own_kernel = true;
  if (!static_dim(in.exprs, in.ins[0].shape[static_cast<size_t>(axis)], "the softmax axis", &p->channels).ok()) {
    if (p->layout != Layout::kPlain) return decline("softmax over channels of a dynamic size");
    p->channels = 0;  // a dynamic last axis (attention over a dynamic sequence): read at run time
  }
  p->flops_per_output = 4;
  return ok_status();
}

Status plan_layer_norm(const PlanInput& in, OpPlan* p) {
  const size_t rank = in.ins[0].shape.size();
  int64_t axis = in.attrs.get_int("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(rank);
  if (rank < 1 || axis != static_cast<int64_t>(rank) - 1) return decline("normalization over other than the last axis");
  if (in.out_shapes.size() > 1) return decline("the Mean and InvStdDev outputs");
  KILN_TRY(static_dim(in.exprs, in.ins[0].shape[rank - 1], "the normalized axis", &p->channels));
  for (size_t k = 1; k < 3 && k < in.ins.size(); ++k) {
    if (!in.ins[k].present) continue;
    if (!in.ins[k].const_data) return decline("Scale and B are not constant");
    size_t n = 1;
    for (core::ExprId d : in.ins[k].shape) n *= static_cast<size_t>(std::max<int64_t>(0, const_of(in.exprs, d)));
    if (n != p->channels) return decline("Scale or B broadcast from fewer elements than the normalized axis");
  }
  p->kind = OpKind::kLayerNorm;
  p->layout = Layout::kPlain;
  p->own_kernel = true;
  p->alpha = in.attrs.get_float("epsilon", 1e-5f);
  p->flops_per_output = 8;
  return ok_status();
}

Status plan_attention(const PlanInput& in, OpPlan* p) {
  p->kind = OpKind::kAttention;
  p->layout = Layout::kPlain;
  p->own_kernel = true;
  if (in.ins.size() < 3 || in.ins[0].shape.size() < 2 || in.ins[2].shape.size() < 2)
    return decline("operands of rank below 2");
  const int64_t lk = const_of(in.exprs, in.ins[2].shape[in.ins[2].shape.size() - 2]);
  const int64_t d = const_of(in.exprs, in.ins[0].shape.back());
  p->flops_per_output = 4.0 * static_cast<double>(lk > 0 ? lk : 64) * static_cast<double>(d > 0 ? d : 16);
  return ok_status();
}

std::unique_ptr<Op> make_softmax(const OpPlan&, const OpSource&) { return std::make_unique<RowSoftmax>(); }

std::unique_ptr<Op> make_layer_norm(const OpPlan&, const OpSource&) { return std::make_unique<LayerNorm>(); }

std::unique_ptr<Op> make_attention(const OpPlan&, const OpSource&) { return std::make_unique<Attention>(); }

}  // namespace kiln::delegates::xnnpack
