// Resize (opsets 11-17: X, roi, scales, sizes) and Upsample (opset 7-9: X and scales), modes
// nearest, linear and cubic (Resize only), on the last two axes (the others keep their
// size): bilinear / bicubic for rank >= 2, 1-D for rank 1. Per resized axis, output coordinate x maps to the input
// coordinate x_original by coordinate_transformation_mode (scale = the scales value when
// given, else out/in):
//   half_pixel            (x + 0.5) / scale - 0.5
//   pytorch_half_pixel    (x + 0.5) / scale - 0.5, or 0 when out == 1
//   align_corners         x * (in - 1) / (out - 1), or 0 when out == 1
//   asymmetric            x / scale
//   tf_half_pixel_for_nn  (x + 0.5) / scale
// then nearest rounds it by nearest_mode, linear blends the two neighbours, cubic the four
// around it (Keys' kernel with cubic_coeff_a, default -0.75; exclude_outside drops taps
// outside the input and renormalizes); all clamp indices to [0, in - 1] (edge replication). Output sizes: floor(in * scale), or sizes.
// Upsample, and Resize from opset 10 (the importer sets its attributes), is asymmetric with
// nearest_mode simple: floor, or ceil on a shrinking axis. roi is ignored (tf_crop_and_resize and
// antialias are refused).
#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include "kernels/portable/resize.h"
#include "kernels/portable/int_input.h"

namespace kiln::kernels {

namespace {

enum class Coord : uint8_t { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn };
/// kSimple (not an ONNX nearest_mode; Upsample and opset-10 Resize): floor when the axis
/// grows or keeps its size, ceil when it shrinks, as ONNX Runtime does.
enum class Nearest : uint8_t { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

/// How one node resamples.
struct Params {
  bool linear = false;
  bool cubic = false;
  double cubic_a = -0.75;        ///< cubic_coeff_a
  bool exclude_outside = false;  ///< cubic: taps outside the input get weight 0, the rest renormalized
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
};

/// Reads Resize's string attributes without allocating; on an unknown value returns false
/// and names the attribute in *bad.
bool read_resize_params(const core::Attrs& a, Params* p, const char** bad) {
  std::string_view mode = a.get_str("mode", "nearest");
  std::string_view ct = a.get_str("coordinate_transformation_mode", "half_pixel");
  std::string_view nm = a.get_str("nearest_mode", "round_prefer_floor");
  p->linear = mode == "linear";
  p->cubic = mode == "cubic";
  p->cubic_a = a.get_float("cubic_coeff_a", -0.75f);
  p->exclude_outside = a.get_int("exclude_outside", 0) != 0;
  if (!p->linear && !p->cubic && mode != "nearest") {
    *bad = "mode";
    return false;
  }
  if (ct == "half_pixel") {
    p->coord = Coord::kHalfPixel;
  } else if (ct == "pytorch_half_pixel") {
    p->coord = Coord::kPytorchHalfPixel;
  } else if (ct == "align_corners") {
    p->coord = Coord::kAlignCorners;
  } else if (ct == "asymmetric") {
    p->coord = Coord::kAsymmetric;
  } else if (ct == "tf_half_pixel_for_nn") {
    p->coord = Coord::kTfHalfPixelForNn;
  } else {
    *bad = "coordinate_transformation_mode";
    return false;
  }
  if (nm == "round_prefer_floor") {
    p->nearest = Nearest::kRoundPreferFloor;
  } else if (nm == "round_prefer_ceil") {
    p->nearest = Nearest::kRoundPreferCeil;
  } else if (nm == "floor") {
    p->nearest = Nearest::kFloor;
  } else if (nm == "ceil") {
    p->nearest = Nearest::kCeil;
  } else if (nm == "simple") {
    p->nearest = Nearest::kSimple;
  } else {
    *bad = "nearest_mode";
    return false;
  }
  return true;
}

/// Upsample: asymmetric coordinates, nearest rounds down (it only enlarges).
Params upsample_params(const core::Attrs& a) {
  Params p;
  p.linear = a.str_equals("mode", "linear");
  p.coord = Coord::kAsymmetric;
  p.nearest = Nearest::kSimple;
  return p;
}

/// Largest denominator tried when reading a scale as a fraction p/q.
constexpr int64_t kMaxDenominator = 100;

/// Symbolic floor(in * s) for axis `axis`: exact as floordiv(in*p, q) when s is within 1e-6
/// of a fraction p/q with a small q (2.0, 0.5, 1.5...), else folded when `in` is constant.
Result<ExprId> scaled_size(ShapeCtx& c, ExprId in, float s, size_t axis) {
  core::ExprPool& p = c.pool;
  if (s == 1.f) return in;
  // Scales come from files: a size at or past 2^62 (or an infinite scale) is refused before
  // any conversion to an integer (found by fuzz_onnx: a scale of 1e30 cast out of range).
  if (!(static_cast<double>(s) * static_cast<double>(std::max<int64_t>(1, p.range(in).hi)) < 0x1p62))
    return c.error("scale " + std::to_string(s) + " on axis " + std::to_string(axis) + " (size " + p.to_string(in) +
                   ") makes the output size 2^62 or more");
  for (int64_t q = 1; q <= kMaxDenominator; ++q) {
    const int64_t num = std::llround(static_cast<double>(s) * q);
    if (num >= 1 && std::abs(static_cast<double>(num) / q - s) < 1e-6) {
      ExprId prod = p.mul(in, p.constant(num));
      return q == 1 ? prod : p.floordiv(prod, p.constant(q));
    }
  }
  if (p.is_const(in)) return p.constant(static_cast<int64_t>(std::floor(p.const_value(in) * static_cast<double>(s))));
  return c.error("scale " + std::to_string(s) + " on axis " + std::to_string(axis) + " (size " + p.to_string(in) +
                 ") is not a fraction p/q with q <= " + std::to_string(kMaxDenominator) +
                 ", so the output size cannot be written symbolically; give sizes instead of scales or pin the dim");
}

/// Output shape from constant scales (one per axis); only the last two axes may change.
Status shape_from_scales(ShapeCtx& c, const std::vector<float>& scales, std::vector<ExprId>* out) {
  const std::vector<ExprId>& x = c.in(0).shape;
  if (scales.size() != x.size())
    return c.error("has " + std::to_string(scales.size()) + " scales for input " + c.pool.shape_to_string(x) +
                   " of rank " + std::to_string(x.size()) + "; expected one per axis");
  for (size_t k = 0; k < x.size(); ++k) {
    const float s = scales[k];
    if (!(s > 0.f)) return c.error("scale " + std::to_string(s) + " on axis " + std::to_string(k) + " must be > 0");
    if (s != 1.f && k + 2 < x.size())
      return c.error("scale " + std::to_string(s) + " on axis " + std::to_string(k) +
                     ": only the last two axes can be resized, the others need scale 1");
    KILN_ASSIGN_OR_RETURN(ExprId size, scaled_size(c, x[k], s, k));
    out->push_back(size);
  }
  return ok_status();
}

/// Checks the sizes of resized axes >= 1 (guarded when symbolic; an axis kept as it is may
/// be empty, as a batch of 0) and sets output 0.
Status finish_shape(ShapeCtx& c, std::vector<ExprId> out) {
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k] != c.in(0).shape[k]) KILN_TRY(c.require_ge(out[k], c.pool.constant(1), "(output size of axis " + std::to_string(k) + " for input " +
                                                          c.pool.shape_to_string(c.in(0).shape) + ")"));
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::move(out);
  return ok_status();
}

/// Whether input i is omitted or has no elements (opset 11 passes an empty scales with sizes).
bool is_empty(const ShapeCtx& c, size_t i) {
  if (!c.has_input(i)) return true;
  for (ExprId d : c.in(i).shape)
    if (c.pool.is_const_value(d, 0)) return true;
  return false;
}

/// One resized axis at its actual sizes.
struct Axis {
  int64_t in = 1, out = 1;
  double scale = 1;
};

double original_coord(const Axis& a, Coord mode, int64_t x) {
  switch (mode) {
    case Coord::kHalfPixel: return (x + 0.5) / a.scale - 0.5;
    case Coord::kPytorchHalfPixel: return a.out > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
    case Coord::kAlignCorners: return a.out > 1 ? static_cast<double>(x) * (a.in - 1) / (a.out - 1) : 0.0;
    case Coord::kAsymmetric: return x / a.scale;
    case Coord::kTfHalfPixelForNn: return (x + 0.5) / a.scale;
  }
  return 0.0;
}

int64_t clamp_index(int64_t i, int64_t in) { return i < 0 ? 0 : i >= in ? in - 1 : i; }

/// Input index nearest output coordinate x.
int64_t nearest_index(const Axis& a, const Params& p, int64_t x) {
  const double xo = original_coord(a, p.coord, x);
  const double fl = std::floor(xo), frac = xo - fl;
  double pick = fl;
  switch (p.nearest) {
    case Nearest::kRoundPreferFloor: pick = frac > 0.5 ? fl + 1 : fl; break;
    case Nearest::kRoundPreferCeil: pick = frac >= 0.5 ? fl + 1 : fl; break;
    case Nearest::kFloor: pick = fl; break;
    case Nearest::kCeil: pick = std::ceil(xo); break;
    case Nearest::kSimple: pick = a.scale < 1 ? std::ceil(xo) : fl; break;
  }
  return clamp_index(static_cast<int64_t>(pick), a.in);
}

/// The two input indices around output coordinate x and the weight of the second.
void linear_taps(const Axis& a, const Params& p, int64_t x, int64_t* i0, int64_t* i1, float* w1) {
  const double xo = original_coord(a, p.coord, x);
  const double fl = std::floor(xo);
  *w1 = static_cast<float>(xo - fl);
  *i0 = clamp_index(static_cast<int64_t>(fl), a.in);
  *i1 = clamp_index(static_cast<int64_t>(fl) + 1, a.in);
}

/// The four input indices (clamped: edge padding) around output coordinate x and their cubic
/// weights. Taps are f-1 .. f+2 with f = ceil(x_original) - 1, so the fraction t = x_original
/// - f lies in (0, 1] (the ONNX reference prefers the left neighbour on an exact hit).
void cubic_taps(const Axis& a, const Params& p, int64_t x, int64_t idx[4], double w[4]) {
  const double xo = original_coord(a, p.coord, x);
  const double f = std::ceil(xo) - 1, t = xo - f, A = p.cubic_a;
  // Far outside the input every tap clamps to an edge (or is excluded) alike; bounding f keeps
  // the integer conversion defined for any coordinate (and NaN) a hostile roi or scale makes.
  const double f_index = f > -8.0 ? std::min(f, static_cast<double>(a.in) + 8.0) : -8.0;
  auto outer = [A](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // 1 <= d <= 2
  auto inner = [A](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };        // 0 <= d <= 1
  w[0] = outer(t + 1);
  w[1] = inner(t);
  w[2] = inner(1 - t);
  w[3] = outer(2 - t);
  double kept = 0;
  for (int i = 0; i < 4; ++i) {
    const auto j = static_cast<int64_t>(f_index) - 1 + i;
    if (p.exclude_outside && (j < 0 || j >= a.in)) w[i] = 0;
    kept += w[i];
    idx[i] = clamp_index(j, a.in);
  }
  if (p.exclude_outside && kept != 0)
    for (int i = 0; i < 4; ++i) w[i] /= kept;
}

/// Resamples planes [outer][H][W][channels] (channels = 1: the last two axes of a
/// channels-first tensor; channels = C: a channels-last [N, H, W, C] tensor).
void resample_planes(const float* x, float* y, int64_t outer, const Axis& ah, const Axis& aw, int64_t channels,
                     const Params& p) {
  const int64_t ch = channels;
  for (int64_t o = 0; o < outer; ++o) {
    const float* xp = x + o * ah.in * aw.in * ch;
    float* yp = y + o * ah.out * aw.out * ch;
    for (int64_t oh = 0; oh < ah.out; ++oh) {
      float* yr = yp + oh * aw.out * ch;
      if (p.cubic) {
        int64_t hi[4], wi[4];
        double hw[4], ww[4];
        cubic_taps(ah, p, oh, hi, hw);
        for (int64_t ow = 0; ow < aw.out; ++ow) {
          cubic_taps(aw, p, ow, wi, ww);
          for (int64_t k = 0; k < ch; ++k) {
            double sum = 0;
            for (int i = 0; i < 4; ++i) {
              const float* xr = xp + hi[i] * aw.in * ch + k;
              sum += hw[i] * (ww[0] * xr[wi[0] * ch] + ww[1] * xr[wi[1] * ch] + ww[2] * xr[wi[2] * ch] +
                              ww[3] * xr[wi[3] * ch]);
            }
            yr[ow * ch + k] = static_cast<float>(sum);
          }
        }
        continue;
      }
      if (!p.linear) {
        const float* xr = xp + nearest_index(ah, p, oh) * aw.in * ch;
        for (int64_t ow = 0; ow < aw.out; ++ow) {
          const float* src = xr + nearest_index(aw, p, ow) * ch;
          for (int64_t k = 0; k < ch; ++k) yr[ow * ch + k] = src[k];
        }
        continue;
      }
      int64_t h0, h1, w0, w1;
      float fh, fw;
      linear_taps(ah, p, oh, &h0, &h1, &fh);
      const float* r0 = xp + h0 * aw.in * ch;
      const float* r1 = xp + h1 * aw.in * ch;
      for (int64_t ow = 0; ow < aw.out; ++ow) {
        linear_taps(aw, p, ow, &w0, &w1, &fw);
        for (int64_t k = 0; k < ch; ++k) {
          const float a0 = r0[w0 * ch + k], a1 = r0[w1 * ch + k], b0 = r1[w0 * ch + k], b1 = r1[w1 * ch + k];
          const float top = a0 + fw * (a1 - a0);
          const float bottom = b0 + fw * (b1 - b0);
          yr[ow * ch + k] = top + fh * (bottom - top);
        }
      }
    }
  }
}

/// Resamples the last two axes of xv into yv (with `channels_last`, axes 1 and 2 of a
/// [N, H, W, C] tensor whose scales are given in channels-first order). `scales` (one per
/// axis) may be nullptr.
KernelStatus resample(const TensorView& xv, TensorView& yv, const Params& p, const float* scales, bool channels_last) {
  const int r = xv.rank;
  if (yv.rank != r || r < 1 || (channels_last && r != 4)) return KernelStatus::kInvalidValue;
  const int h_axis = channels_last ? 1 : r - 2, w_axis = channels_last ? 2 : r - 1;
  const int h_scale = channels_last ? 2 : r - 2, w_scale = channels_last ? 3 : r - 1;
  int64_t outer = 1, channels = 1;
  for (int k = 0; k < r; ++k) {
    if (k == h_axis || k == w_axis) continue;
    if (yv.dims[k] != xv.dims[k]) return KernelStatus::kInvalidValue;
    (channels_last && k == 3 ? channels : outer) *= xv.dims[k];
  }
  Axis ah, aw;  // rank 1: H stays 1
  if (r >= 2) ah = Axis{xv.dims[h_axis], yv.dims[h_axis], 1};
  aw = Axis{xv.dims[w_axis], yv.dims[w_axis], 1};
  ah.scale = scales && r >= 2 ? static_cast<double>(scales[h_scale]) : static_cast<double>(ah.out) / static_cast<double>(ah.in);
  aw.scale = scales ? static_cast<double>(scales[w_scale]) : static_cast<double>(aw.out) / static_cast<double>(aw.in);
  if (ah.in == 0 || aw.in == 0)
    return outer * channels * ah.out * aw.out == 0 ? KernelStatus::kOk : KernelStatus::kInvalidValue;
  resample_planes(xv.as<float>(), yv.as<float>(), outer, ah, aw, channels, p);
  return KernelStatus::kOk;
}

}  // namespace

Status resize_shape(ShapeCtx& c) {
  if (c.num_inputs() == 2)
    return c.error("has 2 inputs (X, scales), the opset-10 form, which is not supported; re-export with opset >= 11");
  KILN_TRY(c.expect_inputs(1, 4));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  if (c.attrs.get_int("antialias", 0) != 0) return c.error("attribute 'antialias' is not supported");
  if (c.attrs.has("axes")) return c.error("attribute 'axes' is not supported; give scales or sizes for every axis");
  if (!c.attrs.str_equals("keep_aspect_ratio_policy", "stretch") && c.attrs.has("keep_aspect_ratio_policy"))
    return c.error("attribute 'keep_aspect_ratio_policy' must be 'stretch'");
  if (c.attrs.str_equals("coordinate_transformation_mode", "tf_crop_and_resize"))
    return c.error("coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  Params params;
  const char* bad = nullptr;
  if (!read_resize_params(c.attrs, &params, &bad))
    return c.error(std::string("attribute '") + bad + "' has unsupported value '" + c.attrs.get_str(bad, "") + "'");
  const bool has_scales = !is_empty(c, 2), has_sizes = c.has_input(3);
  if (has_scales == has_sizes)
    return c.error(has_scales ? "has both scales (input #2) and sizes (input #3); give only one"
                              : "needs scales (input #2) or sizes (input #3)");
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  std::vector<ExprId> out;
  if (has_scales) {
    KILN_TRY(c.expect_dtype(2, DType::kF32));
    std::vector<float> scales;
    if (!c.const_floats(2, &scales)) return c.error("scales input #2 must be a constant");
    KILN_TRY(shape_from_scales(c, scales, &out));
  } else {
    if (c.in(3).dtype != DType::kI64) return c.error("sizes input #3 must have dtype i64");
    if (!known_ints(c, 3, &out)) return c.error("sizes input #3 must be a constant or computed from shapes");
    if (out.size() != x.size())
      return c.error("has " + std::to_string(out.size()) + " sizes for input " + p.shape_to_string(x) +
                     "; expected one per axis");
    for (size_t k = 0; k + 2 < x.size(); ++k)
      KILN_TRY(c.require_eq(out[k], x[k], "(only the last two axes can be resized; sizes " + p.shape_to_string(out) +
                                              " must keep axis " + std::to_string(k) + " of input " +
                                              p.shape_to_string(x) + ")"));
  }
  return finish_shape(c, std::move(out));
}

namespace {
KernelStatus resize_any(const RunCtx& c, bool channels_last) {
  Params p;
  const char* bad = nullptr;
  if (!read_resize_params(c.attrs, &p, &bad)) return KernelStatus::kInvalidValue;
  const bool scales = c.has_input(2) && c.in(2).numel() > 0;
  if (scales && c.in(2).numel() != c.in(0).rank) return KernelStatus::kInvalidValue;
  return resample(c.in(0), c.out(0), p, scales ? c.in(2).as<float>() : nullptr, channels_last);
}
}  // namespace

KernelStatus resize_run(const RunCtx& c) { return resize_any(c, false); }

KernelStatus resize_run_channels_last(const RunCtx& c) { return resize_any(c, true); }

Status upsample_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 2));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  std::string mode = c.attrs.get_str("mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return c.error("attribute 'mode' is '" + mode + "', expected nearest or linear");
  std::vector<float> scales;
  if (c.num_inputs() == 2) {
    KILN_TRY(c.expect_dtype(1, DType::kF32));
    if (!c.const_floats(1, &scales)) return c.error("scales input #1 must be a constant");
  } else if (c.attrs.has("scales")) {  // opset 7
    scales.assign(c.attrs.floats("scales"), c.attrs.floats("scales") + c.attrs.floats_size("scales"));
  } else {
    return c.error("needs scales (input #1, or the attribute before opset 9)");
  }
  for (float s : scales)
    if (s < 1.f) return c.error("scale " + std::to_string(s) + " is below 1; Upsample only enlarges");
  std::vector<ExprId> out;
  KILN_TRY(shape_from_scales(c, scales, &out));
  return finish_shape(c, std::move(out));
}

KernelStatus upsample_run(const RunCtx& c) {
  const float* scales = c.num_inputs == 2 ? c.in(1).as<float>() : c.attrs.floats("scales");
  const int64_t n = c.num_inputs == 2 ? c.in(1).numel() : c.attrs.floats_size("scales");
  if (!scales || n != c.in(0).rank) return KernelStatus::kInvalidValue;
  return resample(c.in(0), c.out(0), upsample_params(c.attrs), scales, false);
}

}  // namespace kiln::kernels
