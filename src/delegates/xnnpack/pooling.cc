// Delegated pooling (ops.inc: MaxPool, AveragePool, GlobalAveragePool): XNNPACK's pooling
// operators, and Kiln's NaN-keeping max pooling for the windows XNNPACK refuses (ceil_mode,
// 1x1 windows, strides past the window).
#include <memory>

#include "delegates/xnnpack/max_pool_nhwc.h"
#include "delegates/xnnpack/op.h"
#include "core/status.h"

namespace kiln::delegates::xnnpack {
namespace {

struct XnnMaxPool : XnnOp {
  Status create(const OpSource&) override {
    const OpPlan& p = plan;
    const Padding pad(p);
    return check_create(xnn_create_max_pooling2d_nhwc_f32(pad.top, pad.right, pad.bottom, pad.left, p.kernel_h,
                                                          p.kernel_w, p.stride_h, p.stride_w, p.dilation_h,
                                                          p.dilation_w, p.channels, p.channels, p.channels, p.out_min,
                                                          p.out_max, pad.flags, &xop),
                        what);
  }
  Status setup() override {
    size_t n, h, w, c;
    nhwc_dims(*ins[0], in_twin[0], &n, &h, &w, &c);
    return check_setup(xnn_setup_max_pooling2d_nhwc_f32(xop, n, h, w, ins[0]->as<float>(), out->as<float>(), pool), *this);
  }
};

struct XnnAveragePool : XnnOp {
  Status create(const OpSource&) override {
    const OpPlan& p = plan;
    const Padding pad(p);
    return check_create(xnn_create_average_pooling2d_nhwc_f32(pad.top, pad.right, pad.bottom, pad.left, p.kernel_h,
                                                              p.kernel_w, p.stride_h, p.stride_w, p.channels,
                                                              p.channels, p.channels, p.out_min, p.out_max, pad.flags,
                                                              &xop),
                        what);
  }
  Status setup() override {
    size_t n, h, w, c;
    nhwc_dims(*ins[0], in_twin[0], &n, &h, &w, &c);
    return check_setup(xnn_setup_average_pooling2d_nhwc_f32(xop, n, h, w, ins[0]->as<float>(), out->as<float>(), pool),
                       *this);
  }
};

struct XnnGlobalAveragePool : XnnOp {
  Status create(const OpSource&) override {
    return check_create(xnn_create_global_average_pooling_nwc_f32(plan.channels, plan.channels, plan.channels,
                                                                  plan.out_min, plan.out_max, 0, &xop),
                        what);
  }
  Status setup() override {
    size_t n, h, w, c;
    nhwc_dims(*ins[0], in_twin[0], &n, &h, &w, &c);
    return check_setup(
        xnn_setup_global_average_pooling_nwc_f32(xop, n, h * w, ins[0]->as<float>(), out->as<float>(), pool), *this);
  }
};

struct OwnMaxPool : Op {
  Status setup() override {  // the geometry at the bound-to shape
    const OpPlan& p = plan;
    MaxPoolGeometry& g = geom;
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
    max_pool_nhwc(geom, ins[0]->as<float>(), out->as<float>(), pool);
    return ok_status();
  }
  MaxPoolGeometry geom;
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
  const bool ceil_mode = in.attrs.get_int("ceil_mode", 0) != 0;
  const bool xnn_refuses =
      p->kernel_h * p->kernel_w < 2 || p->stride_h > p->kernel_h || p->stride_w > p->kernel_w || ceil_mode;
  if (in.op == "MaxPool") {
    p->kind = OpKind::kMaxPool;
    p->own_kernel = xnn_refuses;
    return ok_status();
  }
  if (ceil_mode) return decline("ceil_mode = 1 is not supported");
  if (p->kernel_h * p->kernel_w < 2) return decline("a 1x1 pooling window");
  if (p->stride_h > p->kernel_h || p->stride_w > p->kernel_w) return decline("stride larger than the window");
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
  return ok_status();
}

std::unique_ptr<Op> make_pool(const OpPlan& p, const OpSource&) {
  if (p.kind == OpKind::kGlobalAveragePool) return std::make_unique<XnnGlobalAveragePool>();
  if (p.kind == OpKind::kAveragePool) return std::make_unique<XnnAveragePool>();
  if (p.own_kernel) return std::make_unique<OwnMaxPool>();
  return std::make_unique<XnnMaxPool>();
}

}  // namespace kiln::delegates::xnnpack
