// Winograd F(2x2, 3x3) and F(4x4, 3x3) against a double-precision direct convolution written here: odd and
// even output sizes (tiles cut by the edge), pads 0, 1, 2 and asymmetric, inputs smaller than
// a tile, channel counts that are not multiples of 8 or 16, clamps, batch, one and two
// threads with one or two scratch slots, tile groups cut by the batch; and non-finite inputs,
// whose outputs must keep the direct sum's classes (NaN, +Inf, -Inf, finite) exactly. Runs on
// whichever row of the ISA table KILN_MAX_ISA leaves (scripts/test_isas.sh runs each).
#include <gtest/gtest.h>

#include <pthreadpool.h>

#include <cmath>
#include <random>

#include "delegates/xnnpack/dense_conv.h"
#include "delegates/xnnpack/winograd_conv.h"

namespace kiln::delegates::xnnpack {
namespace {

struct WinogradCase {
  size_t n, h, w, c, m;
  int64_t pt, pl, pb, pr;
};

size_t out_size(size_t in, int64_t a, int64_t b) { return static_cast<size_t>(static_cast<int64_t>(in) + a + b - 2); }

// y[n][oh][ow][m] in double (x NHWC, w OIHW 3x3), clamped; NaN kept through the clamp. `magnitude`,
// if given, gets each output's sum of |terms| (what a rounding error scales with).
std::vector<double> reference(const WinogradCase& k, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& b, float lo, float hi,
                              std::vector<double>* magnitude = nullptr) {
  const size_t oh_n = out_size(k.h, k.pt, k.pb), ow_n = out_size(k.w, k.pl, k.pr);
  std::vector<double> y(k.n * oh_n * ow_n * k.m);
  if (magnitude) magnitude->assign(y.size(), 0.0);
  for (size_t n = 0; n < k.n; ++n)
    for (size_t oh = 0; oh < oh_n; ++oh)
      for (size_t ow = 0; ow < ow_n; ++ow)
        for (size_t m = 0; m < k.m; ++m) {
          double s = b[m], mag = std::fabs(b[m]);
          for (size_t i = 0; i < 3; ++i)
            for (size_t j = 0; j < 3; ++j) {
              const int64_t ih = static_cast<int64_t>(oh + i) - k.pt, iw = static_cast<int64_t>(ow + j) - k.pl;
              if (ih < 0 || iw < 0 || ih >= static_cast<int64_t>(k.h) || iw >= static_cast<int64_t>(k.w)) continue;
              for (size_t c = 0; c < k.c; ++c) {
                const double t =
                    static_cast<double>(x[((n * k.h + ih) * k.w + iw) * k.c + c]) * w[((m * k.c + c) * 3 + i) * 3 + j];
                s += t, mag += std::fabs(t);
              }
            }
          if (magnitude) (*magnitude)[((n * oh_n + oh) * ow_n + ow) * k.m + m] = mag;
          y[((n * oh_n + oh) * ow_n + ow) * k.m + m] = std::isnan(s) ? s : std::min<double>(hi, std::max<double>(lo, s));
        }
  return y;
}

DenseConvGeometry geometry(const WinogradCase& k, float lo, float hi) {
  DenseConvGeometry g;
  g.batch = k.n, g.in_h = k.h, g.in_w = k.w;
  g.out_h = out_size(k.h, k.pt, k.pb), g.out_w = out_size(k.w, k.pl, k.pr);
  g.pad_top = k.pt, g.pad_left = k.pl, g.in_stride = k.c, g.out_min = lo, g.out_max = hi;
  return g;
}

// F(2x2): within 2e-4 relative. F(4x4)'s transforms scale values by up to 100 (its points +-2):
// its rounding error grows with the sum of |terms|, whatever the output's own size (measured
// over these cases: up to 2.1e-6 of that sum, against 1.7e-7 for F(2x2)).
double tolerance(size_t tile, double want, double magnitude) {
  return 2e-4 * (1 + std::fabs(want)) + (tile == 4 ? 5e-6 * magnitude : 0.0);
}

const char* cls(double v) { return std::isnan(v) ? "NaN" : std::isinf(v) ? (v > 0 ? "+Inf" : "-Inf") : "finite"; }

TEST(WinogradConv, PaysFromSixteenTiles) {
  DenseConvGeometry g;
  g.batch = 1, g.out_h = 7, g.out_w = 7;  // 4 x 4 tiles
  EXPECT_TRUE(winograd_pays(g, 2));
  g.out_h = 6;  // 3 x 4
  EXPECT_FALSE(winograd_pays(g, 2));
  g.batch = 2;
  EXPECT_TRUE(winograd_pays(g, 2));
}

// F(4x4) where its tiles number 4 or more, and one per 600 KB of its weights (36 x C x M floats).
TEST(WinogradConv, FourByFourWhereItsTilesPayForItsWeights) {
  DenseConvGeometry g;
  g.batch = 1, g.out_h = 8, g.out_w = 8;  // 2 x 2 tiles of 4x4
  EXPECT_EQ(winograd_tile(g, 64, 64), 4u);    // 0.6 MB
  EXPECT_EQ(winograd_tile(g, 256, 256), 2u);  // 9.4 MB
  EXPECT_TRUE(winograd_pays(g, 4));
  g.out_h = g.out_w = 14;  // 16 tiles
  EXPECT_EQ(winograd_tile(g, 256, 256), 4u);
  EXPECT_EQ(winograd_tile(g, 384, 384), 2u);  // 21 MB
  g.out_h = g.out_w = 4;  // one tile
  EXPECT_EQ(winograd_tile(g, 32, 32), 2u);
  EXPECT_FALSE(winograd_pays(g, 4));
}

TEST(WinogradConv, FitsOnly3x3StrideOneDenseLayers) {
  EXPECT_TRUE(winograd_fits(3, 3, 1, 1, 1, 1, 1, 64, 64));
  EXPECT_FALSE(winograd_fits(3, 3, 2, 2, 1, 1, 1, 64, 64));  // strided
  EXPECT_FALSE(winograd_fits(3, 3, 1, 1, 2, 2, 1, 64, 64));  // dilated
  EXPECT_FALSE(winograd_fits(5, 5, 1, 1, 1, 1, 1, 64, 64));
  EXPECT_FALSE(winograd_fits(3, 3, 1, 1, 1, 1, 2, 64, 64));  // grouped
  EXPECT_FALSE(winograd_fits(3, 3, 1, 1, 1, 1, 1, 3, 64));   // a stem: the transforms cost more than they save
  // 16 channels in or out: the transforms cost as much as they save, on every row
  EXPECT_FALSE(winograd_fits(3, 3, 1, 1, 1, 1, 1, 16, 64));
  EXPECT_FALSE(winograd_fits(3, 3, 1, 1, 1, 1, 1, 64, 16));
  EXPECT_TRUE(winograd_fits(3, 3, 1, 1, 1, 1, 1, 32, 32));
}

TEST(WinogradConv, MatchesADirectReferenceAtManyGeometries) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  pthreadpool_t two = pthreadpool_create(2);
  const WinogradCase cases[] = {
      {1, 8, 8, 16, 16, 1, 1, 1, 1},   {2, 7, 9, 17, 33, 1, 1, 1, 1},  {1, 5, 6, 24, 20, 0, 0, 0, 0},
      {1, 1, 1, 16, 16, 1, 1, 1, 1},   {1, 2, 3, 40, 16, 1, 1, 1, 1},  {3, 10, 11, 16, 48, 0, 1, 1, 0},
      {1, 6, 5, 19, 17, 2, 2, 2, 2},   {1, 4, 4, 64, 64, 1, 0, 0, 1},  {2, 13, 3, 33, 40, 1, 1, 1, 1},
      // more tiles than one task holds (48 at 64 channels; fewer per task with more channels)
      {2, 20, 22, 64, 32, 1, 1, 1, 1}, {1, 12, 14, 520, 24, 1, 1, 1, 1},
  };
  for (const size_t tile : {2, 4})
  for (const WinogradCase& k : cases) {
    std::vector<float> x(k.n * k.h * k.w * k.c), w(k.m * k.c * 9), b(k.m);
    for (float& v : x) v = u(rng);
    for (float& v : w) v = u(rng);
    for (float& v : b) v = u(rng);
    WinogradWeights packed;
    pack_winograd(w.data(), b.data(), k.m, k.c, tile, &packed);
    std::vector<float> scratch(2 * winograd_scratch_floats(packed));
    for (float lo : {-INFINITY, 0.f}) {
      const float hi = lo == 0.f ? 6.f : INFINITY;
      const DenseConvGeometry g = geometry(k, lo, hi);
      std::vector<double> magnitude;
      const std::vector<double> want = reference(k, x, w, b, lo, hi, &magnitude);
      for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two})
        for (size_t slots : {1, 2}) {
          std::vector<float> y(want.size() + 1, NAN);  // one past the end must stay untouched
          winograd_conv(packed, g, x.data(), y.data(), scratch.data(), slots, pool);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(y[i], want[i], tolerance(tile, want[i], magnitude[i]))
                << "F(" << tile << "x" << tile << ") n=" << k.n << " " << k.h << "x" << k.w << " c=" << k.c << " m=" << k.m << " i=" << i;
          EXPECT_TRUE(std::isnan(y.back()));
        }
    }
  }
  pthreadpool_destroy(two);
}

// One NaN, +Inf or -Inf in the input: each output has the class the direct sum gives it (the
// window that holds the value, and no other, is non-finite), values elsewhere unchanged.
TEST(WinogradConv, NonFiniteInputsKeepTheDirectClasses) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(0.1f, 1.f);  // positive: +Inf stays +Inf through the sum
  // 30 tiles, and 4 tiles over a batch of two
  for (const size_t tile : {2, 4})
  for (const WinogradCase& k : {WinogradCase{1, 9, 10, 16, 20, 1, 1, 1, 1}, WinogradCase{2, 2, 3, 16, 20, 1, 1, 1, 1}}) {
    std::vector<float> x(k.n * k.h * k.w * k.c), w(k.m * k.c * 9), b(k.m);
    for (float& v : x) v = u(rng);
    for (float& v : w) v = u(rng);
    for (float& v : b) v = u(rng);
    w[(3 * k.c + 5) * 9 + 4] = 0.f;  // a zero weight: Inf * 0 is NaN in the direct sum
    WinogradWeights packed;
    pack_winograd(w.data(), b.data(), k.m, k.c, tile, &packed);
    std::vector<float> scratch(winograd_scratch_floats(packed));
    const size_t mid = ((k.h / 2) * k.w + k.w / 2) * k.c + 5;
    for (const float bad : {NAN, INFINITY, -INFINITY})
      for (const size_t at : {size_t{0}, mid, x.size() - 1}) {
        std::vector<float> xb = x;
        xb[at] = bad;
        for (float lo : {-INFINITY, 0.f}) {
          const float hi = lo == 0.f ? 6.f : INFINITY;
          const std::vector<double> want = reference(k, xb, w, b, lo, hi);
          std::vector<float> y(want.size());
          winograd_conv(packed, geometry(k, lo, hi), xb.data(), y.data(), scratch.data(), 1, nullptr);
          size_t non_finite = 0;
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_STREQ(cls(y[i]), cls(want[i])) << "F(" << tile << "x" << tile << ") " << k.h << "x" << k.w << " bad=" << bad << " at " << at << " output " << i;
            non_finite += !std::isfinite(want[i]);
            if (std::isfinite(want[i])) {
              ASSERT_NEAR(y[i], want[i], 2e-4 * (1 + std::fabs(want[i])));
            }
          }
          if (lo != 0.f || std::isnan(bad)) {  // (Relu6 clamps an Inf to a bound)
            EXPECT_GT(non_finite, 0u) << "the case must reach an output";
          }
        }
      }
  }
}

}  // namespace
}  // namespace kiln::delegates::xnnpack
