// The delegate's vectorized erf against std::erf in double: every f32 step of 1e-3 over
// [-6, 6] plus the extremes, and lengths that leave a scalar tail, on one and two threads.
#include <gtest/gtest.h>

#include <pthreadpool.h>

#include <cmath>
#include <limits>
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

}  // namespace
}  // namespace kiln::delegates::xnnpack
