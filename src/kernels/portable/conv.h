#pragma once
// What Conv shares with its integer forms (ConvInteger, QLinearConv): the shape of a
// convolution of given operands, and the direct convolution of one output plane, for float
// operands or for integer ones with zero points, accumulated in int32 (exact).

#include <type_traits>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/portable/window.h"

namespace kiln::kernels {

/// The output shape of a convolution of input #xi by weight #wi with optional bias #bi (a
/// 1-D tensor of the output channels); checks group, kernel_shape and the window attributes.
Status conv_operands_shape(ShapeCtx& c, size_t xi, size_t wi, size_t bi, std::vector<ExprId>* y);
/// The same with the weight's shape given (an op whose weights are packed: the shape comes from
/// its attributes).
Status conv_operands_shape_of(ShapeCtx& c, size_t xi, const std::vector<ExprId>& w, size_t bi, std::vector<ExprId>* y);

/// Conv and ConvTranspose: group and the window attributes, read once.
struct ConvPrep {
  int64_t group;
  Window win;
};

/// Adds, for each of the `channels` input channels, one H x W plane of the kernel applied to
/// that channel's input plane to one output plane: y[oh, ow] += (w[kh, kw] - wz) *
/// (x[oh*stride + kh*dilation - pad_begin, ...] - xz) over the taps that land inside the
/// input (those in the padding read the zero point, so add nothing). Channel c's input plane
/// is x + c*x_step, its kernel w + c*w_step. Float operands have no zero points. Out of line,
/// as ConvTranspose's scatter_planes, so the depth loops around it cannot take registers
/// from its inner loops.
template <typename Acc, typename X, typename W>
[[gnu::noinline]] void conv_planes(const X* x, Acc xz, int64_t x_step, const W* w, Acc wz, int64_t w_step,
                                   int64_t channels, Acc* yp, const ConvDims& g, const Window& win) {
  const int64_t in_h = g.in[kSlotH], in_w = g.in[kSlotW], out_h = g.out[kSlotH], out_w = g.out[kSlotW];
  const int64_t k_h = g.k[kSlotH], k_w = g.k[kSlotW];
  const int64_t stride_h = win.stride[kSlotH], stride_w = win.stride[kSlotW];
  for (int64_t ic = 0; ic < channels; ++ic) {
    const X* xp = x + ic * x_step;
    const W* wp = w + ic * w_step;
    for (int64_t kh = 0; kh < k_h; ++kh) {
      // Output rows oh read input row oh*stride + off_h; keep those inside the input.
      int64_t off_h = kh * win.dilation[kSlotH] - win.pad_begin[kSlotH], oh_lo, oh_hi;
      clip_range(off_h, stride_h, in_h, out_h, &oh_lo, &oh_hi);
      for (int64_t kw = 0; kw < k_w; ++kw) {
        const Acc wt = static_cast<Acc>(wp[kh * k_w + kw]) - wz;
        int64_t off_w = kw * win.dilation[kSlotW] - win.pad_begin[kSlotW], ow_lo, ow_hi;
        clip_range(off_w, stride_w, in_w, out_w, &ow_lo, &ow_hi);
        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          const X* xr = xp + (oh * stride_h + off_h) * in_w;
          Acc* yr = yp + oh * out_w;
          if constexpr (std::is_floating_point_v<Acc>) {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) yr[ow] += wt * xr[ow * stride_w + off_w];
          } else {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) yr[ow] += wt * (static_cast<Acc>(xr[ow * stride_w + off_w]) - xz);
          }
        }
      }
    }
  }
}

/// One convolution's actual geometry (window pads resolved), walked one output plane at a time.
struct ConvPlanes {
  ConvDims g;
  Window win;
  int64_t group_ch, out_per_group, in_plane, out_plane, k_plane, in_vol, out_vol, k_vol;

  ConvPlanes(const TensorView& x, const TensorView& w, const TensorView& y, const ConvPrep& prep)
      : g(x, w, y), win(prep.win), group_ch(w.dims[1]), out_per_group(g.out_ch / prep.group), in_plane(g.in_plane()),
        out_plane(g.out_plane()), k_plane(g.k_plane()), in_vol(g.in[kSlotD] * in_plane),
        out_vol(g.out[kSlotD] * out_plane), k_vol(g.k[kSlotD] * k_plane) {
    for (int slot = 0; slot < kMaxSpatial; ++slot) win.resolve(slot, g.in[slot], g.out[slot], g.k[slot]);
  }

  /// Output plane (n, m) into yp (out_vol values): `init` plus the convolution of batch n's
  /// input group by output channel m's kernel. A 1-D or 2-D convolution is a 3-D one of depth
  /// 1: one (kd, od) pair of planes.
  template <typename Acc, typename X, typename W>
  void accumulate(const X* x, Acc xz, const W* w, Acc wz, int64_t n, int64_t m, Acc init, Acc* yp) const {
    for (int64_t i = 0; i < out_vol; ++i) yp[i] = init;
    const X* xg = x + (n * g.in_ch + (m / out_per_group) * group_ch) * in_vol;  // the group's channels
    const W* wm = w + m * group_ch * k_vol;
    const int64_t in_d = g.in[kSlotD], out_d = g.out[kSlotD], k_d = g.k[kSlotD];
    for (int64_t kd = 0; kd < k_d; ++kd) {
      // Output planes od read input plane od*stride + off_d; keep those inside the input.
      int64_t off_d = kd * win.dilation[kSlotD] - win.pad_begin[kSlotD], od_lo, od_hi;
      clip_range(off_d, win.stride[kSlotD], in_d, out_d, &od_lo, &od_hi);
      for (int64_t od = od_lo; od < od_hi; ++od)
        conv_planes<Acc>(xg + (od * win.stride[kSlotD] + off_d) * in_plane, xz, in_vol, wm + kd * k_plane, wz, k_vol,
                         group_ch, yp + od * out_plane, g, win);
    }
  }
};

}  // namespace kiln::kernels
