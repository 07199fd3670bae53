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
// nearest_mode simple: floor, or ceil on a shrinking axis. roi is ignored (tf_crop_and_resize is
// refused).
// Opset 18: `axes` names the axes scales/sizes list (the others keep their size);
// keep_aspect_ratio_policy not_larger / not_smaller (sizes only) resizes every listed axis by
// one scale, the min / max over them of sizes[i] / in[i], to round(scale * in) (halves up), and
// maps coordinates with that scale; antialias (linear and cubic) stretches the filter by 1/scale
// on a shrinking axis, as the ONNX reference does: taps ceil(x_original) - 1 + i for i in
// [start, 1 - start], start = floor(-support / scale) + 1 (support 1 linear, 2 cubic), weights the
// hat / Keys' kernel at scale * (i - ratio), normalized (exclude_outside first drops taps outside
// the input for cubic). antialias with align_corners is refused (ONNX Runtime and the reference
// disagree there).
#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include "kernels/portable/resize.h"
#include "kernels/portable/int_input.h"
#include "core/status.h"

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
  bool antialias = false;        ///< linear / cubic: filter stretched by 1/scale when shrinking
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
  p->antialias = a.get_int("antialias", 0) != 0 && (p->linear || p->cubic);
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

/// Why an `axes` attribute was rejected.
enum class AxesError : uint8_t { kNone, kOutOfRange, kRepeated };

/// The axes scales / sizes refer to: `axes` (negative counts from the back) or all of them.
/// On an out-of-range or repeated axis returns false with the offending value in *bad.
bool read_axes(const core::Attrs& a, int rank, int axes[kMaxRank], int* n, AxesError* why, int64_t* bad) {
  const int64_t* v = a.ints("axes");
  const uint32_t count = a.ints_size("axes");
  if (!a.has("axes")) {
    for (int k = 0; k < rank; ++k) axes[k] = k;
    *n = rank;
    return true;
  }
  bool seen[kMaxRank] = {};
  *n = 0;
  for (uint32_t i = 0; i < count; ++i) {
    *bad = v ? v[i] : 0;
    if (!v || *bad < -rank || *bad >= rank || *n >= kMaxRank) return (*why = AxesError::kOutOfRange, false);
    const int k = static_cast<int>(*bad < 0 ? *bad + rank : *bad);
    if (seen[k]) return (*why = AxesError::kRepeated, false);
    seen[k] = true;
    axes[(*n)++] = k;
  }
  return true;
}

/// keep_aspect_ratio_policy: 0 stretch, 1 not_larger, 2 not_smaller; -1 for anything else.
int aspect_policy(const core::Attrs& a) {
  if (!a.has("keep_aspect_ratio_policy") || a.str_equals("keep_aspect_ratio_policy", "stretch")) return 0;
  if (a.str_equals("keep_aspect_ratio_policy", "not_larger")) return 1;
  return a.str_equals("keep_aspect_ratio_policy", "not_smaller") ? 2 : -1;
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

/// The antialiased taps of one output coordinate (ONNX reference): indices first + i for
/// i < n (clamped to the input when read), weight(i) already normalized.
struct AaTaps {
  int64_t first = 0;
  int n = 0;
  int start = 0;
  double ratio = 1, s = 1, norm = 1;
  const Params* p = nullptr;
  int64_t in = 1;

  /// Unnormalized filter value of tap i (0 outside the input under cubic exclude_outside).
  double raw(int i) const {
    if (p->exclude_outside && p->cubic && (first + i < 0 || first + i >= in)) return 0;
    const double d = std::abs(s * (start + i - ratio)), A = p->cubic_a;
    if (!p->cubic) return std::max(0.0, 1 - d);
    if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
    return d < 2 ? ((A * d - 5 * A) * d + 8 * A) * d - 4 * A : 0.0;
  }
  double weight(int i) const { return raw(i) * norm; }
  int64_t index(int i) const { return clamp_index(first + i, in); }
};

AaTaps aa_taps(const Axis& a, const Params& p, int64_t x) {
  AaTaps t;
  t.p = &p;
  t.in = a.in;
  const double xo = original_coord(a, p.coord, x);
  // Far outside the input every tap clamps to an edge alike; bounding the base keeps the
  // integer conversion defined for any coordinate.
  const double base = std::ceil(xo) - 1;
  const double bounded = std::max(-8.0 - 4.0 * static_cast<double>(a.in), std::min(base, 5.0 * static_cast<double>(a.in) + 8.0));
  t.ratio = xo - base;  // (0, 1]: the left neighbour on an exact hit
  t.s = std::min(a.scale, 1.0);
  t.start = static_cast<int>(std::floor(-(p.cubic ? 2.0 : 1.0) / t.s) + 1);
  t.n = 2 - 2 * t.start;
  t.first = static_cast<int64_t>(bounded) + t.start;
  double total = 0;
  for (int i = 0; i < t.n; ++i) total += t.raw(i);
  t.norm = total != 0 ? 1 / total : 0;
  return t;
}

/// resample_planes with antialiasing (linear or cubic): every output element is the weighted
/// sum over the taps of both axes, accumulated in the output (no scratch).
void resample_planes_aa(const float* x, float* y, int64_t outer, const Axis& ah, const Axis& aw, int64_t ch,
                        const Params& p) {
  for (int64_t o = 0; o < outer; ++o) {
    const float* xp = x + o * ah.in * aw.in * ch;
    float* yp = y + o * ah.out * aw.out * ch;
    for (int64_t oh = 0; oh < ah.out; ++oh) {
      const AaTaps th = aa_taps(ah, p, oh);
      for (int64_t ow = 0; ow < aw.out; ++ow) {
        const AaTaps tw = aa_taps(aw, p, ow);
        float* yo = yp + (oh * aw.out + ow) * ch;
        std::fill(yo, yo + ch, 0.f);
        for (int i = 0; i < th.n; ++i) {
          const double wi = th.weight(i);
          if (wi == 0) continue;
          const float* xr = xp + th.index(i) * aw.in * ch;
          for (int j = 0; j < tw.n; ++j) {
            const float w = static_cast<float>(wi * tw.weight(j));
            const float* src = xr + tw.index(j) * ch;
            for (int64_t k = 0; k < ch; ++k) yo[k] += w * src[k];
          }
        }
      }
    }
  }
}

/// Resamples planes [outer][H][W][channels] (channels = 1: the last two axes of a
/// channels-first tensor; channels = C: a channels-last [N, H, W, C] tensor).
constexpr int64_t kColumnChunk = 256;  // output columns whose linear taps are computed at once

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
      int64_t h0, h1;
      float fh;
      linear_taps(ah, p, oh, &h0, &h1, &fh);
      const float* r0 = xp + h0 * aw.in * ch;
      const float* r1 = xp + h1 * aw.in * ch;
      // The columns' taps, a chunk at a time (the same for every row: computing them per
      // pixel, with a division each, took most of LR-ASPP's 16x16 -> 128x128 upsampling).
      for (int64_t c0 = 0; c0 < aw.out; c0 += kColumnChunk) {
        const int64_t c1 = std::min(aw.out, c0 + kColumnChunk);
        int64_t w0[kColumnChunk], w1[kColumnChunk];
        float fw[kColumnChunk];
        for (int64_t ow = c0; ow < c1; ++ow) {
          linear_taps(aw, p, ow, &w0[ow - c0], &w1[ow - c0], &fw[ow - c0]);
          w0[ow - c0] *= ch, w1[ow - c0] *= ch;
        }
        for (int64_t ow = c0; ow < c1; ++ow) {
          const float* a = r0 + w0[ow - c0];
          const float* b = r0 + w1[ow - c0];
          const float* d = r1 + w0[ow - c0];
          const float* e = r1 + w1[ow - c0];
          const float f = fw[ow - c0];
          float* out = yr + ow * ch;
          for (int64_t k = 0; k < ch; ++k) {
            const float top = a[k] + f * (b[k] - a[k]);
            const float bottom = d[k] + f * (e[k] - d[k]);
            out[k] = top + fh * (bottom - top);
          }
        }
      }
    }
  }
}

/// Resamples the last two axes of xv into yv (with `channels_last`, axes 1 and 2 of a
/// [N, H, W, C] tensor whose scales are given in channels-first order). `scales` (one per
/// axis) may be nullptr.
KernelStatus resample(const TensorView& xv, TensorView& yv, const Params& p, const double* scales, bool channels_last) {
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
  ah.scale = scales && r >= 2 ? scales[h_scale] : static_cast<double>(ah.out) / static_cast<double>(ah.in);
  aw.scale = scales ? scales[w_scale] : static_cast<double>(aw.out) / static_cast<double>(aw.in);
  if (ah.in == 0 || aw.in == 0)
    return outer * channels * ah.out * aw.out == 0 ? KernelStatus::kOk : KernelStatus::kInvalidValue;
  if (p.antialias)
    resample_planes_aa(xv.as<float>(), yv.as<float>(), outer, ah, aw, channels, p);
  else
    resample_planes(xv.as<float>(), yv.as<float>(), outer, ah, aw, channels, p);
  return KernelStatus::kOk;
}

}  // namespace

namespace {

/// Sizes of the listed axes under keep_aspect_ratio_policy (1 not_larger, 2 not_smaller): with
/// scale = min / max over listed axes i of s_i / x_i, axis j gets round(scale * x_j), halves up.
/// round is monotone, so that is min / max over i of round(x_j * s_i / x_i) =
/// floordiv(2 * x_j * s_i + x_i, 2 * x_i): exact in integers, symbolic sizes included (the
/// input sizes of listed axes must be >= 1).
Status aspect_sizes(ShapeCtx& c, int policy, const int* axes, int n, const std::vector<ExprId>& sizes,
                    std::vector<ExprId>* out) {
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  for (int i = 0; i < n; ++i)
    KILN_TRY(c.require_ge(x[axes[i]], p.constant(1),
                          "(keep_aspect_ratio_policy divides sizes by axis " + std::to_string(axes[i]) +
                              " of input " + p.shape_to_string(x) + ")"));
  for (int j = 0; j < n; ++j) {
    const ExprId xj = x[axes[j]];
    ExprId best = sizes[j];  // i == j: round(x_j * s_j / x_j) = s_j
    for (int i = 0; i < n; ++i) {
      if (i == j) continue;
      const ExprId xi = x[axes[i]];
      const ExprId r = p.floordiv(p.add(p.mul(p.constant(2), p.mul(xj, sizes[i])), xi), p.mul(p.constant(2), xi));
      best = policy == 1 ? p.min(best, r) : p.max(best, r);
    }
    (*out)[axes[j]] = best;
  }
  return ok_status();
}

}  // namespace

Status resize_shape(ShapeCtx& c) {
  if (c.num_inputs() == 2)
    return c.error("has 2 inputs (X, scales), the opset-10 form, which is not supported; re-export with opset >= 11");
  KILN_TRY(c.expect_inputs(1, 4));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  const int64_t aa = c.attrs.get_int("antialias", 0);
  if (aa != 0 && aa != 1) return c.error("antialias " + std::to_string(aa) + " must be 0 or 1");
  const int policy = aspect_policy(c.attrs);
  if (policy < 0)
    return c.error(std::string("keep_aspect_ratio_policy '") + c.attrs.get_str("keep_aspect_ratio_policy", "") +
                   "' must be stretch, not_larger or not_smaller");
  if (c.attrs.str_equals("coordinate_transformation_mode", "tf_crop_and_resize"))
    return c.error("coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  Params params;
  const char* bad = nullptr;
  if (!read_resize_params(c.attrs, &params, &bad))
    return c.error(std::string("attribute '") + bad + "' has unsupported value '" + c.attrs.get_str(bad, "") + "'");
  if (params.antialias && params.coord == Coord::kAlignCorners)
    return c.error("antialias=1 with coordinate_transformation_mode 'align_corners' is not supported (ONNX Runtime "
                   "and the ONNX reference disagree on it); use half_pixel or pytorch_half_pixel");
  const bool has_scales = !is_empty(c, 2), has_sizes = c.has_input(3);
  if (has_scales == has_sizes)
    return c.error(has_scales ? "has both scales (input #2) and sizes (input #3); give only one"
                              : "needs scales (input #2) or sizes (input #3)");
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  const int rank = static_cast<int>(x.size());
  int axes[kMaxRank], n = 0;
  AxesError axes_error = AxesError::kNone;
  int64_t bad_axis = 0;
  if (rank > kMaxRank || !read_axes(c.attrs, rank, axes, &n, &axes_error, &bad_axis))
    return c.error("axes value " + std::to_string(bad_axis) +
                   (axes_error == AxesError::kRepeated ? " is repeated"
                                                       : " is outside [-" + std::to_string(rank) + ", " +
                                                             std::to_string(rank - 1) + "] for input " +
                                                             p.shape_to_string(x)));
  const std::string listed = c.attrs.has("axes") ? " (one per axis in axes)" : "; expected one per axis";
  std::vector<ExprId> out = x;
  if (has_scales) {
    KILN_TRY(c.expect_dtype(2, DType::kF32));
    std::vector<float> scales;
    if (!c.const_floats(2, &scales)) return c.error("scales input #2 must be a constant");
    if (scales.size() != static_cast<size_t>(n))
      return c.error("has " + std::to_string(scales.size()) + " scales for input " + p.shape_to_string(x) +
                     " of rank " + std::to_string(rank) + (c.attrs.has("axes") ? ", expected " + std::to_string(n) + listed : listed));
    std::vector<float> full(static_cast<size_t>(rank), 1.f);
    for (int i = 0; i < n; ++i) full[axes[i]] = scales[i];
    out.clear();
    KILN_TRY(shape_from_scales(c, full, &out));
  } else {
    if (c.in(3).dtype != DType::kI64) return c.error("sizes input #3 must have dtype i64");
    std::vector<ExprId> sizes;
    if (!known_ints(c, 3, &sizes)) return c.error("sizes input #3 must be a constant or computed from shapes");
    if (sizes.size() != static_cast<size_t>(n))
      return c.error("has " + std::to_string(sizes.size()) + " sizes for input " + p.shape_to_string(x) +
                     (c.attrs.has("axes") ? ", expected " + std::to_string(n) + listed : listed));
    if (policy == 0) {
      for (int i = 0; i < n; ++i) out[axes[i]] = sizes[i];
    } else {
      KILN_TRY(aspect_sizes(c, policy, axes, n, sizes, &out));
    }
    for (int k = 0; k + 2 < rank; ++k)
      KILN_TRY(c.require_eq(out[k], x[k], "(only the last two axes can be resized; output " + p.shape_to_string(out) +
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
  const TensorView& x = c.in(0);
  int axes[kMaxRank], n = 0;
  AxesError why;
  int64_t bad_axis;
  const int policy = aspect_policy(c.attrs);
  if (x.rank > kMaxRank || policy < 0 || !read_axes(c.attrs, x.rank, axes, &n, &why, &bad_axis))
    return KernelStatus::kInvalidValue;
  // Scales per axis in channels-first order; without scales (and without a policy) out/in.
  double full[kMaxRank];
  for (int k = 0; k < kMaxRank; ++k) full[k] = 1.0;
  const bool scales = c.has_input(2) && c.in(2).numel() > 0;
  if (scales) {
    if (c.in(2).numel() != n) return KernelStatus::kInvalidValue;
    for (int i = 0; i < n; ++i) full[axes[i]] = static_cast<double>(c.in(2).as<float>()[i]);
  } else if (policy != 0) {
    // One scale for every listed axis, in float as ONNX Runtime computes it.
    if (!c.has_input(3) || c.in(3).numel() != n) return KernelStatus::kInvalidValue;
    const int64_t* sizes = c.in(3).as<int64_t>();
    float scale = 0.f;
    for (int i = 0; i < n; ++i) {
      const int64_t in = x.dims[channels_last && x.rank == 4 ? (axes[i] == 1 ? 3 : axes[i] == 0 ? 0 : axes[i] - 1)
                                                              : axes[i]];
      if (in <= 0) return KernelStatus::kInvalidValue;
      const float si = static_cast<float>(sizes[i]) / static_cast<float>(in);
      scale = i == 0 ? si : policy == 1 ? std::min(scale, si) : std::max(scale, si);
    }
    for (int i = 0; i < n; ++i) full[axes[i]] = static_cast<double>(scale);
  }
  return resample(x, c.out(0), p, scales || policy != 0 ? full : nullptr, channels_last);
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
  if (!scales || n != c.in(0).rank || n > kMaxRank) return KernelStatus::kInvalidValue;
  double full[kMaxRank];
  for (int64_t k = 0; k < n; ++k) full[k] = static_cast<double>(scales[k]);
  return resample(c.in(0), c.out(0), upsample_params(c.attrs), full, false);
}

}  // namespace kiln::kernels
