// The delegate's channels-last pooling (pool_nhwc.h) against plain references written here.
// Max: ceil-mode edges, dilation, padding, a 1x1 window with stride 2, channel counts around
// the vector width, a window past the vector row's tap table, NaN and +-Inf in the input (NaN
// wins, as ONNX Runtime's MaxPool), and a fused clamp. Average (over the taps inside the
// input) and global average: the same edges, on one and two threads, NaN and Inf carried (a
// NaN, or +Inf with -Inf, in a window gives NaN; XNNPACK's operators gave -Inf). The ISA job
// (scripts/test_isas.sh) runs it under each row the CPU has.
#include <gtest/gtest.h>

#include <pthreadpool.h>

#include <cmath>
#include <random>
#include <vector>

#include "delegates/xnnpack/pool_nhwc.h"

namespace kiln::delegates::xnnpack {
namespace {

// Each output element of the pooling of x, reduced from its window's values (in window order,
// padding skipped) by `reduce`, then clamped unless it is NaN.
template <typename Reduce>
std::vector<float> pool_reference(const PoolGeometry& g, const std::vector<float>& x, Reduce reduce) {
  std::vector<float> y(g.batch * g.out_h * g.out_w * g.channels), taps;
  for (size_t n = 0; n < g.batch; ++n)
    for (size_t oh = 0; oh < g.out_h; ++oh)
      for (size_t ow = 0; ow < g.out_w; ++ow)
        for (size_t c = 0; c < g.channels; ++c) {
          taps.clear();
          for (size_t kh = 0; kh < g.kernel_h; ++kh)
            for (size_t kw = 0; kw < g.kernel_w; ++kw) {
              const int64_t ih = static_cast<int64_t>(oh * g.stride_h + kh * g.dilation_h) - g.pad_top;
              const int64_t iw = static_cast<int64_t>(ow * g.stride_w + kw * g.dilation_w) - g.pad_left;
              if (ih < 0 || iw < 0 || ih >= static_cast<int64_t>(g.in_h) || iw >= static_cast<int64_t>(g.in_w)) continue;
              taps.push_back(x[((n * g.in_h + static_cast<size_t>(ih)) * g.in_w + static_cast<size_t>(iw)) * g.channels + c]);
            }
          const float m = reduce(taps);
          y[((n * g.out_h + oh) * g.out_w + ow) * g.channels + c] =
              std::isnan(m) ? NAN : std::min(g.out_max, std::max(g.out_min, m));
        }
  return y;
}

// Max pooling: NaN when any value in the window is NaN (padding never wins).
std::vector<float> reference(const PoolGeometry& g, const std::vector<float>& x) {
  return pool_reference(g, x, [](const std::vector<float>& taps) {
    float m = -INFINITY;
    for (float v : taps) {
      if (std::isnan(v)) return NAN;
      m = std::max(m, v);
    }
    return m;
  });
}

struct PoolCase {
  size_t n, h, w, c, kh, kw, sh, sw, dh, dw;
  int64_t pt, pl;
  bool ceil;
  float lo, hi;
};

TEST(MaxPoolNhwc, MatchesAPlainReference) {
  const PoolCase cases[] = {
      {2, 15, 13, 19, 3, 3, 2, 2, 1, 1, 0, 0, true, -INFINITY, INFINITY},  // squeezenet's, ceil mode
      {1, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, true, -INFINITY, INFINITY},
      {1, 7, 11, 1, 1, 1, 2, 2, 1, 1, 0, 0, false, -INFINITY, INFINITY},  // 1x1 window, stride 2
      {3, 10, 6, 17, 2, 3, 1, 2, 2, 1, 1, 0, true, 0.f, 6.f},            // dilated, a Relu6 fused
      {1, 1, 1, 64, 3, 3, 2, 2, 1, 1, 1, 1, true, -INFINITY, INFINITY},  // 1x1 input
      {1, 20, 20, 9, 20, 20, 1, 1, 1, 1, 0, 0, false, -INFINITY, INFINITY},  // 400 taps: the plain row
  };
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (const PoolCase& k : cases) {
    PoolGeometry g;
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

// Average pooling: the window's values summed in double, divided by their count (padding not
// counted).
std::vector<float> average_reference(const PoolGeometry& g, const std::vector<float>& x) {
  return pool_reference(g, x, [](const std::vector<float>& taps) {
    double sum = 0;
    for (float v : taps) sum += v;
    return static_cast<float>(sum / std::max<size_t>(taps.size(), 1));
  });
}

// Same class, and finite values within a float sum's rounding of the double reference.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(want[i])) {
      ASSERT_TRUE(std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i]) << what << " element " << i << ": " << got[i] << " vs " << want[i];
    } else {
      ASSERT_NEAR(got[i], want[i], 1e-5f * std::max(1.f, std::fabs(want[i]))) << what << " element " << i;
    }
  }
}

TEST(AveragePoolNhwc, MatchesAPlainReferenceAndCarriesNaN) {
  const PoolCase cases[] = {
      {2, 15, 13, 19, 3, 3, 2, 2, 1, 1, 0, 0, true, -INFINITY, INFINITY},  // ceil mode: partial windows
      {1, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, false, -INFINITY, INFINITY},   // padded: taps inside only
      {1, 7, 11, 1, 1, 1, 2, 2, 1, 1, 0, 0, false, -INFINITY, INFINITY},  // 1x1 window, stride 2
      {3, 10, 6, 17, 2, 3, 2, 3, 1, 1, 1, 0, true, 0.f, 6.f},            // a Relu6 fused
      {1, 16, 16, 70, 4, 4, 4, 4, 1, 1, 0, 0, false, -INFINITY, INFINITY},
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 2.f);
  pthreadpool_t two = pthreadpool_create(2);
  for (const PoolCase& k : cases) {
    PoolGeometry g;
    g.batch = k.n, g.in_h = k.h, g.in_w = k.w, g.channels = k.c;
    g.kernel_h = k.kh, g.kernel_w = k.kw, g.stride_h = k.sh, g.stride_w = k.sw;
    g.pad_top = k.pt, g.pad_left = k.pl, g.out_min = k.lo, g.out_max = k.hi;
    auto out_size = [&](size_t in, size_t kern, size_t s, int64_t pad) {
      const int64_t span = static_cast<int64_t>(in) + 2 * pad - static_cast<int64_t>(kern);
      return static_cast<size_t>((k.ceil ? (span + static_cast<int64_t>(s) - 1) : span) / static_cast<int64_t>(s) + 1);
    };
    g.out_h = out_size(k.h, k.kh, k.sh, k.pt);
    g.out_w = out_size(k.w, k.kw, k.sw, k.pl);
    std::vector<float> x(k.n * k.h * k.w * k.c);
    for (float& v : x) v = normal(rng);
    for (size_t i = 0; i < x.size(); i += 97) x[i] = NAN;
    for (size_t i = 5; i < x.size(); i += 131) x[i] = i % 2 ? INFINITY : -INFINITY;
    const std::vector<float> want = average_reference(g, x);
    for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
      std::vector<float> got(want.size(), 1234.f);
      average_pool_nhwc(g, x.data(), got.data(), pool);
      expect_close(got, want, "case " + std::to_string(&k - cases));
    }
  }
  pthreadpool_destroy(two);
}

TEST(GlobalAveragePoolNwc, MatchesAPlainReferenceAndCarriesNaN) {
  std::mt19937 rng(6);
  std::normal_distribution<float> normal(0.f, 2.f);
  pthreadpool_t two = pthreadpool_create(2);
  for (size_t n : {1, 3})
    for (size_t pixels : {1, 5, 49, 400})
      for (size_t c : {1, 7, 64, 65, 200}) {
        std::vector<float> x(n * pixels * c);
        for (float& v : x) v = normal(rng);
        if (x.size() > 50) x[x.size() / 2] = NAN, x[x.size() / 3] = INFINITY;
        for (const auto& clamp : {std::pair<float, float>{-INFINITY, INFINITY}, {0.f, 6.f}}) {
          std::vector<float> want(n * c);
          for (size_t b = 0; b < n; ++b)
            for (size_t k = 0; k < c; ++k) {
              double sum = 0;
              for (size_t p = 0; p < pixels; ++p) sum += x[(b * pixels + p) * c + k];
              const float m = static_cast<float>(sum / static_cast<double>(pixels));
              want[b * c + k] = std::isnan(m) ? m : std::min(clamp.second, std::max(clamp.first, m));
            }
          for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
            std::vector<float> got(n * c + 1, 1234.f);
            global_average_pool_nwc(x.data(), got.data(), n, pixels, c, clamp.first, clamp.second, pool);
            got.pop_back();
            expect_close(got, want, "n " + std::to_string(n) + " pixels " + std::to_string(pixels) + " c " + std::to_string(c));
          }
        }
      }
  pthreadpool_destroy(two);
}

}  // namespace
}  // namespace kiln::delegates::xnnpack
