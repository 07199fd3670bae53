// GridSample (opset 16; opset 20 for 4-D inputs): X [N, C, H, W] sampled at grid
// [N, H_out, W_out, 2] -> Y [N, C, H_out, W_out]. grid[n, i, j] = (x, y) in [-1, 1] names a
// point of image n (x across W, y across H); every channel is sampled there.
//
// Denormalization: align_corners = 1 maps -1 and 1 to the centres of the corner pixels,
// x' = (x + 1) / 2 * (W - 1); align_corners = 0 to their outer edges, x' = ((x + 1) W - 1) / 2.
// mode: bilinear (opset 16) = linear (opset 20): the 4 pixels around x'; nearest: the pixel at
// nearbyint(x') (halves to even); bicubic = cubic: the 4 x 4 pixels around x' with Keys'
// kernel (a = -0.75). padding_mode applies to each pixel a point reads, not to the point:
// zeros reads 0 outside the image; border reads the nearest edge pixel (clamps the index to
// [0, W - 1]); reflection mirrors the index about x_min and x_max (-0.5 and W - 0.5, or 0 and
// W - 1 with align_corners) until inside. For linear and nearest that is, up to rounding, the
// same as padding the point first (the ONNX reference does); for cubic it is not, and ONNX
// Runtime pads the pixels.
//
// The arithmetic is ONNX Runtime's (1.31), in float and in its order, so results match it bit
// for bit: nearest ties depend on the float x', which can differ from the exact one
// (x = 0.42857143f, W = 7: float x' = 4.5 -> 4, exact 4.50000001 -> 5); linear with zeros
// padding and align_corners = 0 (its fast path) sums w11 p11 + w12 p12 + w21 p21 + w22 p22,
// the other linear cases dy2 (dx2 p11 + dx1 p12) + dy1 (dx2 p21 + dx1 p22). A point whose x'
// or y' is not finite (a NaN or infinite grid value) gives NaN: ONNX Runtime converts it to an
// integer index, which is undefined.
//
// Only the 4-D form: the volumetric (5-D) and N-D forms of opset 20 are refused at shape time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

enum class SampleMode : uint8_t { kLinear, kNearest, kCubic };
enum class SamplePad : uint8_t { kZeros, kBorder, kReflection };

struct GridSamplePrep {
  SampleMode mode = SampleMode::kLinear;
  SamplePad pad = SamplePad::kZeros;
  bool align_corners = false;
};

bool parse_mode(const char* s, SampleMode* m) {
  if (std::strcmp(s, "bilinear") == 0 || std::strcmp(s, "linear") == 0) *m = SampleMode::kLinear;
  else if (std::strcmp(s, "nearest") == 0) *m = SampleMode::kNearest;
  else if (std::strcmp(s, "bicubic") == 0 || std::strcmp(s, "cubic") == 0) *m = SampleMode::kCubic;
  else return false;
  return true;
}

bool parse_pad(const char* s, SamplePad* p) {
  if (std::strcmp(s, "zeros") == 0) *p = SamplePad::kZeros;
  else if (std::strcmp(s, "border") == 0) *p = SamplePad::kBorder;
  else if (std::strcmp(s, "reflection") == 0) *p = SamplePad::kReflection;
  else return false;
  return true;
}

/// Reads the attributes; false if one is not a supported value (the shape function says which).
bool read_prep(const core::Attrs& a, GridSamplePrep* p) {
  const int64_t ac = a.get_int("align_corners", 0);
  p->align_corners = ac == 1;
  return parse_mode(a.get_str("mode", "bilinear"), &p->mode) && parse_pad(a.get_str("padding_mode", "zeros"), &p->pad) &&
         (ac == 0 || ac == 1);
}

/// One image axis of `size` pixels: denormalization, the valid interval and padding.
struct Axis {
  int64_t size = 0;
  float lo = 0, hi = 0;  ///< [x_min, x_max] of the denormalized coordinate
  bool align_corners = false;

  Axis(int64_t n, bool ac) : size(n), align_corners(ac) {
    lo = ac ? 0.f : -0.5f;
    hi = ac ? static_cast<float>(n - 1) : static_cast<float>(n) - 0.5f;
  }

  /// The normalized coordinate v in pixel units (float, in ONNX Runtime's order).
  float denormalize(float v) const {
    if (align_corners) return (v + 1.f) / 2.f * static_cast<float>(size - 1);
    return ((v + 1.f) * static_cast<float>(size) - 1.f) / 2.f;
  }

  /// Mirrors finite x about lo and hi until it lies in [lo, hi]. One pixel with align_corners
  /// has lo == hi: everything reflects onto it.
  float reflect(float x) const {
    const float range = hi - lo;
    if (!(range > 0.f)) return lo;
    if (x < lo || x > hi) {
      // dx / range beyond 2^62 has no integer part to speak of; clamp so the cast is defined.
      const float dx = x < lo ? lo - x : x - hi;
      const float q = std::min(dx / range, 4.6e18f);
      const int64_t n = static_cast<int64_t>(q);
      const float r = dx - static_cast<float>(n) * range;
      const bool even = n % 2 == 0;
      return x < lo ? (even ? lo + r : hi - r) : (even ? hi - r : lo + r);
    }
    return x;
  }

  /// Pixel index for integer coordinate i, or -1 for a zero (zeros padding outside).
  int64_t pixel(int64_t i, SamplePad pad) const {
    if (i >= 0 && i < size) return i;
    if (pad == SamplePad::kZeros) return -1;
    if (pad == SamplePad::kBorder) return std::clamp<int64_t>(i, 0, size - 1);
    const int64_t r = static_cast<int64_t>(reflect(static_cast<float>(i)));
    return std::clamp<int64_t>(r, 0, size - 1);  // a no-op but for float rounding far out
  }
};

/// Keys' cubic convolution weights (a = -0.75) of the 4 pixels around a point t in [0, 1)
/// past the second, in float as ONNX Runtime computes them.
void cubic_weights(float t, float w[4]) {
  constexpr float a = -0.75f;
  t = std::fabs(t);
  w[0] = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a;
  w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  w[2] = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1;
  w[3] = ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a;
}

/// Nearest integer, halves to even (std::nearbyint in the default rounding mode, whatever
/// mode the caller has set).
float round_half_even(float x) {
  float r = std::round(x);  // halves away from zero
  if (std::fabs(x - std::trunc(x)) == 0.5f) r = 2.f * std::round(x * 0.5f);
  return r;
}

/// Integer part of a finite coordinate, clamped far outside any image so the cast is defined
/// (beyond 2^40 every pixel it names is outside, whichever it is).
int64_t floor_index(float x) {
  constexpr float kFar = 1099511627776.f;  // 2^40
  return static_cast<int64_t>(std::floor(std::clamp(x, -kFar, kFar)));
}

/// Samples every channel of image n (x: C planes of H*W) at one grid point into y (C values,
/// `ystride` apart).
void sample_point(const GridSamplePrep& p, const Axis& ax, const Axis& ay, float gx, float gy, const float* x,
                  int64_t channels, float* y, int64_t ystride) {
  const int64_t plane = ay.size * ax.size;
  float fx = ax.denormalize(gx), fy = ay.denormalize(gy);
  if (p.mode == SampleMode::kNearest) {
    fx = round_half_even(fx);
    fy = round_half_even(fy);
  }
  if (!std::isfinite(fx) || !std::isfinite(fy)) {
    for (int64_t ch = 0; ch < channels; ++ch) y[ch * ystride] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (p.mode == SampleMode::kNearest) {
    const int64_t c = ax.pixel(floor_index(fx), p.pad), r = ay.pixel(floor_index(fy), p.pad);  // fx, fy integers
    const bool zero = c < 0 || r < 0;
    for (int64_t ch = 0; ch < channels; ++ch) y[ch * ystride] = zero ? 0.f : x[ch * plane + r * ax.size + c];
    return;
  }
  if (p.mode == SampleMode::kLinear) {
    const int64_t x1 = floor_index(fx), y1 = floor_index(fy), x2 = x1 + 1, y2 = y1 + 1;
    const float dx2 = static_cast<float>(x2) - fx, dx1 = fx - static_cast<float>(x1);
    const float dy2 = static_cast<float>(y2) - fy, dy1 = fy - static_cast<float>(y1);
    const int64_t c1 = ax.pixel(x1, p.pad), c2 = ax.pixel(x2, p.pad);
    const int64_t r1 = ay.pixel(y1, p.pad), r2 = ay.pixel(y2, p.pad);
    // Offsets of the 4 pixels, -1 for a zero.
    const int64_t o11 = r1 < 0 || c1 < 0 ? -1 : r1 * ax.size + c1, o12 = r1 < 0 || c2 < 0 ? -1 : r1 * ax.size + c2;
    const int64_t o21 = r2 < 0 || c1 < 0 ? -1 : r2 * ax.size + c1, o22 = r2 < 0 || c2 < 0 ? -1 : r2 * ax.size + c2;
    const bool weights_first = p.pad == SamplePad::kZeros && !p.align_corners;
    const float w11 = dy2 * dx2, w12 = dy2 * dx1, w21 = dy1 * dx2, w22 = dy1 * dx1;
    for (int64_t ch = 0; ch < channels; ++ch) {
      const float* img = x + ch * plane;
      const float p11 = o11 < 0 ? 0.f : img[o11], p12 = o12 < 0 ? 0.f : img[o12];
      const float p21 = o21 < 0 ? 0.f : img[o21], p22 = o22 < 0 ? 0.f : img[o22];
      y[ch * ystride] = weights_first ? w11 * p11 + w12 * p12 + w21 * p21 + w22 * p22
                                      : dy2 * (dx2 * p11 + dx1 * p12) + dy1 * (dx2 * p21 + dx1 * p22);
    }
    return;
  }
  // Cubic: pixels x0 .. x0 + 3 around fx, each padded on its own.
  const int64_t x0 = floor_index(fx) - 1, y0 = floor_index(fy) - 1;
  float wx[4], wy[4];
  cubic_weights(fx - static_cast<float>(x0) - 1.f, wx);
  cubic_weights(fy - static_cast<float>(y0) - 1.f, wy);
  int64_t cols[4], rows[4];
  for (int k = 0; k < 4; ++k) {
    cols[k] = ax.pixel(x0 + k, p.pad);
    rows[k] = ay.pixel(y0 + k, p.pad);
  }
  for (int64_t ch = 0; ch < channels; ++ch) {
    const float* img = x + ch * plane;
    float v[4];
    for (int i = 0; i < 4; ++i) {
      float q[4];
      for (int k = 0; k < 4; ++k) q[k] = rows[i] < 0 || cols[k] < 0 ? 0.f : img[rows[i] * ax.size + cols[k]];
      v[i] = wx[0] * q[0] + wx[1] * q[1] + wx[2] * q[2] + wx[3] * q[3];
    }
    y[ch * ystride] = wy[0] * v[0] + wy[1] * v[1] + wy[2] * v[2] + wy[3] * v[3];
  }
}

}  // namespace

void grid_sample_prepare(const PrepareCtx& c, OpData* d) {
  GridSamplePrep& p = d->as<GridSamplePrep>();
  p = GridSamplePrep();
  read_prep(c.attrs, &p);  // validated by the shape function
}

Status grid_sample_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  KILN_TRY(c.expect_dtype(1, DType::kF32));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  const std::vector<ExprId>& g = c.in(1).shape;
  const std::string input = "input " + p.shape_to_string(x), grid = "grid " + p.shape_to_string(g);
  if (x.size() > 4)
    return c.error(input + " has rank " + std::to_string(x.size()) +
                   ": only the 4-D form (X [N, C, H, W], grid [N, H_out, W_out, 2]) is supported, not the "
                   "volumetric or N-D forms of opset 20");
  if (x.size() < 4) return c.error(input + " must have rank 4 (N, C, H, W)");
  if (g.size() != 4) return c.error(grid + " must have rank 4 (N, H_out, W_out, 2) for a 4-D input");
  const char* mode = c.attrs.get_str("mode", "bilinear");
  const char* pad = c.attrs.get_str("padding_mode", "zeros");
  GridSamplePrep prep;
  if (!parse_mode(mode, &prep.mode))
    return c.error(std::string("mode '") + mode +
                   "' is not supported; expected bilinear, nearest or bicubic (opset 16), linear or cubic (opset 20)");
  if (!parse_pad(pad, &prep.pad))
    return c.error(std::string("padding_mode '") + pad + "' is not supported; expected zeros, border or reflection");
  const int64_t ac = c.attrs.get_int("align_corners", 0);
  if (ac != 0 && ac != 1) return c.error("align_corners " + std::to_string(ac) + " must be 0 or 1");
  KILN_TRY(c.require_eq(g[0], x[0], "(" + grid + " needs one point set per image of " + input + ")"));
  KILN_TRY(c.require_eq(g[3], p.constant(2), "(the last axis of " + grid + " holds the point (x, y))"));
  if (prep.pad != SamplePad::kZeros) {
    // Border and reflection read a pixel of the image wherever a point falls.
    const char* names[] = {"height", "width"};
    for (int k = 0; k < 2; ++k) {
      if (p.is_const_value(x[2 + k], 0))
        return c.error(input + " has " + names[k] + " 0: " + pad +
                       " padding reads a pixel of the image; only zeros padding samples an empty one");
      KILN_TRY(c.require_at_least(x[2 + k], 1, std::string(pad) + " padding: the " + names[k] + " of " + input));
    }
  }
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = {x[0], x[1], g[1], g[2]};
  return ok_status();
}

KernelStatus grid_sample_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  const TensorView& gv = c.in(1);
  TensorView& yv = c.out(0);
  if (xv.rank != 4 || gv.rank != 4 || yv.rank != 4 || !c.op_data) return KernelStatus::kInvalidValue;
  const GridSamplePrep& p = c.op_data->as<GridSamplePrep>();
  const int64_t n = xv.dims[0], channels = xv.dims[1], h = xv.dims[2], w = xv.dims[3];
  const int64_t hout = gv.dims[1], wout = gv.dims[2];
  if (gv.dims[0] != n || gv.dims[3] != 2 || yv.dims[0] != n || yv.dims[1] != channels || yv.dims[2] != hout ||
      yv.dims[3] != wout)
    return KernelStatus::kInvalidValue;
  const int64_t points = hout * wout;
  if (n == 0 || channels == 0 || points == 0) return KernelStatus::kOk;
  float* y = yv.as<float>();
  if (h == 0 || w == 0) {  // nothing to read: zeros padding gives 0 everywhere
    if (p.pad != SamplePad::kZeros) return KernelStatus::kInvalidValue;
    std::fill(y, y + n * channels * points, 0.f);
    return KernelStatus::kOk;
  }
  const Axis ax(w, p.align_corners), ay(h, p.align_corners);
  const float* x = xv.as<float>();
  const float* grid = gv.as<float>();
  for (int64_t b = 0; b < n; ++b) {
    const float* xb = x + b * channels * h * w;
    const float* gb = grid + b * points * 2;
    float* yb = y + b * channels * points;
    for (int64_t i = 0; i < points; ++i)
      sample_point(p, ax, ay, gb[2 * i], gb[2 * i + 1], xb, channels, yb + i, points);
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
