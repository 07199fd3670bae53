// The delegate's vectorized erf against std::erf in double: every f32 step of 1e-3 over
// [-6, 6] plus the extremes, and lengths that leave a scalar tail, on one and two threads.
#include <gtest/gtest.h>

#include <pthreadpool.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "delegates/xnnpack/pointwise.h"

namespace kiln::delegates::xnnpack {
namespace {

TEST(FastErf, WithinFourTenMillionthsOfStdErf) {
  std::vector<float> x;
  for (int i = -6000; i <= 6000; ++i) x.push_back(static_cast<float>(i) * 1e-3f);
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(1e30f);
  pthreadpool_t two = pthreadpool_create(2);
  for (size_t n : {x.size(), size_t{7}, size_t{13}, size_t{0}})
    for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
      std::vector<float> y(n + 1, NAN);
      fast_erf(x.data(), y.data(), n, pool);
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], std::erf(static_cast<double>(x[i])), 5e-7) << "x = " << x[i];
      EXPECT_TRUE(std::isnan(y[n]));
    }
  pthreadpool_destroy(two);
}

TEST(Gate, SwishAndHardSwishMatchTheirDefinitions) {
  std::vector<float> x;
  for (int i = -3000; i <= 3000; ++i) x.push_back(static_cast<float>(i) * 5e-3f);
  x.push_back(80.f);
  x.push_back(-80.f);
  pthreadpool_t two = pthreadpool_create(2);
  for (bool hard : {false, true})
    for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
      std::vector<float> y(x.size() + 1, NAN);
      gate(x.data(), y.data(), x.size(), hard, 1.f / 6, 0.5f, pool);
      for (size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        const double want = hard ? v * std::min(1.0, std::max(0.0, v / 6 + 0.5)) : v / (1 + std::exp(-v));
        ASSERT_NEAR(y[i], want, 2e-6 * std::max(1.0, std::fabs(v))) << "x = " << v << (hard ? " hard" : " sigmoid");
      }
      EXPECT_TRUE(std::isnan(y.back()));
    }
  pthreadpool_destroy(two);
}

TEST(FastTanh, WithinFourTenMillionthsOfStdTanh) {
  std::vector<float> x;
  for (int i = -12000; i <= 12000; ++i) x.push_back(static_cast<float>(i) * 1e-3f);
  x.push_back(1e30f);
  x.push_back(-1e30f);
  std::vector<float> y(x.size());
  fast_tanh(x.data(), y.data(), x.size(), nullptr);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], std::tanh(static_cast<double>(x[i])), 5e-7) << "x = " << x[i];
}

TEST(SoftmaxRows, MatchesDoubleSoftmaxAtManyLengthsAndMasks) {
  pthreadpool_t two = pthreadpool_create(2);
  std::mt19937 rng(4);
  std::normal_distribution<float> g(0.f, 4.f);
  for (size_t n : {1, 3, 8, 13, 64, 129, 1000})
    for (size_t rows : {1, 5}) {
      std::vector<float> x(rows * n);
      for (float& v : x) v = g(rng);
      if (n > 2) x[1] = -INFINITY;  // a masked position
      for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
        std::vector<float> y(x.size() + 1, NAN);
        softmax_rows(x.data(), y.data(), rows, n, pool);
        for (size_t r = 0; r < rows; ++r) {
          double m = -INFINITY, s = 0;
          for (size_t i = 0; i < n; ++i) m = std::max<double>(m, x[r * n + i]);
          for (size_t i = 0; i < n; ++i) s += std::exp(x[r * n + i] - m);
          for (size_t i = 0; i < n; ++i)
            ASSERT_NEAR(y[r * n + i], std::exp(x[r * n + i] - m) / s, 1e-6) << "n=" << n << " row " << r << " i " << i;
        }
        EXPECT_TRUE(std::isnan(y.back()));
      }
    }
  std::vector<float> masked(4, -INFINITY), out(4);
  softmax_rows(masked.data(), out.data(), 1, 4, nullptr);
  for (float v : out) EXPECT_TRUE(std::isnan(v)) << "an all-masked row is NaN, as the portable kernel";
  pthreadpool_destroy(two);
}

}  // namespace
}  // namespace kiln::delegates::xnnpack
