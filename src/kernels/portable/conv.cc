// Conv: 1-D, 2-D and 3-D convolution over NC[[D]H]W input with [M, C/group, [[kD]kH]kW]
// weights, optional bias [M]; attributes group, strides, dilations, pads, kernel_shape, auto_pad.
#include "kernels/kernel.h"
#include "kernels/portable/conv.h"
#include "core/status.h"

namespace kiln::kernels {

Status conv_operands_shape(ShapeCtx& c, size_t xi, size_t wi, size_t bi, std::vector<ExprId>* y) {
  return conv_operands_shape_of(c, xi, c.in(wi).shape, bi, y);
}

Status conv_operands_shape_of(ShapeCtx& c, size_t xi, const std::vector<ExprId>& w, size_t bi, std::vector<ExprId>* y) {
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(xi).shape;
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
  if (c.has_input(bi)) {
    const std::vector<ExprId>& b = c.in(bi).shape;
    if (b.size() != 1) return c.error("bias " + p.shape_to_string(b) + " must have rank 1");
    KILN_TRY(c.require_eq(b[0], w[0], "(bias length must equal the output channels of weight " +
                                          p.shape_to_string(w) + ")"));
  }
  *y = {x[0], w[0]};
  return window_output_sizes(c, std::vector<ExprId>(x.begin() + 2, x.end()), kernel, false, y);
}

Status conv_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 3));
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) KILN_TRY(c.expect_dtype(i, DType::kF32));
  std::vector<ExprId> out;
  KILN_TRY(conv_operands_shape(c, 0, 1, 2, &out));
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::move(out);
  return ok_status();
}

void conv_prepare(const PrepareCtx& c, OpData* d) {
  ConvPrep& p = d->as<ConvPrep>();
  p.group = c.attrs.get_int("group", 1);
  p.win = Window{};
  p.win.read(c.attrs, c.input_ranks[0] - 2);
}

KernelStatus conv_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  const TensorView& wv = c.in(1);
  const ConvPlanes planes(xv, wv, c.out(0), c.op_data->as<ConvPrep>());
  const float* bias = c.has_input(2) ? c.in(2).as<float>() : nullptr;
  float* y = c.out(0).as<float>();
  for (int64_t n = 0; n < planes.g.batch; ++n)
    for (int64_t m = 0; m < planes.g.out_ch; ++m) {
      float* yp = y + (n * planes.g.out_ch + m) * planes.out_vol;
      planes.accumulate<float>(xv.as<float>(), 0.f, wv.as<float>(), 0.f, n, m, bias ? bias[m] : 0.f, yp);
    }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
