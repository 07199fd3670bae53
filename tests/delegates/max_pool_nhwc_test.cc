// The delegate's channels-last max pooling (the windows XNNPACK refuses) against a plain
// reference written here: ceil-mode edges, dilation, padding, a 1x1 window with stride 2,
// channel counts around the vector width, a window past the vector row's tap table, NaN and
// +-Inf in the input (NaN wins, as ONNX Runtime's MaxPool), and a fused clamp. The ISA job
// (scripts/test_isas.sh) runs it under each row the CPU has.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "delegates/xnnpack/max_pool_nhwc.h"

namespace kiln::delegates::xnnpack {
namespace {

std::vector<float> reference(const MaxPoolGeometry& g, const std::vector<float>& x) {
  std::vector<float> y(g.batch * g.out_h * g.out_w * g.channels);
  for (size_t n = 0; n < g.batch; ++n)
    for (size_t oh = 0; oh < g.out_h; ++oh)
      for (size_t ow = 0; ow < g.out_w; ++ow)
        for (size_t c = 0; c < g.channels; ++c) {
          float m = -INFINITY;
          bool nan = false;
          for (size_t kh = 0; kh < g.kernel_h; ++kh)
            for (size_t kw = 0; kw < g.kernel_w; ++kw) {
              const int64_t ih = static_cast<int64_t>(oh * g.stride_h + kh * g.dilation_h) - g.pad_top;
              const int64_t iw = static_cast<int64_t>(ow * g.stride_w + kw * g.dilation_w) - g.pad_left;
              if (ih < 0 || iw < 0 || ih >= static_cast<int64_t>(g.in_h) || iw >= static_cast<int64_t>(g.in_w)) continue;
              const float v = x[((n * g.in_h + static_cast<size_t>(ih)) * g.in_w + static_cast<size_t>(iw)) * g.channels + c];
              nan = nan || std::isnan(v);
              m = std::max(m, v);
            }
          y[((n * g.out_h + oh) * g.out_w + ow) * g.channels + c] = nan ? NAN : std::min(g.out_max, std::max(g.out_min, m));
        }
  return y;
}

struct Case {
  size_t n, h, w, c, kh, kw, sh, sw, dh, dw;
  int64_t pt, pl;
  bool ceil;
  float lo, hi;
};

TEST(MaxPoolNhwc, MatchesAPlainReference) {
  const Case cases[] = {
      {2, 15, 13, 19, 3, 3, 2, 2, 1, 1, 0, 0, true, -INFINITY, INFINITY},  // squeezenet's, ceil mode
      {1, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, true, -INFINITY, INFINITY},
      {1, 7, 11, 1, 1, 1, 2, 2, 1, 1, 0, 0, false, -INFINITY, INFINITY},  // 1x1 window, stride 2
      {3, 10, 6, 17, 2, 3, 1, 2, 2, 1, 1, 0, true, 0.f, 6.f},            // dilated, a Relu6 fused
      {1, 1, 1, 64, 3, 3, 2, 2, 1, 1, 1, 1, true, -INFINITY, INFINITY},  // 1x1 input
      {1, 20, 20, 9, 20, 20, 1, 1, 1, 1, 0, 0, false, -INFINITY, INFINITY},  // 400 taps: the plain row
  };
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (const Case& k : cases) {
    MaxPoolGeometry g;
    g.batch = k.n, g.in_h = k.h, g.in_w = k.w, g.channels = k.c;
    g.kernel_h = k.kh, g.kernel_w = k.kw, g.stride_h = k.sh, g.stride_w = k.sw, g.dilation_h = k.dh, g.dilation_w = k.dw;
    g.pad_top = k.pt, g.pad_left = k.pl, g.out_min = k.lo, g.out_max = k.hi;
    auto out_size = [&](size_t in, size_t kern, size_t s, size_t d, int64_t pad) {
      const int64_t span = static_cast<int64_t>(in) + 2 * pad - static_cast<int64_t>((kern - 1) * d + 1);
      return static_cast<size_t>((k.ceil ? (span + static_cast<int64_t>(s) - 1) : span) / static_cast<int64_t>(s) + 1);
    };
    g.out_h = out_size(k.h, k.kh, k.sh, k.dh, k.pt);
    g.out_w = out_size(k.w, k.kw, k.sw, k.dw, k.pl);
    std::vector<float> x(k.n * k.h * k.w * k.c);
    for (float& v : x) v = normal(rng);
    for (size_t i = 0; i < x.size(); i += 37) x[i] = NAN;
    for (size_t i = 5; i < x.size(); i += 53) x[i] = i % 2 ? INFINITY : -INFINITY;
    const std::vector<float> want = reference(g, x);
    std::vector<float> got(want.size(), 1234.f);
    max_pool_nhwc(g, x.data(), got.data(), nullptr);
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) {
        ASSERT_TRUE(std::isnan(got[i])) << "case " << (&k - cases) << " element " << i;
      } else {
        ASSERT_EQ(got[i], want[i]) << "case " << (&k - cases) << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::delegates::xnnpack
