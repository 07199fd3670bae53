// Conv: 1-D and 2-D convolution over NC[H]W input with [M, C/group, kH, kW] weights,
// optional bias [M]; attributes group, strides, dilations, pads, kernel_shape, auto_pad.
#include "kernels/kernel.h"
#include "kernels/portable/window.h"

namespace kiln::kernels {

Status conv_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 3));
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) KILN_TRY(c.expect_dtype(i, DType::kF32));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  const std::vector<ExprId>& w = c.in(1).shape;
  if (x.size() != 3 && x.size() != 4)
    return c.error("supports 1-D and 2-D convolution (input rank 3 or 4), got input " + p.shape_to_string(x));
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

KernelStatus conv_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  const TensorView& wv = c.in(1);
  TensorView& yv = c.out(0);
  const ConvDims g(xv, wv, yv);
  const int64_t n_batch = g.batch, in_ch = g.in_ch, in_h = g.in_h, in_w = g.in_w, out_ch = g.out_ch;
  const int64_t group_ch = wv.dims[1], k_h = g.k_h, k_w = g.k_w, out_h = g.out_h, out_w = g.out_w;
  const ConvPrep& prep = c.op_data->as<ConvPrep>();
  int64_t group = prep.group;
  int64_t out_per_group = out_ch / group;
  Window win = prep.win;
  win.resolve(0, in_h, out_h, k_h);
  win.resolve(1, in_w, out_w, k_w);
  const float* x = xv.as<float>();
  const float* w = wv.as<float>();
  const float* bias = c.has_input(2) ? c.in(2).as<float>() : nullptr;
  float* y = yv.as<float>();
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane(), k_plane = g.k_plane();

  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t m = 0; m < out_ch; ++m) {
      float* yp = y + (n * out_ch + m) * out_plane;
      float b = bias ? bias[m] : 0.f;
      for (int64_t i = 0; i < out_plane; ++i) yp[i] = b;
      int64_t first_in = (m / out_per_group) * group_ch;
      for (int64_t ic = 0; ic < group_ch; ++ic) {
        const float* xp = x + (n * in_ch + first_in + ic) * in_plane;
        const float* wp = w + (m * group_ch + ic) * k_plane;
        for (int64_t kh = 0; kh < k_h; ++kh) {
          // Output rows oh read input row oh*stride + off_h; keep those inside the input.
          int64_t off_h = kh * win.dilation[0] - win.pad_begin[0], oh_lo, oh_hi;
          clip_range(off_h, win.stride[0], in_h, out_h, &oh_lo, &oh_hi);
          for (int64_t kw = 0; kw < k_w; ++kw) {
            float wt = wp[kh * k_w + kw];
            int64_t off_w = kw * win.dilation[1] - win.pad_begin[1], ow_lo, ow_hi;
            clip_range(off_w, win.stride[1], in_w, out_w, &ow_lo, &ow_hi);
            for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
              const float* xr = xp + (oh * win.stride[0] + off_h) * in_w;
              float* yr = yp + oh * out_w;
              for (int64_t ow = ow_lo; ow < ow_hi; ++ow) yr[ow] += wt * xr[ow * win.stride[1] + off_w];
            }
          }
        }
      }
    }
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
