// GridSample: values of ONNX Runtime 1.31 for every mode x padding_mode x align_corners (a
// row of points through and past the image, and 2-D points), nearest ties decided on the float
// coordinate, 1-pixel images, a seeded sweep against a reference written here (double, apart
// from the float denormalization that defines the ties; also run in oversized slots), 0
// extents, errors, and symbolic H, W, H_out, W_out run far below the bound.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;
using Shape = std::vector<int64_t>;

AttrStore gs_attrs(const std::string& mode, const std::string& pad, int64_t align_corners) {
  return AttrStore().set_str("mode", mode).set_str("padding_mode", pad).set_int("align_corners", align_corners);
}

// ---- The reference: one output element at a time, straightforward loops.

/// The pixel coordinate of normalized v on an axis of `size` pixels, in float as ONNX Runtime
/// computes it (the float value decides nearest's ties).
double denormalize(float v, int64_t size, bool ac) {
  if (ac) return static_cast<double>((v + 1.f) / 2.f * static_cast<float>(size - 1));
  return static_cast<double>(((v + 1.f) * static_cast<float>(size) - 1.f) / 2.f);
}

/// Mirrors x about lo and hi, one fold at a time, until inside.
double reflect(double x, double lo, double hi) {
  if (hi <= lo) return lo;
  while (x < lo || x > hi) x = x < lo ? 2 * lo - x : 2 * hi - x;
  return x;
}

struct RefAxis {
  int64_t size;
  bool ac;
  double lo() const { return ac ? 0 : -0.5; }
  double hi() const { return ac ? size - 1 : size - 0.5; }
  /// Padding of a point (linear, nearest): border clamps, reflection mirrors, zeros keeps.
  double pad_point(double x, const std::string& pad) const {
    if (x >= lo() && x <= hi()) return x;
    if (pad == "border") return std::min(std::max(x, 0.0), static_cast<double>(size - 1));
    if (pad == "reflection") return reflect(x, lo(), hi());
    return x;
  }
  /// Pixel index for integer coordinate i; -1 reads 0.
  int64_t pixel(int64_t i, const std::string& pad) const {
    if (i >= 0 && i < size) return i;
    if (pad == "zeros") return -1;
    if (pad == "border") return i < 0 ? 0 : size - 1;
    return static_cast<int64_t>(reflect(static_cast<double>(i), lo(), hi()));
  }
};

/// Keys' cubic kernel (a = -0.75) at distance d.
double keys(double d) {
  const double a = -0.75, t = std::abs(d);
  if (t <= 1) return (a + 2) * t * t * t - (a + 3) * t * t + 1;
  if (t < 2) return a * t * t * t - 5 * a * t * t + 8 * a * t - 4 * a;
  return 0;
}

/// Y [N, C, H_out, W_out] for X [N, C, H, W] and grid [N, H_out, W_out, 2].
std::vector<double> reference(const Tensor& x, const Tensor& grid, const std::string& mode, const std::string& pad,
                              bool ac) {
  const int64_t n = x.shape[0], channels = x.shape[1], h = x.shape[2], w = x.shape[3];
  const int64_t hout = grid.shape[1], wout = grid.shape[2];
  const RefAxis ax{w, ac}, ay{h, ac};
  std::vector<double> y(static_cast<size_t>(n * channels * hout * wout));
  const bool linear = mode == "bilinear" || mode == "linear", cubic = mode == "bicubic" || mode == "cubic";
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t i = 0; i < hout; ++i)
        for (int64_t j = 0; j < wout; ++j) {
          const int64_t g = ((b * hout + i) * wout + j) * 2;
          double fx = denormalize(grid.data<float>()[g], w, ac), fy = denormalize(grid.data<float>()[g + 1], h, ac);
          auto at = [&](int64_t r, int64_t c) -> double {
            const int64_t pr = ay.pixel(r, pad), pc = ax.pixel(c, pad);
            return pr < 0 || pc < 0 ? 0.0 : x.at(((b * channels + ch) * h + pr) * w + pc);
          };
          double v = 0;
          if (cubic) {  // the point is not padded; each of its 16 pixels is
            const int64_t x0 = static_cast<int64_t>(std::floor(fx)) - 1, y0 = static_cast<int64_t>(std::floor(fy)) - 1;
            for (int64_t r = y0; r < y0 + 4; ++r)
              for (int64_t c = x0; c < x0 + 4; ++c) v += keys(fy - r) * keys(fx - c) * at(r, c);
          } else {
            if (!linear) fx = std::nearbyint(fx), fy = std::nearbyint(fy);
            fx = ax.pad_point(fx, pad);
            fy = ay.pad_point(fy, pad);
            if (!linear) {
              v = at(static_cast<int64_t>(fy), static_cast<int64_t>(fx));
            } else {
              const int64_t x1 = static_cast<int64_t>(std::floor(fx)), y1 = static_cast<int64_t>(std::floor(fy));
              const double tx = fx - x1, ty = fy - y1;
              v = (1 - ty) * ((1 - tx) * at(y1, x1) + tx * at(y1, x1 + 1)) +
                  ty * ((1 - tx) * at(y1 + 1, x1) + tx * at(y1 + 1, x1 + 1));
            }
          }
          y[static_cast<size_t>(((b * channels + ch) * hout + i) * wout + j)] = v;
        }
  return y;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.at(static_cast<int64_t>(i)), want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
}

Tensor run_gs(const Tensor& x, const Tensor& grid, const AttrStore& a) {
  OpResult r = run_op("GridSample", {x, grid}, a);
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
  return r.outputs.empty() ? Tensor() : r.outputs[0];
}

struct OrtCase {
  const char* mode;
  const char* pad;
  int64_t align_corners;
  std::vector<float> want;
};

// X = 0 .. 11 as [1, 1, 3, 4]; points (x, 0) for x in xs: the middle row, through the image,
// its edges and far past them (wrapping several times under reflection). ONNX Runtime 1.31.
TEST(GridSample, MatchesOnnxRuntimeAlongARow) {
  const std::vector<float> xs = {-1.25f, -1, -0.75f, -0.5f, -0.25f, 0, 0.25f, 0.5f,
                                 0.75f,  1,  1.25f,  1.5f,  2.5f,   -2.5f, -3.7f, 5.2f};
  std::vector<float> g;
  for (float v : xs) g.insert(g.end(), {v, 0.f});
  Tensor grid = make_tensor<float>({1, 1, static_cast<int64_t>(xs.size()), 2}, g);
  std::vector<float> img(12);
  for (int i = 0; i < 12; ++i) img[i] = static_cast<float>(i);
  Tensor x = make_tensor<float>({1, 1, 3, 4}, img);
  const std::vector<OrtCase> cases = {
      {"nearest", "zeros", 0, {0, 4, 4, 4, 5, 6, 6, 6, 7, 0, 0, 0, 0, 0, 0, 0}},
      {"nearest", "zeros", 1, {4, 4, 4, 5, 5, 6, 6, 6, 7, 7, 7, 0, 0, 0, 0, 0}},
      {"nearest", "border", 0, {4, 4, 4, 4, 5, 6, 6, 6, 7, 7, 7, 7, 7, 4, 4, 7}},
      {"nearest", "border", 1, {4, 4, 4, 5, 5, 6, 6, 6, 7, 7, 7, 7, 7, 4, 4, 7}},
      {"nearest", "reflection", 0, {4, 4, 4, 4, 5, 6, 6, 6, 7, 7, 7, 7, 5, 7, 6, 7}},
      {"nearest", "reflection", 1, {4, 4, 4, 5, 5, 6, 6, 6, 7, 7, 7, 6, 5, 6, 6, 7}},
      {"bilinear", "zeros", 0, {0, 2, 4, 4.5, 5, 5.5, 6, 6.5, 7, 3.5, 0, 0, 0, 0, 0, 0}},
      {"bilinear", "zeros", 1, {2.5, 4, 4.375, 4.75, 5.125, 5.5, 5.875, 6.25, 6.625, 7, 4.375, 1.75, 0, 0, 0, 0}},
      {"bilinear", "border", 0, {4, 4, 4, 4.5, 5, 5.5, 6, 6.5, 7, 7, 7, 7, 7, 4, 4, 7}},
      {"bilinear", "border", 1, {4, 4, 4.375, 4.75, 5.125, 5.5, 5.875, 6.25, 6.625, 7, 7, 7, 7, 4, 4, 7}},
      {"bilinear", "reflection", 0, {4, 4, 4, 4.5, 5, 5.5, 6, 6.5, 7, 7, 7, 6.5, 4.5, 6.5, 6.0999999, 7}},
      {"bilinear", "reflection", 1, {4.375, 4, 4.375, 4.75, 5.125, 5.5, 5.875, 6.25, 6.625, 7, 6.625, 6.25, 4.75, 6.25, 5.94999981, 6.70000076}},
      {"bicubic", "zeros", 0, {0, 1.90625, 4, 4.78125, 5, 5.5, 6, 7.25, 7, 3.59375, 0, -0.65625, 0, 0, 0, 0}},
      {"bicubic", "zeros", 1, {2.44873047, 4, 4.73388672, 4.80859375, 5.16601562, 5.5, 5.83398438, 6.578125, 7.47460938, 7, 4.58740234, 1.62109375, 0, 0, 0, 0}},
      {"bicubic", "border", 0, {4, 3.90625, 4, 4.40625, 5, 5.5, 6, 6.59375, 7, 7.09375, 7, 7, 7, 4, 4, 6.99999714}},
      {"bicubic", "border", 1, {3.89013672, 4, 4.29443359, 4.66796875, 5.16601562, 5.5, 5.83398438, 6.33203125, 6.70556641, 7, 7.10986328, 7.03515625, 7, 4, 4, 7}},
      {"bicubic", "reflection", 0, {4, 3.8125, 4, 4.40625, 5, 5.5, 6, 6.59375, 7, 7.1875, 7, 6.59375, 4.40625, 6.59375, 6.14274979, 7.06749821}},
      {"bicubic", "reflection", 1, {4.18457031, 4, 4.18457031, 4.6328125, 5.16601562, 5.5, 5.83398438, 6.3671875, 6.81542969, 7, 6.81542969, 6.3671875, 4.6328125, 6.3671875, 5.92862511, 6.87850094}}
};
  for (const OrtCase& c : cases) {
    const std::string what = std::string(c.mode) + " " + c.pad + " align_corners=" + std::to_string(c.align_corners);
    Tensor y = run_gs(x, grid, gs_attrs(c.mode, c.pad, c.align_corners));
    ASSERT_EQ(y.shape, (Shape{1, 1, 1, 16})) << what;
    for (size_t i = 0; i < c.want.size(); ++i) EXPECT_NEAR(y.at(i), c.want[i], 1e-6 * (1 + std::abs(c.want[i]))) << what << " at x = " << xs[i];
    expect_near_all(y, reference(x, grid, c.mode, c.pad, c.align_corners == 1), 1e-5, what + " (reference)");
  }
}

// X = 1.5 * (0 .. 19) - 7 as [1, 1, 4, 5]; six 2-D points as a [1, 2, 3, 2] grid, some
// outside on both axes. ONNX Runtime 1.31.
TEST(GridSample, MatchesOnnxRuntimeIn2d) {
  std::vector<float> img(20);
  for (int i = 0; i < 20; ++i) img[i] = 1.5f * static_cast<float>(i) - 7.f;
  Tensor x = make_tensor<float>({1, 1, 4, 5}, img);
  Tensor grid = make_tensor<float>({1, 2, 3, 2}, {0.3f, -0.8f, -1.1f, 0.9f, 0.95f, 1.3f, -0.2f, -1.6f, 2.2f, 0.1f, -0.6f, 0.45f});
  const std::vector<OrtCase> cases = {
      {"nearest", "zeros", 0, {-2.5, 0, 0, 0, 0, 8}},
      {"nearest", "zeros", 1, {-2.5, 15.5, 21.5, 0, 0, 9.5}},
      {"nearest", "border", 0, {-2.5, 15.5, 21.5, -4, 14, 8}},
      {"nearest", "border", 1, {-2.5, 15.5, 21.5, -4, 14, 9.5}},
      {"nearest", "reflection", 0, {-2.5, 15.5, 21.5, 3.5, 9.5, 8}},
      {"nearest", "reflection", 1, {-2.5, 15.5, 21.5, 3.5, 11, 9.5}},
      {"bilinear", "zeros", 0, {-2.58749986, 2.71249938, 0, 0, 0, 11.750001}},
      {"bilinear", "zeros", 1, {-0.850000501, 11.499999, 11.7425041, -0.45999983, 0, 10.5125017}},
      {"bilinear", "border", 0, {-2.875, 15.5, 21.5, -4.75, 11.750001, 11.75}},
      {"bilinear", "border", 1, {-0.850000501, 14.374999, 21.3500004, -4.5999999, 11.375001, 10.5125017}},
      {"bilinear", "reflection", 0, {-2.875, 15.5, 20.75, 0.500000477, 8.00000095, 11.75}},
      {"bilinear", "reflection", 1, {-0.850000501, 14.6749992, 17.9750023, 2.15000033, 7.77500057, 10.5125017}},
      {"bicubic", "zeros", 0, {-3.15942192, 2.68126726, -0.845468879, 0.224437654, 0, 14.692626}},
      {"bicubic", "zeros", 1, {-1.7436204, 12.9539547, 13.4339237, -0.430776596, 0, 11.455348}},
      {"bicubic", "border", 0, {-3.40093803, 16.2741413, 21.6647949, -4.75000095, 11.4350052, 12.3293762}},
      {"bicubic", "border", 1, {-1.39787722, 14.5059261, 22.1528282, -4.68662453, 11.1190701, 10.89853}},
      {"bicubic", "reflection", 0, {-3.45156217, 16.470314, 21.1993008, -0.169371545, 7.68500519, 12.3293762}},
      {"bicubic", "reflection", 1, {-2.22475004, 15.3435364, 19.5418453, 1.74275255, 7.48306847, 11.0046549}}
};
  for (const OrtCase& c : cases) {
    const std::string what = std::string(c.mode) + " " + c.pad + " align_corners=" + std::to_string(c.align_corners);
    Tensor y = run_gs(x, grid, gs_attrs(c.mode, c.pad, c.align_corners));
    ASSERT_EQ(y.shape, (Shape{1, 1, 2, 3})) << what;
    for (size_t i = 0; i < c.want.size(); ++i) EXPECT_NEAR(y.at(i), c.want[i], 1e-5 * (1 + std::abs(c.want[i]))) << what << " at " << i;
    expect_near_all(y, reference(x, grid, c.mode, c.pad, c.align_corners == 1), 1e-5, what + " (reference)");
  }
}

TEST(GridSample, OpsetTwentyNamesAndDefaults) {
  std::mt19937 rng(20);
  Tensor x = random_f32(rng, {2, 3, 4, 5}), grid = random_f32(rng, {2, 3, 2, 2}, -1.3f, 1.3f);
  for (const char* pad : {"zeros", "border", "reflection"}) {
    EXPECT_EQ(run_gs(x, grid, gs_attrs("linear", pad, 0)).bytes, run_gs(x, grid, gs_attrs("bilinear", pad, 0)).bytes);
    EXPECT_EQ(run_gs(x, grid, gs_attrs("cubic", pad, 1)).bytes, run_gs(x, grid, gs_attrs("bicubic", pad, 1)).bytes);
  }
  // Defaults: bilinear, zeros, align_corners 0.
  EXPECT_EQ(run_gs(x, grid, AttrStore()).bytes, run_gs(x, grid, gs_attrs("bilinear", "zeros", 0)).bytes);
}

// Nearest rounds the float coordinate half to even: x = 0.42857143f on W = 7 is 4.5 in float
// (-> 4), 4.50000001 exactly (-> 5); x = 0 on W = 4 is 1.5 (-> 2); ONNX Runtime agrees.
TEST(GridSample, NearestTiesOnTheFloatCoordinate) {
  Tensor x = make_tensor<float>({1, 1, 1, 7}, {0, 10, 20, 30, 40, 50, 60});
  Tensor grid = make_tensor<float>({1, 1, 4, 2}, {0.42857143f, 0, -0.14285713f, 0, 0.4285715f, 0, 1.0000001f, 0});
  EXPECT_EQ(run_gs(x, grid, gs_attrs("nearest", "border", 0)).values<float>(), (std::vector<float>{40, 20, 40, 60}));
  Tensor x4 = make_tensor<float>({1, 1, 1, 4}, {0, 1, 2, 3});
  Tensor g4 = make_tensor<float>({1, 1, 4, 2}, {0, 0, -0.5f, 0, 0.5f, 0, 1, 0});  // 1.5, 0.5, 2.5, 3.5
  EXPECT_EQ(run_gs(x4, g4, gs_attrs("nearest", "zeros", 0)).values<float>(), (std::vector<float>{2, 0, 2, 0}));
  EXPECT_EQ(run_gs(x4, g4, gs_attrs("nearest", "border", 0)).values<float>(), (std::vector<float>{2, 0, 2, 3}));
}

// One pixel across (W = 1) and one row (H = 1): with align_corners every point is the pixel.
TEST(GridSample, SinglePixelAxes) {
  Tensor x = make_tensor<float>({1, 2, 1, 1}, {5, -3});
  Tensor grid = make_tensor<float>({1, 1, 3, 2}, {0.3f, 0.9f, -2.2f, 1.7f, 3.1f, -4.2f});
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* pad : {"zeros", "border", "reflection"})
      for (int64_t ac : {0, 1}) {
        const std::string what = std::string(mode) + " " + pad + " " + std::to_string(ac);
        Tensor y = run_gs(x, grid, gs_attrs(mode, pad, ac));
        ASSERT_EQ(y.shape, (Shape{1, 2, 1, 3})) << what;
        expect_near_all(y, reference(x, grid, mode, pad, ac == 1), 1e-5, what);
        if (std::string(pad) != "zeros" && std::string(mode) != "bicubic") {
          EXPECT_EQ(y.values<float>(), (std::vector<float>{5, 5, 5, -3, -3, -3})) << what;
        }
      }
  // H = 1, W = 2 (ONNX Runtime 1.31): bilinear border, and reflection with align_corners.
  Tensor x2 = make_tensor<float>({1, 1, 1, 2}, {5, 7});
  Tensor y = run_gs(x2, grid, gs_attrs("bilinear", "border", 0));
  expect_near_all(y, {6.6, 5, 7}, 1e-6, "H1 border");
  y = run_gs(x2, grid, gs_attrs("bilinear", "reflection", 1));
  expect_near_all(y, {6.3, 6.2, 5.1}, 1e-6, "H1 reflection align_corners");
  y = run_gs(x2, grid, gs_attrs("bicubic", "zeros", 1));
  expect_near_all(y, {7.409062385559082, 1.7959980964660645, -0.23690462112426758}, 1e-6, "H1 bicubic");
}

// A NaN or infinite point gives NaN in every mode and padding (ONNX Runtime's result is
// undefined there: it converts the coordinate to an integer index); finite neighbours are
// unaffected, and nothing outside the image is read.
TEST(GridSample, NonFinitePoints) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = make_tensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor grid = make_tensor<float>({1, 1, 4, 2}, {nan, 0, inf, -1, -1, -inf, -1, -1});
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* pad : {"zeros", "border", "reflection"}) {
      std::vector<float> y = run_gs(x, grid, gs_attrs(mode, pad, 1)).values<float>();
      ASSERT_EQ(y.size(), 4u);
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i])) << mode << " " << pad << " at " << i;
      EXPECT_EQ(y[3], 1) << mode << " " << pad;  // (-1, -1) with align_corners: the corner pixel
    }
}

TEST(GridSample, RandomSweepAgainstReference) {
  std::mt19937 rng(1606);
  const char* modes[] = {"bilinear", "nearest", "bicubic", "linear", "cubic"};
  const char* pads[] = {"zeros", "border", "reflection"};
  const float exact[] = {-1, -0.5f, 0, 0.5f, 1, -1.5f, 1.5f, 0.25f};
  for (int iter = 0; iter < 450; ++iter) {
    const std::string mode = modes[iter % 5], pad = pads[iter / 5 % 3];
    const int64_t ac = iter / 15 % 2;
    const Shape xs = {1 + static_cast<int64_t>(rng() % 2), 1 + static_cast<int64_t>(rng() % 3),
                      1 + static_cast<int64_t>(rng() % 6), 1 + static_cast<int64_t>(rng() % 6)};
    const Shape gs = {xs[0], 1 + static_cast<int64_t>(rng() % 4), 1 + static_cast<int64_t>(rng() % 4), 2};
    Tensor x = random_f32(rng, xs, -2, 2);
    // Points mostly within [-1.6, 1.6]; some far out (reflection folds many times), some on
    // the exact fractions where pixel centres and edges fall.
    Tensor grid = random_f32(rng, gs, -1.6f, 1.6f);
    for (int64_t i = 0; i < grid.numel(); ++i) {
      const unsigned k = rng() % 10;
      if (k == 0) grid.data<float>()[i] = exact[rng() % 8];
      if (k == 1) grid.data<float>()[i] *= 4;
    }
    const std::string what = "iter " + std::to_string(iter) + " " + mode + " " + pad + " ac=" + std::to_string(ac);
    SlotRun s = run_op_in_slots("GridSample", {x, grid}, gs_attrs(mode, pad, ac));
    ASSERT_TRUE(s.exact.status.ok()) << what << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.kernel, kernels::KernelStatus::kOk) << what;
    ASSERT_EQ(s.exact.outputs[0].shape, (Shape{xs[0], xs[1], gs[1], gs[2]})) << what;
    EXPECT_TRUE(s.tails_intact) << what;
    EXPECT_EQ(s.outputs[0].bytes, s.exact.outputs[0].bytes) << what;
    expect_near_all(s.exact.outputs[0], reference(x, grid, mode, pad, ac == 1), 2e-5, what);
  }
}

TEST(GridSample, ZeroExtents) {
  std::mt19937 rng(0);
  // N, C, H_out or W_out of 0: an empty output.
  for (auto [xs, gs] : std::vector<std::pair<Shape, Shape>>{{{0, 2, 3, 3}, {0, 2, 2, 2}},
                                                           {{1, 0, 3, 3}, {1, 2, 2, 2}},
                                                           {{1, 2, 3, 3}, {1, 0, 2, 2}},
                                                           {{1, 2, 3, 3}, {1, 2, 0, 2}}}) {
    for (const char* pad : {"zeros", "border", "reflection"}) {
      OpResult r = run_op("GridSample", {random_f32(rng, xs), random_f32(rng, gs)}, gs_attrs("bilinear", pad, 0));
      ASSERT_TRUE(r.status.ok()) << r.status.message();
      EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
      EXPECT_EQ(r.outputs[0].shape, (Shape{xs[0], xs[1], gs[1], gs[2]}));
      EXPECT_TRUE(r.outputs[0].bytes.empty());
    }
  }
  // An empty image (H or W = 0): zeros padding reads 0 everywhere; border and reflection
  // have no pixel to read and are refused.
  for (Shape xs : {Shape{1, 2, 0, 3}, Shape{1, 2, 3, 0}}) {
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      Tensor y = run_gs(make_tensor<float>(xs, {}), random_f32(rng, {1, 2, 2, 2}), gs_attrs(mode, "zeros", 0));
      EXPECT_EQ(y.values<float>(), std::vector<float>(8, 0.f)) << mode;
    }
  }
  Tensor empty = make_tensor<float>({1, 2, 0, 3}, {});
  EXPECT_TRUE(has_text(run_op("GridSample", {empty, random_f32(rng, {1, 2, 2, 2})}, gs_attrs("bilinear", "border", 0)).status,
                       "node 'test' (GridSample): input [1, 2, 0, 3] has height 0: border padding reads a pixel of "
                       "the image; only zeros padding samples an empty one"));
  std::vector<Tensor> out(1);
  out[0].shape = {1, 2, 2, 2};
  EXPECT_EQ(run_kernel("GridSample", {empty, random_f32(rng, {1, 2, 2, 2})}, &out, gs_attrs("bilinear", "reflection", 0)),
            kernels::KernelStatus::kInvalidValue);
  EXPECT_EQ(out[0].bytes, std::vector<unsigned char>(32, 0xCD));
}

TEST(GridSample, Errors) {
  std::mt19937 rng(3);
  Tensor x = random_f32(rng, {1, 2, 3, 3}), grid = random_f32(rng, {1, 2, 2, 2});
  auto status = [](const std::vector<Tensor>& in, const AttrStore& a = AttrStore()) {
    return run_op("GridSample", in, a).status;
  };
  EXPECT_TRUE(has_text(status({random_f32(rng, {1, 2, 3, 3, 3}), random_f32(rng, {1, 2, 2, 2, 3})}),
                       "node 'test' (GridSample): input [1, 2, 3, 3, 3] has rank 5: only the 4-D form (X [N, C, H, W], "
                       "grid [N, H_out, W_out, 2]) is supported, not the volumetric or N-D forms of opset 20"));
  EXPECT_TRUE(has_text(status({random_f32(rng, {1, 2, 3}), random_f32(rng, {1, 2, 1})}),
                       "input [1, 2, 3] must have rank 4 (N, C, H, W)"));
  EXPECT_TRUE(has_text(status({x, random_f32(rng, {1, 4, 2})}),
                       "grid [1, 4, 2] must have rank 4 (N, H_out, W_out, 2) for a 4-D input"));
  EXPECT_TRUE(has_text(status({x, grid}, AttrStore().set_str("mode", "area")),
                       "mode 'area' is not supported; expected bilinear, nearest or bicubic (opset 16), linear or cubic "
                       "(opset 20)"));
  EXPECT_TRUE(has_text(status({x, grid}, AttrStore().set_str("padding_mode", "wrap")),
                       "padding_mode 'wrap' is not supported; expected zeros, border or reflection"));
  EXPECT_TRUE(has_text(status({x, grid}, AttrStore().set_int("align_corners", 2)), "align_corners 2 must be 0 or 1"));
  EXPECT_TRUE(has_text(status({x, random_f32(rng, {2, 2, 2, 2})}),
                       "sizes 2 and 1 must be equal (grid [2, 2, 2, 2] needs one point set per image of input "
                       "[1, 2, 3, 3])"));
  EXPECT_TRUE(has_text(status({x, random_f32(rng, {1, 2, 2, 3})}),
                       "sizes 3 and 2 must be equal (the last axis of grid [1, 2, 2, 3] holds the point (x, y))"));
  EXPECT_TRUE(has_text(status({x}), "expects 2 inputs, got 1"));
  EXPECT_TRUE(has_text(status({x, make_tensor<int64_t>({1, 1, 1, 2}, {0, 0})}), "input #1 has dtype i64, expected f32"));
}

// H, W (input) and H_out, W_out (grid) symbolic and independent: the output follows the grid,
// with no guard; a grid batch of its own is tied to the input's. Then the kernel at dims far
// below the bounds, against the reference.
TEST(GridSampleSymbolic, ShapeAndRunsBelowTheBound) {
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId h = pool.dim(pool.add_dim({"H", 1, 256, 1}));
  ExprId w = pool.dim(pool.add_dim({"W", 1, 256, 1}));
  ExprId ho = pool.dim(pool.add_dim({"Ho", 1, 128, 1}));
  ExprId wo = pool.dim(pool.add_dim({"Wo", 1, 128, 1}));
  ExprId gb = pool.dim(pool.add_dim({"gb", 1, 8, 1}));
  ExprId three = pool.constant(3), two = pool.constant(2);
  SymResult r = infer(pool, "GridSample",
                      {sym_input(DType::kF32, {batch, three, h, w}), sym_input(DType::kF32, {batch, ho, wo, two})},
                      gs_attrs("bilinear", "reflection", 0));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 3, Ho, Wo]");
  EXPECT_EQ(guards_text(pool, r), "");
  SymResult g = infer(pool, "GridSample",
                      {sym_input(DType::kF32, {batch, three, h, w}), sym_input(DType::kF32, {gb, ho, wo, two})});
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(guards_text(pool, g), "gb == batch");
  // Border padding with a symbolic image size: H, W >= 1 holds for every admissible value.
  g = infer(pool, "GridSample",
            {sym_input(DType::kF32, {batch, three, h, w}), sym_input(DType::kF32, {batch, ho, wo, two})},
            gs_attrs("nearest", "border", 1));
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(guards_text(pool, g), "");

  std::mt19937 rng(11);
  // dims: batch, H, W, Ho, Wo, gb
  for (Shape dims : {Shape{1, 1, 1, 1, 1, 1}, Shape{2, 1, 7, 3, 1, 1}, Shape{1, 9, 2, 1, 5, 1}, Shape{3, 5, 6, 4, 3, 1}}) {
    for (const char* mode : {"bilinear", "nearest", "bicubic"})
      for (const char* pad : {"zeros", "border", "reflection"})
        for (int64_t ac : {0, 1}) {
          const std::string what = std::string(mode) + " " + pad + " ac=" + std::to_string(ac);
          std::vector<Tensor> out(1);
          out[0].shape = eval_shape(pool, r.outputs[0].shape, dims);
          ASSERT_EQ(out[0].shape, (Shape{dims[0], 3, dims[3], dims[4]})) << what;
          Tensor x = random_f32(rng, {dims[0], 3, dims[1], dims[2]});
          Tensor grid = random_f32(rng, {dims[0], dims[3], dims[4], 2}, -1.4f, 1.4f);
          ASSERT_EQ(run_kernel("GridSample", {x, grid}, &out, gs_attrs(mode, pad, ac)), kernels::KernelStatus::kOk) << what;
          expect_near_all(out[0], reference(x, grid, mode, pad, ac == 1), 2e-5, what);
        }
  }
}

}  // namespace
}  // namespace kiln::testing
