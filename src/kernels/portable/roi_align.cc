// RoiAlign (ONNX opset 10 and 16): for each region of interest, a pooled [C, output_height,
// output_width] map of X [N, C, H, W] (f32). rois [R, 4] (f32) are (x1, y1, x2, y2) in the
// input image's coordinates, scaled by spatial_scale; batch_indices [R] (i64 or i32) picks
// the image. Each output bin averages (mode avg) or takes the largest weighted corner
// (mode max, as ONNX Runtime computes it) of sampling_ratio x sampling_ratio bilinear samples
// (sampling_ratio 0: ceil(roi size / bins) per axis). coordinate_transformation_mode
// half_pixel (opset 16's default) shifts the roi by -0.5 pixel; output_half_pixel (opset 10,
// what torchvision exports) does not, and takes a roi at least 1 pixel wide and tall.
// Samples more than one pixel outside the map count as 0. A roi with a NaN or infinite
// coordinate pools to NaN; one whose adaptive grid exceeds 65536 samples per axis fails the
// run. Two-stage detectors (torchvision's Faster R-CNN, MultiScaleRoIAlign) pool their
// proposals with it. Output: [R, C, oh, ow].
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

struct RoiParams {
  int64_t oh = 1, ow = 1, sampling = 0;
  float scale = 1.f;
  bool half_pixel = false, max_mode = false;
};

bool params_of(const core::Attrs& a, bool opset16_default, RoiParams* p) {
  p->oh = a.get_int("output_height", 1);
  p->ow = a.get_int("output_width", 1);
  p->sampling = a.get_int("sampling_ratio", 0);
  p->scale = a.get_float("spatial_scale", 1.f);
  const char* mode = a.get_str("mode", "avg");
  const char* ct = a.get_str("coordinate_transformation_mode", opset16_default ? "half_pixel" : "output_half_pixel");
  const std::string m = mode ? mode : "avg", t = ct ? ct : "output_half_pixel";
  if ((m != "avg" && m != "max") || (t != "half_pixel" && t != "output_half_pixel")) return false;
  p->max_mode = m == "max";
  p->half_pixel = t == "half_pixel";
  return p->oh >= 1 && p->ow >= 1 && p->sampling >= 0;
}

/// The four corner weights and offsets of a bilinear sample at (y, x) of an h x w map; false
/// when the sample lies more than one pixel outside (it counts as 0).
bool bilinear(float y, float x, int64_t h, int64_t w, float wt[4], int64_t at[4]) {
  if (y < -1.f || y > static_cast<float>(h) || x < -1.f || x > static_cast<float>(w)) return false;
  y = std::max(y, 0.f);
  x = std::max(x, 0.f);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= h - 1) y0 = y1 = h - 1, y = static_cast<float>(y0);
  else y1 = y0 + 1;
  if (x0 >= w - 1) x0 = x1 = w - 1, x = static_cast<float>(x0);
  else x1 = x0 + 1;
  const float ly = y - static_cast<float>(y0), lx = x - static_cast<float>(x0), hy = 1.f - ly, hx = 1.f - lx;
  wt[0] = hy * hx, wt[1] = hy * lx, wt[2] = ly * hx, wt[3] = ly * lx;
  at[0] = y0 * w + x0, at[1] = y0 * w + x1, at[2] = y1 * w + x0, at[3] = y1 * w + x1;
  return true;
}

/// Samples per bin and axis past which a roi is refused (an adaptive grid grows with the roi).
constexpr float kMaxGrid = 65536.f;

/// False when the roi cannot be pooled: a coordinate is NaN or infinite (its bins are then
/// NaN: the non-finite rule), or its adaptive grid is absurdly fine.
bool pool_roi(const float* x, int64_t channels, int64_t h, int64_t w, const float* roi, const RoiParams& p, float* y) {
  const int64_t bins_all = channels * p.oh * p.ow;
  if (!std::isfinite(roi[0]) || !std::isfinite(roi[1]) || !std::isfinite(roi[2]) || !std::isfinite(roi[3])) {
    std::fill(y, y + bins_all, std::numeric_limits<float>::quiet_NaN());
    return true;
  }
  const float off = p.half_pixel ? 0.5f : 0.f;
  const float x0 = roi[0] * p.scale - off, y0 = roi[1] * p.scale - off;
  float rw = roi[2] * p.scale - off - x0, rh = roi[3] * p.scale - off - y0;
  if (!p.half_pixel) rw = std::max(rw, 1.f), rh = std::max(rh, 1.f);
  const float bh = rh / static_cast<float>(p.oh), bw = rw / static_cast<float>(p.ow);
  const float grid_h = p.sampling > 0 ? static_cast<float>(p.sampling) : std::ceil(rh / static_cast<float>(p.oh));
  const float grid_w = p.sampling > 0 ? static_cast<float>(p.sampling) : std::ceil(rw / static_cast<float>(p.ow));
  if (!(grid_h <= kMaxGrid) || !(grid_w <= kMaxGrid)) return false;
  const int64_t gh = static_cast<int64_t>(std::max(grid_h, 0.f)), gw = static_cast<int64_t>(std::max(grid_w, 0.f));
  const float count = static_cast<float>(std::max<int64_t>(gh * gw, 1));
  const int64_t plane = h * w, bins = p.oh * p.ow;
  for (int64_t ph = 0; ph < p.oh; ++ph)
    for (int64_t pw = 0; pw < p.ow; ++pw) {
      for (int64_t c = 0; c < channels; ++c) y[c * bins + ph * p.ow + pw] = 0.f;
      bool first = true;
      for (int64_t iy = 0; iy < gh; ++iy) {
        const float sy = y0 + static_cast<float>(ph) * bh + (static_cast<float>(iy) + .5f) * bh / static_cast<float>(gh);
        for (int64_t ix = 0; ix < gw; ++ix) {
          const float sx = x0 + static_cast<float>(pw) * bw + (static_cast<float>(ix) + .5f) * bw / static_cast<float>(gw);
          float wt[4] = {0, 0, 0, 0};
          int64_t at[4] = {0, 0, 0, 0};
          const bool inside = bilinear(sy, sx, h, w, wt, at);
          for (int64_t c = 0; c < channels; ++c) {
            const float* m = x + c * plane;
            float& out = y[c * bins + ph * p.ow + pw];
            if (!p.max_mode) {
              if (inside) out += wt[0] * m[at[0]] + wt[1] * m[at[1]] + wt[2] * m[at[2]] + wt[3] * m[at[3]];
              continue;
            }
            float v = 0.f;
            if (inside) {
              v = wt[0] * m[at[0]];
              for (int k = 1; k < 4; ++k) v = wt[k] * m[at[k]] > v || wt[k] * m[at[k]] != wt[k] * m[at[k]] ? wt[k] * m[at[k]] : v;
            }
            out = first || v > out || v != v ? v : out;
          }
          first = false;
        }
      }
      if (!p.max_mode)
        for (int64_t c = 0; c < channels; ++c) y[c * bins + ph * p.ow + pw] /= count;
    }
  return true;
}

}  // namespace

Status roi_align_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(3, 3));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  KILN_TRY(c.expect_dtype(1, DType::kF32));
  if (c.in(2).dtype != DType::kI64 && c.in(2).dtype != DType::kI32)
    return c.error(std::string("batch_indices has dtype ") + dtype_name(c.in(2).dtype) + ", expected i64 or i32");
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  const std::vector<ExprId>& rois = c.in(1).shape;
  if (x.size() != 4) return c.error("X " + p.shape_to_string(x) + " must be [N, C, H, W]");
  if (rois.size() != 2) return c.error("rois " + p.shape_to_string(rois) + " must be [num_rois, 4]");
  if (c.rank(2) != 1) return c.error("batch_indices " + p.shape_to_string(c.in(2).shape) + " must be [num_rois]");
  KILN_TRY(c.require_eq(rois[1], p.constant(4), "(rois " + p.shape_to_string(rois) + " hold x1, y1, x2, y2)"));
  KILN_TRY(c.require_eq(c.in(2).shape[0], rois[0], "(one batch index per roi)"));
  RoiParams rp;
  if (!params_of(c.attrs, true, &rp))
    return c.error("needs output_height, output_width >= 1, sampling_ratio >= 0, mode avg or max and "
                   "coordinate_transformation_mode half_pixel or output_half_pixel");
  if (rp.oh > kMaxSizeAttr || rp.ow > kMaxSizeAttr) return c.error("output size above " + std::to_string(kMaxSizeAttr));
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = {rois[0], x[1], p.constant(rp.oh), p.constant(rp.ow)};
  return ok_status();
}

KernelStatus roi_align_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  const TensorView& rois = c.in(1);
  const TensorView& bi = c.in(2);
  TensorView& y = c.out(0);
  RoiParams p;
  if (!params_of(c.attrs, true, &p) || x.rank != 4 || rois.rank != 2 || rois.dims[1] != 4 || bi.numel() != rois.dims[0] ||
      y.rank != 4 || y.dims[0] != rois.dims[0] || y.dims[1] != x.dims[1] || y.dims[2] != p.oh || y.dims[3] != p.ow)
    return KernelStatus::kInvalidValue;
  const int64_t n = x.dims[0], channels = x.dims[1], h = x.dims[2], w = x.dims[3];
  for (int64_t r = 0; r < rois.dims[0]; ++r) {
    const int64_t b = bi.dtype == DType::kI64 ? bi.as<int64_t>()[r] : bi.as<int32_t>()[r];
    if (b < 0 || b >= n) return KernelStatus::kInvalidValue;
  }
  if (h == 0 || w == 0) {  // nothing to sample: every bin is 0
    if (y.numel() > 0) std::memset(y.data, 0, y.nbytes());
    return KernelStatus::kOk;
  }
  for (int64_t r = 0; r < rois.dims[0]; ++r) {
    const int64_t b = bi.dtype == DType::kI64 ? bi.as<int64_t>()[r] : bi.as<int32_t>()[r];
    if (!pool_roi(x.as<float>() + b * channels * h * w, channels, h, w, rois.as<float>() + r * 4, p,
                  y.as<float>() + r * channels * p.oh * p.ow))
      return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
