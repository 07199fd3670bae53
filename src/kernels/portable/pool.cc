// MaxPool, AveragePool (1-D and 2-D, NC[H]W), GlobalAveragePool and GlobalMaxPool (any
// spatial rank; output N, C, 1, ...).
// Attributes kernel_shape, strides, pads, dilations, auto_pad, ceil_mode; AveragePool adds
// count_include_pad, MaxPool an optional Indices output (storage_order 0 or 1).
#include <cmath>
#include <limits>

#include "kernels/kernel.h"
#include "kernels/portable/window.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

Status window_pool_shape(ShapeCtx& c, bool is_max) {
  KILN_TRY(c.expect_inputs(1, 1));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  if (x.size() != 3 && x.size() != 4)
    return c.error("supports 1-D and 2-D pooling (input rank 3 or 4), got input " + p.shape_to_string(x));
  size_t nsp = x.size() - 2;
  if (!c.attrs.has("kernel_shape")) return c.error("attribute 'kernel_shape' is required");
  std::vector<int64_t> ks, pads;
  KILN_TRY(window_ints(c, "kernel_shape", nsp, 1, 1, &ks));
  KILN_TRY(window_ints(c, "pads", 2 * nsp, 0, 0, &pads));
  // As ONNX Runtime does: a pad as wide as the kernel would allow windows of padding only.
  if (!c.attrs.has("auto_pad") || c.attrs.str_equals("auto_pad", "NOTSET")) {
    for (size_t k = 0; k < 2 * nsp; ++k)
      if (pads[k] >= ks[k % nsp])
        return c.error("pad " + std::to_string(pads[k]) + " must be smaller than the kernel size " +
                       std::to_string(ks[k % nsp]));
  }
  int64_t ceil_mode = c.attrs.get_int("ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1)
    return c.error("attribute 'ceil_mode' must be 0 or 1, got " + std::to_string(ceil_mode));
  int64_t order = c.attrs.get_int("storage_order", 0);
  if (is_max && order != 0 && order != 1)
    return c.error("attribute 'storage_order' must be 0 or 1, got " + std::to_string(order));
  int64_t include = c.attrs.get_int("count_include_pad", 0);
  if (!is_max && include != 0 && include != 1)
    return c.error("attribute 'count_include_pad' must be 0 or 1, got " + std::to_string(include));
  if (c.outputs.size() > (is_max ? 2u : 1u))
    return c.error("has " + std::to_string(is_max ? 2 : 1) + " output(s), " + std::to_string(c.outputs.size()) +
                   " requested");
  std::vector<ExprId> kernel;
  for (int64_t k : ks) kernel.push_back(p.constant(k));
  std::vector<ExprId> out = {x[0], x[1]};
  KILN_TRY(window_output_sizes(c, std::vector<ExprId>(x.begin() + 2, x.end()), kernel, ceil_mode != 0, &out));
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = out;
  if (c.outputs.size() > 1) {
    c.out(1).dtype = DType::kI64;
    c.out(1).shape = out;
  }
  return ok_status();
}

/// Actual sizes of one pooling call, 1-D folded into 2-D (H = kH = OH = 1).
/// MaxPool and AveragePool: window, kernel size and flags, read once.
struct PoolPrep {
  Window win;
  int64_t k_h, k_w;
  bool column_major, include_pad;
};

struct PoolGeometry {
  int64_t planes, in_h, in_w, out_h, out_w, k_h, k_w;
  Window win;

  explicit PoolGeometry(const RunCtx& c) {
    const TensorView& x = c.in(0);
    const TensorView& y = c.out(0);
    const PoolPrep& prep = c.op_data->as<PoolPrep>();
    int nsp = x.rank - 2;
    planes = x.dims[0] * x.dims[1];
    in_h = nsp == 2 ? x.dims[2] : 1;
    in_w = x.dims[x.rank - 1];
    out_h = nsp == 2 ? y.dims[2] : 1;
    out_w = y.dims[y.rank - 1];
    k_h = prep.k_h;
    k_w = prep.k_w;
    win = prep.win;
    win.resolve(kSlotH, in_h, out_h, k_h);
    win.resolve(kSlotW, in_w, out_w, k_w);
  }
  /// Window taps [lo, hi) of output position o on axis slot a (kSlotH or kSlotW) that land
  /// inside the input; *padded = taps inside the input or its pads.
  void taps(int a, int64_t o, int64_t* lo, int64_t* hi, int64_t* padded) const {
    int64_t in = a == kSlotH ? in_h : in_w, k = a == kSlotH ? k_h : k_w;
    int64_t start = o * win.stride[a] - win.pad_begin[a];
    clip_range(start, win.dilation[a], in, k, lo, hi);
    int64_t plo, phi;
    clip_range(start + win.pad_begin[a], win.dilation[a], in + win.pad_begin[a] + win.pad_end[a], k, &plo, &phi);
    *padded = phi - plo;
  }
  /// One window as the kernels see it.
  struct Taps {
    const float* plane;       ///< the input plane
    int64_t out;              ///< flat output index (plane, oh, ow)
    int64_t h0, w0;           ///< input row and column of tap (0, 0), may be in the pads
    int64_t h_lo, h_hi, w_lo, w_hi;  ///< taps inside the input
    int64_t h_pad, w_pad;     ///< taps inside the input or its pads
  };
  /// Calls fn(taps) for every output position of every plane of x, in output order.
  template <typename Fn>
  void for_each_window(const float* x, Fn fn) const {
    const int64_t in_plane = in_h * in_w;
    Taps t;
    for (int64_t pl = 0; pl < planes; ++pl) {
      t.plane = x + pl * in_plane;
      for (int64_t oh = 0; oh < out_h; ++oh) {
        taps(kSlotH, oh, &t.h_lo, &t.h_hi, &t.h_pad);
        t.h0 = oh * win.stride[kSlotH] - win.pad_begin[kSlotH];
        for (int64_t ow = 0; ow < out_w; ++ow) {
          taps(kSlotW, ow, &t.w_lo, &t.w_hi, &t.w_pad);
          t.w0 = ow * win.stride[kSlotW] - win.pad_begin[kSlotW];
          t.out = (pl * out_h + oh) * out_w + ow;
          fn(t);
        }
      }
    }
  }
};

}  // namespace

void pool_prepare(const PrepareCtx& c, OpData* d) {
  PoolPrep& p = d->as<PoolPrep>();
  const int nsp = c.input_ranks[0] - 2;
  const int64_t* ks = c.attrs.ints("kernel_shape");
  p.win = Window{};
  p.win.read(c.attrs, nsp);
  p.k_h = nsp == 2 ? ks[0] : 1;
  p.k_w = ks[nsp - 1];
  p.column_major = c.attrs.get_int("storage_order", 0) == 1;
  p.include_pad = c.attrs.get_int("count_include_pad", 0) == 1;
}

Status max_pool_shape(ShapeCtx& c) { return window_pool_shape(c, true); }
Status average_pool_shape(ShapeCtx& c) { return window_pool_shape(c, false); }

/// Windows with no tap inside the input give the lowest float (index -1).
KernelStatus max_pool_run(const RunCtx& c) {
  PoolGeometry g(c);
  float* y = c.out(0).as<float>();
  int64_t* ind = c.num_outputs > 1 && c.outputs[1] ? c.out(1).as<int64_t>() : nullptr;
  const bool column_major = c.op_data->as<PoolPrep>().column_major;
  const int64_t in_plane = g.in_h * g.in_w, dh = g.win.dilation[kSlotH], dw = g.win.dilation[kSlotW];
  g.for_each_window(c.in(0).as<float>(), [&](const PoolGeometry::Taps& t) {
    float best = std::numeric_limits<float>::lowest();
    int64_t best_h = -1, best_w = -1;
    for (int64_t kh = t.h_lo; kh < t.h_hi; ++kh) {
      const int64_t row = (t.h0 + kh * dh) * g.in_w + t.w0;  // w0 + kw*dw >= 0 for kept taps
      for (int64_t kw = t.w_lo; kw < t.w_hi; ++kw) {
        const float v = t.plane[row + kw * dw];
        if (best_h < 0 || v > best || (v != v && best == best)) {  // NaN wins and stays, as torch
          best = v;
          best_h = t.h0 + kh * dh;
          best_w = t.w0 + kw * dw;
        }
      }
    }
    y[t.out] = best;
    if (ind) {
      const int64_t pl = t.out / (g.out_h * g.out_w);
      const int64_t within = column_major ? best_w * g.in_h + best_h : best_h * g.in_w + best_w;
      ind[t.out] = best_h < 0 ? -1 : pl * in_plane + within;
    }
  });
  return KernelStatus::kOk;
}

/// Windows with nothing to count give 0.
KernelStatus average_pool_run(const RunCtx& c) {
  PoolGeometry g(c);
  float* y = c.out(0).as<float>();
  const bool include_pad = c.op_data->as<PoolPrep>().include_pad;
  const int64_t dh = g.win.dilation[kSlotH], dw = g.win.dilation[kSlotW];
  g.for_each_window(c.in(0).as<float>(), [&](const PoolGeometry::Taps& t) {
    float sum = 0.f;
    for (int64_t kh = t.h_lo; kh < t.h_hi; ++kh) {
      const int64_t row = (t.h0 + kh * dh) * g.in_w + t.w0;
      for (int64_t kw = t.w_lo; kw < t.w_hi; ++kw) sum += t.plane[row + kw * dw];
    }
    // ceil_mode windows may overhang the pads too; those taps never count.
    const int64_t count = include_pad ? t.h_pad * t.w_pad : (t.h_hi - t.h_lo) * (t.w_hi - t.w_lo);
    y[t.out] = count > 0 ? sum / static_cast<float>(count) : 0.f;
  });
  return KernelStatus::kOk;
}

namespace {

/// GlobalAveragePool, GlobalMaxPool: [N, C, spatial...] -> [N, C, 1, ...].
Status global_pool_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  const std::vector<ExprId>& x = c.in(0).shape;
  if (x.size() < 3)
    return c.error("needs an input of rank >= 3 (N, C, spatial...), got " + c.pool.shape_to_string(x));
  std::vector<ExprId> out(x.size(), c.pool.constant(1));
  out[0] = x[0];
  out[1] = x[1];
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::move(out);
  return ok_status();
}

}  // namespace

Status global_average_pool_shape(ShapeCtx& c) { return global_pool_shape(c); }
Status global_max_pool_shape(ShapeCtx& c) { return global_pool_shape(c); }

namespace {

/// [N, C, spatial...] as N*C planes of prod(spatial) elements.
void planes_of(const TensorView& x, int64_t* planes, int64_t* plane) {
  *planes = x.dims[0] * x.dims[1];
  *plane = 1;
  for (int k = 2; k < x.rank; ++k) *plane *= x.dims[k];
}

}  // namespace

KernelStatus global_average_pool_run(const RunCtx& c) {
  const float* x = c.in(0).as<float>();
  float* y = c.out(0).as<float>();
  int64_t planes, plane;
  planes_of(c.in(0), &planes, &plane);
  for (int64_t pl = 0; pl < planes; ++pl) {
    double sum = 0;  // a whole plane (up to the bound's H*W) is summed: keep the precision
    for (int64_t i = 0; i < plane; ++i) sum += x[pl * plane + i];
    y[pl] = static_cast<float>(sum / static_cast<double>(plane));
  }
  return KernelStatus::kOk;
}

/// A NaN anywhere in a plane makes its maximum NaN (numpy's max, the ONNX reference).
KernelStatus global_max_pool_run(const RunCtx& c) {
  const float* x = c.in(0).as<float>();
  float* y = c.out(0).as<float>();
  int64_t planes, plane;
  planes_of(c.in(0), &planes, &plane);
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x + pl * plane;
    float best = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < plane; ++i) {
      if (std::isnan(xp[i])) {
        best = xp[i];
        break;
      }
      if (xp[i] > best) best = xp[i];
    }
    y[pl] = best;
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
