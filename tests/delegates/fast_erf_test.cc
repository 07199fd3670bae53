// The delegate's vectorized erf against std::erf in double: every f32 step of 1e-3 over
// [-6, 6] plus the extremes, and lengths that leave a scalar tail, on one and two threads.
#include <gtest/gtest.h>

#include <pthreadpool.h>

#include <cmath>
#include <limits>
#include <vector>

#include "delegates/xnnpack/fast_erf.h"

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

}  // namespace
}  // namespace kiln::delegates::xnnpack
