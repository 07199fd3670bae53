// Conv: 1-D, 2-D and 3-D convolution over NC[[D]H]W input with [M, C/group, [[kD]kH]kW]
// weights, optional bias [M]; attributes group, strides, dilations, pads, kernel_shape, auto_pad.
#include "kernels/kernel.h"
#include "kernels/portable/window.h"
#include "core/status.h"

namespace kiln::kernels {

Status conv_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 3));
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) KILN_TRY(c.expect_dtype(i, DType::kF32));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  const std::vector<ExprId>& w = c.in(1).shape;
  if (x.size() < 3 || x.size() > 2 + kMaxSpatial)
    return c.error("supports 1-D, 2-D and 3-D convolution (input rank 3, 4 or 5), got input " + p.shape_to_string(x));
  if (w.size() != x.size())
    return c.error("weight " + p.shape_to_string(w) + " must have the rank of input " + p.shape_to_string(x));
  size_t nsp = x.size() - 2;
  int64_t group = c.attrs.get_int("group", 1);
  if (group < 1) return c.error("attribute 'group' must be >= 1, got " + std::to_string(group));
  std::string g = std::to_string(group);
  KILN_TRY(c.require_divisible(w[0], group, "(output channels of weight " + p.shape_to_string(w) +
                                                 " must be divisible by group " + g + ")"));
  KILN_TRY(c.require_eq(x[1], p.mul(w[1], p.constant(group)),
                        "(input channels of " + p.shape_to_string(x) + " must equal group " + g +
                            " times dim 1 of weight " + p.shape_to_string(w) + ")"));
  std::vector<ExprId> kernel(w.begin() + 2, w.end());
  if (c.attrs.has("kernel_shape")) {
    std::vector<int64_t> ks;
    KILN_TRY(window_ints(c, "kernel_shape", nsp, 1, 1, &ks));
    for (size_t k = 0; k < nsp; ++k)
      KILN_TRY(c.require_eq(kernel[k], p.constant(ks[k]),
                            "(attribute 'kernel_shape' must match weight " + p.shape_to_string(w) + ")"));
  }
  if (c.has_input(2)) {
    const std::vector<ExprId>& b = c.in(2).shape;
    if (b.size() != 1) return c.error("bias " + p.shape_to_string(b) + " must have rank 1");
    KILN_TRY(c.require_eq(b[0], w[0], "(bias length must equal the output channels of weight " +
                                          p.shape_to_string(w) + ")"));
  }
  std::vector<ExprId> out = {x[0], w[0]};
  KILN_TRY(window_output_sizes(c, std::vector<ExprId>(x.begin() + 2, x.end()), kernel, false, &out));
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::move(out);
  return ok_status();
}

/// Conv and ConvTranspose: group and the window attributes, read once.
struct ConvPrep {
  int64_t group;
  Window win;
};

void conv_prepare(const PrepareCtx& c, OpData* d) {
  ConvPrep& p = d->as<ConvPrep>();
  p.group = c.attrs.get_int("group", 1);
  p.win = Window{};
  p.win.read(c.attrs, c.input_ranks[0] - 2);
}

namespace {

/// Adds, for each of the `channels` input channels, one H x W plane of the kernel applied to
/// that channel's input plane to one output plane: y[oh, ow] += w[kh, kw] *
/// x[oh*stride + kh*dilation - pad_begin, ...] over the taps that land inside the input (those
/// in the padding read zeros). Channel c's input plane is x + c*x_step, its kernel w + c*w_step.
/// Out of line, as ConvTranspose's scatter_planes, so the depth loops around it cannot take
/// registers from its inner loops.
[[gnu::noinline]] void conv_planes(const float* x, int64_t x_step, const float* w, int64_t w_step, int64_t channels,
                                   float* yp, const ConvDims& g, const Window& win) {
  const int64_t in_h = g.in[kSlotH], in_w = g.in[kSlotW], out_h = g.out[kSlotH], out_w = g.out[kSlotW];
  const int64_t k_h = g.k[kSlotH], k_w = g.k[kSlotW];
  const int64_t stride_h = win.stride[kSlotH], stride_w = win.stride[kSlotW];
  for (int64_t ic = 0; ic < channels; ++ic) {
    const float* xp = x + ic * x_step;
    const float* wp = w + ic * w_step;
    for (int64_t kh = 0; kh < k_h; ++kh) {
      // Output rows oh read input row oh*stride + off_h; keep those inside the input.
      int64_t off_h = kh * win.dilation[kSlotH] - win.pad_begin[kSlotH], oh_lo, oh_hi;
      clip_range(off_h, stride_h, in_h, out_h, &oh_lo, &oh_hi);
      for (int64_t kw = 0; kw < k_w; ++kw) {
        float wt = wp[kh * k_w + kw];
        int64_t off_w = kw * win.dilation[kSlotW] - win.pad_begin[kSlotW], ow_lo, ow_hi;
        clip_range(off_w, stride_w, in_w, out_w, &ow_lo, &ow_hi);
        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          const float* xr = xp + (oh * stride_h + off_h) * in_w;
          float* yr = yp + oh * out_w;
          for (int64_t ow = ow_lo; ow < ow_hi; ++ow) yr[ow] += wt * xr[ow * stride_w + off_w];
        }
      }
    }
  }
}

}  // namespace

KernelStatus conv_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  const TensorView& wv = c.in(1);
  TensorView& yv = c.out(0);
  const ConvDims g(xv, wv, yv);
  const ConvPrep& prep = c.op_data->as<ConvPrep>();
  const int64_t n_batch = g.batch, in_ch = g.in_ch, out_ch = g.out_ch, group_ch = wv.dims[1];
  const int64_t out_per_group = out_ch / prep.group;
  Window win = prep.win;
  for (int slot = 0; slot < kMaxSpatial; ++slot) win.resolve(slot, g.in[slot], g.out[slot], g.k[slot]);
  const float* x = xv.as<float>();
  const float* w = wv.as<float>();
  const float* bias = c.has_input(2) ? c.in(2).as<float>() : nullptr;
  float* y = yv.as<float>();
  // A 1-D or 2-D convolution is a 3-D one of depth 1: one (kd, od) pair of planes.
  const int64_t in_d = g.in[kSlotD], out_d = g.out[kSlotD], k_d = g.k[kSlotD];
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane(), k_plane = g.k_plane();
  const int64_t in_vol = in_d * in_plane, out_vol = out_d * out_plane, k_vol = k_d * k_plane;

  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t m = 0; m < out_ch; ++m) {
      float* yp = y + (n * out_ch + m) * out_vol;
      float b = bias ? bias[m] : 0.f;
      for (int64_t i = 0; i < out_vol; ++i) yp[i] = b;
      const float* xg = x + (n * in_ch + (m / out_per_group) * group_ch) * in_vol;  // the group's channels
      const float* wm = w + m * group_ch * k_vol;
      for (int64_t kd = 0; kd < k_d; ++kd) {
        // Output planes od read input plane od*stride + off_d; keep those inside the input.
        int64_t off_d = kd * win.dilation[kSlotD] - win.pad_begin[kSlotD], od_lo, od_hi;
        clip_range(off_d, win.stride[kSlotD], in_d, out_d, &od_lo, &od_hi);
        for (int64_t od = od_lo; od < od_hi; ++od)
          conv_planes(xg + (od * win.stride[kSlotD] + off_d) * in_plane, in_vol, wm + kd * k_plane, k_vol, group_ch,
                      yp + od * out_plane, g, win);
      }
    }
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
