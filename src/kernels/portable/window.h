#pragma once
// Sliding-window geometry shared by Conv, ConvTranspose and the pools: attribute checks and
// symbolic output sizes for the shape functions, and the same attributes read at run time (no
// allocation). Up to three spatial axes (D, H, W) sit in fixed slots; a window with fewer axes
// uses the last ones and leaves the leading slots as axes of size 1 (stride 1, no padding).

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

/// Spatial slots of a window and their order: a 1-D window uses kSlotW, a 2-D one kSlotH and
/// kSlotW, a 3-D one all three.
constexpr int kMaxSpatial = 3;
constexpr int kSlotD = 0, kSlotH = 1, kSlotW = 2;

/// Slot of spatial axis `k` (0-based, after N and C) of a window with `nsp` spatial axes.
constexpr int spatial_slot(int nsp, int k) { return kMaxSpatial - nsp + k; }

enum class AutoPad : uint8_t { kNotSet, kValid, kSameUpper, kSameLower };

/// Window attributes of one node as the kernel sees them; pads are final after resolve().
struct Window {
  AutoPad auto_pad = AutoPad::kNotSet;
  int64_t stride[kMaxSpatial] = {1, 1, 1};
  int64_t dilation[kMaxSpatial] = {1, 1, 1};
  int64_t pad_begin[kMaxSpatial] = {0, 0, 0};
  int64_t pad_end[kMaxSpatial] = {0, 0, 0};

  /// Reads strides/dilations/pads/auto_pad for `nsp` spatial axes (1 to kMaxSpatial) into
  /// their slots; the leading slots keep the identity. The shape function validated them.
  void read(const core::Attrs& a, int nsp) {
    auto_pad = a.str_equals("auto_pad", "VALID")        ? AutoPad::kValid
               : a.str_equals("auto_pad", "SAME_UPPER") ? AutoPad::kSameUpper
               : a.str_equals("auto_pad", "SAME_LOWER") ? AutoPad::kSameLower
                                                        : AutoPad::kNotSet;
    const int64_t* s = a.ints("strides");
    const int64_t* d = a.ints("dilations");
    const int64_t* p = auto_pad == AutoPad::kNotSet ? a.ints("pads") : nullptr;
    for (int k = 0; k < nsp; ++k) {
      const int slot = spatial_slot(nsp, k);
      if (s) stride[slot] = s[k];
      if (d) dilation[slot] = d[k];
      if (p) {
        pad_begin[slot] = p[k];
        pad_end[slot] = p[nsp + k];
      }
    }
  }

  /// For SAME_*: pads from the actual input, output and kernel sizes of axis `slot`.
  void resolve(int slot, int64_t in, int64_t out, int64_t k) {
    if (auto_pad != AutoPad::kSameUpper && auto_pad != AutoPad::kSameLower) return;
    int64_t total = std::max<int64_t>(0, (out - 1) * stride[slot] + dilation[slot] * (k - 1) + 1 - in);
    pad_begin[slot] = auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
    pad_end[slot] = total - pad_begin[slot];
  }
};

/// Actual sizes of a Conv or ConvTranspose run (x [N, C, spatial...], weight [., ., kernel...],
/// y [N, M, spatial...]) with the spatial sizes in Window's slots; absent leading axes are 1.
struct ConvDims {
  int nsp;  ///< spatial axes: 1 to kMaxSpatial
  int64_t batch, in_ch, out_ch;
  int64_t in[kMaxSpatial], out[kMaxSpatial], k[kMaxSpatial];

  ConvDims(const TensorView& x, const TensorView& w, const TensorView& y)
      : nsp(x.rank - 2), batch(x.dims[0]), in_ch(x.dims[1]), out_ch(y.dims[1]) {
    for (int slot = 0; slot < kMaxSpatial; ++slot) {
      const int axis = 2 + slot - spatial_slot(nsp, 0);  // tensor axis of this slot, < 2 if absent
      const bool present = axis >= 2;
      in[slot] = present ? x.dims[axis] : 1;
      out[slot] = present ? y.dims[axis] : 1;
      k[slot] = present ? w.dims[axis] : 1;
    }
  }
  /// Elements of one H x W plane of the input, the output and a kernel.
  int64_t in_plane() const { return in[kSlotH] * in[kSlotW]; }
  int64_t out_plane() const { return out[kSlotH] * out[kSlotW]; }
  int64_t k_plane() const { return k[kSlotH] * k[kSlotW]; }
};

/// Sets [lo, hi) to the indices j in [0, n) with 0 <= start + j*step < limit (step >= 1): the
/// taps of a window that land inside an axis, or the outputs whose tap lands inside it.
inline void clip_range(int64_t start, int64_t step, int64_t limit, int64_t n, int64_t* lo, int64_t* hi) {
  *lo = start >= 0 ? 0 : (-start + step - 1) / step;
  *hi = start >= limit ? 0 : std::min(n, (limit - 1 - start) / step + 1);
  if (*hi < *lo) *hi = *lo;
}

/// Reads an optional ints attribute of exactly `n` values each in [`min`, kMaxSizeAttr], else `def`.
inline Status window_ints(const ShapeCtx& c, const char* name, size_t n, int64_t min, int64_t def,
                          std::vector<int64_t>* out) {
  out->assign(n, def);
  if (!c.attrs.has(name)) return ok_status();
  if (c.attrs.ints_size(name) != n)
    return c.error(std::string("attribute '") + name + "' needs " + std::to_string(n) + " values, got " +
                   std::to_string(c.attrs.ints_size(name)));
  const int64_t* v = c.attrs.ints(name);
  for (size_t k = 0; k < n; ++k) {
    if (v[k] < min)
      return c.error(std::string("attribute '") + name + "' value " + std::to_string(v[k]) + " must be >= " +
                     std::to_string(min));
    if (v[k] > kMaxSizeAttr)
      return c.error(std::string("attribute '") + name + "' value " + std::to_string(v[k]) + " must be <= " +
                     std::to_string(kMaxSizeAttr));
    (*out)[k] = v[k];
  }
  return ok_status();
}

/// Validates the window attributes of `nsp` spatial axes and appends the symbolic output size
/// of each axis to `out`. `in` and `kernel` hold the input and kernel sizes; `ceil_mode` is
/// the pools' attribute (false for Conv). Output sizes that might be < 1 become guards.
inline Status window_output_sizes(ShapeCtx& c, const std::vector<ExprId>& in, const std::vector<ExprId>& kernel,
                                  bool ceil_mode, std::vector<ExprId>* out) {
  core::ExprPool& p = c.pool;
  size_t nsp = in.size();
  const char* ap = c.attrs.get_str("auto_pad", "NOTSET");
  std::string auto_pad = ap;
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return c.error("attribute 'auto_pad' is '" + auto_pad + "', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  std::vector<int64_t> strides, dilations, pads;
  KILN_TRY(window_ints(c, "strides", nsp, 1, 1, &strides));
  KILN_TRY(window_ints(c, "dilations", nsp, 1, 1, &dilations));
  KILN_TRY(window_ints(c, "pads", 2 * nsp, 0, 0, &pads));
  if (auto_pad != "NOTSET") std::fill(pads.begin(), pads.end(), 0);
  for (size_t k = 0; k < nsp; ++k) {
    ExprId s = p.constant(strides[k]);
    ExprId size;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      size = p.ceildiv(in[k], s);  // the pads adapt to the actual size at run time
    } else {
      // in + pad_begin + pad_end - (dilation*(k-1) + 1): the room left after the first window
      ExprId eff = p.add(p.mul(p.constant(dilations[k]), p.sub(kernel[k], p.constant(1))), p.constant(1));
      ExprId room = p.sub(p.add(in[k], p.constant(pads[k] + pads[nsp + k])), eff);
      if (!ceil_mode) {
        size = p.add(p.floordiv(room, s), p.constant(1));
      } else {
        size = p.add(p.ceildiv(room, s), p.constant(1));
        // ONNX: a window that would start in the right padding is dropped. The last start
        // (size-1)*s must be < in + pad_begin, which can only fail when pad_end + s > eff.
        ExprId slack = p.sub(p.add(p.constant(pads[nsp + k]), s), eff);
        if (p.range(slack).hi > 0) {
          ExprId last = p.add(p.floordiv(p.sub(p.add(in[k], p.constant(pads[k])), p.constant(1)), s), p.constant(1));
          size = p.min(size, last);
        }
      }
    }
    KILN_TRY(c.require_ge(size, p.constant(1),
                          "(output size of spatial axis " + std::to_string(k) + " for input size " + p.to_string(in[k]) +
                              " and kernel " + p.to_string(kernel[k]) + ")"));
    out->push_back(size);
  }
  return ok_status();
}

}  // namespace kiln::kernels
