// Delegated ops that move data (ops.inc: Concat, Resize, ChannelShuffle, Slice), and the layout
// changes at a region's edges (ToNhwc, ToNchw; export places them): Concat along channels as
// one strided XNNPACK copy per input, Resize of H and W on the portable kernel's channels-last
// maths, ChannelShuffle as XNNPACK's channel shuffle over the pixels, a Slice of channels as one
// strided copy.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "delegates/xnnpack/layout.h"
#include "delegates/xnnpack/op.h"
#include "kernels/kernel.h"
#include "kernels/portable/resize.h"
#include "core/status.h"

namespace kiln::delegates::xnnpack {
namespace {

// Concat: one strided copy per input into its channel slice, but for inputs their producer
// wrote there in place (DelegateOp::into). Channel counts are static (the support check said
// so); views have no dims before bind.
struct Concat : Op {
  ~Concat() override {
    for (xnn_operator_t c : copies) xnn_delete_operator(c);
  }
  Status create(const OpSource& src) override {
    auto channels = [&](int32_t v) {
      const fb::Value* val = src.m->values()->Get(v);
      const bool twin = val->storage() == fb::StorageKind::Delegate;
      return static_cast<size_t>((*src.exprs)[val->shape()->Get(twin ? val->shape()->size() - 1 : 1)].value);
    };
    const size_t total = channels(src.dop->outputs()->Get(0));
    for (size_t k = 0; k < ins.size(); ++k) {
      const size_t c = channels(src.dop->inputs()->Get(k));
      xnn_operator_t copy = nullptr;
      KILN_TRY(check_create(xnn_create_copy_nc_x32(c, c, total, 0, &copy), what));
      copies.push_back(copy);
    }
    in_place.assign(ins.size(), false);
    return ok_status();
  }
  bool input_in_place(size_t k) override {
    in_place[k] = true;
    return true;
  }
  Status setup() override {
    size_t on, oh, ow, total, n, h, w, c;
    nhwc_dims(*out, out_twin, &on, &oh, &ow, &total);
    size_t offset = 0;
    for (size_t k = 0; k < ins.size(); ++k) {
      nhwc_dims(*ins[k], in_twin[k], &n, &h, &w, &c);  // c: this input's channels
      if (!in_place[k])
        KILN_TRY(check_setup(
          xnn_setup_copy_nc_x32(copies[k], on * oh * ow, ins[k]->data, out->as<float>() + offset, pool), *this));
      offset += c;
    }
    return ok_status();
  }
  Status run() override {
    for (size_t k = 0; k < copies.size(); ++k)
      if (!in_place[k] && xnn_run_operator(copies[k], pool) != xnn_status_success)
        return internal_error(what + ": XNNPACK run failed");
    return ok_status();
  }
  std::vector<xnn_operator_t> copies;
  std::vector<bool> in_place;  ///< written by its producer
};

// ChannelShuffle (export's, from shufflenet's Reshape-Transpose-Reshape): output channel
// i * G + g of each pixel is input channel g * (C / G) + i, XNNPACK's channel shuffle.
struct ChannelShuffle : XnnOp {
  bool keeps_nan() const override { return true; }  // copies
  Status create(const OpSource&) override {
    return check_create(xnn_create_channel_shuffle_nc_x32(plan.groups, plan.channels / plan.groups, plan.channels,
                                                          plan.channels, 0, &xop),
                        what);
  }
  Status setup() override {
    size_t n, h, w, c;
    nhwc_dims(*ins[0], in_twin[0], &n, &h, &w, &c);
    return check_setup(xnn_setup_channel_shuffle_nc_x32(xop, n * h * w, ins[0]->data, out->data, pool), *this);
  }
};

// A Slice of channels [first, first + out_channels) of every pixel: one strided copy.
struct SliceChannels : XnnOp {
  bool keeps_nan() const override { return true; }  // copies
  Status create(const OpSource&) override {
    return check_create(xnn_create_copy_nc_x32(plan.out_channels, plan.channels, plan.out_channels, 0, &xop), what);
  }
  Status setup() override {
    size_t n, h, w, c;
    nhwc_dims(*ins[0], in_twin[0], &n, &h, &w, &c);
    return check_setup(
        xnn_setup_copy_nc_x32(xop, n * h * w, ins[0]->as<float>() + plan.first_channel, out->data, pool), *this);
  }
};

// Resize of H and W, channels-last: the portable kernel's maths on NHWC dims (a channels-first
// value read as is, its spatial axes 1, is seen with its dims permuted).
struct Resize : Op {
  Status create(const OpSource& src) override {
    operands.capture(src);
    return ok_status();
  }
  Status run() override {
    TensorView x = as_nhwc(*ins[0], in_twin[0]);
    TensorView y = as_nhwc(*out, out_twin);
    const TensorView* in[4] = {&x, nullptr, nullptr, nullptr};
    for (size_t k = 1; k < operands.views.size() && k < 4; ++k) in[k] = operands.views[k];
    TensorView* yp = &y;
    kernels::RunCtx ctx;
    ctx.inputs = in;
    ctx.num_inputs = static_cast<uint32_t>(std::min<size_t>(4, operands.views.size()));
    ctx.outputs = &yp;
    ctx.num_outputs = 1;
    ctx.attrs = operands.attr_view();
    const kernels::KernelStatus ks = kernels::resize_run_channels_last(ctx);
    if (ks != kernels::KernelStatus::kOk)
      return Status(Code::kInvalidArgument, what + ": " + kernels::kernel_status_message(ks), Reason::kDataRefused);
    return ok_status();
  }
  KernelOperands operands;
};

}  // namespace

// A region's edge: a value copied between channels-first and its channels-last twin.
struct LayoutChange : Op {
  explicit LayoutChange(bool to_nhwc) : to_nhwc(to_nhwc) { step_kind = to_nhwc ? "to_nhwc" : "to_nchw"; }
  bool is_layout_change() const override { return true; }
  Status run() override {
    const TensorView& x = *ins[0];
    size_t n, h, w, c;
    nhwc_dims(x, !to_nhwc, &n, &h, &w, &c);
    if (dtype_size(x.dtype) == 1) {
      if (to_nhwc) to_channels_last_bytes(x.as<uint8_t>(), out->as<uint8_t>(), n, c, h * w);
      else to_channels_first_bytes(x.as<uint8_t>(), out->as<uint8_t>(), n, c, h * w);
    } else if (to_nhwc) {
      to_channels_last(x.as<float>(), out->as<float>(), n, c, h * w, pool);
    } else {
      to_channels_first(x.as<float>(), out->as<float>(), n, c, h * w, pool);
    }
    return ok_status();
  }
  bool to_nhwc;
};

std::unique_ptr<Op> make_layout_change(bool to_nhwc) { return std::make_unique<LayoutChange>(to_nhwc); }

Status plan_concat(const PlanInput& in, OpPlan* p) {
  int64_t axis = in.attrs.get_int("axis", 0);
  const size_t rank = in.ins[0].shape.size();
  if (axis < 0) axis += static_cast<int64_t>(rank);
  if (rank != 4 || axis != 1) return decline("concatenation along other than the channels of a 4-D tensor");
  for (const Operand& o : in.ins) {
    size_t c = 0;
    if (o.const_data) return decline("a constant operand");
    KILN_TRY(static_dim(in.exprs, o.shape[1], "channels", &c));
  }
  p->kind = OpKind::kConcat;
  p->layout = Layout::kNhwc;
  return ok_status();
}

Status plan_resize(const PlanInput& in, OpPlan* p) {
  if (in.ins[0].shape.size() != 4) return decline("only 4-D inputs");
  for (size_t k = 1; k < in.ins.size() && k < 3; ++k)  // sizes (#3) may be computed: the output view has them
    if (in.ins[k].present && !in.ins[k].const_data) return decline("roi and scales must be constant");
  p->kind = OpKind::kResize;
  p->layout = Layout::kNhwc;
  p->own_kernel = true;
  p->flops_per_output = 4;
  return ok_status();
}

Status plan_channel_shuffle(const PlanInput& in, OpPlan* p) {
  if (in.ins[0].shape.size() != 4) return decline("a channel shuffle of other than a 4-D tensor");
  if (in.ins[0].dtype != DType::kF32) return decline("a channel shuffle of other than f32");
  if (in.ins[0].const_data) return decline("a constant operand");
  const int64_t g = in.attrs.get_int("groups", 0);
  KILN_TRY(static_dim(in.exprs, in.ins[0].shape[1], "channels", &p->channels));
  if (g < 2 || static_cast<size_t>(g) > p->channels || p->channels % static_cast<size_t>(g) != 0)
    return decline("groups " + std::to_string(g) + " of " + std::to_string(p->channels) + " channels");
  p->groups = static_cast<uint32_t>(g);
  p->kind = OpKind::kChannelShuffle;
  p->layout = Layout::kNhwc;
  return ok_status();
}

namespace {

// The values of a constant 1-D int64 or int32 operand; false when it is not one.
bool const_ints(const Operand& o, const core::ExprNode* exprs, std::vector<int64_t>* out) {
  if (!o.present || !o.const_data || o.shape.size() != 1 || (o.dtype != DType::kI64 && o.dtype != DType::kI32))
    return false;
  const int64_t n = const_of(exprs, o.shape[0]);
  if (n < 0 || n > 8) return false;
  out->resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k)
    (*out)[k] = o.dtype == DType::kI64 ? static_cast<const int64_t*>(o.const_data)[k]
                                       : static_cast<const int32_t*>(o.const_data)[k];
  return true;
}

}  // namespace

// Slice of channels only (axis 1 of a 4-D f32 tensor, constant bounds, step 1): what
// shufflenet's chunk(2, dim=1) becomes. Bounds follow ONNX: negative ones count from C, then
// clamp into [0, C].
Status plan_slice(const PlanInput& in, OpPlan* p) {
  const Operand& x = in.ins[0];
  if (x.shape.size() != 4 || x.dtype != DType::kF32 || x.const_data) return decline("a slice of other than a 4-D f32 activation");
  if (in.ins.size() < 3) return decline("starts and ends as attributes (opset < 10)");
  std::vector<int64_t> starts, ends, axes = {0}, steps = {1};
  if (!const_ints(in.ins[1], in.exprs, &starts) || !const_ints(in.ins[2], in.exprs, &ends) || starts.size() != 1 ||
      ends.size() != 1)
    return decline("starts and ends other than one constant each");
  if (in.ins.size() > 3 && in.ins[3].present && !const_ints(in.ins[3], in.exprs, &axes)) return decline("computed axes");
  if (in.ins.size() > 4 && in.ins[4].present && !const_ints(in.ins[4], in.exprs, &steps)) return decline("computed steps");
  if (axes.size() != 1 || steps.size() != 1 || (axes[0] != 1 && axes[0] != -3)) return decline("a slice of other than channels");
  if (steps[0] != 1) return decline("a step other than 1");
  KILN_TRY(static_dim(in.exprs, x.shape[1], "channels", &p->channels));
  const int64_t c = static_cast<int64_t>(p->channels);
  int64_t b = starts[0] < 0 ? starts[0] + c : starts[0], e = ends[0] < 0 ? ends[0] + c : ends[0];
  b = std::min(std::max<int64_t>(b, 0), c);
  e = std::min(std::max<int64_t>(e, 0), c);
  if (e <= b) return decline("an empty slice");
  p->first_channel = static_cast<size_t>(b);
  p->out_channels = static_cast<size_t>(e - b);
  p->kind = OpKind::kSlice;
  p->layout = Layout::kNhwc;
  return ok_status();
}

std::unique_ptr<Op> make_concat(const OpPlan&, const OpSource&) { return std::make_unique<Concat>(); }

std::unique_ptr<Op> make_channel_shuffle(const OpPlan&, const OpSource&) { return std::make_unique<ChannelShuffle>(); }

std::unique_ptr<Op> make_slice(const OpPlan&, const OpSource&) { return std::make_unique<SliceChannels>(); }

std::unique_ptr<Op> make_resize(const OpPlan&, const OpSource&) { return std::make_unique<Resize>(); }

}  // namespace kiln::delegates::xnnpack
