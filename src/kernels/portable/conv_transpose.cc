// ConvTranspose: 1-D, 2-D and 3-D transposed convolution of NC[[D]H]W input with
// [C, M/group, [[kD]kH]kW] weights, optional bias [M]; attributes group, strides, dilations,
// pads, output_padding, kernel_shape, output_shape, auto_pad. Per spatial axis (ONNX):
//   out = stride*(in-1) + output_padding + (k-1)*dilation + 1 - pad_begin - pad_end,
// except that SAME_UPPER/SAME_LOWER give out = in*stride and an output_shape attribute gives
// out directly; in both cases the total padding follows from that out and is split as
//   SAME_UPPER: begin = floor(total/2);  otherwise: begin = total - floor(total/2).
#include <string>

#include "kernels/kernel.h"
#include "kernels/portable/window.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// floor(t / 2) for any sign.
int64_t floor_half(int64_t t) { return t >= 0 ? t / 2 : -((1 - t) / 2); }

/// Reads the optional output_shape attribute: `nsp` spatial sizes, or `nsp + 2` with N and C
/// first (older exporters); empty when absent.
Status read_output_shape(const ShapeCtx& c, size_t nsp, std::vector<int64_t>* out) {
  out->clear();
  if (!c.attrs.has("output_shape")) return ok_status();
  uint32_t n = c.attrs.ints_size("output_shape");
  if (n != nsp && n != nsp + 2)
    return c.error("attribute 'output_shape' needs " + std::to_string(nsp) + " values (or " +
                   std::to_string(nsp + 2) + " with N and C), got " + std::to_string(n));
  const int64_t* v = c.attrs.ints("output_shape") + (n - nsp);
  for (size_t k = 0; k < nsp; ++k) {
    if (v[k] < 1) return c.error("attribute 'output_shape' value " + std::to_string(v[k]) + " must be >= 1");
    out->push_back(v[k]);
  }
  return ok_status();
}

}  // namespace

Status conv_transpose_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 3));
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) KILN_TRY(c.expect_dtype(i, DType::kF32));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  const std::vector<ExprId>& w = c.in(1).shape;
  if (x.size() < 3 || x.size() > 2 + kMaxSpatial)
    return c.error("supports 1-D, 2-D and 3-D transposed convolution (input rank 3, 4 or 5), got input " +
                   p.shape_to_string(x));
  if (w.size() != x.size())
    return c.error("weight " + p.shape_to_string(w) + " must have the rank of input " + p.shape_to_string(x));
  const size_t nsp = x.size() - 2;
  const int64_t group = c.attrs.get_int("group", 1);
  if (group < 1) return c.error("attribute 'group' must be >= 1, got " + std::to_string(group));
  const std::string ws = p.shape_to_string(w);
  KILN_TRY(c.require_eq(x[1], w[0], "(input channels of " + p.shape_to_string(x) + " must equal dim 0 of weight " +
                                        ws + ")"));
  KILN_TRY(c.require_divisible(w[0], group, "(input channels of weight " + ws + " must be divisible by group " +
                                                std::to_string(group) + ")"));
  std::vector<ExprId> kernel(w.begin() + 2, w.end());
  if (c.attrs.has("kernel_shape")) {
    std::vector<int64_t> ks;
    KILN_TRY(window_ints(c, "kernel_shape", nsp, 1, 1, &ks));
    for (size_t k = 0; k < nsp; ++k)
      KILN_TRY(c.require_eq(kernel[k], p.constant(ks[k]), "(attribute 'kernel_shape' must match weight " + ws + ")"));
  }
  const ExprId out_ch = p.mul(w[1], p.constant(group));
  if (c.has_input(2)) {
    const std::vector<ExprId>& b = c.in(2).shape;
    if (b.size() != 1) return c.error("bias " + p.shape_to_string(b) + " must have rank 1");
    KILN_TRY(c.require_eq(b[0], out_ch, "(bias length must equal the output channels, group " +
                                            std::to_string(group) + " times dim 1 of weight " + ws + ")"));
  }
  const std::string auto_pad = c.attrs.get_str("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && !same)
    return c.error("attribute 'auto_pad' is '" + auto_pad + "', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  std::vector<int64_t> strides, dilations, pads, out_pad, out_shape;
  KILN_TRY(window_ints(c, "strides", nsp, 1, 1, &strides));
  KILN_TRY(window_ints(c, "dilations", nsp, 1, 1, &dilations));
  KILN_TRY(window_ints(c, "pads", 2 * nsp, 0, 0, &pads));
  KILN_TRY(window_ints(c, "output_padding", nsp, 0, 0, &out_pad));
  KILN_TRY(read_output_shape(c, nsp, &out_shape));
  if (auto_pad != "NOTSET") std::fill(pads.begin(), pads.end(), 0);

  std::vector<ExprId> out = {x[0], out_ch};
  for (size_t k = 0; k < nsp; ++k) {
    const ExprId in = x[2 + k], s = p.constant(strides[k]);
    ExprId size;
    if (!out_shape.empty()) {
      size = p.constant(out_shape[k]);
    } else if (same) {
      size = p.mul(in, s);
    } else {
      ExprId eff = p.add(p.mul(p.constant(dilations[k]), p.sub(kernel[k], p.constant(1))), p.constant(1));
      size = p.add(p.mul(s, p.sub(in, p.constant(1))), eff);
      size = p.add(size, p.constant(out_pad[k] - pads[k] - pads[nsp + k]));
    }
    KILN_TRY(c.require_ge(size, p.constant(1), "(output size of spatial axis " + std::to_string(k) +
                                                   " for input size " + p.to_string(in) + " and kernel " +
                                                   p.to_string(kernel[k]) + ")"));
    out.push_back(size);
  }
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::move(out);
  return ok_status();
}

/// Group, window attributes and output padding (in Window's slots), read once.
struct ConvTransposePrep {
  int64_t group;
  Window win;
  int64_t out_pad[kMaxSpatial];
  bool has_output_shape;
};

void conv_transpose_prepare(const PrepareCtx& c, OpData* d) {
  ConvTransposePrep& p = d->as<ConvTransposePrep>();
  const int nsp = c.input_ranks[0] - 2;
  p.group = c.attrs.get_int("group", 1);
  p.win = Window{};
  p.win.read(c.attrs, nsp);
  const int64_t* op = c.attrs.ints("output_padding");
  for (int slot = 0; slot < kMaxSpatial; ++slot) p.out_pad[slot] = 0;
  for (int k = 0; op && k < nsp; ++k) p.out_pad[spatial_slot(nsp, k)] = op[k];
  p.has_output_shape = c.attrs.has("output_shape");
}

namespace {

/// Scatters one input plane through one H x W plane of the kernel into one output plane, for
/// each of `channels` pairs (channel c's kernel at w + c*w_step, its output at y + c*y_step):
/// input pixel (ih, iw) and tap (kh, kw) land on output
/// (ih*stride - pad_begin + kh*dilation, iw*stride - pad_begin + kw*dilation).
/// Out of line: inlined into the batch, channel and depth loops around it, its inner loops
/// spilled registers (2-D ran ~30% slower than before the depth loops were added).
[[gnu::noinline]] void scatter_planes(const float* xp, const float* w, int64_t w_step, float* y, int64_t y_step,
                                      int64_t channels, const ConvDims& g, const Window& win) {
  const int64_t in_h = g.in[kSlotH], in_w = g.in[kSlotW], out_h = g.out[kSlotH], out_w = g.out[kSlotW];
  const int64_t k_h = g.k[kSlotH], k_w = g.k[kSlotW];
  const int64_t stride_h = win.stride[kSlotH], stride_w = win.stride[kSlotW];
  for (int64_t mm = 0; mm < channels; ++mm) {
    const float* wp = w + mm * w_step;
    float* yp = y + mm * y_step;
    for (int64_t kh = 0; kh < k_h; ++kh) {
      const int64_t off_h = kh * win.dilation[kSlotH] - win.pad_begin[kSlotH];
      int64_t ih_lo, ih_hi;
      clip_range(off_h, stride_h, out_h, in_h, &ih_lo, &ih_hi);
      for (int64_t kw = 0; kw < k_w; ++kw) {
        const float wt = wp[kh * k_w + kw];
        const int64_t off_w = kw * win.dilation[kSlotW] - win.pad_begin[kSlotW];
        int64_t iw_lo, iw_hi;
        clip_range(off_w, stride_w, out_w, in_w, &iw_lo, &iw_hi);
        for (int64_t ih = ih_lo; ih < ih_hi; ++ih) {
          const float* xr = xp + ih * in_w;
          float* yr = yp + (ih * stride_h + off_h) * out_w;
          for (int64_t iw = iw_lo; iw < iw_hi; ++iw) yr[iw * stride_w + off_w] += wt * xr[iw];
        }
      }
    }
  }
}

}  // namespace

KernelStatus conv_transpose_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  const TensorView& wv = c.in(1);
  TensorView& yv = c.out(0);
  const ConvDims g(xv, wv, yv);
  const int64_t n_batch = g.batch, in_ch = g.in_ch, out_ch = g.out_ch, group_out = wv.dims[1];
  const ConvTransposePrep& prep = c.op_data->as<ConvTransposePrep>();
  const int64_t group_in = in_ch / prep.group;
  Window win = prep.win;
  if (prep.has_output_shape || win.auto_pad == AutoPad::kSameUpper || win.auto_pad == AutoPad::kSameLower) {
    // Absent leading slots (size 1, stride 1, kernel 1, no output padding) get total 0.
    for (int slot = 0; slot < kMaxSpatial; ++slot) {
      const int64_t total = win.stride[slot] * (g.in[slot] - 1) + prep.out_pad[slot] +
                            (g.k[slot] - 1) * win.dilation[slot] + 1 - g.out[slot];
      win.pad_begin[slot] = win.auto_pad == AutoPad::kSameUpper ? floor_half(total) : total - floor_half(total);
    }
  }
  const float* x = xv.as<float>();
  const float* w = wv.as<float>();
  const float* bias = c.has_input(2) ? c.in(2).as<float>() : nullptr;
  float* y = yv.as<float>();
  // A 1-D or 2-D transposed convolution is a 3-D one of depth 1: one (kd, id) pair.
  const int64_t in_d = g.in[kSlotD], out_d = g.out[kSlotD], k_d = g.k[kSlotD];
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane(), k_plane = g.k_plane();
  const int64_t in_vol = in_d * in_plane, out_vol = out_d * out_plane, k_vol = k_d * k_plane;
  for (int64_t n = 0; n < n_batch; ++n)
    for (int64_t m = 0; m < out_ch; ++m) {
      float* yp = y + (n * out_ch + m) * out_vol;
      const float b = bias ? bias[m] : 0.f;
      for (int64_t i = 0; i < out_vol; ++i) yp[i] = b;
    }

  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t ic = 0; ic < in_ch; ++ic) {
      const float* xp = x + (n * in_ch + ic) * in_vol;
      float* yg = y + (n * out_ch + (ic / group_in) * group_out) * out_vol;  // the group's channels
      const float* wc = w + ic * group_out * k_vol;
      for (int64_t kd = 0; kd < k_d; ++kd) {
        // Input plane id and depth tap kd land on output plane id*stride + off_d.
        const int64_t off_d = kd * win.dilation[kSlotD] - win.pad_begin[kSlotD];
        int64_t id_lo, id_hi;
        clip_range(off_d, win.stride[kSlotD], out_d, in_d, &id_lo, &id_hi);
        for (int64_t id = id_lo; id < id_hi; ++id)
          scatter_planes(xp + id * in_plane, wc + kd * k_plane, k_vol, yg + (id * win.stride[kSlotD] + off_d) * out_plane,
                         out_vol, group_out, g, win);
      }
    }
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
