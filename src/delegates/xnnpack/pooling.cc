// Delegated pooling (ops.inc: MaxPool, AveragePool, GlobalAveragePool) on Kiln's NaN-keeping
// channels-last kernels (pool_nhwc.h), not XNNPACK's operators (which turned a NaN into +-Inf).
#include <memory>

#include "delegates/xnnpack/pool_nhwc.h"
#include "delegates/xnnpack/op.h"
#include "core/status.h"

namespace kiln::delegates::xnnpack {
namespace {

struct WindowPool : Op {
  Status setup() override {  // the geometry at the bound-to shape
    const OpPlan& p = plan;
    PoolGeometry& g = geom;
    nhwc_dims(*ins[0], in_twin[0], &g.batch, &g.in_h, &g.in_w, &g.channels);
    size_t c;
    nhwc_dims(*out, out_twin, &g.batch, &g.out_h, &g.out_w, &c);
    g.kernel_h = p.kernel_h, g.kernel_w = p.kernel_w, g.stride_h = p.stride_h, g.stride_w = p.stride_w;
    g.dilation_h = p.dilation_h, g.dilation_w = p.dilation_w;
    g.pad_top = p.pad_top, g.pad_left = p.pad_left;
    g.out_min = p.out_min, g.out_max = p.out_max;
    if (p.same_upper) {
      g.pad_top = same_upper_pad(g.in_h, g.out_h, p.stride_h, p.kernel_h, p.dilation_h);
      g.pad_left = same_upper_pad(g.in_w, g.out_w, p.stride_w, p.kernel_w, p.dilation_w);
    }
    return ok_status();
  }
  Status run() override {
    if (plan.kind == OpKind::kMaxPool) max_pool_nhwc(geom, ins[0]->as<float>(), out->as<float>(), pool);
    else average_pool_nhwc(geom, ins[0]->as<float>(), out->as<float>(), pool);
    return ok_status();
  }
  PoolGeometry geom;
};

struct GlobalAveragePool : Op {
  Status run() override {
    size_t n, h, w, c;
    nhwc_dims(*ins[0], in_twin[0], &n, &h, &w, &c);
    global_average_pool_nwc(ins[0]->as<float>(), out->as<float>(), n, h * w, c, plan.out_min, plan.out_max, pool);
    return ok_status();
  }
};

}  // namespace

Status plan_pool(const PlanInput& in, OpPlan* p) {
  const Operand& x = in.ins[0];
  if (x.shape.size() != 4) return decline("only 2-D pooling");
  if (in.out_shapes.size() != 1) return decline("the Indices output is not supported");
  if (in.attrs.get_int("storage_order", 0) != 0) return decline("storage_order = 1 is not supported");
  KILN_TRY(static_dim(in.exprs, x.shape[1], "channels", &p->channels));
  KILN_TRY(window_plan(in.attrs, 2, p));
  const int64_t* k = in.attrs.ints("kernel_shape");
  if (!k || in.attrs.ints_size("kernel_shape") != 2 || !small(k[0]) || !small(k[1]))
    return decline("kernel_shape must have 2 values");
  p->kernel_h = static_cast<uint32_t>(k[0]);
  p->kernel_w = static_cast<uint32_t>(k[1]);
  p->layout = Layout::kNhwc;
  p->flops_per_output = static_cast<double>(k[0] * k[1]);
  p->own_kernel = true;
  if (in.op == "MaxPool") {
    p->kind = OpKind::kMaxPool;
    return ok_status();
  }
  p->kind = OpKind::kAveragePool;
  if (p->dilation_h != 1 || p->dilation_w != 1) return decline("dilated average pooling");
  const bool padded = p->same_upper || p->pad_top || p->pad_left || p->pad_bottom || p->pad_right;
  if (padded && in.attrs.get_int("count_include_pad", 0) != 0) return decline("count_include_pad = 1 with padding");
  return ok_status();
}

Status plan_global_pool(const PlanInput& in, OpPlan* p) {
  if (in.ins[0].shape.size() != 4) return decline("only 2-D pooling");
  KILN_TRY(static_dim(in.exprs, in.ins[0].shape[1], "channels", &p->channels));
  p->kind = OpKind::kGlobalAveragePool;
  p->layout = Layout::kNhwc;
  p->own_kernel = true;
  return ok_status();
}

std::unique_ptr<Op> make_pool(const OpPlan& p, const OpSource&) {
  if (p.kind == OpKind::kGlobalAveragePool) return std::make_unique<GlobalAveragePool>();
  return std::make_unique<WindowPool>();
}

}  // namespace kiln::delegates::xnnpack
